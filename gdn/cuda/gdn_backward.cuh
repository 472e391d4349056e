// Chunked backward of the gated linear recurrence on sm_90a, reference version (version 1).
//
// Build (through gdn_api.cu, which holds the launches):
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c gdn/cuda/gdn_api.cu
//
// After the forward's prepare_chunks and state_scan have recomputed γ, tril(P), T, W, U, Δ and
// the chunk-start states, the backward runs, per (sequence, value head):
//   reverse_scan (chunks last to first, 16-column slices of V), with dS the gradient of the
//     state after the chunk:  dΔ = (K ⊙ e^{γ_C−γ}) dS + scale·tril(P)ᵀ dO,
//     dS ← Λ_C dS + scale·(Q ⊙ e^γ)ᵀ dO − Λ(β ⊙ K)ᵀ (Tᵀ dΔ), each decay applied last, by halves;
//   chunk_grad (all chunks in parallel): the intra-chunk gradients, the vector-Jacobian product
//     through T (dT = dU Ṽᵀ + dW R̃ᵀ, dA = −Tᵀ dT Tᵀ), then dq, dk, dv, dβ and dγ, and dg as the
//     reverse cumulative sum of dγ within the chunk;
//   group_sum: dq, dk of a query/key head summed over its value heads in increasing order.
// gdn/cpu/gdn_chunked.cpp is the same computation, step for step, in plain C++, with the same
// precision measures (gdn_forward.cuh lists them). Limits: K, V <= 128. No atomics; every element one thread's sequential sum in a fixed order. Scalar FMA
// tiles; gdn_backward_tc.cuh is version 2 on tensor cores.
#pragma once

#include "gdn_forward.cuh"

