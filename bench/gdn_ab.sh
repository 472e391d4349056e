#!/usr/bin/env bash
# Two builds of the recurrence kernels side by side on one GPU: each DIR holds a library and the
# check program linked against it (bench/gdn_profile.sh build DIR), run alternately ROUNDS times
# with --time-v2 (every member at B4 T4096 H32, bf16, medians of 20 runs by CUDA events). Prints
# every round, then per member the median over rounds of each build and the ratio B / A.
#
#   bench/gdn_ab.sh DIR_A DIR_B [ROUNDS]        ROUNDS defaults to 3
set -euo pipefail
a="${1:?build A}" b="${2:?build B}" rounds="${3:-3}"
log=$(mktemp)
for r in $(seq "$rounds"); do
    for dir in "$a" "$b"; do
        "$dir/check_gdn_cuda" --time-v2 | sed "s|^|$(basename "$dir") |" | tee -a "$log"
    done
done
python3 - "$log" "$(basename "$a")" "$(basename "$b")" <<'PY'
import collections, re, statistics, sys
log, a, b = sys.argv[1:]
t = collections.defaultdict(list)
for line in open(log):
    m = re.match(r"(\S+) time (\S+) .*: fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms", line)
    if m:
        t[(m[1], m[2])].append((float(m[3]), float(m[4])))
print(f"| member | fwd ms {a} | fwd ms {b} | {b} / {a} | fwd+bwd ms {a} | fwd+bwd ms {b} | {b} / {a} |")
print("|---|---|---|---|---|---|---|")
for member in dict.fromkeys(m for _, m in t):
    fa, fb = (statistics.median(x[0] for x in t[(v, member)]) for v in (a, b))
    ba, bb = (statistics.median(x[1] for x in t[(v, member)]) for v in (a, b))
    print(f"| {member} | {fa:.3f} | {fb:.3f} | {fb / fa:.3f} | {ba:.3f} | {bb:.3f} | {bb / ba:.3f} |")
PY
rm -f "$log"
