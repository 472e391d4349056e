// Positive control for the recurrence forward contracts (contracts/gdn-forward-*.toml): the
// float32 chunked algorithm of gdn/cpu (chunks of 64, the WY/UT transform for the delta members,
// sub-chunk anchoring for per-channel gates), computed under IEEE defaults whatever the caller's
// MXCSR holds. Inputs f32, bf16 or f16 with any strides; outputs rounded to their dtype.
// Self-contained: the problem checks and the chunked implementation are compiled in here.
// gdn_forward_bf16_operands.cpp compiles this file with KCV_GDN_CONTROL_BF16_OPERANDS set: the
// same algorithm with its intermediates rounded to bf16, for the contracts that allow bf16 operands.
#include <exception>
#include <string>

#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"

#include "../../gdn/cpu/gdn_chunked.cpp"
#include "../../gdn/cpu/kcv_call_io.hpp"
#include "../../gdn/problem.cpp"

#ifndef KCV_GDN_CONTROL_BF16_OPERANDS
#define KCV_GDN_CONTROL_BF16_OPERANDS false
#define KCV_GDN_CONTROL_NAME "gdn_forward"
#define KCV_GDN_CONTROL_TITLE "float32 chunked recurrence, CPU"
#define KCV_GDN_CONTROL_OPERANDS ""
#define KCV_GDN_CONTROL_CONTRACTS                                                                              \
    R"j("gdn-forward-linear-attention", "gdn-forward-ssd", "gdn-forward-gla", "gdn-forward-gdn", "gdn-forward-kda")j"
#endif

namespace {
thread_local std::string last_error;
}

extern "C" {

int kcv_kernel(const kcv_call* call) {
    try {
        kcvk::IeeeEnvironment ieee;
        using namespace kcv::gdn;
        cpu::serve_forward<cpu::ForwardArgs>(call, [](const Problem& p, cpu::ForwardArgs a) {
            a.bf16_operands = KCV_GDN_CONTROL_BF16_OPERANDS;
            cpu::chunked_forward(p, a);
        });
        return 0;
    } catch (const std::exception& e) {
        last_error = e.what();
        return 1;
    }
}

const char* kcv_kernel_name(void) { return KCV_GDN_CONTROL_NAME " (" KCV_GDN_CONTROL_TITLE ")"; }

const char* kcv_kernel_last_error(void) { return last_error.c_str(); }

const char* kcv_kernel_manifest(void) {
    return R"j({"role": "control", "name": ")j" KCV_GDN_CONTROL_NAME R"j(",)j"
           R"j( "description": "float32 chunked gated linear recurrence forward (C = 64, WY/UT transform, sub-chunk anchoring))j"
           KCV_GDN_CONTROL_OPERANDS R"j(",)j"
           R"j( "contracts": [)j" KCV_GDN_CONTROL_CONTRACTS R"j(]})j";
}

}  // extern "C"
