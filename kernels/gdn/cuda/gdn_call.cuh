// The recurrence's CUDA kernels behind the native ABI: reads a kcv_call into the C interface of
// gdn/cuda/gdn_cuda.h and runs it on the call's stream. Operands and attributes are those of the
// CPU controls (gdn/cpu/kcv_call_io.hpp) and of the oracles "gdn_forward" and "gdn_backward":
//   forward   inputs  q, k, v, [g], [beta], [h0], [cu_seqlens]          outputs o, [ht]
//   backward  inputs  q, k, v, [g], [beta], [h0], do, [dht], [cu_seqlens]
//             outputs dq, dk, dv, [dg], [dbeta], [dh0]
// attributes gate (0/1/2), delta, scale (default K^-1/2), initial_state, final_state, varlen.
//
// The kernels take what gdn_cuda.h states: q, k, v, beta, do and o, dq, dk, dv, dbeta all in one
// dtype (f32, bf16 or f16); g, h0, ht, dht, dg, dh0 in f32; cu_seqlens i64; every tensor dense
// row-major (a byte offset is fine, other strides are refused: the kernels index densely);
// K, V <= 128. bf16 and f16 inputs run version 2 (tensor cores), f32 version 1.
//
// The workspace (kcv_gdn_workspace_bytes) is allocated on the call's stream and freed on it
// (stream-ordered, so the host never waits), and filled with 0xFF bytes first: a caller's
// workspace promises no content, and a NaN there reaches the outputs if a kernel reads scratch
// it did not write.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "kcv_cuda_util.cuh"

#include "../../../gdn/cuda/gdn_cuda.h"
#include "../../../gdn/problem.hpp"

