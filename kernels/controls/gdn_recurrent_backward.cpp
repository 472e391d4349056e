// Positive control for the recurrence backward contracts (contracts/gdn-backward-*.toml): the
// adjoint of the recurrent form, token by token from the last in float32 (the steps of the
// float64 oracle, gdn/oracle, with float32 states and arithmetic; dg in the token form
// Σ_v dSd ⊙ Sd), computed under IEEE defaults whatever the caller's MXCSR holds. Beside the
// chunked control (gdn_backward) it spans the error of correct float32 implementations that
// ORD-03 takes as its envelope. Inputs f32, bf16 or f16 with any strides; outputs rounded to
// their dtype. Self-contained: the problem checks and the recurrence are compiled in here.
#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

#include "../../gdn/cpu/kcv_call_io.hpp"
#include "../../gdn/oracle/gdn_oracle.cpp"
#include "../../gdn/problem.cpp"

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        using namespace kcv::gdn;
        cpu::serve_backward<BackwardArgsF32>(&c, [](const Problem& p, const BackwardArgsF32& a) { backward(p, a); });
    });
}

KCV_EXPORT const char* kcv_kernel_name(void) { return "gdn_recurrent_backward (float32 token-by-token recurrence adjoint, CPU)"; }

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"j({"role": "control", "name": "gdn_recurrent_backward",)j"
           R"j( "description": "float32 gated linear recurrence backward, token by token from the last (the recurrent form's adjoint)",)j"
           R"j( "contracts": ["gdn-backward-linear-attention", "gdn-backward-ssd", "gdn-backward-gla",)j"
           R"j( "gdn-backward-gdn", "gdn-backward-kda"]})j";
}
