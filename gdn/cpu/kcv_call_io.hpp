// The recurrence controls' side of the native ABI (include/kcv/kcv_kernel.h): the operand list
// the attributes select, reading DLPack inputs into float32 arrays and writing float32 results
// into the outputs the verifier allocated. Operands and attributes are those of the oracles
// "gdn_forward" and "gdn_backward" (src/oracles/gdn.cpp):
//   forward   inputs  q, k, v, [g], [beta], [h0], [cu_seqlens]          outputs o, [ht]
//   backward  inputs  q, k, v, [g], [beta], [h0], do, [dht], [cu_seqlens]
//             outputs dq, dk, dv, [dg], [dbeta], [dh0]
// attributes gate (0/1/2), delta, scale (default K^-1/2), initial_state, final_state, varlen.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kcv/kcv_kernel.h"
#include "kcv_half.hpp"

#include "../problem.hpp"

namespace kcv::gdn::cpu {

struct CallError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline double call_attribute(const kcv_call* call, const char* name, double fallback) {
    for (int32_t i = 0; i < call->n_attributes; ++i)
        if (std::strcmp(call->attributes[i].name, name) == 0) return call->attributes[i].value;
    return fallback;
}

inline int64_t numel(const DLTensor& t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t.ndim; ++d) n *= t.shape[d];
    return n;
}

inline std::vector<int64_t> dims_of(const DLTensor& t) { return {t.shape, t.shape + t.ndim}; }

// Byte address of logical element i (row-major over the shape), honouring strides and offset.
inline const uint8_t* element(const DLTensor& t, int64_t i) {
    const int64_t bytes = (t.dtype.bits * t.dtype.lanes) / 8;
    int64_t offset = 0;
    if (t.strides == nullptr) {
        offset = i;
    } else {
        for (int32_t d = t.ndim - 1; d >= 0; --d) {
            offset += (i % t.shape[d]) * t.strides[d];
            i /= t.shape[d];
        }
    }
    return static_cast<const uint8_t*>(t.data) + t.byte_offset + offset * bytes;
}

inline std::vector<float> read_floats(const DLTensor& t, const char* what) {
    std::vector<float> out(static_cast<size_t>(numel(t)));
    const DLDataType d = t.dtype;
    if (d.code != kDLFloat && d.code != kDLBfloat) throw CallError(std::string(what) + ": not a floating-point tensor");
    for (int64_t i = 0; i < numel(t); ++i) {
        const uint8_t* p = element(t, i);
        if (d.code == kDLFloat && d.bits == 32) {
            std::memcpy(&out[i], p, 4);
        } else if (d.code == kDLBfloat && d.bits == 16) {
            uint16_t h;
            std::memcpy(&h, p, 2);
            out[i] = kcvk::f32_from_bf16(h);
        } else if (d.code == kDLFloat && d.bits == 16) {
            uint16_t h;
            std::memcpy(&h, p, 2);
            out[i] = kcvk::f32_from_f16(h);
        } else {
            throw CallError(std::string(what) + ": dtype must be f32, bf16 or f16");
        }
    }
    return out;
}

inline std::vector<int64_t> read_integers(const DLTensor& t, const char* what) {
    std::vector<int64_t> out(static_cast<size_t>(numel(t)));
    if (t.dtype.code != kDLInt || (t.dtype.bits != 32 && t.dtype.bits != 64))
        throw CallError(std::string(what) + ": dtype must be i32 or i64");
    for (int64_t i = 0; i < numel(t); ++i) {
        const uint8_t* p = element(t, i);
        if (t.dtype.bits == 64) {
            std::memcpy(&out[i], p, 8);
        } else {
            int32_t x;
            std::memcpy(&x, p, 4);
            out[i] = x;
        }
    }
    return out;
}

// Rounds to the output's dtype (f32, bf16 or f16) and stores in logical row-major order.
inline void write_floats(DLTensor& t, const std::vector<float>& v, const char* what) {
    if (numel(t) != static_cast<int64_t>(v.size()))
        throw CallError(std::string(what) + ": output holds " + std::to_string(numel(t)) + " elements, expected " +
                        std::to_string(v.size()));
    const DLDataType d = t.dtype;
    for (int64_t i = 0; i < numel(t); ++i) {
        uint8_t* p = const_cast<uint8_t*>(element(t, i));
        if (d.code == kDLFloat && d.bits == 32) {
            std::memcpy(p, &v[i], 4);
        } else if (d.code == kDLBfloat && d.bits == 16) {
            const uint16_t h = kcvk::bf16_from_f32(v[i]);
            std::memcpy(p, &h, 2);
        } else if (d.code == kDLFloat && d.bits == 16) {
            const uint16_t h = kcvk::f16_from_f32(v[i]);
            std::memcpy(p, &h, 2);
        } else {
            throw CallError(std::string(what) + ": dtype must be f32, bf16 or f16");
        }
    }
}

// The operands of one call, in float32, with the problem they describe.
struct CallOperands {
    Problem problem;
    bool initial_state = false, final_state = false;
    std::vector<float> q, k, v, g, beta, h0, d_o, dht;
};