namespace kcv::gdn::cuda {

struct BackwardArgs {
    ForwardArgs fwd;
    const void* d_o;
    const float* dht;
    void* dq;
    void* dk;
    void* dv;
    float* dg;
    void* dbeta;
    float* dh0;
};

template <int GATE, bool DELTA, class TI>
__global__ void __launch_bounds__(kThreads) reverse_scan(Dims d, Workspace w, BackwardArgs a) {
    const int n = blockIdx.x, hv = blockIdx.y, v0 = blockIdx.z * kScanCols, h = hv / d.group;
    const int K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int VS = min(kScanCols, V - v0), GK = GATE == 2 ? K : 1;
    float* const smem = shared_floats();
    float* dS_s = smem;                         // K×16
    float* kt_s = dS_s + K * kScanCols;         // C×K  K ⊙ e^{γ_C − γ}
    float* q_s = kt_s + kChunk * K;             // C×K
    float* bk_s = q_s + kChunk * K;             // C×K  β ⊙ K (delta)
    float* half_s = bk_s + kChunk * K;          // C×GK e^{γ_t / 2}
    float* P_s = half_s + kChunk * GK;          // C×C
    float* T_s = P_s + kChunk * kChunk;         // C×C  (delta)
    float* dO_s = T_s + kChunk * kChunk;        // C×16
    float* dD_s = dO_s + kChunk * kScanCols;    // C×16
    float* TdD_s = dD_s + kChunk * kScanCols;   // C×16 Tᵀ dΔ (delta)
    float* dec_s = TdD_s + kChunk * kScanCols;  // K    e^{γ_C / 2}
    const SequenceExtent seq = sequence_extent(d, n);
    const StateSlice dS{dS_s, kScanCols, K, V, v0, VS, d.HV, hv};
    dS.load(a.dht, n);
    const TI* q = static_cast<const TI*>(a.fwd.q);
    const TI* k = static_cast<const TI*>(a.fwd.k);
    const TI* beta = static_cast<const TI*>(a.fwd.beta);
    const TI* dO = static_cast<const TI*>(a.d_o);
    for (int jc = seq.chunks - 1; jc >= 0; --jc) {
        const ScanStep st = scan_step(seq, jc, w, d.HV, hv, GK);
        const int r0 = st.r0, L = st.L;
        const size_t sh = st.sh;
        const float* gam = st.gam;
        dS.store(w.dstates, st.slot);
        for (int e = tid; e < kChunk * K; e += nt) {
            const int t = e / K, i = e % K;
            const bool in = t < L;
            const size_t at = (size_t(r0 + t) * d.H + h) * K + i;
            const float kv = in ? to_float(k[at]) : 0.0f;
            kt_s[e] = in ? kv * to_end_at<GATE>(st.to_end, t, i, K) : 0.0f;
            q_s[e] = in ? to_float(q[at]) : 0.0f;
            if (DELTA) bk_s[e] = in ? to_float(beta[size_t(r0 + t) * d.HV + hv]) * kv : 0.0f;
        }
        for (int e = tid; e < kChunk * GK; e += nt)
            half_s[e] = GATE != 0 && e / GK < L ? exp_rn(0.5f * gam[e]) : 1.0f;
        for (int e = tid; e < kChunk * kChunk; e += nt) {
            P_s[e] = w.P[sh * kChunk * kChunk + e];
            if (DELTA) T_s[e] = w.Tm[sh * kChunk * kChunk + e];
        }
        for (int e = tid; e < kChunk * kScanCols; e += nt) {
            const int t = e / kScanCols, col = e % kScanCols;
            dO_s[e] = (t < L && col < VS) ? to_float(dO[(size_t(r0 + t) * d.HV + hv) * V + v0 + col]) : 0.0f;
        }
        half_chunk_decay<GATE>(st, K, dec_s);
        __syncthreads();
        // dΔ = (K ⊙ e^{γ_C−γ}) dS + scale·tril(P)ᵀ dO
        for (int e = tid; e < L * VS; e += nt) {
            const int t = e / VS, col = e % VS;
            float inter = 0.0f, intra = 0.0f;
            for (int i = 0; i < K; ++i) inter += kt_s[t * K + i] * dS_s[i * kScanCols + col];
            for (int s = t; s < L; ++s) intra += P_s[s * kChunk + t] * dO_s[s * kScanCols + col];
            const float out = inter + d.scale * intra;
            dD_s[t * kScanCols + col] = out;
            w.ddelta[(sh * kChunk + t) * V + v0 + col] = out;
        }
        __syncthreads();
        if (DELTA) {
            for (int e = tid; e < L * VS; e += nt) {
                const int t = e / VS, col = e % VS;
                float acc = 0.0f;
                for (int s = t; s < L; ++s) acc += T_s[s * kChunk + t] * dD_s[s * kScanCols + col];
                TdD_s[t * kScanCols + col] = acc;
            }
            __syncthreads();
        }
        // dS₀ = Λ_C dS + scale·(Q ⊙ e^γ)ᵀ dO − Wᵀ dΔ, with Wᵀ dΔ = Λ(β ⊙ K)ᵀ (Tᵀ dΔ); every decay
        // is applied last and by halves, so a strongly decayed term keeps its significant bits.
        for (int e = tid; e < K * VS; e += nt) {
            const int i = e / VS, col = e % VS;
            const int gi = GATE == 2 ? i : 0;
            float from_o = 0.0f, from_w = 0.0f;
            for (int t = 0; t < L; ++t)
                from_o += decayed(q_s[t * K + i] * dO_s[t * kScanCols + col], half_s[t * GK + gi]);
            if (DELTA)
                for (int t = 0; t < L; ++t)
                    from_w += decayed(bk_s[t * K + i] * TdD_s[t * kScanCols + col], half_s[t * GK + gi]);
            float s = decayed(dS_s[i * kScanCols + col], dec_s[i]) + d.scale * from_o;
            if (DELTA) s -= from_w;
            dS_s[i * kScanCols + col] = s;
        }
        __syncthreads();
    }
    if (a.dh0) dS.store(a.dh0, n);
}

inline size_t reverse_scan_smem_bytes(int K, int gate) {
    const int GK = gate == 2 ? K : 1;
    return sizeof(float) * (size_t(K) * kScanCols + 3 * size_t(kChunk) * K + size_t(kChunk) * GK +
                            2 * kChunk * kChunk + 3 * kChunk * kScanCols + K);
}

// Elements per thread at a time in chunk_grad's element-wise passes over tiles in global memory
// (the workspace scratch), for the reason of kLoadBatch (gdn_common.cuh); fewer, as each element
// holds two or three values.
constexpr int kElementBatch = 4;

// chunk_grad's tiles, one layout for both versions (grad_smem_bytes): shared memory, then the
// chunk's γ, e^{γ_C − γ}, workspace scratch, states, Δ and dΔ.
struct GradTiles {
    float* q_s;      // C×K
    float* k_s;      // C×K
    float* bk_s;     // C×K  β ⊙ K (delta)
    float* g_s;      // C×GK log decays
    float* dgam_s;   // C×GK
    float* T_s;      // C×C (at a 16-byte offset, for copy_rows)
    float* dM_s;     // C×C  dP, then dT Tᵀ
    float* dT_s;     // C×C  dT, then dA (version 2: first the per-channel terms of dγ_C)
    float* F_s;      // C×C  e^{γ_t − γ_j} (scalar gate); version 2's scratch (per-channel gate); none for GATE 0
    float* b_s;      // C: β (delta), zero past L
    float* dend_s;   // GK: gradient of γ_C
    float* past;     // the first float past these tiles
    const float* gam;
    const float* to_end;
    float* s_dqt;    // dQ̃, then dbk_A
    float* s_dkt;    // dK̃, then dk_A
    float* s_dW;
    float* s_drt;
    float* s_dq;
    float* s_dk;
    float* s_xa;     // anchored x (per-channel gate); version 2: then R̃
    float* s_ea;     // anchor factors (per-channel gate)
    const float* S0;
    const float* dS;
    const float* D;
    const float* dD;
};

template <int GATE>
__device__ __forceinline__ GradTiles grad_tiles(const Workspace& w, size_t sh, int K, int V) {
    const int GK = GATE == 2 ? K : 1;
    GradTiles G;
    G.q_s = shared_floats();
    G.k_s = G.q_s + kChunk * K;
    G.bk_s = G.k_s + kChunk * K;
    G.g_s = G.bk_s + kChunk * K;
    G.dgam_s = G.g_s + kChunk * GK;
    G.T_s = G.dgam_s + kChunk * GK;
    G.dM_s = G.T_s + kChunk * kChunk;
    G.dT_s = G.dM_s + kChunk * kChunk;
    G.F_s = G.dT_s + kChunk * kChunk;
    G.b_s = G.F_s + (GATE != 0 ? kChunk * kChunk : 0);
    G.dend_s = G.b_s + kChunk;
    G.past = G.dend_s + GK;
    G.gam = w.gamma + sh * kChunk * GK;
    G.to_end = w.to_end + sh * kChunk * GK;
    G.s_dqt = w.scratch + (sh * kScratch + 0) * kChunk * K;
    G.s_dkt = w.scratch + (sh * kScratch + 1) * kChunk * K;
    G.s_dW = w.scratch + (sh * kScratch + 2) * kChunk * K;
    G.s_drt = w.scratch + (sh * kScratch + 3) * kChunk * K;
    G.s_dq = w.scratch + (sh * kScratch + 4) * kChunk * K;
    G.s_dk = w.scratch + (sh * kScratch + 5) * kChunk * K;
    G.s_xa = w.scratch + (sh * kScratch + 6) * kChunk * K;
    G.s_ea = w.scratch + (sh * kScratch + 7) * kChunk * K;
    G.S0 = w.states + sh * K * V;
    G.dS = w.dstates + sh * K * V;
    G.D = w.delta + sh * kChunk * V;
    G.dD = w.ddelta + sh * kChunk * V;
    return G;
}

// Float64 scratch in a float tile: the first 8-byte boundary at or after p (n doubles need 2n + 1
// floats of the tile).
__device__ __forceinline__ double* aligned_doubles(float* p) {
    return reinterpret_cast<double*>((reinterpret_cast<uintptr_t>(p) + 7) & ~uintptr_t(7));
}

// chunk_grad's inputs: Q, K and the log decays, zeroed dγ and dγ_C, T and β (delta), then β ⊙ K
// (delta, after the barrier).
template <int GATE, bool DELTA, class TI>
__device__ __forceinline__ void load_grad_inputs(const Dims& d, const Workspace& w, const BackwardArgs& a,
                                                 ChunkPos c, GradTiles G) {
    const int tid = threadIdx.x, nt = blockDim.x, hv = blockIdx.y, h = hv / d.group, K = d.K, L = c.L;
    const int GK = GATE == 2 ? K : 1;
    const size_t sh = size_t(c.slot) * d.HV + hv;
    load_tile(static_cast<const TI*>(a.fwd.q), c.row0, L, d.H, h, K, G.q_s);
    load_tile(static_cast<const TI*>(a.fwd.k), c.row0, L, d.H, h, K, G.k_s);
    load_gate<GATE>(a.fwd.g, c, d.HV, hv, K, G.g_s);
    for (int e = tid; e < kChunk * GK; e += nt) G.dgam_s[e] = 0.0f;
    for (int i = tid; i < GK; i += nt) G.dend_s[i] = 0.0f;
    if (DELTA) {
        copy_rows(G.T_s, kChunk, w.Tm + sh * kChunk * kChunk, kChunk, kChunk, kChunk);
        const TI* beta = static_cast<const TI*>(a.fwd.beta);
        for (int t = tid; t < kChunk; t += nt) G.b_s[t] = t < L ? to_float(beta[size_t(c.row0 + t) * d.HV + hv]) : 0.0f;
    }
    async_copies_wait();
    __syncthreads();
    if (DELTA)
        for (int e = tid; e < kChunk * K; e += nt) G.bk_s[e] = e / K < L ? G.b_s[e / K] * G.k_s[e] : 0.0f;
}

// After the score gradient through A (dbk_A in s_dqt, dk_A in s_dkt): dbk = dbk_A + e^γ ⊙ dR̃
// into s_dqt, dk += dk_A + β ⊙ dbk, dγ += e^γ ⊙ (β ⊙ K) ⊙ dR̃ (summed over channels in Acc for a
// scalar gate); then a barrier. eg: a scalar gate's e^{γ_t} per token, taken once by the caller
// (the same floats), or null to take them here.
template <int GATE, class Acc = float>
__device__ __forceinline__ void combine_through_a(const Dims& d, ChunkPos c, GradTiles G,
                                                  const float* eg = nullptr) {
    const int tid = threadIdx.x, nt = blockDim.x, K = d.K, L = c.L;
    const int GK = GATE == 2 ? K : 1;
    auto et_at = [&](int t, int i) {
        return GATE == 1 && eg ? eg[t] : exp_rn(gamma_at<GATE>(G.gam, t, i, K));
    };
    for (int e0 = tid; e0 < L * K; e0 += kElementBatch * nt) {
        float dbk[kElementBatch], dk[kElementBatch];
        for (int u = 0; u < kElementBatch; ++u) {
            const int e = min(e0 + u * nt, L * K - 1), t = e / K, i = e % K;
            const float et = et_at(t, i);
            dbk[u] = G.s_dqt[e] + et * G.s_drt[e];
            dk[u] = G.s_dk[e] + G.s_dkt[e];
            dk[u] += G.b_s[t] * dbk[u];
        }
        for (int u = 0; u < kElementBatch; ++u) {
            const int e = e0 + u * nt;
            if (e >= L * K) break;
            G.s_dqt[e] = dbk[u];
            G.s_dk[e] = dk[u];
        }
    }
    if (GATE != 0)
        for (int e = tid; e < L * GK; e += nt) {
            const int t = e / GK, i0 = e % GK;
            Acc acc = 0;
            const float *bk = G.bk_s + t * K, *drt = G.s_drt + t * K;
            auto term = [&](int i, float b, float r) { acc += Acc(et_at(t, i) * b) * r; };
            if (GATE == 1) walk_rows(K, term, bk, drt);   // a scalar gate sums its row
            else term(i0, bk[i0], drt[i0]);
            G.dgam_s[e] += float(acc);
        }
    __syncthreads();
}

// dv = dΔ for the members without the delta rule.
template <class TI>
__device__ __forceinline__ void copy_dv(const Dims& d, const BackwardArgs& a, ChunkPos c, GradTiles G) {
    const int tid = threadIdx.x, nt = blockDim.x, hv = blockIdx.y, V = d.V;
    TI* dv = static_cast<TI*>(a.dv);
    for (int e = tid; e < c.L * V; e += nt) {
        const int t = e / V, j = e % V;
        dv[(size_t(c.row0 + t) * d.HV + hv) * V + j] = from_float<TI>(G.dD[t * V + j]);
    }
}

// chunk_grad's outputs: dg (g enters only through γ, so dg is the reverse cumulative sum of dγ
// within the chunk, from dγ_C, summed in Acc) and dq, dk of this value head: for group_sum, or
// where each query/key head has one value head, straight into dq and dk as group_sum would write
// them (0 + x, so that a −0 leaves as +0 there too).
template <int GATE, class TI, class Acc = float>
__device__ __forceinline__ void write_chunk_grads(const Dims& d, const Workspace& w, const BackwardArgs& a,
                                                  ChunkPos c, GradTiles G) {
    const int tid = threadIdx.x, nt = blockDim.x, hv = blockIdx.y, K = d.K, L = c.L;
    const int GK = GATE == 2 ? K : 1;
    if (GATE != 0) {
        for (int i = tid; i < GK; i += nt) {
            Acc run = G.dend_s[i];
            for (int t = L - 1; t >= 0; --t) {
                run += G.dgam_s[t * GK + i];
                a.dg[(size_t(c.row0 + t) * d.HV + hv) * GK + i] = float(run);
            }
        }
    }
    for (int e0 = tid; e0 < L * K; e0 += kElementBatch * nt) {
        float dq[kElementBatch], dk[kElementBatch];
        for (int u = 0; u < kElementBatch; ++u) {
            const int e = min(e0 + u * nt, L * K - 1);
            dq[u] = G.s_dq[e];
            dk[u] = G.s_dk[e];
        }
        for (int u = 0; u < kElementBatch; ++u) {
            const int e = e0 + u * nt, t = e / K, i = e % K;
            if (e >= L * K) break;
            const size_t at = (size_t(c.row0 + t) * d.HV + hv) * K + i;
            if (d.group == 1) {
                static_cast<TI*>(a.dq)[at] = from_float<TI>(0.0f + dq[u]);
                static_cast<TI*>(a.dk)[at] = from_float<TI>(0.0f + dk[u]);
            } else {
                w.dq_heads[at] = dq[u];
                w.dk_heads[at] = dk[u];
            }
        }
    }
}

template <int GATE, bool DELTA, class TI>
__global__ void __launch_bounds__(kThreads) chunk_grad(Dims d, Workspace w, BackwardArgs a) {
    ChunkPos c;
    if (!locate_chunk(d, blockIdx.x, c)) return;
    const int hv = blockIdx.y, K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int L = c.L, GK = GATE == 2 ? K : 1;
    const float scale = d.scale;
    const size_t sh = size_t(c.slot) * d.HV + hv;
    const GradTiles G = grad_tiles<GATE>(w, sh, K, V);
    const TI* dO = static_cast<const TI*>(a.d_o);
    const TI* v = static_cast<const TI*>(a.fwd.v);
    const TI* beta = static_cast<const TI*>(a.fwd.beta);
    auto beta_at = [&](int t) { return DELTA ? to_float(beta[size_t(c.row0 + t) * d.HV + hv]) : 0.0f; };
    auto dO_at = [&](int t, int j) { return to_float(dO[(size_t(c.row0 + t) * d.HV + hv) * V + j]); };
    auto v_at = [&](int t, int j) { return to_float(v[(size_t(c.row0 + t) * d.HV + hv) * V + j]); };
    auto gm = [&](int t, int i) { return gamma_at<GATE>(G.gam, t, i, K); };
    auto kdecay = [&](int t, int i) { return to_end_at<GATE>(G.to_end, t, i, K); };

    load_grad_inputs<GATE, DELTA, TI>(d, w, a, c, G);

    // Products over V with the states and Δ: dQ̃ = scale·dO S₀ᵀ, dK̃ = Δ dSᵀ, dW = −dΔ S₀ᵀ.
    for (int e = tid; e < kChunk * K; e += nt) {
        const int t = e / K, i = e % K;
        float dqt = 0.0f, dkt = 0.0f, dw = 0.0f;
        if (t < L)
            for (int j = 0; j < V; ++j) {
                dqt += dO_at(t, j) * G.S0[i * V + j];
                dkt += G.D[t * V + j] * G.dS[i * V + j];
                if (DELTA) dw += G.dD[t * V + j] * G.S0[i * V + j];
            }
        G.s_dqt[e] = scale * dqt;
        G.s_dkt[e] = dkt;
        if (DELTA) G.s_dW[e] = -dw;
    }
    // dP = scale·tril(dO Δᵀ).
    for (int e = tid; e < kChunk * kChunk; e += nt) {
        const int t = e / kChunk, s = e % kChunk;
        float acc = 0.0f;
        if (t < L && s <= t)
            for (int j = 0; j < V; ++j) acc += dO_at(t, j) * G.D[s * V + j];
        G.dM_s[e] = t < L && s <= t ? scale * acc : 0.0f;
    }
    __syncthreads();
    // Through tril(P) and through Q ⊙ e^γ, K ⊙ e^{γ_C − γ}, Λ_C S₀.
    if (GATE == 1) scalar_gate_factors(G.g_s, L, G.F_s);
    gated_scores_backward<GATE>(G.dM_s, G.q_s, G.k_s, G.g_s, G.F_s, L, K, false, G.s_dq, G.s_dk, G.dgam_s, G.s_xa,
                                G.s_ea);
    for (int e = tid; e < L * K; e += nt) {
        const int t = e / K, i = e % K;
        G.s_dq[e] += exp_rn(gm(t, i)) * G.s_dqt[e];
        G.s_dk[e] += kdecay(t, i) * G.s_dkt[e];
    }
    if (GATE != 0) {
        // dγ_t += q̃_t ⊙ dq̃_t − k̃_t ⊙ dk̃_t, dγ_C += Σ_t k̃_t ⊙ dk̃_t + e^{γ_C} Σ_v dS ⊙ S₀; per
        // channel one term at a time, as the CPU adds them.
        for (int e = tid; e < L * GK; e += nt) {
            const int t = e / GK, i0 = e % GK;
            if (GATE == 2) {
                G.dgam_s[e] += G.q_s[e] * exp_rn(gm(t, i0)) * G.s_dqt[e];
                G.dgam_s[e] -= G.k_s[e] * kdecay(t, i0) * G.s_dkt[e];
            } else {
                float acc = 0.0f;
                for (int i = 0; i < K; ++i) {
                    const float qt = G.q_s[t * K + i] * exp_rn(gm(t, i));
                    const float kt = G.k_s[t * K + i] * kdecay(t, i);
                    acc += qt * G.s_dqt[t * K + i] - kt * G.s_dkt[t * K + i];
                }
                G.dgam_s[e] += acc;
            }
        }
        for (int i0 = tid; i0 < GK; i0 += nt) {
            float acc = 0.0f;
            for (int i = (GATE == 2 ? i0 : 0); i < (GATE == 2 ? i0 + 1 : K); ++i) {
                float kk = 0.0f, ss = 0.0f;
                for (int t = 0; t < L; ++t)
                    kk += G.k_s[t * K + i] * kdecay(t, i) * G.s_dkt[t * K + i];
                for (int j = 0; j < V; ++j) ss += G.dS[i * V + j] * G.S0[i * V + j];
                acc += kk + exp_rn(gm(L - 1, i)) * ss;
            }
            G.dend_s[i0] += acc;
        }
    }
    __syncthreads();

    TI* dv = static_cast<TI*>(a.dv);
    if (DELTA) {
        // dT = dΔ Ṽᵀ + dW R̃ᵀ with Ṽ = β ⊙ V, R̃ = e^γ ⊙ β ⊙ K.
        for (int e = tid; e < kChunk * kChunk; e += nt) {
            const int t = e / kChunk, s = e % kChunk;
            float from_u = 0.0f, from_w = 0.0f;
            if (t < L && s < L) {
                const float bs = beta_at(s);
                for (int j = 0; j < V; ++j) from_u += G.dD[t * V + j] * (bs * v_at(s, j));
                for (int i = 0; i < K; ++i) from_w += G.s_dW[t * K + i] * (exp_rn(gm(s, i)) * G.bk_s[s * K + i]);
            }
            G.dT_s[e] = from_u + from_w;
        }
        // dR̃ = Tᵀ dW, and dv = β ⊙ (Tᵀ dΔ), both on T's lower triangle.
        for (int e = tid; e < L * K; e += nt) {
            const int t = e / K, i = e % K;
            float acc = 0.0f;
            for (int s = t; s < L; ++s) acc += G.T_s[s * kChunk + t] * G.s_dW[s * K + i];
            G.s_drt[e] = acc;
        }
        for (int e = tid; e < L * V; e += nt) {
            const int t = e / V, j = e % V;
            float acc = 0.0f;
            for (int s = t; s < L; ++s) acc += G.T_s[s * kChunk + t] * G.dD[s * V + j];
            dv[(size_t(c.row0 + t) * d.HV + hv) * V + j] = from_float<TI>(beta_at(t) * acc);
        }
        __syncthreads();
        // dA = −Tᵀ dT Tᵀ on the strictly lower triangle: X = dT Tᵀ, then −Tᵀ X.
        for (int e = tid; e < kChunk * kChunk; e += nt) {
            const int r = e / kChunk, j = e % kChunk;
            float acc = 0.0f;
            for (int b = 0; b <= j; ++b) acc += G.dT_s[r * kChunk + b] * G.T_s[j * kChunk + b];
            G.dM_s[e] = acc;
        }
        __syncthreads();
        for (int e = tid; e < kChunk * kChunk; e += nt) {
            const int t = e / kChunk, j = e % kChunk;
            float acc = 0.0f;
            if (t < L && j < t)
                for (int r = t; r < L; ++r) acc += G.T_s[r * kChunk + t] * G.dM_s[r * kChunk + j];
            G.dT_s[e] = j < t && t < L ? -acc : 0.0f;
        }
        __syncthreads();
        // Through A (rows b ⊙ k): dbk_A into G.s_dqt, dk_A into G.s_dkt.
        gated_scores_backward<GATE>(G.dT_s, G.bk_s, G.k_s, G.g_s, G.F_s, L, K, true, G.s_dqt, G.s_dkt, G.dgam_s,
                                    G.s_xa, G.s_ea);
        combine_through_a<GATE>(d, c, G);
        // dβ = ⟨v, Tᵀ dΔ⟩ + ⟨k, dbk⟩.
        TI* dbeta = static_cast<TI*>(a.dbeta);
        for (int t = tid; t < L; t += nt) {
            float acc = 0.0f;
            for (int j = 0; j < V; ++j) {
                float dvt = 0.0f;
                for (int s = t; s < L; ++s) dvt += G.T_s[s * kChunk + t] * G.dD[s * V + j];
                acc += v_at(t, j) * dvt;
            }
            for (int i = 0; i < K; ++i) acc += G.k_s[t * K + i] * G.s_dqt[t * K + i];
            dbeta[size_t(c.row0 + t) * d.HV + hv] = from_float<TI>(acc);
        }
    } else {
        copy_dv<TI>(d, a, c, G);
    }
    __syncthreads();
    write_chunk_grads<GATE, TI>(d, w, a, c, G);
}

// GradTiles' shared part; F_s only where a gate has it (227 KiB at most: 224.8 KiB for K = 128
// with a per-channel gate).
inline size_t grad_smem_bytes(int K, int gate) {
    const int GK = gate == 2 ? K : 1;
    return sizeof(float) *
           (3 * size_t(kChunk) * K + 2 * size_t(kChunk) * GK + GK + kChunk + (gate != 0 ? 4 : 3) * kChunk * kChunk);
}



// dq, dk of query/key head h: the sum over its value heads h·G .. h·G + G − 1, in that order
// (G > 1; with one value head per query/key head chunk_grad writes them).
template <class TI>
__global__ void group_sum(Dims d, Workspace w, BackwardArgs a) {
    const size_t total = size_t(d.B) * d.T * d.H * d.K;
    TI* dq = static_cast<TI*>(a.dq);
    TI* dk = static_cast<TI*>(a.dk);
    for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
        const size_t row = e / (size_t(d.H) * d.K);
        const int h = static_cast<int>((e / d.K) % d.H), i = static_cast<int>(e % d.K);
        float sq = 0.0f, sk = 0.0f;
        for (int r = 0; r < d.group; ++r) {
            const size_t at = (row * d.HV + h * d.group + r) * d.K + i;
            sq += w.dq_heads[at];
            sk += w.dk_heads[at];
        }
        dq[e] = from_float<TI>(sq);
        dk[e] = from_float<TI>(sk);
    }
}

}  // namespace kcv::gdn::cuda
