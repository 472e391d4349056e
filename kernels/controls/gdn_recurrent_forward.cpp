// Positive control for the recurrence forward contracts (contracts/gdn-forward-*.toml): the
// recurrent form, token by token in float32 (the steps of the float64 oracle, gdn/oracle, with
// float32 state and arithmetic), computed under IEEE defaults whatever the caller's MXCSR holds.
// It is the other formulation every implementation of the family chooses between (a "fused
// recurrent" kernel against a chunked one), so beside the chunked control (gdn_forward) it spans
// the error of correct float32 implementations that ORD-03 takes as its envelope. Inputs f32,
// bf16 or f16 with any strides; outputs rounded to their dtype. Self-contained: the problem
// checks and the recurrence are compiled in here.
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
        cpu::serve_forward<ForwardArgsF32>(&c, [](const Problem& p, const ForwardArgsF32& a) { forward(p, a); });
    });
}

KCV_EXPORT const char* kcv_kernel_name(void) { return "gdn_recurrent_forward (float32 token-by-token recurrence, CPU)"; }

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"j({"role": "control", "name": "gdn_recurrent_forward",)j"
           R"j( "description": "float32 gated linear recurrence forward, token by token (the recurrent form)",)j"
           R"j( "contracts": ["gdn-forward-linear-attention", "gdn-forward-ssd", "gdn-forward-gla",)j"
           R"j( "gdn-forward-gdn", "gdn-forward-kda"]})j";
}
