#!/usr/bin/env bash
# Every gate of `kcv verify` over contracts, candidates and seeds, JOBS at a time, then a table of
# each run's verdict, failing gates and each numeric gate's r (ORD-03's ratio), one row a run.
# A job is a line "CONTRACT CANDIDATE SEED" on standard input: CONTRACT a built-in id or a file,
# CANDIDATE a kernel library (a path, or a name under KERNELS). What it measured is in
# bench/RESULTS.md ("Chains of rounded operands").
#   printf '%s\n' "contracts/gdn-forward-kda-bf16-operands.toml kcv_controls_gdn_forward_bf16_operands.so 1" |
#     KCV=build/dev/out/bin/kcv KERNELS=build/dev/out/kernels OUTDIR=/tmp/gs bash bench/gdn_gate_seeds.sh
set -u
KCV=${KCV:-kcv}
KERNELS=${KERNELS:?KERNELS: the folder of kernel libraries (controls, and cuda/ for the GPU candidates)}
OUTDIR=${OUTDIR:-/tmp/kcv-gate-seeds}
JOBS=${JOBS:-$(nproc)}
LIMIT_S=${LIMIT_S:-540}
mkdir -p "$OUTDIR"
export KCV KERNELS OUTDIR
timeout "$LIMIT_S" xargs -P "$JOBS" -L 1 bash -c '
  contract=$1 candidate=$2 seed=$3
  case $candidate in */*) lib=$candidate ;; *) lib=$KERNELS/$candidate ;; esac
  name=$(basename "$contract" .toml)__$(basename "$candidate" .so)__$seed
  "$KCV" verify --contract "$contract" --candidate "$lib" --kernels "$KERNELS" --seed "$seed" --json "$OUTDIR/$name.json" \
    > "$OUTDIR/$name.log" 2>&1
  echo "$name exit $?" >> "$OUTDIR/exits.txt"' _
python3 - "$OUTDIR" <<'PY'
import glob, json, os, sys
d = sys.argv[1]
print(f"{'contract':44} {'candidate':36} {'seed':>4} {'verdict':7}  r by gate (failing gates starred)")
for log in sorted(glob.glob(os.path.join(d, "*.log"))):
    contract, candidate, seed = os.path.basename(log)[:-4].split("__")
    path = log[:-4] + ".json"
    if not os.path.exists(path):
        print(f"{contract:44} {candidate:36} {seed:>4} {'none':7}  no record: cut off by the limit or crashed (see its .log)")
        continue
    r = json.load(open(path))
    err = r.get("error")
    gates = r.get("gates", [])
    cells = []
    for g in gates:
        if g.get("verdict") == "n/a":
            continue
        metric = g.get("metric")
        star = "*" if g.get("verdict") == "fail" else ""
        cells.append(f"{g['id']}{star} {metric:.3g}" if isinstance(metric, (int, float)) else f"{g['id']}{star}")
    verdict = "error" if err else ("fail" if r.get("failed_gates") else "pass")
    print(f"{contract:44} {candidate:36} {seed:>4} {verdict:7}  {err or ', '.join(cells)}")
PY
