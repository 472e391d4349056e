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
    int row0, length, first_slot, chunks;
    sequence_extent(d, n, row0, length, first_slot, chunks);

    for (int e = tid; e < K * kScanCols; e += nt) {
        const int i = e / kScanCols, col = e % kScanCols;
        dS_s[e] = (a.dht && col < VS) ? a.dht[((size_t(n) * d.HV + hv) * K + i) * V + v0 + col] : 0.0f;
    }
    __syncthreads();
    const TI* q = static_cast<const TI*>(a.fwd.q);
    const TI* k = static_cast<const TI*>(a.fwd.k);
    const TI* beta = static_cast<const TI*>(a.fwd.beta);
    const TI* dO = static_cast<const TI*>(a.d_o);
    for (int jc = chunks - 1; jc >= 0; --jc) {
        const int slot = first_slot + jc, r0 = row0 + jc * kChunk, L = min(kChunk, length - jc * kChunk);
        const size_t sh = size_t(slot) * d.HV + hv;
        const float* gam = w.gamma + sh * kChunk * GK;
        const float* to_end = w.to_end + sh * kChunk * GK;
        for (int e = tid; e < K * VS; e += nt) {
            const int i = e / VS, col = e % VS;
            w.dstates[(sh * K + i) * V + v0 + col] = dS_s[i * kScanCols + col];
        }
        for (int e = tid; e < kChunk * K; e += nt) {
            const int t = e / K, i = e % K;
            const bool in = t < L;
            const size_t at = (size_t(r0 + t) * d.H + h) * K + i;
            const float kv = in ? to_float(k[at]) : 0.0f;
            kt_s[e] = in ? kv * (GATE != 0 ? to_end[t * GK + (GATE == 2 ? i : 0)] : 1.0f) : 0.0f;
            q_s[e] = in ? to_float(q[at]) : 0.0f;
            if (DELTA) bk_s[e] = in ? to_float(beta[size_t(r0 + t) * d.HV + hv]) * kv : 0.0f;
        }
        for (int e = tid; e < kChunk * GK; e += nt)
            half_s[e] = GATE != 0 && e / GK < L ? expf(0.5f * gam[e]) : 1.0f;
        for (int e = tid; e < kChunk * kChunk; e += nt) {
            P_s[e] = w.P[sh * kChunk * kChunk + e];
            if (DELTA) T_s[e] = w.Tm[sh * kChunk * kChunk + e];
        }
        for (int e = tid; e < kChunk * kScanCols; e += nt) {
            const int t = e / kScanCols, col = e % kScanCols;
            dO_s[e] = (t < L && col < VS) ? to_float(dO[(size_t(r0 + t) * d.HV + hv) * V + v0 + col]) : 0.0f;
        }
        for (int i = tid; i < K; i += nt) dec_s[i] = expf(0.5f * gamma_at<GATE>(gam, L - 1, i, K));
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
    if (a.dh0)
        for (int e = tid; e < K * VS; e += nt) {
            const int i = e / VS, col = e % VS;
            a.dh0[((size_t(n) * d.HV + hv) * K + i) * V + v0 + col] = dS_s[i * kScanCols + col];
        }
}

inline size_t reverse_scan_smem_bytes(int K, int gate) {
    const int GK = gate == 2 ? K : 1;
    return sizeof(float) * (size_t(K) * kScanCols + 3 * size_t(kChunk) * K + size_t(kChunk) * GK +
                            2 * kChunk * kChunk + 3 * kChunk * kScanCols + K);
}

