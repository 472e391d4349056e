// Chunked forward of the gated linear recurrence on sm_90a, reference version (version 1).
//
// Build (through gdn_api.cu, which holds the launches):
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c gdn/cuda/gdn_api.cu
//
// Computes, per (sequence, value head) and chunk of C = 64 tokens (gdn/cpu/gdn_chunked.hpp has
// the algebra): γ, tril(P), and for the delta members A, T = (I + A)⁻¹, W = T Λ(b ⊙ K),
// U = T (w ⊙ V) [prepare_chunks, one block per chunk and value head, all chunks in parallel];
// the state scan S_next = Λ_C S + (K ⊙ e^{γ_C − γ})ᵀ Δ with Δ = U − W S, sequential over the
// chunks of a sequence and parallel over 16-column slices of V [state_scan]; and the outputs
// O = scale·[(Q ⊙ e^γ) S + tril(P) Δ] [chunk_output, all chunks in parallel].
// Layout: gdn_cuda.h; with cu_seqlens (B = 1) sequence n is tokens [cu[n], cu[n+1]), its chunks
// never straddle a boundary, and each block finds its chunk on the device (locate_chunk).
// Precision as gdn/cpu/gdn_chunked.cpp: log decays summed with Kahan's compensation, every
// exponent γ_t − γ_j a sum over its own range of g, and the decay of a value carried out of the
// chunk applied last and by halves (docs/gdn.md says why each is needed).
// Limits: K, V <= 128. Every element is one thread's sequential float32 sum in a fixed order, so
// results are bitwise reproducible; no atomics. Scalar FMA tiles; gdn_forward_tc.cuh is version 2
// on tensor cores.
#pragma once

#include "gdn_common.cuh"

namespace kcv::gdn::cuda {

struct ForwardArgs {
    const void* q;
    const void* k;
    const void* v;
    const float* g;
    const void* beta;
    const float* h0;
    void* o;
    float* ht;
};

__global__ void chunk_offsets_kernel(const int64_t* cu, int N, int* offsets) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    int acc = 0;
    offsets[0] = 0;
    for (int n = 0; n < N; ++n) {
        const int len = static_cast<int>(cu[n + 1] - cu[n]);
        acc += (len + kChunk - 1) / kChunk;
        offsets[n + 1] = acc;
    }
}

// The log decays of one chunk into g_s (C×GK, zero past L), then a barrier (for every gate kind,
// so that tiles loaded before it are complete too).
template <int GATE>
__device__ void load_gate(const float* g, const ChunkPos& c, int HV, int hv, int K, float* g_s) {
    const int GK = GATE == 2 ? K : 1;
    if (GATE != 0)
        for (int e = threadIdx.x; e < kChunk * GK; e += blockDim.x) {
            const int t = e / GK, i = e % GK;
            g_s[e] = t < c.L ? g[(size_t(c.row0 + t) * HV + hv) * GK + i] : 0.0f;
        }
    __syncthreads();
}

template <int GATE>
__device__ __forceinline__ float gamma_at(const float* gam, int t, int i, int K) {
    if (GATE == 0) return 0.0f;
    if (GATE == 1) return gam[t];
    return gam[t * K + i];
}

// e^{γ} of token t, channel i (1 without a gate). A scalar gate's comes from per_token, its e^{γ_t}
// taken once per token by the caller (the same floats); per_token is read only for a scalar gate.
// Decided at compile time: a test of the pointer in the element-wise passes kept the float64
// exponential's code beside every table read, and cost SSD's backward 2% and Gated DeltaNet's 1%.
template <int GATE>
__device__ __forceinline__ float exp_gamma(const float* per_token, const float* gam, int t, int i, int K) {
    if constexpr (GATE == 1) return per_token[t];
    else return exp_rn(gamma_at<GATE>(gam, t, i, K));
}

// e^{γ_C − γ_t} of channel i (to_end: the chunk's C×GK factors; 1 without a gate).
template <int GATE>
__device__ __forceinline__ float to_end_at(const float* to_end, int t, int i, int K) {
    if (GATE == 0) return 1.0f;
    if (GATE == 1) return to_end[t];
    return to_end[t * K + i];
}

// e^{γ_C / 2} per channel into dec (K): the decay of the state carried across the chunk, applied
// by halves.
template <int GATE>
__device__ __forceinline__ void half_chunk_decay(ScanStep st, int K, float* dec) {
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int i = tid; i < K; i += nt) dec[i] = exp_rn(0.5f * gamma_at<GATE>(st.gam, st.L - 1, i, K));
}

