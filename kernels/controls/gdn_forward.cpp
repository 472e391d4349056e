// Positive control for the recurrence forward contracts (contracts/gdn-forward-*.toml): the
// float32 chunked algorithm of gdn/cpu (chunks of 64, the WY/UT transform for the delta members,
// sub-chunk anchoring for per-channel gates), computed under IEEE defaults whatever the caller's
// MXCSR holds. Inputs f32, bf16 or f16 with any strides; outputs rounded to their dtype.
// Self-contained: the problem checks and the chunked implementation are compiled in here.
#include <exception>
#include <string>

#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"

#include "../../gdn/cpu/gdn_chunked.cpp"
#include "../../gdn/cpu/kcv_call_io.hpp"
#include "../../gdn/problem.cpp"

namespace {
thread_local std::string last_error;
}

extern "C" {

int kcv_kernel(const kcv_call* call) {
    try {
        kcvk::IeeeEnvironment ieee;
        kcv::gdn::cpu::serve_forward<kcv::gdn::cpu::ForwardArgs>(call, kcv::gdn::cpu::chunked_forward);
        return 0;
    } catch (const std::exception& e) {
        last_error = e.what();
        return 1;
    }
}

const char* kcv_kernel_name(void) { return "gdn_forward (float32 chunked recurrence, CPU)"; }

const char* kcv_kernel_last_error(void) { return last_error.c_str(); }

const char* kcv_kernel_manifest(void) {
    return R"j({"role": "control", "name": "gdn_forward",)j"
           R"j( "description": "float32 chunked gated linear recurrence forward (C = 64, WY/UT transform, sub-chunk anchoring)",)j"
           R"j( "contracts": ["gdn-forward-linear-attention", "gdn-forward-ssd", "gdn-forward-gla",)j"
           R"j( "gdn-forward-gdn", "gdn-forward-kda"]})j";
}

}  // extern "C"
