#!/usr/bin/env bash
# What float32 accuracy costs the recurrence kernels. The library as built splits every float32
# operand of its tensor-core products into TF32 parts (gdn/cuda/gdn_mma.cuh); the same source built
# with KCV_GDN_TF32_OPERANDS rounds each such operand to TF32 once, one mma a tile, as a kernel
# with reduced-precision intermediates would. This times both in one run on one GPU (kcv's ops
# alone, bench/gdn_bench.py), checks both against the float64 oracle, and prints a table.
#
#   bench/gdn_tf32_operands.sh build DIR                      both libraries: DIR/split, DIR/tf32 (bench/gdn_build.sh)
#   bench/gdn_tf32_operands.sh run DIR [MEMBERS] [SHAPES]     time and check both; rows in DIR/*.json
#
# MEMBERS defaults to gdn,kda,gla,ssd,la and SHAPES (indices into GDN.md's shapes) to 0. `run`
# needs a CUDA device, torch and triton, and kcv's Python package or the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:?build or run}" dir="${2:?a directory}"
mkdir -p "$dir"
case "$what" in
build)
    for v in split tf32; do
        mkdir -p "$dir/$v"
        define=()
        [ "$v" = tf32 ] && define=(-DKCV_GDN_TF32_OPERANDS)
        bench/gdn_build.sh "$dir/$v" "${define[@]}"
    done
    ;;
run)
    members="${3:-gdn,kda,gla,ssd,la}" shapes="${4:-0}"
    for v in split tf32; do
        KCV_GDN_CUDA_LIB="$dir/$v/libkcv_gdn_cuda.so" python3 bench/gdn_bench.py --members "$members" \
            --shapes "$shapes" --impls kcv --json "$dir/$v.json" | tee "$dir/$v.log"
    done
    python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
split, tf32 = (json.load(open(f"{d}/{v}.json")) for v in ("split", "tf32"))
print("| member | shape | fwd ms, split | fwd ms, tf32 | fwd+bwd ms, split | fwd+bwd ms, tf32 | speed-up fwd / fwd+bwd"
      " | rel. L2 split (largest of o…dβ / dg) | rel. L2 tf32 | check tf32 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for a in split:
    b = next(r for r in tf32 if (r["member"], r["shape"]) == (a["member"], a["shape"]))
    def err(r):
        e = r.get("rel_l2", {})
        main = max((v for k, v in e.items() if k != "dg"), default=float("nan"))
        return f"{main:.3g} / {e['dg']:.2g}" if "dg" in e else f"{main:.3g}"
    print(f"| {a['member']} | {a['shape']} | {a['kcv_fwd_ms']:.2f} | {b['kcv_fwd_ms']:.2f} | {a['kcv_fwdbwd_ms']:.2f} "
          f"| {b['kcv_fwdbwd_ms']:.2f} | {a['kcv_fwd_ms'] / b['kcv_fwd_ms']:.2f} / "
          f"{a['kcv_fwdbwd_ms'] / b['kcv_fwdbwd_ms']:.2f} | {err(a)} | {err(b)} | "
          f"{'pass' if b.get('pass_fwd_bwd') else 'FAIL'} |")
PY
    ;;
*) echo "unknown step $what (build or run)" >&2; exit 2 ;;
esac