namespace kcvk __attribute__((visibility("hidden"))) {
namespace gdn {

inline int32_t io_dtype_code(Dtype t) {
    switch (t) {
        case Dtype::f32: return 0;
        case Dtype::bf16: return 1;
        case Dtype::f16: return 2;
        default: throw Error(std::string("q: dtype ") + dtype_name(t) + ", the kernels take f32, bf16 or f16");
    }
}

// The device address of a dense row-major tensor of the given shape and dtype.
inline char* dense(const TensorRef& t, const std::vector<int64_t>& shape, Dtype dtype) {
    t.expect_cuda();
    t.expect_dtype(dtype);
    bool same = t.ndim() == static_cast<int>(shape.size());
    for (int d = 0; same && d < t.ndim(); ++d) same = t.size(d) == shape[d];
    if (!same) {
        std::string want = "[";
        for (size_t d = 0; d < shape.size(); ++d) want += (d ? "," : "") + std::to_string(shape[d]);
        throw Error(t.role() + ": shape " + t.shape_str() + ", expected " + want + "]");
    }
    int64_t compact = 1;
    for (int d = t.ndim() - 1; d >= 0; --d) {
        if (t.size(d) != 1 && t.stride(d) != compact)
            throw Error(t.role() + ": the recurrence kernels need dense row-major tensors (stride " +
                        std::to_string(t.stride(d)) + " in dimension " + std::to_string(d) + ", dense is " +
                        std::to_string(compact) + ")");
        compact *= t.size(d);
    }
    return t.base();
}

// The stream-ordered workspace of one call, poisoned with NaN bytes.
class Workspace {
public:
    Workspace(size_t bytes, cudaStream_t stream) : stream_(stream) {
        if (bytes == 0) return;
        check_cuda(cudaMallocAsync(&base_, bytes, stream), "cudaMallocAsync (workspace)");
        check_cuda(cudaMemsetAsync(base_, 0xFF, bytes, stream), "cudaMemsetAsync (workspace)");
    }
    ~Workspace() {
        if (base_) cudaFreeAsync(base_, stream_);
    }
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
    void* get() const { return base_; }

private:
    void* base_ = nullptr;
    cudaStream_t stream_;
};

// Reads the call into the kernels' parameters and runs the forward or the backward.
inline void run_recurrence(const kcv_call& c, bool backward) {
    const int gate = static_cast<int>(int_attribute(c, "gate", 0, 0, 2));
    const bool delta = int_attribute(c, "delta", 0, 0, 1) == 1;
    const bool initial_state = int_attribute(c, "initial_state", 0, 0, 1) == 1;
    const bool final_state = backward && int_attribute(c, "final_state", 0, 0, 1) == 1;
    const bool varlen = int_attribute(c, "varlen", 0, 0, 1) == 1;
    const int inputs = ::kcv::gdn::call_input_count(gate != 0, delta, initial_state, backward, final_state, varlen);
    const int outputs = backward ? 3 + (gate != 0) + delta + initial_state : (c.n_outputs == 2 ? 2 : 1);
    expect_arity(c, inputs, outputs);

    int next = 0;
    auto input = [&](const char* role) { return TensorRef(c.inputs[next++], std::string("input ") + role); };
    const TensorRef q = input("q"), k = input("k"), v = input("v");
    q.expect_rank(4);
    v.expect_rank(4);
    kcv_gdn_params p{};
    p.gate = gate;
    p.delta = delta;
    p.dtype = io_dtype_code(q.dtype());
    p.B = q.size(0);
    p.T = q.size(1);
    p.H = q.size(2);
    p.K = q.size(3);
    p.HV = v.size(2);
    p.V = v.size(3);
    p.N = p.B;
    p.scale = static_cast<float>(attribute(c, "scale", 1.0 / std::sqrt(static_cast<double>(p.K))));
    const Dtype io = q.dtype();
    const std::vector<int64_t> qk_shape{p.B, p.T, p.H, p.K}, v_shape{p.B, p.T, p.HV, p.V};
    const std::vector<int64_t> g_shape = gate == 2 ? std::vector<int64_t>{p.B, p.T, p.HV, p.K}
                                                   : std::vector<int64_t>{p.B, p.T, p.HV};
    const std::vector<int64_t> beta_shape{p.B, p.T, p.HV};
    if (varlen) {
        const TensorRef cu(c.inputs[c.n_inputs - 1], "input cu_seqlens");
        if (cu.ndim() != 1 || cu.size(0) < 2) throw Error("input cu_seqlens: N + 1 >= 2 offsets");
        p.N = cu.size(0) - 1;
        p.cu_seqlens = reinterpret_cast<const int64_t*>(dense(cu, {p.N + 1}, Dtype::i64));
    }
    const std::vector<int64_t> state_shape{p.N, p.HV, p.K, p.V};

    p.q = dense(q, qk_shape, io);
    p.k = dense(k, qk_shape, io);
    p.v = dense(v, v_shape, io);
    if (gate != 0) p.g = reinterpret_cast<const float*>(dense(input("g"), g_shape, Dtype::f32));
    if (delta) p.beta = dense(input("beta"), beta_shape, io);
    if (initial_state) p.h0 = reinterpret_cast<const float*>(dense(input("h0"), state_shape, Dtype::f32));

    int out = 0;
    auto output = [&](const char* role, const std::vector<int64_t>& shape, Dtype dtype) {
        return dense(TensorRef(c.outputs[out++], std::string("output ") + role), shape, dtype);
    };
    if (backward) {
        p.d_o = dense(input("do"), v_shape, io);
        if (final_state) p.dht = reinterpret_cast<const float*>(dense(input("dht"), state_shape, Dtype::f32));
        p.dq = output("dq", qk_shape, io);
        p.dk = output("dk", qk_shape, io);
        p.dv = output("dv", v_shape, io);
        if (gate != 0) p.dg = reinterpret_cast<float*>(output("dg", g_shape, Dtype::f32));
        if (delta) p.dbeta = output("dbeta", beta_shape, io);
        if (initial_state) p.dh0 = reinterpret_cast<float*>(output("dh0", state_shape, Dtype::f32));
    } else {
        p.o = output("o", v_shape, io);
        if (outputs == 2) p.ht = reinterpret_cast<float*>(output("ht", state_shape, Dtype::f32));
    }

    const cudaStream_t stream = stream_of(c);
    p.workspace_bytes = kcv_gdn_workspace_bytes(&p, backward ? 1 : 0);
    const Workspace workspace(p.workspace_bytes, stream);
    p.workspace = workspace.get();
    const int status = backward ? kcv_gdn_backward(&p, stream) : kcv_gdn_forward(&p, stream);
    if (status != 0) throw Error(std::string(backward ? "kcv_gdn_backward: " : "kcv_gdn_forward: ") + kcv_gdn_last_error());
}

}  // namespace gdn
}  // namespace kcvk
