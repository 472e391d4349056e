#!/usr/bin/env python3
"""ORD-03 over many seeds: how far correct implementations of a contract stray from each other.

For each contract (file name matching --contracts) and seed, one `kcv verify --gate ORD-03` of
  - the contract's first positive control (--candidates controls, CPU only), or
  - the recurrence's CUDA kernels (--candidates kernels: <kernels>/cuda/kcv_gdn_{forward,backward}.so), or
  - the chunked control at another chunk length (--candidates chunk32 or chunk128:
    <kernels>/kcv_controls_gdn_{forward,backward}_chunk<N>.so), a correct implementation that
    is not among the contract's controls.
ORD-03's record keeps, for every probe, call and output (detail.errors), the candidate's ratio to
the controls' envelope and each control's ratio against the envelope of the others alone ("leave
one out"): how far a correct implementation strays above an envelope it is not part of. The gate
computes both; this script only gathers them. The table says, per contract and line,
the largest ratio over the seeds, at which seed, and at how many seeds each margin of the
calibration grid would fail it. A contract's measurement.ord03_margin is chosen from its controls'
lines and the chunk-length variants' (docs/gates.md, "A contract's own margin"), never from the
kernels'.

    python3 bench/ord03_sweep.py --kcv build/out/bin/kcv --kernels build/out/kernels \
        --contracts 'gdn-forward-.*-b?f16$' --seeds 0-15 --candidates controls --jobs 16 --out /tmp/sweep
"""
import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import time
import tomllib

GRID = (1.0, 1.1, 1.2, 1.5, 2.0, 3.0)


def seeds_of(text):
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def jobs_for(args):
    jobs = []
    for name in sorted(os.listdir("contracts")):
        stem = name.removesuffix(".toml")
        if not name.endswith(".toml") or not re.search(args.contracts, stem):
            continue
        with open(os.path.join("contracts", name), "rb") as f:
            controls = tomllib.load(f)["oracle"].get("controls", [])
        if len(controls) < 2:
            continue  # one control has no envelope but its own
        kind = stem.split("-")[1]   # forward or backward
        if args.candidates == "controls":
            label, path = controls[0], os.path.join(args.kernels, f"kcv_controls_{controls[0]}.so")
        elif args.candidates.startswith("chunk"):
            label = f"gdn_{kind}_{args.candidates}"
            path = os.path.join(args.kernels, f"kcv_controls_{label}.so")
        else:
            label, path = f"cuda_{kind}", os.path.join(args.kernels, "cuda", f"kcv_gdn_{kind}.so")
        jobs += [(stem, label, path, seed, controls) for seed in seeds_of(args.seeds)]
    return jobs


def lines_of(errors, label, controls):
    """The candidate's largest recorded ratio, and each control's against the others.

    A ratio that is not a number (a NaN or an infinity travels as null) is left out of the
    largest; the gate's own verdict says what it means."""
    out = {}
    for e in errors:
        for name, r in [(label, e["ratio"])] + [(f"{c} (vs the others)", r)
                                                 for c, r in zip(controls, e["control_ratios"])]:
            if r is not None and r > out.get(name, (-1.0, ""))[0]:
                out[name] = (r, e["output"])
    return out


def run(args, job, stop_at):
    stem, label, path, seed, controls = job
    left = stop_at - time.monotonic()
    if left < 5:
        return job, None, "not started (deadline)"
    rec = os.path.join(args.out, f"{stem}.{label}.{seed}.json")
    cmd = [args.kcv, "verify", "--contract", os.path.join("contracts", stem + ".toml"), "--candidate", path,
           "--kernels", args.kernels, "--gate", "ORD-03", "--seed", str(seed), "--json", rec]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
    except subprocess.TimeoutExpired:
        return job, None, "cut at the deadline"
    try:
        with open(rec) as f:
            gate = next(g for g in json.load(f)["gates"] if g["id"] == "ORD-03")
    except (OSError, ValueError, StopIteration) as e:
        return job, None, f"no record (exit {p.returncode}): {e}; {p.stderr[-300:]}"
    errors = gate.get("detail", {}).get("errors")
    if gate.get("verdict") not in ("pass", "fail") or not errors:
        return job, None, f"{gate.get('verdict')}: {gate.get('reason', '')[:200]}"
    return job, lines_of(errors, label, controls), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kcv", required=True)
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--contracts", default=r"^gdn-")
    ap.add_argument("--seeds", default="0-15")
    ap.add_argument("--candidates", choices=("controls", "kernels", "chunk32", "chunk128"), default="controls",
                    help="whom to verify: the first control, the CUDA kernels, or the chunked control at another "
                         "chunk length; either way the records give the controls against each other")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--deadline", type=float, default=86400.0, help="seconds from the start")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    args.kernels = os.path.abspath(args.kernels)
    os.makedirs(args.out, exist_ok=True)
    stop_at = time.monotonic() + args.deadline
    jobs = jobs_for(args)
    results, problems = {}, []
    with cf.ThreadPoolExecutor(args.jobs) as pool:
        for job, got, why in pool.map(lambda j: run(args, j, stop_at), jobs):
            if got is None:
                problems.append((job, why))
                continue
            for name, (r, output) in got.items():
                results.setdefault((job[0], name), []).append((job[3], r, output))

    lines = [f"{'contract':36} {'line':40} {'seeds':>5} {'largest':>8} {'at':>4} {'on':>4}  fails at " +
             " ".join(f"{m:>4}" for m in GRID)]
    for (stem, name), got in sorted(results.items()):
        seed, worst, output = max(got, key=lambda x: x[1])
        fails = [sum(1 for _, r, _ in got if r > m) for m in GRID]
        lines.append(f"{stem:36} {name:40} {len(got):5} {worst:8.3f} {seed:4} {output:>4}  " +
                     " ".join(f"{n:4}" for n in fails))
    for job, why in problems:
        lines.append(f"problem: {job[0]} {job[1]} seed {job[3]}: {why}")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"grid": GRID,
                   "lines": [{"contract": s_, "line": n, "ratios": {str(a): [b, c] for a, b, c in got}}
                             for (s_, n), got in sorted(results.items())],
                   "problems": [{"job": list(j[:4]), "why": w} for j, w in problems]}, f, indent=1)


if __name__ == "__main__":
    main()
