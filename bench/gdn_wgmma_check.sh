#!/usr/bin/env bash
# The recurrence kernels as built by default, with chunk_output_tc's and reverse_scan_tc's products
# on wgmma (gdn/cuda/gdn_wgmma.cuh), beside a base build whose flags keep some of them on mma.sync
# (KCV_GDN_WGMMA=0, every product on mma.sync, unless other flags are given, e.g.
# -DKCV_GDN_REVERSE_WGMMA=0 for the reverse scan's alone): the same outputs bit
# for bit, and how much faster. `run` checks both builds' every case against the float64 oracle
# (gdn/tests/check_gdn_cuda.cu), compares every output's digest between them, times every member at
# B4 T4096 H32 in alternation (bench/gdn_ab.sh) and, where ncu is installed, the two kernels alone
# in each; it also runs bench/wgmma_probe.cu, whose case P compares block_mma_wgmma with block_mma
# alone. A table last.
#
#   bench/gdn_wgmma_check.sh build DIR [FLAGS]    DIR/base (FLAGS, default -DKCV_GDN_WGMMA=0) and
#                                                 DIR/wgmma (bench/gdn_build.sh); no GPU
#   bench/gdn_wgmma_check.sh run DIR [ROUNDS]     needs an sm_90a GPU; logs in DIR/logs
#
# The wgmma products are the default because every digest agreed on an H200 (bench/RESULTS.md):
# they must be block_mma's bits (the host emulation checks that on this source,
# tests/cpp/test_gdn_cuda_emulated.cpp, WgmmaPortGivesBlockMmasBits, OutputOnWgmma and
# BackwardOnWgmma, and a GPU must agree). Rerun this after any change to a product. chunk_grad_tc's
# products run on wgmma only in a library built with -DKCV_GDN_GRAD_WGMMA=1 (slower on an H100,
# bench/RESULTS.md): compare such a build with bench/gdn_build.sh and bench/gdn_ab.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:?build or run}" dir="${2:?a directory}"
case "$what" in
build)
    shift 2
    bench/gdn_build.sh "$dir/base" "${@:--DKCV_GDN_WGMMA=0}" &
    bench/gdn_build.sh "$dir/wgmma"
    wait $!
    ;;
run)
    logs="$dir/logs"
    mkdir -p "$logs"
    status=0
    for v in base wgmma; do
        timeout 300 "$dir/$v/check_gdn_cuda" > "$logs/check_$v.log" 2>&1 || status=1
        awk '/digest=/{print $2, $3, $NF}' "$logs/check_$v.log" > "$logs/digests_$v.txt"
    done
    cases=$(wc -l < "$logs/digests_base.txt")
    differ=$(diff "$logs/digests_base.txt" "$logs/digests_wgmma.txt" | grep -c '^[<>]' || true)
    nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -fmad=false bench/wgmma_probe.cu -o "$dir/wgmma_probe" &&
        timeout 120 "$dir/wgmma_probe" > "$logs/wgmma_probe.log" 2>&1 || status=1
    ROUNDS="${3:-3}" bench/gdn_ab.sh "$dir/base" "$dir/wgmma" > "$logs/ab.log" 2>&1 || status=1
    if command -v ncu > /dev/null; then
        for v in base wgmma; do
            for m in gdn kda linear_attention; do
                # Every launch of the three kernels in the profile run (it runs each more than once, in an
                # order of its own); the first of each kernel is reported.
                timeout 120 ncu --metrics gpu__time_duration.sum --kernel-name 'regex:state_scan_tc|chunk_output_tc|reverse_scan_tc' \
                    "$dir/$v/check_gdn_cuda" --profile "$m" > "$logs/ncu_${v}_$m.log" 2>&1 || true
                echo "$v $m $(awk 'match($0, /(state|reverse)_scan_tc|chunk_output_tc/){k=substr($0, RSTART, RLENGTH)}
                                   /gpu__time_duration.sum/ && !seen[k]++ {printf "%s %s %s  ", k, $(NF-1), $NF}' \
                                  "$logs/ncu_${v}_$m.log")"
            done
        done > "$logs/kernels.txt"
    fi
    for v in base wgmma; do echo "check $v: $(grep -c '^ok' "$logs/check_$v.log") ok, $(grep -c '^FAIL' "$logs/check_$v.log") failed"; done
    echo "digests: $cases cases, $differ lines differ between base and wgmma"
    grep -E '^(PASS|FAIL|INFO)  P ' "$logs/wgmma_probe.log" || tail -8 "$logs/wgmma_probe.log"
    [ -f "$logs/kernels.txt" ] && { echo "state_scan_tc, chunk_output_tc, reverse_scan_tc (ncu, the first launch of each):"; cat "$logs/kernels.txt"; }
    grep '^|' "$logs/ab.log" || true
    [ "$differ" = 0 ] && [ "$cases" -gt 0 ] || status=1
    exit "$status"
    ;;
*) echo "unknown step $what (build or run)" >&2; exit 2 ;;
esac