// Per chunk and value head: γ (Kahan prefix sums) and e^{γ_C − γ_t} (range sums) into the
// workspace, tril(P), and for the delta members A (rows β ⊙ k), T = (I + A)⁻¹, W and U.
template <int GATE, bool DELTA, class TI>
__global__ void __launch_bounds__(kThreads) prepare_chunks(Dims d, Workspace w, ForwardArgs a) {
    ChunkPos c;
    if (!locate_chunk(d, blockIdx.x, c)) return;
    const int hv = blockIdx.y, h = hv / d.group, K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int GK = GATE == 2 ? K : 1;
    float* const smem = shared_floats();
    float* q_s = smem;                        // C×K: Q, then β ⊙ K (delta)
    float* k_s = q_s + kChunk * K;            // C×K
    float* g_s = k_s + kChunk * K;            // C×GK log decays
    float* gam_s = g_s + kChunk * GK;         // C×GK
    float* xa_s = gam_s + kChunk * GK;        // C×K (per-channel gate)
    float* ka_s = xa_s + kChunk * K;          // C×K (per-channel gate)
    float* A_s = ka_s + kChunk * K;           // C×C
    float* T_s = A_s + kChunk * kChunk;       // C×C
    const size_t sh = size_t(c.slot) * d.HV + hv;

    load_tile(static_cast<const TI*>(a.q), c.row0, c.L, d.H, h, K, q_s);
    load_tile(static_cast<const TI*>(a.k), c.row0, c.L, d.H, h, K, k_s);
    load_gate<GATE>(a.g, c, d.HV, hv, K, g_s);
    if (GATE != 0) {
        for (int i = tid; i < GK; i += nt) {
            KahanSum run;
            for (int t = 0; t < kChunk; ++t) {
                if (t < c.L) run.add(g_s[t * GK + i]);
                gam_s[t * GK + i] = t < c.L ? run.sum : 0.0f;
            }
        }
        for (int e = tid; e < kChunk * GK; e += nt) {
            const int t = e / GK, i = e % GK;
            w.to_end[sh * kChunk * GK + e] = t < c.L ? exp_rn(log_decay_between(g_s, GK, t, c.L - 1, i)) : 0.0f;
        }
        __syncthreads();
        for (int e = tid; e < kChunk * GK; e += nt) w.gamma[sh * kChunk * GK + e] = gam_s[e];
    }
    gated_scores<GATE>(q_s, k_s, g_s, c.L, K, false, w.P + sh * kChunk * kChunk, xa_s, ka_s);
    if (!DELTA) return;

    const TI* beta = static_cast<const TI*>(a.beta);
    auto beta_at = [&](int t) { return to_float(beta[size_t(c.row0 + t) * d.HV + hv]); };
    // A_tj = ((β_t k_t), k_j gated), strictly lower: β enters the row operand before the sum, as
    // on the CPU.
    float* bk_s = q_s;
    for (int e = tid; e < kChunk * K; e += nt) bk_s[e] = e / K < c.L ? beta_at(e / K) * k_s[e] : 0.0f;
    __syncthreads();
    gated_scores<GATE>(bk_s, k_s, g_s, c.L, K, true, A_s, xa_s, ka_s);
    // T = (I + A)⁻¹ by forward substitution: row t of T is e_t − Σ_{j<t} A_tj T_j.
    for (int e = tid; e < kChunk * kChunk; e += nt) T_s[e] = 0.0f;
    __syncthreads();
    for (int t = 0; t < c.L; ++t) {
        for (int col = tid; col <= t; col += nt) {
            float acc = 0.0f;
            for (int j = col; j < t; ++j) acc += A_s[t * kChunk + j] * T_s[j * kChunk + col];
            T_s[t * kChunk + col] = col == t ? 1.0f : -acc;
        }
        __syncthreads();
    }
    for (int e = tid; e < kChunk * kChunk; e += nt) w.Tm[sh * kChunk * kChunk + e] = T_s[e];
    // W = T Λ(β ⊙ K) and U = T (β ⊙ V), reading T only on its lower triangle.
    for (int e = tid; e < kChunk * K; e += nt) {
        const int t = e / K, i = e % K;
        float acc = 0.0f;
        for (int j = 0; j <= t && t < c.L; ++j)
            acc += T_s[t * kChunk + j] * (exp_rn(gamma_at<GATE>(gam_s, j, i, K)) * bk_s[j * K + i]);
        w.W[sh * kChunk * K + e] = acc;
    }
    const TI* v = static_cast<const TI*>(a.v);
    for (int e = tid; e < kChunk * V; e += nt) {
        const int t = e / V, j = e % V;
        float acc = 0.0f;
        for (int s = 0; s <= t && t < c.L; ++s)
            acc += T_s[t * kChunk + s] * (beta_at(s) * to_float(v[(size_t(c.row0 + s) * d.HV + hv) * V + j]));
        w.U[sh * kChunk * V + e] = acc;
    }
}

inline size_t prepare_smem_bytes(int K, int gate) {
    const int GK = gate == 2 ? K : 1;
    return sizeof(float) * (size_t(kChunk) * K * 4 + 2 * size_t(kChunk) * GK + 2 * kChunk * kChunk);
}

