#!/usr/bin/env bash
# Times the recurrence kernels beside fla at several members and shapes in one call on a GPU
# machine, each row checked against the float64 oracle at the full shape, within a deadline:
#   1. builds the kcv package there (headers carried in .deps/, no CUDA: only the oracle is needed)
#      while fla's Triton kernels compile for every member and shape at once (`--impls fla
#      --no-check`, autotuning results not kept, FLA_CACHE_RESULTS=0, so that no configuration
#      chosen under that contention is used);
#   2. runs bench/gdn_bench.py once per member and shape, one process at a time (fla autotunes
#      again, on compiled kernels), while DEADLINE_S seconds from the start leave room for one.
# fla's gated backward guard is bypassed for every member; gdn_bench.py labels the rows of the
# members it applies to (FLA_GUARDED) as speed references.
# fla-core and einops are carried as wheels in .whl/; the CUDA library is LIB_DIR's, built here
# with bench/gdn_build.sh. Logs under $OUT; rebuild the table and bench/results/gdn.json from
# $OUT/bench.log with `bench/gdn_bench.py --rows-from`.
#
#   bash bench/gdn_retime.sh LIB_DIR "gdn:1 kda:3 gla:0,1 ..." [DEADLINE_S]
set -u
cd "$(dirname "$0")/.."
lib_dir=$(cd "${1:?the directory of libkcv_gdn_cuda.so}" && pwd)
rows="${2:?member:shapes pairs, e.g. \"gdn:1 kda:3\"}"
deadline="${3:-540}"
OUT=${OUT:-/tmp/gdn-retime-out}
mkdir -p "$OUT"
t0=$(date +%s)
log() { echo "[$(( $(date +%s) - t0 ))s $(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$OUT/steps.log" 2>&1

python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl .whl/einops*.whl \
  || log "fla-core did not install"
export PYTHONUNBUFFERED=1 FLA_CACHE_RESULTS=0
# Their logs stay out of $OUT (a call brings back a few files only); a failure's tail goes to warm.log.
mkdir -p /tmp/gdn-warm
for row in $rows; do
  m=${row%%:*} s=${row#*:}
  ( wlog="/tmp/gdn-warm/$m-$s.log"
    PYTHONPATH=/tmp/site timeout 420 python3 bench/gdn_bench.py --members "$m" --shapes "$s" --impls fla --no-check \
      --fla-gated-bwd-despite-guard > "$wlog" 2>&1
    rc=$?
    { echo "compiled $row rc $rc $(date -u +%T)"; [ $rc -ne 0 ] && tail -5 "$wlog"; } >> "$OUT/warm.log" ) &
done
log "package"
python3 -m pip install -v --no-build-isolation --no-deps -Ccmake.define.KCV_DEPS_INCLUDE="$PWD/.deps" \
  -Ccmake.define.KCV_CUDA=OFF -Cbuild-dir=build/device --target /tmp/kcvpkg . > "$OUT/package.log" 2>&1
rc=$?
log "package rc $rc"
[ $rc -ne 0 ] && grep -n -i -B2 -A8 "error" "$OUT/package.log" | head -40
wait
log "fla compiled: $(tr '\n' ' ' < "$OUT/warm.log")"

export PYTHONPATH=/tmp/kcvpkg:/tmp/site KCV_GDN_CUDA_LIB="$lib_dir/libkcv_gdn_cuda.so"
for row in $rows; do
  m=${row%%:*} s=${row#*:}
  left=$(( deadline - ($(date +%s) - t0) ))
  if [ "$left" -lt 45 ]; then log "no time for $row"; continue; fi
  log "bench $row ($left s left)"
  timeout "$left" python3 bench/gdn_bench.py --members "$m" --shapes "$s" --impls kcv,fla \
    --fla-gated-bwd-despite-guard >> "$OUT/bench.log" 2>&1
  log "bench $row rc $?"
done
log "done; rows in $OUT/bench.log"
