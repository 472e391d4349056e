// A recurrence backward whose initial-state gradient is too large by a relative 2^-19 (16 to 32
// ulps of float32): the chunked float32 adjoint of gdn/cpu, the contracts' positive control, with
// every element of dh0 then scaled by 1 + 2^-19; dq, dk, dv, dg and dβ are the control's bits. The
// analytic bound admits it; ORD-03 at the backward contracts' own margin (3, wide enough for
// other chunk lengths) must still exclude it.
#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

#include "../../../gdn/cpu/gdn_chunked.cpp"
#include "../../../gdn/cpu/kcv_call_io.hpp"
#include "../../../gdn/problem.cpp"

#ifndef KCV_TEST_DH0_BIAS
#define KCV_TEST_DH0_BIAS 0x1p-19f
#endif

namespace {

using namespace kcv::gdn;
using namespace kcv::gdn::cpu;

void backward_with_biased_dh0(const Problem& p, const BackwardArgs& a) {
    chunked_backward(p, a);
    if (a.dh0 == nullptr) return;
    for (int64_t i = 0; i < p.shape.state_size(); ++i) a.dh0[i] *= 1.0f + KCV_TEST_DH0_BIAS;   // the defect
}

}  // namespace

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        serve_backward<BackwardArgs>(&c, backward_with_biased_dh0);
    });
}

KCV_EXPORT const char* kcv_kernel_name(void) { return "gdn_backward_dh0_bias"; }

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }
