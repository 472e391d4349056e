#!/usr/bin/env bash
# Where the time of one recurrence kernel goes: Nsight Compute's full set on one launch at
# B4 T4096 H32 (bf16, K = V = 128; gdn/tests/check_gdn_cuda.cu --profile), with the warp-stall
# samples per source line of gdn/cuda (the library is built with line information).
#
#   bench/gdn_profile.sh build DIR [NVCC FLAGS...]             the library and the check program in DIR
#                                                               (bench/gdn_build.sh)
#   bench/gdn_profile.sh run DIR OUT [MEMBERS] [KERNELS]       profile; OUT/profile.tgz and OUT/summary.txt
#
# MEMBERS defaults to gdn,kda and KERNELS to prepare_chunks_tc,chunk_grad_tc (one launch each, the
# forward's). `run` needs a CUDA device and ncu with access to the hardware counters. summary.txt
# has, per member and kernel, the duration, occupancy and warp-state lines of Nsight Compute's
# details page, then the source lines with the most warp samples (bench/ncu_lines.py);
# profile.tgz has the details pages and the logs in full.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:?build or run}" dir="${2:?a directory}"
case "$what" in
build)
    shift 2
    exec bench/gdn_build.sh "$dir" "$@"
    ;;
run)
    out="${3:?an output directory}" members="${4:-gdn,kda}" kernels="${5:-prepare_chunks_tc,chunk_grad_tc}"
    mkdir -p "$out/profile"
    for m in ${members//,/ }; do
        for k in ${kernels//,/ }; do
            rep="$out/profile/$m-$k"
            timeout 240 ncu --clock-control none --set full --import-source yes --kernel-name "regex:$k" \
                --launch-count 1 -f -o "$rep" "$dir/check_gdn_cuda" --profile "$m" > "$rep.log" 2>&1 \
                || echo "ncu exit $? for $m $k (see $rep.log)"
            ncu -i "$rep.ncu-rep" --page details > "$rep.details.txt" 2>&1 || true
            python3 bench/ncu_lines.py "$rep.ncu-rep" > "$rep.lines.txt" 2>&1 || true
        done
    done
    keep='Duration|Registers Per Thread|Dynamic Shared Memory Per|Achieved Occupancy|Theoretical Occupancy|Block Limit'
    keep="$keep|Warp Cycles Per Issued|Issue Slots Busy|Compute \(SM\) Throughput|Memory Throughput|Eligible Warps"
    for m in ${members//,/ }; do
        for k in ${kernels//,/ }; do
            rep="$out/profile/$m-$k"
            echo "== $m $k"
            grep -E "$keep" "$rep.details.txt" | tr -s ' ' | sed 's/^/  /'
            cat "$rep.lines.txt"
        done
    done > "$out/summary.txt"
    # The reports stay on the device machine (tens of MB each); the pages come back.
    tar -C "$out" --exclude='*.ncu-rep' -czf "$out/profile.tgz" profile && rm -r "$out/profile"
    cat "$out/summary.txt"
    ;;
*) echo "unknown step $what (build or run)" >&2; exit 2 ;;
esac
