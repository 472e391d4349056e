#!/usr/bin/env python3
"""The verifier's cost beside KernelBench's standard check, measured in one audit.

Runs `kcv audit` over a corpus into a fresh journal (or reads a journal given with --journal) and
reads the per-stage times every record carries (`timing`: startup_s, load_s, standard_check_s,
reference_s, gates_s, total_s; see docs/kernelbench.md). For each candidate that loaded:

  battery  = reference_s + sum(gates_s) - sum(gates_compile_s)   the float64 reference and the gates
  standard = standard_check_s - standard_check_compile_s          KernelBench's check: 5 trials

both with the candidate's compile excluded: its build and load (load_s) and, for Triton
candidates, what Triton spent compiling new specialisations during the check and the gates
(standard_check_compile_s, gates_compile_s, where the record has them). The targets of the audit
are battery <= 3 x standard per kernel, and >= 1,000 kernels per GPU-hour excluding the
candidates' builds:

  kernels / GPU-hour = N / (sum(total_s - load_s - compiles) / workers per GPU / 3600) / GPUs

(the workers of one GPU run side by side, so their busy time divided by their number is the
GPU's time). The wall clock of the whole audit, builds included, is reported beside it. When a
target is missed, the table says where the time goes: each gate's share of the battery.

  python3 bench/verifier_bench.py CORPUS [--problems DIR] --device cuda --out bench/results/verifier
  python3 bench/verifier_bench.py --journal journal.jsonl --workers-per-gpu 4 --gpus 1 [--since 55]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def kcv_command() -> list[str]:
    exe = shutil.which("kcv")
    if exe is None:
        sys.exit("verifier_bench: the kcv command is not on the PATH (pip install . first)")
    return [exe]


def run_audit(args, journal: Path) -> float:
    cmd = kcv_command() + ["audit", args.corpus, "--out", str(journal), "--device", args.device,
                           "--workers-per-gpu", str(args.workers_per_gpu), "--seed", str(args.seed)]
    if args.problems:
        cmd += ["--problems", args.problems]
    if args.gpus:
        cmd += ["--gpus", str(args.gpus)]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if args.device == "cpu":
        cmd += ["--workers", str(args.workers_per_gpu)]
    if args.trace:
        cmd += ["--trace"]
    print("+", " ".join(cmd), flush=True)
    started = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - started


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
    return xs[i]


def analyse(records: list[dict], workers: int, gpus: int, wall_s: float | None, new_records: int = 0) -> dict:
    timed = [r for r in records if isinstance(r.get("timing"), dict)]
    # The ratio compares the battery with a standard check that ran its trials: one that the
    # candidate's own error ended at the first call (a NameError, a failed launch) took
    # microseconds and says nothing about the check's cost, so those records are counted apart.
    ran = [r for r in timed if "error" not in r and r["timing"].get("standard_check_s")]
    loaded = [r for r in ran if not (r.get("standard_check") or {}).get("error")]
    per_kernel = []
    gate_totals: dict[str, float] = {}
    for r in loaded:
        t = r["timing"]
        gates = t.get("gates_s") or {}
        compiling = sum(float(v) for v in (t.get("gates_compile_s") or {}).values())
        battery = float(t.get("reference_s") or 0.0) + sum(float(v) for v in gates.values()) - compiling
        standard = float(t["standard_check_s"]) - float(t.get("standard_check_compile_s") or 0.0)
        per_kernel.append({"id": r.get("id", r.get("candidate", {}).get("path", "")), "battery_s": battery,
                           "standard_s": standard, "ratio": battery / standard if standard > 0 else float("inf"),
                           "load_s": float(t.get("load_s") or 0.0), "compile_s": compiling})
        for g, v in gates.items():
            gate_totals[g] = gate_totals.get(g, 0.0) + float(v) - float((t.get("gates_compile_s") or {}).get(g, 0.0))
        gate_totals["reference"] = gate_totals.get("reference", 0.0) + float(t.get("reference_s") or 0.0)
    busy_no_build = sum(float(r["timing"].get("total_s") or 0.0) - float(r["timing"].get("load_s") or 0.0)
                        - sum(float(v) for v in (r["timing"].get("gates_compile_s") or {}).values())
                        - float(r["timing"].get("standard_check_compile_s") or 0.0)
                        for r in timed)
    gpu_hours = busy_no_build / max(1, workers) / 3600.0
    # The same without KernelBench's own check, which an audit runs beside the gates for the
    # differential: kcv's cost alone.
    standard_busy = sum(float(r["timing"].get("standard_check_s") or 0.0)
                        - float(r["timing"].get("standard_check_compile_s") or 0.0) for r in timed)
    gpu_hours_gates = (busy_no_build - standard_busy) / max(1, workers) / 3600.0
    # Where the standard check's time goes (its phases, in records that have them).
    phase_totals: dict[str, float] = {}
    for r in loaded:
        for phase, v in (r["timing"].get("standard_check_phases_s") or {}).items():
            phase_totals[phase] = phase_totals.get(phase, 0.0) + float(v)
    phase_sum = sum(phase_totals.values())
    ratios = [k["ratio"] for k in per_kernel]
    battery_sum = sum(k["battery_s"] for k in per_kernel)
    standard_sum = sum(k["standard_s"] for k in per_kernel)
    out = {
        "records": len(records),
        "timed": len(timed),
        "compared": len(per_kernel),
        "standard_check_errored": len(ran) - len(loaded),
        "ratio_median": statistics.median(ratios) if ratios else None,
        "ratio_p10": quantile(ratios, 0.1) if ratios else None,
        "ratio_p90": quantile(ratios, 0.9) if ratios else None,
        "ratio_of_sums": battery_sum / standard_sum if standard_sum > 0 else None,
        "standard_s_median": statistics.median([k["standard_s"] for k in per_kernel]) if per_kernel else None,
        "battery_s_median": statistics.median([k["battery_s"] for k in per_kernel]) if per_kernel else None,
        "load_s_median": statistics.median([k["load_s"] for k in per_kernel]) if per_kernel else None,
        "compile_s_median": statistics.median([k["compile_s"] for k in per_kernel]) if per_kernel else None,
        "compile_timed": sum(1 for r in loaded if "gates_compile_s" in r["timing"]),
        "startup_s_median": statistics.median([float(r["timing"].get("startup_s") or 0.0) for r in loaded])
        if loaded else None,
        "kernels_per_gpu_hour_excluding_builds": (len(timed) / gpu_hours / max(1, gpus)) if gpu_hours > 0 else None,
        "kernels_per_gpu_hour_excluding_builds_and_standard_check":
            (len(timed) / gpu_hours_gates / max(1, gpus)) if gpu_hours_gates > 0 else None,
        "standard_check_share": {p: v / phase_sum for p, v in sorted(phase_totals.items(), key=lambda kv: -kv[1])}
        if phase_sum > 0 else {},
        "wall_s": wall_s,
        "records_this_run": new_records,
        "kernels_per_hour_wall_including_builds": (new_records / wall_s * 3600.0) if wall_s and new_records else None,
        "workers_per_gpu": workers,
        "gpus": gpus,
        "battery_share": {g: v / battery_sum for g, v in sorted(gate_totals.items(), key=lambda kv: -kv[1])}
        if battery_sum > 0 else {},
        "per_kernel": per_kernel,
    }
    out["targets"] = {
        "battery_at_most_3x_standard": out["ratio_median"] is not None and out["ratio_median"] <= 3.0,
        "at_least_1000_kernels_per_gpu_hour": (out["kernels_per_gpu_hour_excluding_builds"] or 0) >= 1000,
    }
    return out


def table(s: dict) -> str:
    def f(x, fmt="{:.2f}"):
        return "—" if x is None else fmt.format(x)

    lines = [
        "| measure | value |",
        "|---|---|",
        f"| records / timed / compared | {s['records']} / {s['timed']} / {s['compared']} |",
        f"| left out of the ratio: the standard check ended by the candidate's error | {s['standard_check_errored']} |",
        f"| battery ÷ standard check, median (p10–p90) | {f(s['ratio_median'])} ({f(s['ratio_p10'])}–{f(s['ratio_p90'])}) |",
        f"| battery ÷ standard check, sum over kernels | {f(s['ratio_of_sums'])} |",
        f"| standard check s, median | {f(s['standard_s_median'], '{:.3f}')} |",
        f"| battery s, median | {f(s['battery_s_median'], '{:.3f}')} |",
        f"| candidate build s, median (excluded) | {f(s['load_s_median'], '{:.3f}')} |",
        f"| Triton compiles during the gates s, median (excluded; timed in {s['compile_timed']} records) | {f(s['compile_s_median'], '{:.3f}')} |",
        f"| worker start (imports) s, median (counted in the throughput) | {f(s['startup_s_median'], '{:.3f}')} |",
        f"| kernels per GPU-hour, builds excluded | {f(s['kernels_per_gpu_hour_excluding_builds'], '{:.0f}')} |",
        f"| the same without the standard check (kcv's own cost) | {f(s['kernels_per_gpu_hour_excluding_builds_and_standard_check'], '{:.0f}')} |",
        f"| kernels per hour of wall clock, builds included ({s['records_this_run']} records this run) | {f(s['kernels_per_hour_wall_including_builds'], '{:.0f}')} |",
        f"| target ≤ 3× | {'met' if s['targets']['battery_at_most_3x_standard'] else 'missed'} |",
        f"| target ≥ 1,000 / GPU-hour | {'met' if s['targets']['at_least_1000_kernels_per_gpu_hour'] else 'missed'} |",
    ]
    if s["battery_share"]:
        lines += ["", "where the battery's time goes:", "", "| stage | share |", "|---|---|"]
        lines += [f"| {g} | {100 * v:.1f}% |" for g, v in s["battery_share"].items()]
    if s["standard_check_share"]:
        lines += ["", "where the standard check's time goes:", "", "| phase | share |", "|---|---|"]
        lines += [f"| {p} | {100 * v:.1f}% |" for p, v in s["standard_check_share"].items()]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="?", help="corpus.jsonl (kcv corpus writes one)")
    ap.add_argument("--problems", help="problems folder, if the corpus's problem paths need one")
    ap.add_argument("--journal", help="analyse this journal instead of running an audit")
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--workers-per-gpu", type=int, default=2)
    ap.add_argument("--gpus", type=int, default=0, help="GPUs the audit used (default: what kcv sees, or 1)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trace", action="store_true", help="kcv audit --trace: each stage a worker enters, timed")
    ap.add_argument("--out", default="bench/results/verifier", help="folder for the summary (and the journal)")
    ap.add_argument("--journal-out", help="journal to write or resume (default: OUT/journal.jsonl)")
    ap.add_argument("--since", type=int, default=None,
                    help="with --journal: only the records after its first SINCE lines (one run's, measured "
                         "with this run's workers and GPUs)")
    args = ap.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wall, new_records, before = None, 0, args.since or 0
    if args.journal:
        journal = Path(args.journal)
    else:
        if not args.corpus:
            ap.error("give a corpus, or --journal")
        # An audit resumes its journal, so a benchmark cut short by a time limit goes on later.
        journal = Path(args.journal_out) if args.journal_out else out / "journal.jsonl"
        before = _count_lines(journal)
        wall = run_audit(args, journal)
        new_records = _count_lines(journal) - before
    # The throughput is a property of one run (its workers, its GPUs): an audit that resumed a
    # journal is measured on the records it added.
    records = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()][before:]
    gpus = args.gpus or (1 if args.device == "cpu" else max(1, _visible_gpus()))
    s = analyse(records, args.workers_per_gpu, gpus, wall, new_records)
    s["journal"] = str(journal)
    s["device"] = args.device
    s["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (out / "summary.json").write_text(json.dumps(s, indent=2) + "\n")
    print(table(s))
    return 0


def _count_lines(p: Path) -> int:
    return sum(1 for line in p.read_text().splitlines() if line.strip()) if p.exists() else 0


def _visible_gpus() -> int:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return 0 if vis in ("", "-1") else len(vis.split(","))
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
