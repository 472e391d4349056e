#!/usr/bin/env bash
# Checks and times builds of the recurrence kernels side by side in one call on a GPU machine.
# Each DIR holds a library and the check program linked against it (bench/gdn_build.sh DIR, run
# on the development machine and carried). In priority order, each step under its own limit:
#   1. every build's check program against the float64 oracle (gdn/tests/check_gdn_cuda.cu);
#   2. every output's digest of each later build compared with the first build's, case by case
#      (builds that keep the bits print the same digests);
#   3. ROUNDS rounds of bench/gdn_ab.sh over the builds (ratios to the first);
#   4. with FLA_ROWS ("kda:0 gla:0": member:shape pairs of bench/gdn_bench.py), the last build beside
#      fla-core (carried as wheels in .whl/ with einops), one process a row, with no float64 check
#      (step 1 made it). fla's Triton kernels compile during step 1, so that no timing shares the
#      machine with the compiler; fla autotunes again in step 4 on compiled kernels.
# Logs under $OUT; the summary prints last.
#
# A check takes about 70 s alone on an H100 and longer beside fla's compiler (CHECK_S, default 150).
#
#   OUT=... ROUNDS=2 [CHECK_S=150] [FLA_ROWS="kda:0 gla:0"] bash bench/gdn_check_ab.sh DIR_BASE DIR [DIR ...]
set -u
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 DIR_BASE DIR [DIR ...]" >&2; exit 2; }
OUT=${OUT:-/tmp/gdn-check-ab-out}
mkdir -p "$OUT"
t0=$(date +%s)
log() { echo "[$(( $(date +%s) - t0 ))s $(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/device.txt"

rows="${FLA_ROWS:-}"
if [ -n "$rows" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/fla_core*.whl .whl/einops*.whl \
    || log "fla-core did not install"
  export PYTHONUNBUFFERED=1 FLA_CACHE_RESULTS=0
  for row in $rows; do
    ( PYTHONPATH=/tmp/site timeout "${WARM_S:-240}" python3 bench/gdn_bench.py --members "${row%%:*}" --shapes "${row#*:}" \
        --impls fla --no-check --fla-gated-bwd-despite-guard > "/tmp/fla-warm-${row/:/-}.log" 2>&1
      echo "fla compiled for $row: rc $? $(date -u +%T)" >> "$OUT/steps.log" ) &
  done
fi

for dir in "$@"; do
  name=$(basename "$dir")
  log "check $name"
  timeout "${CHECK_S:-150}" "$dir/check_gdn_cuda" > "$OUT/check_$name.log" 2>&1
  log "check $name rc $? ($(grep -E '^[0-9]+ passed' "$OUT/check_$name.log"))"
done

# Digest per case: "<case>/<dtype> <digest>", sorted. Only the cases both checks reached are
# compared (a check cut by its limit stops partway).
digests() { sed -nE 's/^(ok  |FAIL) +(\S+) +(\S+) .*digest=([0-9a-f]+).*/\2\/\3 \4/p' "$1" | sort; }
base=$(basename "$1")
for dir in "${@:2}"; do
  name=$(basename "$dir")
  join <(digests "$OUT/check_$base.log") <(digests "$OUT/check_$name.log") > "$OUT/digests_$name.txt"
  log "digests $name against $base: $(wc -l < "$OUT/digests_$name.txt") cases in both," \
      "$(awk '$2 != $3' "$OUT/digests_$name.txt" | wc -l) differ"
done

wait
log "a/b, ${ROUNDS:-2} rounds"
ROUNDS=${ROUNDS:-2} timeout "${AB_S:-400}" bash bench/gdn_ab.sh "$@" > "$OUT/ab.log" 2>&1
log "a/b rc $?"

if [ -n "$rows" ]; then
  last=$(cd "${@: -1}" && pwd)
  for row in $rows; do
    log "beside fla: $row"
    PYTHONPATH=/tmp/site KCV_GDN_CUDA_LIB="$last/libkcv_gdn_cuda.so" timeout "${FLA_S:-150}" python3 bench/gdn_bench.py \
      --members "${row%%:*}" --shapes "${row#*:}" --impls kcv,fla --no-check --fla-gated-bwd-despite-guard \
      >> "$OUT/fla.log" 2>&1
    log "beside fla: $row rc $?"
  done
fi

echo "== summary"
cat "$OUT/steps.log"
grep "^|" "$OUT/ab.log"
[ -n "$rows" ] && grep "^|" "$OUT/fla.log"
exit 0
