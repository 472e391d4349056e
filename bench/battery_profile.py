#!/usr/bin/env python3
"""Where one candidate's battery spends its time: the gates' child of `kcv audit`, run in this
process under cProfile, for corpus entries picked by index.

For each entry it prints the seconds per gate (as the record's timing has them) and the
functions with the largest cumulative and own time, and writes the whole profile (pstats) beside
the text. The candidate's build happens before the gates and is left out of the profile.

  python3 bench/battery_profile.py .corpora/tritondump/corpus.jsonl --index 0 5 --device cuda \
      --gates CMP-01 RES-01 --out /tmp/profile
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path


class _Events:
    """What the worker reports while it judges, kept for the table."""

    def __init__(self):
        self.gates: dict[str, float] = {}

    def stage(self, *_, **__) -> None:
        pass

    def send(self, event: dict) -> None:
        if event.get("event") == "gate":
            self.gates[event["result"]["id"]] = event["seconds"]


def profile_entry(entry: dict, root: Path, device: str, gates: list[str] | None, out: Path, top: int) -> dict:
    from kcv import worker

    events = _Events()
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="kcv-prof-") as build_dir:
        request = {"reference": str(root / entry["problem"]), "candidate": str(root / entry["candidate"]),
                   "device": device, "seed": 0, "settings": {"build_dir": build_dir}}
        if gates:
            request["gates"] = gates
        began = time.perf_counter()
        profiler.enable()
        record = worker._judge(request, events, "gates")
        profiler.disable()
    wall = time.perf_counter() - began
    slug = entry["id"].replace("/", "_")
    profiler.dump_stats(out / f"{slug}.pstats")
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    (out / f"{slug}.txt").write_text(text.getvalue())
    timing = record.get("timing", {})
    return {"id": entry["id"], "wall_s": wall, "load_s": timing.get("load_s"), "gates_s": events.gates,
            "verdicts": {g["id"]: g["verdict"] for g in record.get("gates", [])}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", help="corpus.jsonl written by `kcv corpus ... --bundle`")
    ap.add_argument("--index", type=int, nargs="+", default=[0], help="entries to profile (0-based)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--gates", nargs="*", help="only these gates (default: all twelve)")
    ap.add_argument("--out", default="battery-profile", help="folder for the profiles")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    corpus = Path(args.corpus)
    entries = [json.loads(line) for line in corpus.read_text().splitlines() if line.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in args.index:
        if not 0 <= i < len(entries):
            sys.exit(f"battery_profile: no entry {i} (the corpus has {len(entries)})")
        rows.append(profile_entry(entries[i], corpus.parent, args.device, args.gates, out, args.top))
        print(json.dumps(rows[-1]), flush=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