// The state scan over the chunks of one sequence, for one value head and a slice of 16 value
// columns (the recurrence acts on value columns independently).
template <int GATE, bool DELTA, class TI>
__global__ void __launch_bounds__(kThreads) state_scan(Dims d, Workspace w, ForwardArgs a) {
    const int n = blockIdx.x, hv = blockIdx.y, v0 = blockIdx.z * kScanCols, h = hv / d.group;
    const int K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int VS = min(kScanCols, V - v0), GK = GATE == 2 ? K : 1;
    float* const smem = shared_floats();
    float* S_s = smem;                       // K×16
    float* W_s = S_s + K * kScanCols;        // C×K
    float* kt_s = W_s + kChunk * K;          // C×K
    float* D_s = kt_s + kChunk * K;          // C×16
    float* dec_s = D_s + kChunk * kScanCols; // K: e^{γ_C / 2}
    const SequenceExtent seq = sequence_extent(d, n);
    const StateSlice S{S_s, kScanCols, K, V, v0, VS, d.HV, hv};
    S.load(a.h0, n);
    const TI* k = static_cast<const TI*>(a.k);
    const TI* v = static_cast<const TI*>(a.v);
    for (int jc = 0; jc < seq.chunks; ++jc) {
        const ScanStep st = scan_step(seq, jc, w, d.HV, hv, GK);
        const int r0 = st.r0, L = st.L;
        const size_t sh = st.sh;
        S.store(w.states, st.slot);
        for (int e = tid; e < kChunk * K; e += nt) {
            const int t = e / K, i = e % K;
            kt_s[e] = t < L ? to_float(k[(size_t(r0 + t) * d.H + h) * K + i]) * to_end_at<GATE>(st.to_end, t, i, K)
                            : 0.0f;
            if (DELTA) W_s[e] = w.W[sh * kChunk * K + e];
        }
        half_chunk_decay<GATE>(st, K, dec_s);
        __syncthreads();
        // Δ = U − W S (delta members) or V.
        for (int e = tid; e < L * VS; e += nt) {
            const int t = e / VS, col = e % VS;
            float out;
            if (DELTA) {
                float acc = 0.0f;
                for (int i = 0; i < K; ++i) acc += W_s[t * K + i] * S_s[i * kScanCols + col];
                out = w.U[(sh * kChunk + t) * V + v0 + col] - acc;
            } else {
                out = to_float(v[(size_t(r0 + t) * d.HV + hv) * V + v0 + col]);
            }
            D_s[t * kScanCols + col] = out;
            w.delta[(sh * kChunk + t) * V + v0 + col] = out;
        }
        __syncthreads();
        for (int e = tid; e < K * VS; e += nt) {
            const int i = e / VS, col = e % VS;
            float acc = 0.0f;
            for (int t = 0; t < L; ++t) acc += kt_s[t * K + i] * D_s[t * kScanCols + col];
            S_s[i * kScanCols + col] = decayed(S_s[i * kScanCols + col], dec_s[i]) + acc;
        }
        __syncthreads();
    }
    if (a.ht) S.store(a.ht, n);
}

inline size_t scan_smem_bytes(int K) {
    return sizeof(float) * (size_t(K) * kScanCols + 2 * size_t(kChunk) * K + kChunk * kScanCols + K);
}

template <int GATE, class TI>
__global__ void __launch_bounds__(kThreads) chunk_output(Dims d, Workspace w, ForwardArgs a) {
    ChunkPos c;
    if (!locate_chunk(d, blockIdx.x, c)) return;
    const int hv = blockIdx.y, h = hv / d.group, K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int GK = GATE == 2 ? K : 1;
    float* const smem = shared_floats();
    float* qt_s = smem;                  // C×K: Q ⊙ e^γ
    float* P_s = qt_s + kChunk * K;      // C×C
    const size_t sh = size_t(c.slot) * d.HV + hv;
    const float* gam = w.gamma + sh * kChunk * GK;
    const TI* q = static_cast<const TI*>(a.q);
    for (int e = tid; e < kChunk * K; e += nt) {
        const int t = e / K, i = e % K;
        qt_s[e] = t < c.L ? to_float(q[(size_t(c.row0 + t) * d.H + h) * K + i]) * exp_rn(gamma_at<GATE>(gam, t, i, K)) : 0.0f;
    }
    for (int e = tid; e < kChunk * kChunk; e += nt) P_s[e] = w.P[sh * kChunk * kChunk + e];
    __syncthreads();
    const float* S0 = w.states + sh * K * V;
    const float* D = w.delta + sh * kChunk * V;
    TI* o = static_cast<TI*>(a.o);
    for (int e = tid; e < c.L * V; e += nt) {
        const int t = e / V, j = e % V;
        float inter = 0.0f, intra = 0.0f;
        for (int i = 0; i < K; ++i) inter += qt_s[t * K + i] * S0[i * V + j];
        for (int s = 0; s <= t; ++s) intra += P_s[t * kChunk + s] * D[s * V + j];
        o[(size_t(c.row0 + t) * d.HV + hv) * V + j] = from_float<TI>(d.scale * (inter + intra));
    }
}

inline size_t output_smem_bytes(int K) { return sizeof(float) * (size_t(kChunk) * K + kChunk * kChunk); }

}  // namespace kcv::gdn::cuda
