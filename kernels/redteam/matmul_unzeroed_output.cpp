// Red team 8 — target ORD-02 (determinism and buffer integrity), class poison-dependent;
// contract matmul-f32.
// Defect: the product is accumulated into the output, c += a·b, as if the caller had zeroed c
// (a split-K epilogue that adds its slice into C, or beta = 1 by mistake). Correct only when c
// happens to hold zeros: ORD-02's runs with 0x00, 0xFF and random poisons give different bytes.
// With kcv's default poison 0xFF (a NaN) every numeric probe sees NaN as well, so the numeric
// gates fail with it; the defect itself is what ORD-02 names.
// Layout: any strides; a[M,K], b[K,N] (trans_b = 1: b[N,K]), c[M,N].
#include <string>

#include "kcv_float_env.hpp"
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
            for (int64_t kk = 0; kk < p.k; ++kk) acc.add(p.a_at(i, kk) * p.b_at(kk, j));
            const int64_t at = p.c_offset(i, j);
            p.c.store_f32(at, p.c.load_f32(at) + acc.total());
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "matmul_unzeroed_output"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "matmul_unzeroed_output", "device": "cpu", "contracts": ["matmul-f32"],
  "target_gate": "ORD-02", "signature": "poison-dependent",
  "description": "matmul that accumulates into the output buffer without zeroing it: c += a.b"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
