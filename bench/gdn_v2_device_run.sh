#!/usr/bin/env bash
# One call on a GPU machine for the version 2 (tensor-core) recurrence kernels, built here from
# source, each step under its own time limit, logs under $OUT (at most 8 files):
#   0. build the library and the check program (build.log, with ptxas registers and spills);
#   1. the tensor-core product alone (block_mma: exact small integers, the 3xTF32 error, subnormal
#      operands), then every case against the float64 oracle with version 2 for bf16/f16
#      (check_v2.log), then the same with version 1 everywhere (check_v1.log); each case line gives
#      the ratio r per output (pass iff r <= 1) after two runs into differently poisoned buffers
#      agreed bit for bit;
#   2. times at GDN.md's shapes, version 1 and version 2 side by side in one process (time.log);
#   3. flash-linear-attention (fla-core, carried as a wheel in .whl/) at the same shapes
#      (bench_fla.log);
#   4. time per kernel under Nsight Compute, version 2 then version 1 (ncu.log);
# and summary.txt. Every step has its own time limit; together at most 455 s (about 4 min expected).
#   bash bench/gdn_v2_device_run.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gdn-v2-device-out}
BUILD=${BUILD:-/tmp/kcv-gdn-v2-build}
mkdir -p "$OUT" "$BUILD"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; date -u; git log --oneline -1; } \
  > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

echo "== 0. build"
SECONDS=0
{
  timeout 120 bench/gdn_build.sh "$BUILD" -Xptxas -v > "$BUILD/lib.log" 2>&1
  echo "build exit: $? after ${SECONDS}s"
  echo "-- ptxas, version 2 kernels and every spill:"
  grep -E "error|warning" "$BUILD/lib.log"
  awk '/Compiling entry/ {name=$0} /Used|spill/ { if (name ~ /_tc/ || $0 ~ /[1-9][0-9]* bytes spill/) print name "\n   " $0 }' \
      "$BUILD/lib.log" | c++filt | sed -E 's/.*Compiling entry function .(.*). for .*/\1/' | grep -v "^$"
} > "$OUT/build.log" 2>&1
grep -E "build exit|error" "$OUT/build.log"
CHECK="$BUILD/check_gdn_cuda"
export KCV_GDN_CUDA_LIB="$BUILD/libkcv_gdn_cuda.so"

echo "== 1. kernels against the oracle, version 2 then version 1"
timeout 60 "$CHECK" > "$OUT/check_v2.log" 2>&1
echo "check exit: $?" >> "$OUT/check_v2.log"
KCV_GDN_KERNELS=1 timeout 45 "$CHECK" > "$OUT/check_v1.log" 2>&1
echo "check exit: $?" >> "$OUT/check_v1.log"

echo "== 2. kernel times, version 1 and version 2 in one process"
timeout 85 "$CHECK" --time-only > "$OUT/time.log" 2>&1
echo "time exit: $?" >> "$OUT/time.log"

echo "== 3. fla-core at the same shapes"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site
mkdir -p /tmp/pyroot/kcv && touch /tmp/pyroot/kcv/__init__.py && ln -sfn "$PWD/python/kcv/gdn" /tmp/pyroot/kcv/gdn
export PYTHONPATH=/tmp/pyroot:${PYTHONPATH:-}
timeout 80 python3 bench/gdn_bench.py --members gdn --impls fla --fla-gated-bwd-despite-guard 2>&1 \
  | grep -v Warning > "$OUT/bench_fla.log"

echo "== 4. time per kernel (Nsight Compute), version 2 then version 1"
{
  for version in 2 1; do
    echo "-- version $version"
    limit=25
    if [ $version = 1 ]; then export KCV_GDN_KERNELS=1; limit=40; fi
    timeout $limit ncu --clock-control none --metrics gpu__time_duration.sum --csv "$CHECK" --profile 2>&1 \
      | grep -E "gpu__time" | awk -F'","' '{print $5, $(NF)}'
  done
  unset KCV_GDN_KERNELS
} > "$OUT/ncu.log" 2>&1

{
  echo "== summary ($(date -u), ${SECONDS}s)"
  grep -E "build exit" "$OUT/build.log"
  for v in 2 1; do echo "-- check v$v"; grep -E "^FAIL|passed|check exit|block_mma" "$OUT/check_v$v.log"; done
  echo "-- times"; grep -E "^time" "$OUT/time.log"
  echo "-- fla"; grep "^|" "$OUT/bench_fla.log"
  echo "-- per kernel"; cat "$OUT/ncu.log"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