inline CallOperands read_call(const kcv_call* call, bool backward) {
    if (call->abi_version != KCV_ABI_VERSION) throw CallError("unsupported ABI version");
    CallOperands ops;
    Problem& p = ops.problem;
    const int gate = static_cast<int>(call_attribute(call, "gate", 0));
    if (gate < 0 || gate > 2) throw CallError("attribute gate must be 0, 1 or 2");
    p.member.gate = static_cast<GateKind>(gate);
    p.member.delta = call_attribute(call, "delta", 0) == 1;
    ops.initial_state = call_attribute(call, "initial_state", 0) == 1;
    ops.final_state = backward && call_attribute(call, "final_state", 0) == 1;
    const bool varlen = call_attribute(call, "varlen", 0) == 1;

    const int32_t expected =
        call_input_count(gate != 0, p.member.delta, ops.initial_state, backward, ops.final_state, varlen);
    if (call->n_inputs != expected)
        throw CallError("expected " + std::to_string(expected) + " inputs for these attributes, got " +
                        std::to_string(call->n_inputs));
    const DLTensor* in = call->inputs;
    if (in[0].ndim != 4 || in[2].ndim != 4) throw CallError("q must be [B,T,H,K] and v [B,T,HV,V]");
    Shape& s = p.shape;
    s.B = in[0].shape[0];
    s.T = in[0].shape[1];
    s.H = in[0].shape[2];
    s.K = in[0].shape[3];
    s.HV = in[2].shape[2];
    s.V = in[2].shape[3];
    if (varlen) s.cu_seqlens = read_integers(in[call->n_inputs - 1], "cu_seqlens");
    p.scale = call_attribute(call, "scale", 1.0 / std::sqrt(static_cast<double>(s.K)));
    try {
        validate(p);
    } catch (const std::invalid_argument& e) {
        throw CallError(e.what());
    }
    int32_t i = 0;
    auto take = [&](const char* what, int64_t elements) {
        if (numel(in[i]) != elements)
            throw CallError(std::string(what) + " holds " + std::to_string(numel(in[i])) + " elements, expected " +
                            std::to_string(elements));
        return read_floats(in[i++], what);
    };
    ops.q = take("q", s.qk_size());
    ops.k = take("k", s.qk_size());
    ops.v = take("v", s.v_size());
    if (gate != 0) ops.g = take("g", s.g_size(p.member.gate));
    if (p.member.delta) ops.beta = take("beta", s.beta_size());
    if (ops.initial_state) ops.h0 = take("h0", s.state_size());
    if (backward) {
        ops.d_o = take("do", s.v_size());
        if (ops.final_state) ops.dht = take("dht", s.state_size());
    }
    return ops;
}

inline const float* or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

// The whole of a forward control's call: the operands read, Args (the float32 argument struct of
// an implementation: fields q, k, v, g, beta, h0, o, ht) filled, `run(problem, args)`, o and
// optionally ht written.
template <class Args, class Run>
void serve_forward(const kcv_call* call, Run run) {
    const CallOperands ops = read_call(call, false);
    const Shape& s = ops.problem.shape;
    if (call->n_outputs != 1 && call->n_outputs != 2) throw CallError("outputs: o and optionally ht");
    std::vector<float> o(s.v_size()), ht(s.state_size());
    Args a;
    a.q = ops.q.data();
    a.k = ops.k.data();
    a.v = ops.v.data();
    a.g = or_null(ops.g);
    a.beta = or_null(ops.beta);
    a.h0 = or_null(ops.h0);
    a.o = o.data();
    a.ht = ht.data();
    run(ops.problem, a);
    write_floats(call->outputs[0], o, "o");
    if (call->n_outputs == 2) write_floats(call->outputs[1], ht, "ht");
}

// The same for a backward control: Args has the inputs, do, dht and dq, dk, dv, dg, dbeta, dh0;
// the outputs the attributes select are written in the order dq, dk, dv, [dg], [dbeta], [dh0].
template <class Args, class Run>
void serve_backward(const kcv_call* call, Run run) {
    const CallOperands ops = read_call(call, true);
    const Problem& p = ops.problem;
    const Shape& s = p.shape;
    const int32_t expected = 3 + (p.member.gate != GateKind::none) + p.member.delta + ops.initial_state;
    if (call->n_outputs != expected)
        throw CallError("expected " + std::to_string(expected) + " outputs (dq, dk, dv, [dg], [dbeta], [dh0]), got " +
                        std::to_string(call->n_outputs));
    std::vector<float> dq(s.qk_size()), dk(s.qk_size()), dv(s.v_size()), dg(s.g_size(p.member.gate)),
        dbeta(s.beta_size()), dh0(s.state_size());
    Args a;
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
    run(p, a);
    int32_t o = 0;
    write_floats(call->outputs[o++], dq, "dq");
    write_floats(call->outputs[o++], dk, "dk");
    write_floats(call->outputs[o++], dv, "dv");
    if (p.member.gate != GateKind::none) write_floats(call->outputs[o++], dg, "dg");
    if (p.member.delta) write_floats(call->outputs[o++], dbeta, "dbeta");
    if (ops.initial_state) write_floats(call->outputs[o++], dh0, "dh0");
}

}  // namespace kcv::gdn::cpu
