// Positive control for the recurrence backward contracts (contracts/gdn-backward-*.toml): the
// adjoint of the recurrent form, token by token from the last in float32 (the steps of the
// float64 oracle, gdn/oracle, with float32 states and arithmetic; dg in the token form
// Σ_v dSd ⊙ Sd), computed under IEEE defaults whatever the caller's MXCSR holds. Beside the
// chunked control (gdn_backward) it spans the error of correct float32 implementations that
// ORD-03 takes as its envelope. Inputs f32, bf16 or f16 with any strides; outputs rounded to
// their dtype. Self-contained: the problem checks and the recurrence are compiled in here.
#include <exception>
#include <string>

#include "kcv/kcv_kernel.h"
#include "kcv_float_env.hpp"

#include "../../gdn/cpu/kcv_call_io.hpp"
#include "../../gdn/oracle/gdn_oracle.cpp"
#include "../../gdn/problem.cpp"

namespace {
thread_local std::string last_error;
}

extern "C" {

int kcv_kernel(const kcv_call* call) {
    try {
        kcvk::IeeeEnvironment ieee;
        using namespace kcv::gdn::cpu;
        const CallOperands ops = read_call(call, true);
        const kcv::gdn::Problem& p = ops.problem;
        const kcv::gdn::Shape& s = p.shape;
        const int32_t expected = 3 + (p.member.gate != kcv::gdn::GateKind::none) + p.member.delta + ops.initial_state;
        if (call->n_outputs != expected)
            throw CallError("expected " + std::to_string(expected) + " outputs (dq, dk, dv, [dg], [dbeta], [dh0]), got " +
                            std::to_string(call->n_outputs));
        std::vector<float> dq(s.qk_size()), dk(s.qk_size()), dv(s.v_size()), dg(s.g_size(p.member.gate)),
            dbeta(s.beta_size()), dh0(s.state_size());
        kcv::gdn::BackwardArgsF32 a;
        a.q = ops.q.data();
        a.k = ops.k.data();
        a.v = ops.v.data();
        a.g = or_null(ops.g);
        a.beta = or_null(ops.beta);
        a.h0 = or_null(ops.h0);
        a.d_o = ops.d_o.data();
        a.dht = or_null(ops.dht);
        a.dq = dq.data();
        a.dk = dk.data();
        a.dv = dv.data();
        a.dg = dg.data();
        a.dbeta = dbeta.data();
        a.dh0 = dh0.data();
        kcv::gdn::backward(p, a);
        int32_t o = 0;
        write_floats(call->outputs[o++], dq, "dq");
        write_floats(call->outputs[o++], dk, "dk");
        write_floats(call->outputs[o++], dv, "dv");
        if (p.member.gate != kcv::gdn::GateKind::none) write_floats(call->outputs[o++], dg, "dg");
        if (p.member.delta) write_floats(call->outputs[o++], dbeta, "dbeta");
        if (ops.initial_state) write_floats(call->outputs[o++], dh0, "dh0");
        return 0;
    } catch (const std::exception& e) {
        last_error = e.what();
        return 1;
    }
}

const char* kcv_kernel_name(void) { return "gdn_recurrent_backward (float32 token-by-token recurrence adjoint, CPU)"; }

const char* kcv_kernel_last_error(void) { return last_error.c_str(); }

const char* kcv_kernel_manifest(void) {
    return R"j({"role": "control", "name": "gdn_recurrent_backward",)j"
           R"j( "description": "float32 gated linear recurrence backward, token by token from the last (the recurrent form's adjoint)",)j"
           R"j( "contracts": ["gdn-backward-linear-attention", "gdn-backward-ssd", "gdn-backward-gla",)j"
           R"j( "gdn-backward-gdn", "gdn-backward-kda"]})j";
}

}  // extern "C"
