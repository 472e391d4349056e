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
    validate(p);
    const Layout lay(p.shape);
    const int K = static_cast<int>(p.shape.K), V = static_cast<int>(p.shape.V);
    const Inputs in{a.q, a.k, a.v, a.g, a.beta};
    for (int64_t n = 0; n < p.shape.sequences(); ++n) {
        const Span& seq = lay.seqs[n];
        for (int64_t hv = 0; hv < p.shape.HV; ++hv) {
            Mat S = load_state(a.h0 ? a.h0 + lay.state(n, hv) : nullptr, K, V);
            for (int64_t t0 = 0; t0 < seq.length; t0 += kChunk) {
                const Chunk c = load_chunk(p, lay, in, seq, t0, chunk_length(seq.length, t0), hv, true);
                Mat O, S_next;
                chunk_outputs(static_cast<float>(p.scale), chunk_forward(p, c, S, true), S, O, S_next);
                for (int t = 0; t < c.L; ++t)
                    std::copy(&O.a[static_cast<size_t>(t) * V], &O.a[static_cast<size_t>(t + 1) * V],
                              a.o + lay.vo(seq, t0 + t, hv));
                S = stored(std::move(S_next), true);   // the defect
            }
            if (a.ht) std::copy(S.a.begin(), S.a.end(), a.ht + lay.state(n, hv));
        }
    }
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
