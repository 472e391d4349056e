// Positive control for the recurrence backward contracts (contracts/gdn-backward-*.toml): the
// float32 chunked adjoint of gdn/cpu (reverse state scan over chunks of 64, the vector-Jacobian
// product through the WY/UT transform, dg as a reverse cumulative sum of dγ), computed under
// IEEE defaults whatever the caller's MXCSR holds. Inputs f32, bf16 or f16 with any strides;
// outputs rounded to their dtype. Self-contained: the problem checks and the chunked
// implementation are compiled in here. gdn_backward_bf16_operands.cpp compiles this file with
// KCV_GDN_CONTROL_BF16_OPERANDS set: the same algorithm with its intermediates rounded to bf16, for
// the contracts that allow bf16 operands.
#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

#include "../../gdn/cpu/gdn_chunked.cpp"
#include "../../gdn/cpu/kcv_call_io.hpp"
#include "../../gdn/problem.cpp"

#ifndef KCV_GDN_CONTROL_BF16_OPERANDS
#define KCV_GDN_CONTROL_BF16_OPERANDS false
#define KCV_GDN_CONTROL_NAME "gdn_backward"
#define KCV_GDN_CONTROL_TITLE "float32 chunked recurrence adjoint, CPU"
#define KCV_GDN_CONTROL_OPERANDS ""
#define KCV_GDN_CONTROL_CONTRACTS                                                                                   \
    R"j("gdn-backward-linear-attention", "gdn-backward-ssd", "gdn-backward-gla", "gdn-backward-gdn", "gdn-backward-kda")j"
#endif
#include "gdn_control_variant.hpp"

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        using namespace kcv::gdn;
        cpu::serve_backward<cpu::BackwardArgs>(&c, [](const Problem& p, cpu::BackwardArgs a) {
            a.bf16_operands = KCV_GDN_CONTROL_BF16_OPERANDS;
            a.chunk = KCV_GDN_CONTROL_CHUNK;
            cpu::chunked_backward(p, a);
        });
    });
}

KCV_EXPORT const char* kcv_kernel_name(void) { return KCV_GDN_CONTROL_NAME " (" KCV_GDN_CONTROL_TITLE ")"; }

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"j({"role": ")j" KCV_GDN_CONTROL_ROLE R"j(", "name": ")j" KCV_GDN_CONTROL_NAME R"j(",)j"
           R"j( "description": "float32 chunked gated linear recurrence backward (C = )j" KCV_GDN_CONTROL_TEXT(KCV_GDN_CONTROL_CHUNK) R"j(, reverse state scan, VJP through the WY/UT transform))j"
           KCV_GDN_CONTROL_OPERANDS R"j(",)j"
           R"j( "contracts": [)j" KCV_GDN_CONTROL_CONTRACTS R"j(]})j";
}
