// The recurrence family's oracles, "gdn_forward" and "gdn_backward": the float64 token-by-token
// evaluation of gdn/oracle behind the OracleFn interface.
//
// Operands, in order (brackets: present only when the attributes say so):
//   gdn_forward   inputs  q, k, v, [g], [beta], [h0], [cu_seqlens]
//                 outputs o, [ht]                          (ht when two outputs are asked for)
//   gdn_backward  inputs  q, k, v, [g], [beta], [h0], do, [dht], [cu_seqlens]
//                 outputs dq, dk, dv, [dg], [dbeta], [dh0]
// Attributes:
//   gate           0 none, 1 scalar per head ([B,T,HV]), 2 per channel ([B,T,HV,K]); default 0
//   delta          0 or 1: the delta term with β (beta input, dbeta output); default 0
//   scale          output scale; default K^-1/2
//   initial_state  0 or 1: h0 input (and dh0 output of the backward); default 0
//   final_state    backward only, 0 or 1: dht input; default 0
//   varlen         0 or 1: cu_seqlens input (integer, N+1 offsets, B = 1); default 0
// Shapes follow gdn/oracle/gdn_oracle.hpp: q, k [B,T,H,K], v [B,T,HV,V], states [N,HV,K,V].
//
// libkcv builds the sources under src/ only, so the oracle's implementation, which lives with
// the recurrence kernels in gdn/, is compiled into this translation unit.
#include "../../gdn/problem.cpp"
#include "../../gdn/oracle/gdn_oracle.cpp"

#include <cmath>
#include <string>
#include <vector>

#include "registry.hpp"