template <int GATE, bool DELTA, class TI>
__global__ void __launch_bounds__(kThreads) chunk_grad(Dims d, Workspace w, BackwardArgs a) {
    ChunkPos c;
    if (!locate_chunk(d, blockIdx.x, c)) return;
    const int hv = blockIdx.y, h = hv / d.group, K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int L = c.L, GK = GATE == 2 ? K : 1;
    const float scale = d.scale;
    float* const smem = shared_floats();
    float* q_s = smem;                     // C×K
    float* k_s = q_s + kChunk * K;         // C×K
    float* bk_s = k_s + kChunk * K;        // C×K  β ⊙ K (delta)
    float* g_s = bk_s + kChunk * K;        // C×GK log decays
    float* dgam_s = g_s + kChunk * GK;     // C×GK
    float* dend_s = dgam_s + kChunk * GK;  // GK: gradient of γ_C
    float* T_s = dend_s + GK;              // C×C
    float* dM_s = T_s + kChunk * kChunk;   // C×C  dP, then dT Tᵀ
    float* dT_s = dM_s + kChunk * kChunk;  // C×C  dT, then dA
    float* F_s = dT_s + kChunk * kChunk;   // C×C  e^{γ_t − γ_j} (scalar gate only)
    const size_t sh = size_t(c.slot) * d.HV + hv;
    const float* gam = w.gamma + sh * kChunk * GK;
    const float* to_end = w.to_end + sh * kChunk * GK;
    float* s_dqt = w.scratch + (sh * kScratch + 0) * kChunk * K;   // dQ̃, then dbk_A
    float* s_dkt = w.scratch + (sh * kScratch + 1) * kChunk * K;   // dK̃, then dk_A
    float* s_dW = w.scratch + (sh * kScratch + 2) * kChunk * K;
    float* s_drt = w.scratch + (sh * kScratch + 3) * kChunk * K;
    float* s_dq = w.scratch + (sh * kScratch + 4) * kChunk * K;
    float* s_dk = w.scratch + (sh * kScratch + 5) * kChunk * K;
    float* s_xa = w.scratch + (sh * kScratch + 6) * kChunk * K;    // anchored x (per-channel gate)
    float* s_ea = w.scratch + (sh * kScratch + 7) * kChunk * K;    // anchor factors (per-channel gate)
    const float* S0 = w.states + sh * K * V;
    const float* dS = w.dstates + sh * K * V;
    const float* D = w.delta + sh * kChunk * V;
    const float* dD = w.ddelta + sh * kChunk * V;
    const TI* dO = static_cast<const TI*>(a.d_o);
    const TI* v = static_cast<const TI*>(a.fwd.v);
    const TI* beta = static_cast<const TI*>(a.fwd.beta);
    auto beta_at = [&](int t) { return DELTA ? to_float(beta[size_t(c.row0 + t) * d.HV + hv]) : 0.0f; };
    auto dO_at = [&](int t, int j) { return to_float(dO[(size_t(c.row0 + t) * d.HV + hv) * V + j]); };
    auto v_at = [&](int t, int j) { return to_float(v[(size_t(c.row0 + t) * d.HV + hv) * V + j]); };
    auto gm = [&](int t, int i) { return gamma_at<GATE>(gam, t, i, K); };
    auto kdecay = [&](int t, int i) { return GATE != 0 ? to_end[t * GK + (GATE == 2 ? i : 0)] : 1.0f; };

    load_tile(static_cast<const TI*>(a.fwd.q), c.row0, L, d.H, h, K, q_s);
    load_tile(static_cast<const TI*>(a.fwd.k), c.row0, L, d.H, h, K, k_s);
    load_gate<GATE>(a.fwd.g, c, d.HV, hv, K, g_s);
    for (int e = tid; e < kChunk * GK; e += nt) dgam_s[e] = 0.0f;
    for (int i = tid; i < GK; i += nt) dend_s[i] = 0.0f;
    if (DELTA)
        for (int e = tid; e < kChunk * kChunk; e += nt) T_s[e] = w.Tm[sh * kChunk * kChunk + e];
    __syncthreads();
    if (DELTA)
        for (int e = tid; e < kChunk * K; e += nt) bk_s[e] = e / K < L ? beta_at(e / K) * k_s[e] : 0.0f;

    // Products over V with the states and Δ: dQ̃ = scale·dO S₀ᵀ, dK̃ = Δ dSᵀ, dW = −dΔ S₀ᵀ.
    for (int e = tid; e < kChunk * K; e += nt) {
        const int t = e / K, i = e % K;
        float dqt = 0.0f, dkt = 0.0f, dw = 0.0f;
        if (t < L)
            for (int j = 0; j < V; ++j) {
                dqt += dO_at(t, j) * S0[i * V + j];
                dkt += D[t * V + j] * dS[i * V + j];
                if (DELTA) dw += dD[t * V + j] * S0[i * V + j];
            }
        s_dqt[e] = scale * dqt;
        s_dkt[e] = dkt;
        if (DELTA) s_dW[e] = -dw;
    }
    // dP = scale·tril(dO Δᵀ).
    for (int e = tid; e < kChunk * kChunk; e += nt) {
        const int t = e / kChunk, s = e % kChunk;
        float acc = 0.0f;
        if (t < L && s <= t)
            for (int j = 0; j < V; ++j) acc += dO_at(t, j) * D[s * V + j];
        dM_s[e] = t < L && s <= t ? scale * acc : 0.0f;
    }
    __syncthreads();
    // Through tril(P) and through Q ⊙ e^γ, K ⊙ e^{γ_C − γ}, Λ_C S₀.
    if (GATE == 1) scalar_gate_factors(g_s, L, F_s);
    gated_scores_backward<GATE>(dM_s, q_s, k_s, g_s, F_s, L, K, false, s_dq, s_dk, dgam_s, s_xa, s_ea);
    for (int e = tid; e < L * K; e += nt) {
        const int t = e / K, i = e % K;
        s_dq[e] += expf(gm(t, i)) * s_dqt[e];
        s_dk[e] += kdecay(t, i) * s_dkt[e];
    }
    if (GATE != 0) {
        // dγ_t += q̃_t ⊙ dq̃_t − k̃_t ⊙ dk̃_t, dγ_C += Σ_t k̃_t ⊙ dk̃_t + e^{γ_C} Σ_v dS ⊙ S₀; per
        // channel one term at a time, as the CPU adds them.
        for (int e = tid; e < L * GK; e += nt) {
            const int t = e / GK, i0 = e % GK;
            if (GATE == 2) {
                dgam_s[e] += q_s[e] * expf(gm(t, i0)) * s_dqt[e];
                dgam_s[e] -= k_s[e] * kdecay(t, i0) * s_dkt[e];
            } else {
                float acc = 0.0f;
                for (int i = 0; i < K; ++i) {
                    const float qt = q_s[t * K + i] * expf(gm(t, i));
                    const float kt = k_s[t * K + i] * kdecay(t, i);
                    acc += qt * s_dqt[t * K + i] - kt * s_dkt[t * K + i];
                }
                dgam_s[e] += acc;
            }
        }
        for (int i0 = tid; i0 < GK; i0 += nt) {
            float acc = 0.0f;
            for (int i = (GATE == 2 ? i0 : 0); i < (GATE == 2 ? i0 + 1 : K); ++i) {
                float kk = 0.0f, ss = 0.0f;
                for (int t = 0; t < L; ++t)
                    kk += k_s[t * K + i] * kdecay(t, i) * s_dkt[t * K + i];
                for (int j = 0; j < V; ++j) ss += dS[i * V + j] * S0[i * V + j];
                acc += kk + expf(gm(L - 1, i)) * ss;
            }
            dend_s[i0] += acc;
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
                for (int j = 0; j < V; ++j) from_u += dD[t * V + j] * (bs * v_at(s, j));
                for (int i = 0; i < K; ++i) from_w += s_dW[t * K + i] * (expf(gm(s, i)) * bk_s[s * K + i]);
            }
            dT_s[e] = from_u + from_w;
        }
        // dR̃ = Tᵀ dW, and dv = β ⊙ (Tᵀ dΔ), both on T's lower triangle.
        for (int e = tid; e < L * K; e += nt) {
            const int t = e / K, i = e % K;
            float acc = 0.0f;
            for (int s = t; s < L; ++s) acc += T_s[s * kChunk + t] * s_dW[s * K + i];
            s_drt[e] = acc;
        }
        for (int e = tid; e < L * V; e += nt) {
            const int t = e / V, j = e % V;
            float acc = 0.0f;
            for (int s = t; s < L; ++s) acc += T_s[s * kChunk + t] * dD[s * V + j];
            dv[(size_t(c.row0 + t) * d.HV + hv) * V + j] = from_float<TI>(beta_at(t) * acc);
        }
        __syncthreads();
        // dA = −Tᵀ dT Tᵀ on the strictly lower triangle: X = dT Tᵀ, then −Tᵀ X.
        for (int e = tid; e < kChunk * kChunk; e += nt) {
            const int r = e / kChunk, j = e % kChunk;
            float acc = 0.0f;
            for (int b = 0; b <= j; ++b) acc += dT_s[r * kChunk + b] * T_s[j * kChunk + b];
            dM_s[e] = acc;
        }
        __syncthreads();
        for (int e = tid; e < kChunk * kChunk; e += nt) {
            const int t = e / kChunk, j = e % kChunk;
            float acc = 0.0f;
            if (t < L && j < t)
                for (int r = t; r < L; ++r) acc += T_s[r * kChunk + t] * dM_s[r * kChunk + j];
            dT_s[e] = j < t && t < L ? -acc : 0.0f;
        }
        __syncthreads();
        // Through A (rows b ⊙ k): dbk_A into s_dqt, dk_A into s_dkt.
        gated_scores_backward<GATE>(dT_s, bk_s, k_s, g_s, F_s, L, K, true, s_dqt, s_dkt, dgam_s, s_xa, s_ea);
        for (int e = tid; e < L * K; e += nt) {
            const int t = e / K, i = e % K;
            const float et = expf(gm(t, i));
            const float dbk = s_dqt[e] + et * s_drt[e];
            s_dqt[e] = dbk;
            s_dk[e] += s_dkt[e];
            s_dk[e] += beta_at(t) * dbk;
        }
        if (GATE != 0)
            for (int e = tid; e < L * GK; e += nt) {
                const int t = e / GK, i0 = e % GK;
                float acc = 0.0f;
                for (int i = (GATE == 2 ? i0 : 0); i < (GATE == 2 ? i0 + 1 : K); ++i)
                    acc += expf(gm(t, i)) * bk_s[t * K + i] * s_drt[t * K + i];
                dgam_s[e] += acc;
            }
        __syncthreads();
        // dβ = ⟨v, Tᵀ dΔ⟩ + ⟨k, dbk⟩.
        TI* dbeta = static_cast<TI*>(a.dbeta);
        for (int t = tid; t < L; t += nt) {
            float acc = 0.0f;
            for (int j = 0; j < V; ++j) {
                float dvt = 0.0f;
                for (int s = t; s < L; ++s) dvt += T_s[s * kChunk + t] * dD[s * V + j];
                acc += v_at(t, j) * dvt;
            }
            for (int i = 0; i < K; ++i) acc += k_s[t * K + i] * s_dqt[t * K + i];
            dbeta[size_t(c.row0 + t) * d.HV + hv] = from_float<TI>(acc);
        }
    } else {
        for (int e = tid; e < L * V; e += nt) {
            const int t = e / V, j = e % V;
            dv[(size_t(c.row0 + t) * d.HV + hv) * V + j] = from_float<TI>(dD[t * V + j]);
        }
    }
    __syncthreads();

    // g enters only through γ: dg is the reverse cumulative sum of dγ within the chunk.
    if (GATE != 0) {
        for (int i = tid; i < GK; i += nt) {
            float run = dend_s[i];
            for (int t = L - 1; t >= 0; --t) {
                run += dgam_s[t * GK + i];
                a.dg[(size_t(c.row0 + t) * d.HV + hv) * GK + i] = run;
            }
        }
    }
    for (int e = tid; e < L * K; e += nt) {
        const int t = e / K, i = e % K;
        w.dq_heads[(size_t(c.row0 + t) * d.HV + hv) * K + i] = s_dq[e];
        w.dk_heads[(size_t(c.row0 + t) * d.HV + hv) * K + i] = s_dk[e];
    }
}

inline size_t grad_smem_bytes(int K, int gate) {
    const int GK = gate == 2 ? K : 1;
    return sizeof(float) *
           (3 * size_t(kChunk) * K + 2 * size_t(kChunk) * GK + GK + (gate == 1 ? 4 : 3) * kChunk * kChunk);
}

// dq, dk of query/key head h: the sum over its value heads h·G .. h·G + G − 1, in that order.
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
