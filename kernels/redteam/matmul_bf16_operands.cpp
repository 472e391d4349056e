// Red team 5 — target PRC-03 (operand precision); contract matmul-f32.
// Defect: from K = 1024 on, the kernel takes a "tensor-core path" that rounds both fp32 operands
// to bf16 (round to nearest even) before multiplying, as a dispatcher that sends large problems
// to bf16 units would; the accumulation stays float32 (pairwise). Below K = 1024 it is an honest
// float32 matmul, so the nominal shape (K = 64) passes ORD-01. PRC-03 runs at K = 1024 with
// random-mantissa operands, where bf16 operands (relative error 2^-9 each) exceed the float32
// bound about tenfold, and the gate recognises a bf16-rounded reference. PRC-01's probes at
// K = 1024 and 4096 see the same rounding, and CMP-01 at K = 4097.
// Layout: any strides; a[M,K], b[K,N] (trans_b = 1: b[N,K]), c[M,N].
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_matmul_operands.hpp"
#include "kcv_pairwise.hpp"

namespace {

constexpr int64_t kTensorCorePathMinK = 1024;

float operand(float v, bool to_bf16) { return to_bf16 ? kcvk::bf16_rounded(v) : v; }

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 2, 1);
    const kcvk::MatmulOperands p(call);
    const bool bf16 = p.k >= kTensorCorePathMinK;
    for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
            kcvk::PairwiseSum acc;
            for (int64_t kk = 0; kk < p.k; ++kk) acc.add(operand(p.a_at(i, kk), bf16) * operand(p.b_at(kk, j), bf16));
            p.c.store_f32(p.c_offset(i, j), acc.total());
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "matmul_bf16_operands"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "matmul_bf16_operands", "device": "cpu", "contracts": ["matmul-f32"],
  "target_gate": "PRC-03", "signature": "operands-rounded:bf16",
  "description": "matmul that rounds fp32 operands to bf16 when K >= 1024"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
