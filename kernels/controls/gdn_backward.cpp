// Positive control for the recurrence backward contracts (contracts/gdn-backward-*.toml): the
// float32 chunked adjoint of gdn/cpu (reverse state scan over chunks of 64, the vector-Jacobian
// product through the WY/UT transform, dg as a reverse cumulative sum of dγ), computed under
// IEEE defaults whatever the caller's MXCSR holds. Inputs f32, bf16 or f16 with any strides;
// outputs rounded to their dtype. Self-contained: the problem checks and the chunked
// implementation are compiled in here.
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
        kcv::gdn::cpu::serve_backward<kcv::gdn::cpu::BackwardArgs>(call, kcv::gdn::cpu::chunked_backward);
        return 0;
    } catch (const std::exception& e) {
        last_error = e.what();
        return 1;
    }
}

const char* kcv_kernel_name(void) { return "gdn_backward (float32 chunked recurrence adjoint, CPU)"; }

const char* kcv_kernel_last_error(void) { return last_error.c_str(); }

const char* kcv_kernel_manifest(void) {
    return R"j({"role": "control", "name": "gdn_backward",)j"
           R"j( "description": "float32 chunked gated linear recurrence backward (reverse state scan, VJP through the WY/UT transform)",)j"
           R"j( "contracts": ["gdn-backward-linear-attention", "gdn-backward-ssd", "gdn-backward-gla",)j"
           R"j( "gdn-backward-gdn", "gdn-backward-kda"]})j";
}

}  // extern "C"
