#!/usr/bin/env bash
# The verifier on a GPU machine, in one call, in priority order; each step has its own time limit
# and its log; everything comes back as one archive, $LOG/audit.tgz (the machine returns few files):
#   build      pip install of kcv (the CUDA forms of the kernels and the guarded allocator too),
#              with the header-only dependencies carried in .device/include
#   gpu-tests  the Python bridge's GPU tests (test_gpu.py, and test_gdn_ops.py -k cuda), a module per
#              interpreter
#   imports    which import orders of torch and kcv a fresh interpreter survives on this machine
#   redteam    kcv redteam --device cuda: the CUDA forms through kcv's own device mirrors
#   redteam-bg the same in the background, beside the steps after it
#   profile-bg:NAME:I  bench/battery_profile.py on entry I of corpus NAME (cProfile of its gates), in
#              the background beside the steps after it
#   disputes-bg:NAME   kcv disputes on the journal of NAME, shrinking each packet's input on the GPU
#              (DISPUTES_N packets), in the background
#   gdn-bench  bench/gdn_bench.py: the recurrence ops of the installed package beside
#              flash-linear-attention (fla-core, carried as a wheel in .whl/), at GDN.md's shapes, in
#              one process (GDN_MEMBERS picks the members, GDN_SHAPES the shapes by index: fla
#              autotunes for minutes per member, so GDN_SHAPES=0 gets every member's first shape;
#              GDN_IMPLS=kcv times kcv alone, GDN_PROFILE=1 adds kcv's time per kernel, GDN_LIB runs
#              another build of the kernels' library instead of the package's). Where .fqla/ holds
#              FlashQLA's packed wheels (bench/flashqla_carry.py pack) and GDN_IMPLS is unset,
#              FlashQLA is installed and timed beside them for Gated DeltaNet, and fla and FlashQLA
#              are checked against float64 as kcv is; its TileLang kernels compile for minutes on
#              their first call, so the compiled ones come back as $OUT/tilelang_cache.tgz, and
#              .fqla/tilelang_cache.tgz, if carried, seeds the cache
#   gdn-gates  kcv verify of the recurrence's CUDA kernels (kernels/gdn/cuda, built into the installed
#              package by the build step) against every contracts/gdn-*.toml, bf16 and f16 (version 2,
#              tensor cores) before f32 (version 1), GDN_JOBS at a time (default: the CPU count; the oracle and
#              the CPU controls run beside each GPU candidate); the records in $LOG/gdn_gates/, a table
#              of verdicts and failing gates in $LOG/gdn_gates/table.txt; GDN_GATES_S bounds the step,
#              GDN_CONTRACTS (an extended regular expression) picks contracts by file name; KCV_BUILD
#              (a build tree carried with the call) takes the place of the package and its build step
#   gdn-check  gdn/tests/check_gdn_cuda.cu and the kernels' library, built from the tree (not the
#              package): every case against the float64 oracle, bitwise determinism; with GDN_LIB
#              the same cases through that build too, and which outputs' digests differ
#   gdn-ncu    Nsight Compute on the check program's one forward and backward (GDN, B4 T4096 H32):
#              per kernel, speed of light, issue and stall statistics, hottest source lines
#   gdn-train  examples/train_gdn.py through the installed package (GDN_TRAIN_STEPS, default 500)
#   mma-subnormals  bench/mma_subnormals.cu: what cvt.rna.tf32, mma.sync (TF32, bf16) and float32
#              arithmetic do with subnormal operands and results on this GPU
#   wgmma-probe  bench/wgmma_probe.cu: wgmma (bf16, tf32, 3xTF32) on TMA-loaded swizzled shared
#              memory checked bit for bit, their dense throughput, and TMA's streaming bandwidth
#   audit:NAME kcv audit of the corpus in .corpora/NAME/corpus.jsonl (written by
#              `kcv corpus ... --bundle`), through bench/verifier_bench.py, resuming the journal
#              .corpora/journals/NAME.jsonl, which stays on the machine between calls while it is warm
# STEPS picks the steps (default: all of them, corpora in the order given by CORPORA);
# AUDIT_S bounds each audit step (seconds), WORKERS the worker processes per GPU, DEVICE=cpu
# rehearses the audit steps on a machine without a GPU. DEADLINE (seconds from the start) caps every
# step so that the whole call ends, archive written, inside the machine's limit per command.
#   STEPS="build gpu-tests redteam audit:tritondump" bash bench/audit_device_run.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kcv-audit-out}
LOG=/tmp/kcv-audit-logs
rm -rf "$LOG"; mkdir -p "$LOG" "$OUT"
trap 'wait; tar -czf "$OUT/audit.tgz" -C "$LOG" .' EXIT
CORPORA=${CORPORA:-"tritondump yenhao"}
STEPS=${STEPS:-"build gpu-tests redteam $(for c in $CORPORA; do printf 'audit:%s ' "$c"; done)"}
AUDIT_S=${AUDIT_S:-240}
WORKERS=${WORKERS:-4}
DEVICE=${DEVICE:-cuda}
DEADLINE=${DEADLINE:-100000}
# The smaller of a step's own limit and what is left before the deadline, less a reserve.
cap() { local left=$((DEADLINE - SECONDS - $2)); [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"; }
mkdir -p .corpora/journals
export PYTHONUNBUFFERED=1
# The kernels' library (the package's flags, with line information) and the check program, built
# once per call into $GDN_BUILD; the ptxas report (registers, spills) in $LOG/gdn_build.log.
GDN_BUILD=/tmp/kcv-gdn-check
gdn_check_build() {
  [ -x "$GDN_BUILD/check_gdn_cuda" ] && return 0
  mkdir -p "$GDN_BUILD"
  local arch="-gencode=arch=compute_90a,code=sm_90a"
  {
    nvcc -std=c++20 -O3 $arch -fmad=false -lineinfo -Xptxas -v -Xcompiler -fPIC -shared gdn/cuda/gdn_api.cu \
      -o "$GDN_BUILD/libkcv_gdn_cuda.so" &
    nvcc -std=c++20 -O2 $arch -c gdn/tests/check_gdn_cuda.cu -o "$GDN_BUILD/check.o" &
    g++ -std=c++20 -O2 -c gdn/problem.cpp -o "$GDN_BUILD/problem.o" &
    g++ -std=c++20 -O2 -c gdn/oracle/gdn_oracle.cpp -o "$GDN_BUILD/oracle.o" &
    wait
    nvcc $arch "$GDN_BUILD/check.o" "$GDN_BUILD/problem.o" "$GDN_BUILD/oracle.o" -L"$GDN_BUILD" -lkcv_gdn_cuda \
      -Xlinker -rpath,"$GDN_BUILD" -o "$GDN_BUILD/check_gdn_cuda"
  } > "$LOG/gdn_build.log" 2>&1
  local rc=$?
  echo "gdn check build exit: $rc"
  return $rc
}
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; date -u;
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } \
  2>&1 | tee "$LOG/device.txt"

for step in $STEPS; do
  echo "== $step"
  case "$step" in
    build)
      # The build folder is ignored by git and kept while the machine stays warm.
      timeout "$(cap 420 20)" python3 -m pip install -q --no-build-isolation --no-deps \
        -Ccmake.define.KCV_DEPS_INCLUDE="$PWD/.device/include" -Cbuild-dir=build/device . \
        > "$LOG/build.log" 2>&1
      rc=$?
      echo "build exit: $rc" | tee -a "$LOG/build.log"
      [ $rc -eq 0 ] || { tail -40 "$LOG/build.log"; exit 1; }
      ;;
    gpu-tests)
      # One module at a time, each in its own interpreter, so that a crash names its module and
      # keeps the others' results; faulthandler prints where a crash happened.
      for m in tests/python/test_gpu.py tests/python/test_gdn_ops.py; do
        echo "-- $m" >> "$LOG/gpu_tests.log"
        timeout "$(cap 150 20)" python3 -X faulthandler -m pytest "$m" -k "cuda or gpu" -q -rs -p no:cacheprovider \
          > "$LOG/gpu_tests_$(basename "$m" .py).log" 2>&1
        echo "exit $?" >> "$LOG/gpu_tests.log"
        grep -m1 -A12 "Fatal Python error" "$LOG/gpu_tests_$(basename "$m" .py).log" >> "$LOG/gpu_tests.log"
        tail -12 "$LOG/gpu_tests_$(basename "$m" .py).log" >> "$LOG/gpu_tests.log"
      done
      cat "$LOG/gpu_tests.log"
      ;;
    imports)
      # Which order of imports a fresh interpreter survives: torch before kcv (the audit's
      # workers) and kcv before torch (a script that imports kcv first).
      for order in "import torch, kcv._core" "import kcv._core, torch" "import kcv, torch; torch.zeros(1, device='cuda')" \
                   "import torch, kcv.worker; torch.zeros(1, device='cuda')"; do
        timeout 60 python3 -X faulthandler -c "$order; print('ok')" > "$LOG/imports.tmp" 2>&1
        echo "$order -> exit $?: $(grep -m1 -A6 'Fatal Python error' "$LOG/imports.tmp" | tr '\n' ' ' | cut -c1-600)" | tee -a "$LOG/imports.log"
      done
      ;;
    profile-bg:*)
      spec=${step#profile-bg:}; name=${spec%%:*}; index=${spec#*:}
      ( timeout "$(cap 300 30)" python3 bench/battery_profile.py ".corpora/$name/corpus.jsonl" --index "$index" \
          --device "$DEVICE" --out "$LOG/profile_$name" > "$LOG/profile_$name.log" 2>&1 ) &
      ;;
    disputes-bg:*)
      name=${step#disputes-bg:}
      ( timeout "$(cap 400 30)" kcv disputes ".corpora/journals/$name.jsonl" --sample "${DISPUTES_N:-4}" \
          --max-trials "${DISPUTES_TRIALS:-16}" --out "$LOG/disputes_$name" > "$LOG/disputes_$name.log" 2>&1 ) &
      ;;
    redteam)
      timeout "$(cap 240 20)" kcv redteam --device cuda --json "$LOG/redteam_cuda.json" 2>&1 | tail -45 | tee "$LOG/redteam_cuda.log"
      ;;
    redteam-bg)
      # The same, beside the steps that follow (it uses one GPU process); waited for at the end.
      ( timeout "$(cap 300 20)" kcv redteam --device cuda --json "$LOG/redteam_cuda.json" > "$LOG/redteam_cuda.log" 2>&1 ) &
      ;;
    gdn-bench)
      mkdir -p /tmp/fla-site
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fla-site .whl/*.whl > "$LOG/gdn_bench.log" 2>&1
      impls=${GDN_IMPLS:-kcv,fla} site=/tmp/fla-site baselines=
      if [ -f .fqla/fqla_wheels.tar.xz ] && [ -z "${GDN_IMPLS:-}" ] &&
          python3 bench/flashqla_carry.py install --carry .fqla --target /tmp/fqla-site >> "$LOG/gdn_bench.log" 2>&1; then
        impls=kcv,fla,flashqla site=/tmp/fqla-site:/tmp/fla-site baselines=--check-baselines
        mkdir -p /tmp/tilelang_cache
        [ -f .fqla/tilelang_cache.tgz ] && tar -xzf .fqla/tilelang_cache.tgz -C /tmp/tilelang_cache
      fi
      ( cd /tmp && PYTHONPATH=$site TILELANG_CACHE_DIR=/tmp/tilelang_cache env ${GDN_LIB:+KCV_GDN_CUDA_LIB=$GDN_LIB} \
          timeout "$(cap "${GDN_BENCH_S:-240}" 45)" python3 "$OLDPWD/bench/gdn_bench.py" \
          --members "${GDN_MEMBERS:-gdn,kda,gla,ssd}" --shapes "${GDN_SHAPES:-all}" --fla-gated-bwd-despite-guard \
          --impls "$impls" $baselines ${GDN_PROFILE:+--profile} \
          --json "$LOG/gdn_bench.json" --results "$LOG/gdn_results.json" ) \
        2>&1 | grep -v "Warning\|TileLang" >> "$LOG/gdn_bench.log"
      [ -d /tmp/tilelang_cache ] && tar -czf "$OUT/tilelang_cache.tgz" -C /tmp/tilelang_cache .
      tail -60 "$LOG/gdn_bench.log"
      ;;
    gdn-gates)
      # The installed package's kcv and kernels, or those of a build tree carried in KCV_BUILD
      # (its out/ folder: bin/kcv and kernels/), which needs no build step here.
      if [ -n "${KCV_BUILD:-}" ]; then
        kdir=$(cd "$KCV_BUILD/out/kernels" && pwd); kcv_bin=$(cd "$KCV_BUILD/out/bin" && pwd)/kcv
      else
        kdir=$(python3 -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("kcv").origin), "kernels"))')
        kcv_bin=kcv
      fi
      mkdir -p "$LOG/gdn_gates"
      ls "$kdir"/cuda/kcv_gdn_*.so > "$LOG/gdn_gates/candidates.txt" 2>&1 || { cat "$LOG/gdn_gates/candidates.txt"; continue; }
      limit=$(cap "${GDN_GATES_S:-200}" 20)
      # A contract cut off by the limit leaves no record; the table says so.
      { ls contracts/gdn-*-bf16.toml contracts/gdn-*-f16.toml; ls contracts/gdn-*.toml | grep -vE -- '-b?f16\.toml$'; } | grep -E -- "${GDN_CONTRACTS:-.}" |
        timeout "$limit" xargs -P "${GDN_JOBS:-$(nproc)}" -I{} bash -c '
          c=$(basename "$1" .toml); kind=${c#gdn-}; kind=${kind%%-*}
          "$4" verify --contract "$1" --candidate "$2/cuda/kcv_gdn_$kind.so" --kernels "$2" --json "$3/$c.json" > "$3/$c.log" 2>&1
          echo "$c exit $?" >> "$3/exits.txt"' _ {} "$kdir" "$LOG/gdn_gates" "$kcv_bin"
      python3 - "$LOG/gdn_gates" "${GDN_CONTRACTS:-.}" > "$LOG/gdn_gates/table.txt" <<'PY'
import glob, json, os, re, sys
d = sys.argv[1]
names = sorted(os.path.basename(p)[:-5] for p in glob.glob("contracts/gdn-*.toml") if re.search(sys.argv[2], os.path.basename(p)))
names.sort(key=lambda n: (not n.endswith("f16"), n))
print(f"{'contract':38} {'verdict':8} {'seconds':>7}  failing gates / error")
for n in names:
    path = os.path.join(d, n + ".json")
    if not os.path.exists(path):
        print(f"{n:38} {'no record (cut off or crashed; see ' + n + '.log)'}")
        continue
    r = json.load(open(path))
    err = r.get("error") or ""
    if isinstance(err, dict):
        err = f"{err.get('code', '')}: {err.get('message', '')}"
    verdict = "error" if err else ("fail" if r.get("failed_gates") else "pass")
    na = [g["id"] for g in r.get("gates", []) if g.get("verdict") == "n/a"]
    detail = err or " ".join(r.get("failed_gates", [])) or ("n/a: " + " ".join(na) if na else "")
    print(f"{n:38} {verdict:8} {r.get('seconds', 0):7.1f}  {detail}")
PY
      cat "$LOG/gdn_gates/table.txt"
      ;;
    gdn-check)
      # The kernels' library (with line information, for the profiler) and gdn/tests/check_gdn_cuda.cu,
      # built from this tree; then every case against the float64 oracle, determinism included.
      gdn_check_build || continue
      timeout "$(cap 120 10)" "$GDN_BUILD/check_gdn_cuda" > "$LOG/gdn_check.log" 2>&1
      echo "check exit: $?" >> "$LOG/gdn_check.log"
      grep -E "^FAIL|passed|check exit|block_mma" "$LOG/gdn_check.log"
      if [ -n "${GDN_LIB:-}" ]; then
        # The same cases through another build of the library (the program's run path yields to
        # LD_LIBRARY_PATH): the digests of every output must agree where the two builds should
        # give the same bits.
        readelf -d "$GDN_BUILD/check_gdn_cuda" | grep -E "RPATH|RUNPATH" > "$LOG/gdn_check_other.log"
        LD_LIBRARY_PATH="$(dirname "$GDN_LIB")" timeout "$(cap 120 10)" "$GDN_BUILD/check_gdn_cuda" \
          >> "$LOG/gdn_check_other.log" 2>&1
        echo "check exit: $?" >> "$LOG/gdn_check_other.log"
        digests() { grep -oE "^(ok  |FAIL) +[^ ]+ +[a-z0-9]+ .*digest=[0-9a-f]+" "$1" | awk '{print $2, $3, $NF}'; }
        echo "digests: $(digests "$LOG/gdn_check.log" | wc -l) cases, differing from $GDN_LIB:"
        diff <(digests "$LOG/gdn_check.log") <(digests "$LOG/gdn_check_other.log") && echo "none"
      fi
      ;;
    gdn-ncu)
      # Nsight Compute on one forward and backward of Gated DeltaNet at B4 T4096 H32: per kernel,
      # speed of light, issue and stall statistics, instruction mix and the hottest source lines.
      gdn_check_build || continue
      timeout "$(cap 240 10)" ncu --clock-control none --import-source yes --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
        --section LaunchStats --section SchedulerStats --section WarpStateStats --section InstructionStats \
        --section SourceCounters "$GDN_BUILD/check_gdn_cuda" --profile > "$LOG/gdn_ncu.log" 2>&1
      echo "ncu exit: $?" >> "$LOG/gdn_ncu.log"
      grep -E "^  [a-z_]+.*\(|Duration|Issue Slots Busy|Executed Ipc Active|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|ncu exit" \
        "$LOG/gdn_ncu.log" | head -120
      ;;
    gdn-train)
      # examples/train_gdn.py through the installed package: every member, curves in train_curves.json.
      timeout "$(cap "${GDN_TRAIN_S:-150}" 10)" python3 examples/train_gdn.py --steps "${GDN_TRAIN_STEPS:-500}" \
        --out "$LOG/train_curves.json" > "$LOG/gdn_train.log" 2>&1
      echo "train exit: $?" >> "$LOG/gdn_train.log"
      tail -15 "$LOG/gdn_train.log"
      ;;
    mma-subnormals)
      { nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a bench/mma_subnormals.cu -o /tmp/mma_subnormals &&
        timeout "$(cap 60 10)" /tmp/mma_subnormals; } > "$LOG/mma_subnormals.log" 2>&1
      cat "$LOG/mma_subnormals.log"
      ;;
    wgmma-probe)
      { nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -fmad=false bench/wgmma_probe.cu -o /tmp/wgmma_probe &&
          timeout "$(cap 120 10)" /tmp/wgmma_probe; echo "wgmma probe exit: $?"; } > "$LOG/wgmma_probe.log" 2>&1
      tail -36 "$LOG/wgmma_probe.log"
      ;;
    audit:*)
      name=${step#audit:}
      [ -f ".corpora/$name/corpus.jsonl" ] || { echo "no corpus .corpora/$name"; continue; }
      before=$( (grep -c . ".corpora/journals/$name.jsonl" 2>/dev/null) || echo 0)
      timeout "$(cap "$AUDIT_S" 45)" python3 bench/verifier_bench.py ".corpora/$name/corpus.jsonl" --device "$DEVICE" \
        --workers-per-gpu "$WORKERS" --journal-out ".corpora/journals/$name.jsonl" --out "$LOG/$name" --trace \
        > "$LOG/audit_$name.full.log" 2>&1
      tail -c 3000 "$LOG/audit_$name.full.log" | tr '\r' '\n' | tail -25 | tee "$LOG/audit_$name.log"
      # Cut short by the limit: the journal keeps what finished; summarise it as it stands.
      python3 bench/verifier_bench.py --journal ".corpora/journals/$name.jsonl" --workers-per-gpu "$WORKERS" --device "$DEVICE" \
        --since "$before" --out "$LOG/$name" > "$LOG/$name/table.md" 2>&1
      kcv summary ".corpora/journals/$name.jsonl" > "$LOG/$name/summary.txt" 2>&1
      cp ".corpora/journals/$name.jsonl" "$LOG/$name/journal.jsonl"
      ;;
    *) echo "unknown step $step" ;;
  esac
done
