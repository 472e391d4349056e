#!/usr/bin/env bash
# One call on a GPU machine, in priority order, each step under its own time limit, logs under
# $OUT: (1) the CUDA kernels against the float64 oracle (gdn/tests/check_gdn_cuda.cu), (2) their
# times at GDN.md's shapes, (3) the training example, (4) flash-linear-attention (fla-core,
# carried as a wheel in .whl/) at the same shapes, (5) a per-kernel profile. The Python ops' GPU
# tests run with `pytest tests/python/test_gdn_ops.py -k cuda` under the same environment. The CUDA library and the check program are built
# beforehand into .device/ (a build here is the fallback when they do not load).
#   bash bench/gdn_device_run.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gdn-device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/device.txt"
date -u | tee -a "$OUT/device.txt"

if [ ! -x .device/check_gdn_cuda ] || ldd .device/check_gdn_cuda 2>&1 | grep -q "not found"; then
  echo "carried binaries do not load; building here"
  bash bench/gdn_build.sh .device
fi
export KCV_GDN_CUDA_LIB=$PWD/.device/libkcv_gdn_cuda.so

echo "== 1. kernels against the oracle"
timeout 40 .device/check_gdn_cuda 2>&1 | tee "$OUT/check.log"
echo "check exit: ${PIPESTATUS[0]}" | tee -a "$OUT/check.log"

echo "== 2. kernel times"
timeout 70 .device/check_gdn_cuda --time 2>&1 | grep -E "^time|device" | tee "$OUT/time.log"

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site
# kcv.gdn without building kcv._core: a package root holding only the gdn subpackage.
mkdir -p /tmp/pyroot/kcv && touch /tmp/pyroot/kcv/__init__.py && ln -sfn "$PWD/python/kcv/gdn" /tmp/pyroot/kcv/gdn
export PYTHONPATH=/tmp/pyroot:${PYTHONPATH:-}

echo "== 3. training example"
timeout 75 python3 examples/train_gdn.py --steps 500 --out "$OUT/train_curves.json" 2>&1 | tail -8 | tee "$OUT/train.log"

echo "== 4. fla-core at the same shapes"
timeout 80 python3 bench/gdn_bench.py --members gdn --impls fla --fla-gated-bwd-despite-guard \
  --json "$OUT/bench_fla.json" 2>&1 | grep -v Warning | tee "$OUT/bench_fla.log"

echo "== 5. time per kernel (Nsight Compute)"
timeout 40 ncu --clock-control none --metrics gpu__time_duration.sum --csv .device/check_gdn_cuda --profile \
  > "$OUT/ncu.csv" 2>&1
grep -E "kcv|gpu__time" "$OUT/ncu.csv" | awk -F'","' '{print $5, $(NF)}' | head -20

echo "== summary"
grep -E "FAIL|passed" "$OUT/check.log"
cat "$OUT/time.log"
grep "^|" "$OUT/bench_fla.log" "$OUT/train.log" | sed 's/^[^:]*://'
