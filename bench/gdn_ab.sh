#!/usr/bin/env bash
# Builds of the recurrence kernels side by side on one GPU: each DIR holds a library and the
# check program linked against it (bench/gdn_profile.sh build DIR), run in turn ROUNDS times with
# --time-v2 (every member at B4 T4096 H32, bf16, medians of 20 runs by CUDA events). Prints every
# round, then per member and build the median over rounds, forward and forward+backward, and its
# ratio to the first build's. A "+kept" row (the backward reading the forward's kept chunk
# preparation) is divided by the first build's own "+kept" row, or by its plain row where the
# first build has none.
#
#   ROUNDS=3 bench/gdn_ab.sh DIR_A DIR_B [DIR_C ...]        ROUNDS defaults to 3
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DIR_A DIR_B [DIR ...]" >&2; exit 2; }
log=$(mktemp)
for r in $(seq "${ROUNDS:-3}"); do
    for dir in "$@"; do
        "$dir/check_gdn_cuda" --time-v2 | sed "s|^|$(basename "$dir") |" | tee -a "$log"
    done
done
names=()
for dir in "$@"; do names+=("$(basename "$dir")"); done
python3 - "$log" "${names[@]}" <<'PY'
import collections, re, statistics, sys
log, builds = sys.argv[1], sys.argv[2:]
t = collections.defaultdict(list)
for line in open(log):
    m = re.match(r"(\S+) time (\S+) .*: fwd ([\d.]+) ms, fwd\+bwd ([\d.]+) ms", line)
    if m:
        t[(m[1], m[2])].append((float(m[3]), float(m[4])))
ref = builds[0]
print("| member | build | fwd ms | ÷ " + ref + " | fwd+bwd ms | ÷ " + ref + " |")
print("|---|---|---|---|---|---|")
for member in dict.fromkeys(m for _, m in t):
    base = member if (ref, member) in t else member.removesuffix("+kept")
    if (ref, base) not in t:
        continue
    f0 = statistics.median(x[0] for x in t[(ref, base)])
    b0 = statistics.median(x[1] for x in t[(ref, base)])
    for b in builds:
        if (b, member) not in t:
            continue
        f = statistics.median(x[0] for x in t[(b, member)])
        fb = statistics.median(x[1] for x in t[(b, member)])
        print(f"| {member} | {b} | {f:.3f} | {f / f0:.3f} | {fb:.3f} | {fb / b0:.3f} |")
PY
rm -f "$log"
