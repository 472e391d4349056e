// An honest matmul for a contract that declares tf32 operands, as a float32 matmul on tensor
// cores runs (PyTorch with allow_tf32, cuBLAS's TF32 mode): both fp32 operands rounded to tf32
// (kcvk::tf32_rounded: to nearest, ties away, as cvt.rna.tf32.f32; subnormals on tf32's own grid
// of 2^-136), products accumulated in float32. Every operand, at every K, so that the subnormal
// probes meet the rounding too.
#include "kcv_float_env.hpp"
#include "kcv_half.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_matmul_operands.hpp"
#include "kcv_pairwise.hpp"

namespace {

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 2, 1);
    const kcvk::MatmulOperands p(call);
    for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
            kcvk::PairwiseSum acc;
            for (int64_t kk = 0; kk < p.k; ++kk)
                acc.add(kcvk::tf32_rounded(p.a_at(i, kk)) * kcvk::tf32_rounded(p.b_at(kk, j)));
            p.c.store_f32(p.c_offset(i, j), acc.total());
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "matmul_tf32_operands"; }

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
