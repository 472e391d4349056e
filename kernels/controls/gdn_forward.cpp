// Positive control for the recurrence forward contracts (contracts/gdn-forward-*.toml): the
// float32 chunked algorithm of gdn/cpu (chunks of 64, the WY/UT transform for the delta members,
// sub-chunk anchoring for per-channel gates), computed under IEEE defaults whatever the caller's
// MXCSR holds. Inputs f32, bf16 or f16 with any strides; outputs rounded to their dtype.
// Self-contained: the problem checks and the chunked implementation are compiled in here.
// gdn_forward_bf16_operands.cpp compiles this file with KCV_GDN_CONTROL_BF16_OPERANDS set: the
// same algorithm with its intermediates rounded to bf16, for the contracts that allow bf16 operands.
#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

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
#include "gdn_control_variant.hpp"

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        using namespace kcv::gdn;
        cpu::serve_forward<cpu::ForwardArgs>(&c, [](const Problem& p, cpu::ForwardArgs a) {
            a.bf16_operands = KCV_GDN_CONTROL_BF16_OPERANDS;
            a.chunk = KCV_GDN_CONTROL_CHUNK;
            cpu::chunked_forward(p, a);
        });
    });
}

KCV_EXPORT const char* kcv_kernel_name(void) { return KCV_GDN_CONTROL_NAME " (" KCV_GDN_CONTROL_TITLE ")"; }

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"j({"role": ")j" KCV_GDN_CONTROL_ROLE R"j(", "name": ")j" KCV_GDN_CONTROL_NAME R"j(",)j"
           R"j( "description": "float32 chunked gated linear recurrence forward (C = )j" KCV_GDN_CONTROL_TEXT(KCV_GDN_CONTROL_CHUNK) R"j(, WY/UT transform, sub-chunk anchoring))j"
           KCV_GDN_CONTROL_OPERANDS R"j(",)j"
           R"j( "contracts": [)j" KCV_GDN_CONTROL_CONTRACTS R"j(]})j";
}