namespace kcv::oracles {
namespace {

struct Flags {
    gdn::Member member;
    bool initial_state = false, final_state = false, varlen = false;
    double scale = 1.0;
};

Flags read_flags(const OracleArgs& a, const Signature& sig) {
    Flags f;
    f.member.gate = static_cast<gdn::GateKind>(int_attribute(a, sig, "gate", 0, 0, 2));
    f.member.delta = int_attribute(a, sig, "delta", 0, 0, 1) == 1;
    if (f.member.delta && f.member.gate == gdn::GateKind::none)
        fail(sig, "attribute delta = 1 needs a gate (gate = 1 or 2): the delta term without a gate is not a member");
    f.initial_state = int_attribute(a, sig, "initial_state", 0, 0, 1) == 1;
    f.final_state = int_attribute(a, sig, "final_state", 0, 0, 1) == 1;
    f.varlen = int_attribute(a, sig, "varlen", 0, 0, 1) == 1;
    return f;
}

// The operand list for these flags, so check_operands names each operand.
Signature make_signature(const char* oracle, const Flags& f, bool backward, size_t forward_outputs) {
    Signature sig{oracle, {{"q"}, {"k"}, {"v"}}, {}};
    if (f.member.gate != gdn::GateKind::none) sig.inputs.push_back({"g"});
    if (f.member.delta) sig.inputs.push_back({"beta"});
    if (f.initial_state) sig.inputs.push_back({"h0"});
    if (backward) {
        sig.inputs.push_back({"do"});
        if (f.final_state) sig.inputs.push_back({"dht"});
        sig.outputs = {{"dq"}, {"dk"}, {"dv"}};
        if (f.member.gate != gdn::GateKind::none) sig.outputs.push_back({"dg"});
        if (f.member.delta) sig.outputs.push_back({"dbeta"});
        if (f.initial_state) sig.outputs.push_back({"dh0"});
    } else {
        sig.outputs = {{"o"}};
        if (forward_outputs == 2) sig.outputs.push_back({"ht"});
    }
    if (f.varlen) sig.inputs.push_back({"cu_seqlens", Operand::integer});
    return sig;
}

// Reads the shape from q and v, checks every operand's shape, and returns the problem.
struct Operands {
    gdn::Problem problem;
    std::vector<std::vector<double>> values;   // the real inputs, in signature order
};

Operands read_operands(const OracleArgs& a, const Signature& sig, const Flags& f, bool backward) {
    const Tensor& q = a.inputs[0];
    const Tensor& v = a.inputs[2];
    if (q.shape.size() != 4) fail(sig, "input 0 (q) must be [B, T, H, K], got " + shape_str(q.shape));
    if (v.shape.size() != 4) fail(sig, "input 2 (v) must be [B, T, HV, V], got " + shape_str(v.shape));
    gdn::Problem p;
    p.member = f.member;
    gdn::Shape& s = p.shape;
    s.B = q.shape[0];
    s.T = q.shape[1];
    s.H = q.shape[2];
    s.K = q.shape[3];
    s.HV = v.shape[2];
    s.V = v.shape[3];
    if (f.varlen) s.cu_seqlens = read_indices(a.inputs.back());
    p.scale = attribute(a, "scale", 1.0 / std::sqrt(static_cast<double>(s.K)));
    try {
        gdn::validate(p);
    } catch (const std::invalid_argument& e) {
        fail(sig, e.what());
    }
    const int64_t N = s.sequences();
    size_t i = 0;
    auto expect = [&](const std::vector<int64_t>& shape) {
        check_shape(sig, "input", i, a.inputs[i], shape);
        ++i;
    };
    expect({s.B, s.T, s.H, s.K});   // q
    expect({s.B, s.T, s.H, s.K});   // k
    expect({s.B, s.T, s.HV, s.V});  // v
    if (f.member.gate == gdn::GateKind::scalar) expect({s.B, s.T, s.HV});
    if (f.member.gate == gdn::GateKind::channel) expect({s.B, s.T, s.HV, s.K});
    if (f.member.delta) expect({s.B, s.T, s.HV});
    if (f.initial_state) expect({N, s.HV, s.K, s.V});
    if (backward) {
        expect({s.B, s.T, s.HV, s.V});   // do
        if (f.final_state) expect({N, s.HV, s.K, s.V});
    }
    Operands ops{p, {}};
    for (size_t j = 0; j < i; ++j) ops.values.push_back(read_values(a.inputs[j]));
    return ops;
}

void gdn_forward(const OracleArgs& a) {
    Signature probe_sig{"gdn_forward", {}, {}};
    const Flags f = read_flags(a, probe_sig);
    if (a.outputs.size() != 1 && a.outputs.size() != 2)
        fail(probe_sig, "produces o and optionally ht, got " + std::to_string(a.outputs.size()) + " outputs");
    const Signature sig = make_signature("gdn_forward", f, false, a.outputs.size());
    check_operands(a, sig);
    const Operands ops = read_operands(a, sig, f, false);
    const gdn::Shape& s = ops.problem.shape;
    check_shape(sig, "output", 0, a.outputs[0], {s.B, s.T, s.HV, s.V});
    check_shape(sig, "scale", 0, a.scales[0], {s.B, s.T, s.HV, s.V});
    if (a.outputs.size() == 2) {
        check_shape(sig, "output", 1, a.outputs[1], {s.sequences(), s.HV, s.K, s.V});
        check_shape(sig, "scale", 1, a.scales[1], {s.sequences(), s.HV, s.K, s.V});
    }

    size_t i = 0;
    gdn::ForwardArgs fa;
    fa.q = ops.values[i++].data();
    fa.k = ops.values[i++].data();
    fa.v = ops.values[i++].data();
    if (f.member.gate != gdn::GateKind::none) fa.g = ops.values[i++].data();
    if (f.member.delta) fa.beta = ops.values[i++].data();
    if (f.initial_state) fa.h0 = ops.values[i++].data();
    std::vector<double> o(s.v_size()), o_scale(s.v_size()), ht(s.state_size()), ht_scale(s.state_size());
    fa.o = o.data();
    fa.o_scale = o_scale.data();
    fa.ht = ht.data();
    fa.ht_scale = ht_scale.data();
    fa.operand_floor = a.operand_floor;
    gdn::forward(ops.problem, fa);
    write_values(a.outputs[0], o);
    write_values(a.scales[0], o_scale);
    if (a.outputs.size() == 2) {
        write_values(a.outputs[1], ht);
        write_values(a.scales[1], ht_scale);
    }
}

void gdn_backward(const OracleArgs& a) {
    Signature probe_sig{"gdn_backward", {}, {}};
    const Flags f = read_flags(a, probe_sig);
    const Signature sig = make_signature("gdn_backward", f, true, 0);
    check_operands(a, sig);
    const Operands ops = read_operands(a, sig, f, true);
    const gdn::Shape& s = ops.problem.shape;

    size_t i = 0;
    gdn::BackwardArgs ba;
    ba.q = ops.values[i++].data();
    ba.k = ops.values[i++].data();
    ba.v = ops.values[i++].data();
    if (f.member.gate != gdn::GateKind::none) ba.g = ops.values[i++].data();
    if (f.member.delta) ba.beta = ops.values[i++].data();
    if (f.initial_state) ba.h0 = ops.values[i++].data();
    ba.d_o = ops.values[i++].data();
    if (f.final_state) ba.dht = ops.values[i++].data();

    // One buffer (and scale) per output, in signature order, with the expected shape.
    struct Out {
        std::vector<int64_t> shape;
        std::vector<double> value, scale;
    };
    std::vector<Out> outs;
    auto add = [&](std::vector<int64_t> shape, double** value, double** scale) {
        Out& o = outs.emplace_back();
        o.shape = std::move(shape);
        o.value.assign(static_cast<size_t>(product(o.shape)), 0.0);
        o.scale.assign(o.value.size(), 0.0);
        *value = o.value.data();
        *scale = o.scale.data();
    };
    outs.reserve(6);
    add({s.B, s.T, s.H, s.K}, &ba.dq, &ba.dq_scale);
    add({s.B, s.T, s.H, s.K}, &ba.dk, &ba.dk_scale);
    add({s.B, s.T, s.HV, s.V}, &ba.dv, &ba.dv_scale);
    if (f.member.gate == gdn::GateKind::scalar) add({s.B, s.T, s.HV}, &ba.dg, &ba.dg_scale);
    if (f.member.gate == gdn::GateKind::channel) add({s.B, s.T, s.HV, s.K}, &ba.dg, &ba.dg_scale);
    if (f.member.delta) add({s.B, s.T, s.HV}, &ba.dbeta, &ba.dbeta_scale);
    if (f.initial_state) add({s.sequences(), s.HV, s.K, s.V}, &ba.dh0, &ba.dh0_scale);
    for (size_t j = 0; j < outs.size(); ++j) {
        check_shape(sig, "output", j, a.outputs[j], outs[j].shape);
        check_shape(sig, "scale", j, a.scales[j], outs[j].shape);
    }
    ba.operand_floor = a.operand_floor;
    gdn::backward(ops.problem, ba);
    for (size_t j = 0; j < outs.size(); ++j) {
        write_values(a.outputs[j], outs[j].value);
        write_values(a.scales[j], outs[j].scale);
    }
}

const OracleRegistrar gdn_forward_registrar("gdn_forward", gdn_forward);
const OracleRegistrar gdn_backward_registrar("gdn_backward", gdn_backward);

}  // namespace
}  // namespace kcv::oracles
