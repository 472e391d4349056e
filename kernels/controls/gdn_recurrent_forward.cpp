// Positive control for the recurrence forward contracts (contracts/gdn-forward-*.toml): the
// recurrent form, token by token in float32 (the steps of the float64 oracle, gdn/oracle, with
// float32 state and arithmetic), computed under IEEE defaults whatever the caller's MXCSR holds.
// It is the other formulation every implementation of the family chooses between (a "fused
// recurrent" kernel against a chunked one), so beside the chunked control (gdn_forward) it spans
// the error of correct float32 implementations that ORD-03 takes as its envelope. Inputs f32,
// bf16 or f16 with any strides; outputs rounded to their dtype. Self-contained: the problem
// checks and the recurrence are compiled in here.
#include <exception>
#include <string>

#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"

#include "../../gdn/cpu/kcv_call_io.hpp"
#include "../../gdn/oracle/gdn_oracle.cpp"
#include "../../gdn/problem.cpp"

namespace {
thread_local std::string last_error;
}

extern "C" {

int kcv_kernel(const kcv_call* call) {
    try {
        kcvk::IeeeEnvironment ieee;
        using namespace kcv::gdn;
        cpu::serve_forward<ForwardArgsF32>(call, [](const Problem& p, const ForwardArgsF32& a) { forward(p, a); });
        return 0;
    } catch (const std::exception& e) {
        last_error = e.what();
        return 1;
    }
}

const char* kcv_kernel_name(void) { return "gdn_recurrent_forward (float32 token-by-token recurrence, CPU)"; }

const char* kcv_kernel_last_error(void) { return last_error.c_str(); }

const char* kcv_kernel_manifest(void) {
    return R"j({"role": "control", "name": "gdn_recurrent_forward",)j"
           R"j( "description": "float32 gated linear recurrence forward, token by token (the recurrent form)",)j"
           R"j( "contracts": ["gdn-forward-linear-attention", "gdn-forward-ssd", "gdn-forward-gla",)j"
           R"j( "gdn-forward-gdn", "gdn-forward-kda"]})j";
}

}  // extern "C"
