#!/usr/bin/env bash
# The scans split along the sequence (gdn/cuda/gdn_launch.cuh, split_scans) on one GPU: the check
# program of a build (bench/gdn_build.sh DIR), whose cases include a split asked for and one the
# shape's rule makes, then its --time-split rows (every member at B1 T32768 with 4, 8, 16 and 32
# value heads, unsplit and split: by the rule with 4 and 8, in 8 segments with 4 and 4 with 8 (a
# per-channel gate's rule rows, pooled with them), in 3 and 2 with 16, in 4 and 8 with 32; medians
# of 10 by CUDA events) ROUNDS times. Prints each split's time
# over the unsplit one's, forward and forward+backward, median over rounds, the kept preparation's
# rows apart. Logs in OUT.
#
#   ROUNDS=2 bench/gdn_split.sh DIR OUT [MEMBERS]      MEMBERS: e.g. gdn,kda (default: all five)
set -euo pipefail
dir="${1:?a build directory}"
out="${2:?a directory for the logs}"
members="${3:-}"
mkdir -p "$out"
"$dir/check_gdn_cuda" > "$out/check.log" 2>&1 || true
echo "check: $(grep -c '^ok' "$out/check.log") ok, $(grep -c '^FAIL' "$out/check.log") failed; split cases:"
grep -E '/split-' "$out/check.log" | awk '{print "  " $1, $2, $3, $5}' || true
: > "$out/time.log"
for r in $(seq "${ROUNDS:-2}"); do
    "$dir/check_gdn_cuda" --time-split $members | tee -a "$out/time.log"
done
python3 - "$out/time.log" <<'PY'
import collections, re, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"time (\S+) +B1 T32768 H(\d+) HV(\d+) .*: fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms", line)
    if m:
        name, h, hv, f, fb = m.groups()
        kept = name.endswith("+kept")
        member, _, seg = name.removesuffix("+kept").partition("/seg")
        rows[(member, hv, kept, seg or "whole")].append((float(f), float(fb)))
print("| member | value heads | backward | segment chunks | fwd ms | ÷ whole | fwd+bwd ms | ÷ whole |")
print("|---|---|---|---|---|---|---|---|")
for (member, hv, kept, seg), t in rows.items():
    base = rows.get((member, hv, kept, "whole"))
    f = statistics.median(x[0] for x in t)
    fb = statistics.median(x[1] for x in t)
    f0 = statistics.median(x[0] for x in base) if base else float("nan")
    fb0 = statistics.median(x[1] for x in base) if base else float("nan")
    print(f"| {member} | {hv} | {'kept' if kept else 'prepares'} | {seg} | {f:.3f} | {f / f0:.3f} | {fb:.3f} | {fb / fb0:.3f} |")
PY
