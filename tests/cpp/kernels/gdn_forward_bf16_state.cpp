// A recurrence forward that carries its state in bf16: the chunked algorithm of gdn/cpu with bf16
// operands, as kernels/controls/gdn_forward_bf16_operands.cpp runs it, except that the state
// passed from one chunk to the next is rounded to bf16 as well, as a kernel that kept its running
// state in a bf16 buffer would. Each chunk's products are what a bf16-operand contract allows; the
// carried state is an accumulator, whose rounding that contract does not allow, and it compounds
// over the sequence.
#include <exception>
#include <string>

#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"

#include "../../../gdn/cpu/gdn_chunked.cpp"
#include "../../../gdn/cpu/kcv_call_io.hpp"
#include "../../../gdn/problem.cpp"

namespace {

thread_local std::string last_error;

using namespace kcv::gdn;
using namespace kcv::gdn::cpu;

void forward_with_bf16_state(const Problem& p, const ForwardArgs& a) {
    ForwardArgs b = a;
    b.bf16_operands = true;
    forward_carrying(p, b, [](Mat&& S) { return stored(std::move(S), true); });   // the defect
}

}  // namespace

extern "C" {

int kcv_kernel(const kcv_call* call) {
    try {
        kcvk::IeeeEnvironment ieee;
        serve_forward<ForwardArgs>(call, forward_with_bf16_state);
        return 0;
    } catch (const std::exception& e) {
        last_error = e.what();
        return 1;
    }
}

const char* kcv_kernel_name(void) { return "gdn_forward_bf16_state"; }

const char* kcv_kernel_last_error(void) { return last_error.c_str(); }

}  // extern "C"
