#!/usr/bin/env bash
# The recurrence kernels with chunk_output_tc's product on wgmma (gdn/cuda/gdn_wgmma.cuh,
# KCV_GDN_WGMMA=1, the default) beside its mma.sync build (KCV_GDN_WGMMA=0): the same outputs bit for bit, and how much
# faster. `run` checks both builds' every case against the float64 oracle (gdn/tests/check_gdn_cuda.cu),
# compares every output's digest between them, times every member at B4 T4096 H32 in alternation
# (bench/gdn_ab.sh) and, where ncu is installed, chunk_output_tc alone in each; it also runs
# bench/wgmma_probe.cu, whose case P compares block_mma_wgmma with block_mma alone. A table last.
#
#   bench/gdn_wgmma_check.sh build DIR            DIR/mma and DIR/wgmma (bench/gdn_build.sh); no GPU
#   bench/gdn_wgmma_check.sh run DIR [ROUNDS]     needs an sm_90a GPU; logs in DIR/logs
#
# The wgmma build is the default because every digest agreed on an H200 (bench/RESULTS.md): its
# products must be block_mma's bits (the host emulation checks that on this source,
# tests/cpp/test_gdn_cuda_emulated.cpp, WgmmaPortGivesBlockMmasBits, and a GPU must agree). Rerun
# this after any change to either product.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:?build or run}" dir="${2:?a directory}"
case "$what" in
build)
    bench/gdn_build.sh "$dir/mma" -DKCV_GDN_WGMMA=0
    bench/gdn_build.sh "$dir/wgmma" -DKCV_GDN_WGMMA=1
    ;;
run)
    logs="$dir/logs"
    mkdir -p "$logs"
    status=0
    for v in mma wgmma; do
        timeout 300 "$dir/$v/check_gdn_cuda" > "$logs/check_$v.log" 2>&1 || status=1
        awk '/digest=/{print $2, $3, $NF}' "$logs/check_$v.log" > "$logs/digests_$v.txt"
    done
    cases=$(wc -l < "$logs/digests_mma.txt")
    differ=$(diff "$logs/digests_mma.txt" "$logs/digests_wgmma.txt" | grep -c '^[<>]' || true)
    nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -fmad=false bench/wgmma_probe.cu -o "$dir/wgmma_probe" &&
        timeout 120 "$dir/wgmma_probe" > "$logs/wgmma_probe.log" 2>&1 || status=1
    ROUNDS="${3:-3}" bench/gdn_ab.sh "$dir/mma" "$dir/wgmma" > "$logs/ab.log" 2>&1 || status=1
    if command -v ncu > /dev/null; then
        for v in mma wgmma; do
            for m in gdn kda linear_attention; do
                timeout 120 ncu --metrics gpu__time_duration.sum --kernel-name regex:chunk_output_tc --launch-count 1 \
                    "$dir/$v/check_gdn_cuda" --profile "$m" > "$logs/ncu_${v}_$m.log" 2>&1 || true
                echo "$v $m $(awk '/gpu__time_duration.sum/{print $(NF-1), $NF}' "$logs/ncu_${v}_$m.log")"
            done
        done > "$logs/chunk_output.txt"
    fi
    for v in mma wgmma; do echo "check $v: $(grep -c '^ok' "$logs/check_$v.log") ok, $(grep -c '^FAIL' "$logs/check_$v.log") failed"; done
    echo "digests: $cases cases, $differ lines differ between mma and wgmma"
    grep -E '^(PASS|FAIL|INFO)  P ' "$logs/wgmma_probe.log" || tail -8 "$logs/wgmma_probe.log"
    [ -f "$logs/chunk_output.txt" ] && { echo "chunk_output_tc (ncu, one launch):"; cat "$logs/chunk_output.txt"; }
    grep '^|' "$logs/ab.log" || true
    [ "$differ" = 0 ] && [ "$cases" -gt 0 ] || status=1
    exit "$status"
    ;;
*) echo "unknown step $what (build or run)" >&2; exit 2 ;;
esac
