// Red team 1 — target PRC-01 (accumulator precision); contract matmul-f32.
// Defect: a split-K matmul whose K-slices of 256 are each accumulated in float32 (pairwise, as
// the positive control does) but combined in an fp16 accumulator (acc = fp16(acc + slice)), as
// when split-K partials go through a half-precision workspace. Up to K = 256 there is one slice
// and the result is the control's float32 dot product, bit for bit, so the nominal shape
// (K = 64) passes ORD-01 and ORD-03; from K = 1024 (PRC-01's second
// sweep point, also in quick mode) the fp16 roundings of the running total (u = 2^-11) exceed the
// float32 bound c·2^-24·√K·Σ|a·b| many times over, and all-positive operands make them grow
// like K. Other gates that sweep K past 256 see it too (PRC-03 at K = 1024, CMP-01 at K = 1000
// and 4097).
// Layout: any strides; a[M,K], b[K,N] (trans_b = 1: b[N,K]), c[M,N].
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_matmul_operands.hpp"
#include "kcv_pairwise.hpp"

namespace {

constexpr int64_t kSlice = 256;

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 2, 1);
    const kcvk::MatmulOperands p(call);
    for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
            float total = 0.0f;
            uint16_t half_total = kcvk::f16_from_f32(0.0f);
            for (int64_t k0 = 0; k0 < p.k; k0 += kSlice) {
                kcvk::PairwiseSum acc;
                for (int64_t kk = k0; kk < p.k && kk < k0 + kSlice; ++kk) acc.add(p.a_at(i, kk) * p.b_at(kk, j));
                const float slice = acc.total();
                if (p.k <= kSlice) total = slice;
                else half_total = kcvk::f16_from_f32(kcvk::f32_from_f16(half_total) + slice);
            }
            if (p.k > kSlice) total = kcvk::f32_from_f16(half_total);
            p.c.store_f32(p.c_offset(i, j), total);
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "matmul_fp16_accumulator"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "matmul_fp16_accumulator", "device": "cpu", "contracts": ["matmul-f32"],
  "target_gate": "PRC-01",
  "description": "split-K matmul: float32 slices of 256, combined in an fp16 accumulator"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
