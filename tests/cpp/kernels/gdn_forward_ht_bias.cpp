// A recurrence forward whose final state is a few ulps too large: the chunked float32 algorithm
// of gdn/cpu, the contracts' positive control, with every element of ht then scaled by
// 1 + 2^-21 (four to eight ulps of float32, by where the element lies in its binade). Its output o
// is the control's, bit for bit; only the state it hands to the next segment is biased, as a
// kernel that rounded its final store upward, or folded a stale correction into it, would be.
// No tolerance the analytic bound allows excludes it; ORD-03 against the controls must.
#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

#include "../../../gdn/cpu/gdn_chunked.cpp"
#include "../../../gdn/cpu/kcv_call_io.hpp"
#include "../../../gdn/problem.cpp"

namespace {

using namespace kcv::gdn;
using namespace kcv::gdn::cpu;

void forward_with_biased_state(const Problem& p, const ForwardArgs& a) {
    chunked_forward(p, a);
    for (int64_t i = 0; i < p.shape.state_size(); ++i) a.ht[i] *= 1.0f + 0x1p-21f;   // the defect
}

}  // namespace

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        serve_forward<ForwardArgs>(&c, forward_with_biased_state);
    });
}

KCV_EXPORT const char* kcv_kernel_name(void) { return "gdn_forward_ht_bias"; }

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }
