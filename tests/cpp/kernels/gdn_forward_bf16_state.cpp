// A recurrence forward that carries its state in bf16: the chunked algorithm of gdn/cpu with bf16
// operands, as kernels/controls/gdn_forward_bf16_operands.cpp runs it, except that the state
// passed from one chunk to the next is rounded to bf16 as well, as a kernel that kept its running
// state in a bf16 buffer would. Each chunk's products are what a bf16-operand contract allows; the
// carried state is an accumulator, whose rounding that contract does not allow, and it compounds
// over the sequence.
#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

#include "../../../gdn/cpu/gdn_chunked.cpp"
#include "../../../gdn/cpu/kcv_call_io.hpp"
#include "../../../gdn/problem.cpp"

namespace {

using namespace kcv::gdn;
using namespace kcv::gdn::cpu;

void forward_with_bf16_state(const Problem& p, const ForwardArgs& a) {
    ForwardArgs b = a;
    b.bf16_operands = true;
    forward_carrying(p, b, [](Mat&& S) { return stored(std::move(S), true); });   // the defect
}

}  // namespace

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        serve_forward<ForwardArgs>(&c, forward_with_bf16_state);
    });
}

KCV_EXPORT const char* kcv_kernel_name(void) { return "gdn_forward_bf16_state"; }

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }
