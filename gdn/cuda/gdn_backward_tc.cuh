// Chunked backward of the gated linear recurrence on sm_90a, version 2: chunk_grad of version 1
// (gdn_backward.cuh) with its matrix products on tensor cores and its serial reductions spread
// over the block.
//
// Build (through gdn_api.cu, which holds the launches):
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c gdn/cuda/gdn_api.cu
//
// Same algebra, workspace and outputs as version 1, which stays the reference beside it (and the
// path of float32 inputs). On tensor cores (gdn_mma.cuh: mma.sync m16n8k8 TF32, float32 operands
// split 3xTF32, raw 16-bit inputs used as exact single TF32 operands): the products over V with
// the states and Δ (dQ̃, dK̃, dW, dP), the intra-chunk score gradients for the gates without a
// per-channel factor, dT = dΔ Ṽᵀ + dW R̃ᵀ, Tᵀ dW, Tᵀ dΔ and dA = −Tᵀ (dT Tᵀ). The gradient of
// γ_C (one thread per gate channel in version 1, a 24 000-step serial loop for a scalar gate) is
// summed per channel in parallel and then over channels in the same order as version 1; dβ reads
// Tᵀ dΔ from the workspace instead of recomputing it on one thread per token. Still scalar: the
// per-channel (KDA, GLA) score gradients, the element-wise terms. The reverse scan is version 1's.
// Limits as version 1: K, V <= 128.
#pragma once

#include "gdn_backward.cuh"
#include "gdn_mma.cuh"

namespace kcv::gdn::cuda {

template <int GATE, bool DELTA, class TI>
__global__ void __launch_bounds__(kThreads, 1) chunk_grad_tc(Dims d, Workspace w, BackwardArgs a) {
    ChunkPos c;
    if (!locate_chunk(d, blockIdx.x, c)) return;
    const int hv = blockIdx.y, h = hv / d.group, K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int L = c.L, GK = GATE == 2 ? K : 1;
    constexpr bool EX = exact_in_tf32<TI>;
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
    float* dT_s = dM_s + kChunk * kChunk;  // C×C  per-channel terms of dγ_C, then dT, then dA
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
    float* s_xa = w.scratch + (sh * kScratch + 6) * kChunk * K;    // anchored x (per-channel gate), then R̃
    float* s_ea = w.scratch + (sh * kScratch + 7) * kChunk * K;    // anchor factors (per-channel gate)
    // Tᵀ dΔ for dβ, in U's slot: the backward never reads U (only the forward's scan does).
    float* s_dvt = w.U + sh * kChunk * V;
    const float* S0 = w.states + sh * K * V;
    const float* dS = w.dstates + sh * K * V;
    const float* D = w.delta + sh * kChunk * V;
    const float* dD = w.ddelta + sh * kChunk * V;
    const TI* dO = static_cast<const TI*>(a.d_o);
    const TI* v = static_cast<const TI*>(a.fwd.v);
    const TI* beta = static_cast<const TI*>(a.fwd.beta);
    auto beta_at = [&](int t) { return DELTA ? to_float(beta[size_t(c.row0 + t) * d.HV + hv]) : 0.0f; };
    auto dO_at = [&](int t, int j) { return t < L ? to_float(dO[(size_t(c.row0 + t) * d.HV + hv) * V + j]) : 0.0f; };
    auto v_at = [&](int t, int j) { return to_float(v[(size_t(c.row0 + t) * d.HV + hv) * V + j]); };
    // Δ and dΔ exist (are written by the scans) only for rows < L.
    auto D_at = [&](int t, int j) { return t < L ? D[t * V + j] : 0.0f; };
    auto dD_at = [&](int t, int j) { return t < L ? dD[t * V + j] : 0.0f; };
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

    // Products over V with the states and Δ: dQ̃ = scale·dO S₀ᵀ, dK̃ = Δ dSᵀ, dW = −dΔ S₀ᵀ, and
    // dP = scale·tril(dO Δᵀ).
    block_mma<4, EX, false>(
        kChunk, K, V, dO_at, [&](int j, int i) { return S0[i * V + j]; },
        [&](int t, int i, float acc) { s_dqt[t * K + i] = scale * acc; });
    block_mma<4, false, false>(
        kChunk, K, V, D_at, [&](int j, int i) { return dS[i * V + j]; },
        [&](int t, int i, float acc) { s_dkt[t * K + i] = acc; });
    if (DELTA)
        block_mma<4, false, false>(
            kChunk, K, V, dD_at, [&](int j, int i) { return S0[i * V + j]; },
            [&](int t, int i, float acc) { s_dW[t * K + i] = -acc; });
    block_mma<4, EX, false>(
        kChunk, kChunk, V, dO_at, [&](int j, int s) { return D_at(s, j); },
        [&](int t, int s, float acc) { dM_s[t * kChunk + s] = t < L && s <= t ? scale * acc : 0.0f; });
    __syncthreads();
    // Through tril(P) and through Q ⊙ e^γ, K ⊙ e^{γ_C − γ}, Λ_C S₀.
    if (GATE == 1) scalar_gate_factors(g_s, L, F_s);
    if constexpr (GATE == 2)
        gated_scores_backward<GATE>(dM_s, q_s, k_s, g_s, F_s, L, K, false, s_dq, s_dk, dgam_s, s_xa, s_ea);
    else
        gated_scores_backward_tc<GATE, EX, EX>(dM_s, q_s, k_s, F_s, L, K, false, s_dq, s_dk, dgam_s);
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
                const float et = expf(gm(t, 0)), kd = kdecay(t, 0);
                float acc = 0.0f;
                for (int i = 0; i < K; ++i) {
                    const float qt = q_s[t * K + i] * et;
                    const float kt = k_s[t * K + i] * kd;
                    acc += qt * s_dqt[t * K + i] - kt * s_dkt[t * K + i];
                }
                dgam_s[e] += acc;
            }
        }
        // The term of channel i, one thread each, into dT_s (free until dT); a scalar gate then
        // sums them over i in increasing order, as version 1's single thread did.
        for (int i = tid; i < K; i += nt) {
            float kk = 0.0f, ss = 0.0f;
            for (int t = 0; t < L; ++t) kk += k_s[t * K + i] * kdecay(t, i) * s_dkt[t * K + i];
            for (int j = 0; j < V; ++j) ss += dS[i * V + j] * S0[i * V + j];
            dT_s[i] = kk + expf(gm(L - 1, i)) * ss;
        }
        __syncthreads();
        if (GATE == 2) {
            for (int i = tid; i < K; i += nt) dend_s[i] += dT_s[i];
        } else if (tid == 0) {
            float acc = 0.0f;
            for (int i = 0; i < K; ++i) acc += dT_s[i];
            dend_s[0] += acc;
        }
    }
    __syncthreads();

    TI* dv = static_cast<TI*>(a.dv);
    if (DELTA) {
        // R̃ = e^γ ⊙ β ⊙ K into s_xa (free between the two score gradients).
        for (int e = tid; e < kChunk * K; e += nt) s_xa[e] = e / K < L ? expf(gm(e / K, e % K)) * bk_s[e] : 0.0f;
        __syncthreads();
        // dT = dΔ Ṽᵀ + dW R̃ᵀ with Ṽ = β ⊙ V: the first product over raw V, β applied after it.
        block_mma<4, false, EX>(
            kChunk, kChunk, V, dD_at, [&](int j, int s) { return s < L ? v_at(s, j) : 0.0f; },
            [&](int t, int s, float acc) { dT_s[t * kChunk + s] = t < L && s < L ? beta_at(s) * acc : 0.0f; });
        __syncthreads();
        block_mma<4, false, false>(
            kChunk, kChunk, K, [&](int t, int i) { return t < L ? s_dW[t * K + i] : 0.0f; },
            [&](int i, int s) { return s_xa[s * K + i]; },
            [&](int t, int s, float acc) {
                if (t < L && s < L) dT_s[t * kChunk + s] += acc;
            });
        // dR̃ = Tᵀ dW and Tᵀ dΔ (dv = β ⊙ Tᵀ dΔ), both on T's lower triangle.
        auto Tt_at = [&](int t, int s) { return t < L && s >= t && s < L ? T_s[s * kChunk + t] : 0.0f; };
        block_mma<4, false, false>(
            kChunk, K, kChunk, Tt_at, [&](int s, int i) { return s_dW[s * K + i]; },
            [&](int t, int i, float acc) { s_drt[t * K + i] = acc; });
        block_mma<4, false, false>(
            L, V, kChunk, Tt_at, dD_at, [&](int t, int j, float acc) {
                s_dvt[t * V + j] = acc;
                dv[(size_t(c.row0 + t) * d.HV + hv) * V + j] = from_float<TI>(beta_at(t) * acc);
            });
        __syncthreads();
        // dA = −Tᵀ dT Tᵀ on the strictly lower triangle: X = dT Tᵀ, then −Tᵀ X.
        block_mma<4, false, false>(
            kChunk, kChunk, kChunk, [&](int r, int b) { return dT_s[r * kChunk + b]; },
            [&](int b, int j) { return b <= j ? T_s[j * kChunk + b] : 0.0f; },
            [&](int r, int j, float acc) { dM_s[r * kChunk + j] = acc; });
        __syncthreads();
        block_mma<4, false, false>(
            kChunk, kChunk, kChunk, Tt_at, [&](int r, int j) { return dM_s[r * kChunk + j]; },
            [&](int t, int j, float acc) { dT_s[t * kChunk + j] = j < t && t < L ? -acc : 0.0f; });
        __syncthreads();
        // Through A (rows b ⊙ k): dbk_A into s_dqt, dk_A into s_dkt.
        if constexpr (GATE == 2)
            gated_scores_backward<GATE>(dT_s, bk_s, k_s, g_s, F_s, L, K, true, s_dqt, s_dkt, dgam_s, s_xa, s_ea);
        else
            gated_scores_backward_tc<GATE, false, EX>(dT_s, bk_s, k_s, F_s, L, K, true, s_dqt, s_dkt, dgam_s);
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
            for (int j = 0; j < V; ++j) acc += v_at(t, j) * s_dvt[t * V + j];
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

}  // namespace kcv::gdn::cuda
