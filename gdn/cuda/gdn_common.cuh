// Shared pieces of the CUDA recurrence kernels: element conversion, where a chunk lives, the
// workspace layout, and the block-level gated score matrix with sub-chunk anchoring.
//
// The kernels of version 1 are the reference ("clear") version of the chunked algorithm: one
// thread computes one element with a sequential float32 sum in a fixed order, operands staged in
// shared memory. It mirrors gdn/cpu/gdn_chunked.cpp step by step, so the CPU code reads as its
// specification. Version 2 (gdn_forward_tc.cuh, gdn_backward_tc.cuh) reuses these pieces and
// moves the matrix products to tensor cores (gdn_mma.cuh).
#pragma once

#if defined(KCV_GDN_HOST_EMULATION)
#include "host_emulation.hpp"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "gdn_cuda.h"

namespace kcv::gdn::cuda {

constexpr int kChunk = 64;      // C
constexpr int kSub = 16;        // sub-chunk of the per-channel anchoring
constexpr int kMaxDim = 128;    // K, V limit of the shared-memory tiles
constexpr int kScanCols = 16;   // value columns per block of version 1's state scans
constexpr int kThreads = 256;
// Row tiles of 16 a warp takes in a block_mma whose tile grid has warps to spare at kThreads: two
// there, one in a block of twice the width (the 512-thread kernels), so that each of its warps has
// a tile of its own. The same bits either way (block_mma sums every element alike whatever MT).
__host__ __device__ constexpr int row_tiles_for(int threads) { return threads > kThreads ? 1 : 2; }
// The kernels that hold one block an SM (their shared memory) run twice kThreads a block, twice the
// warps to hide their waits, at 128 registers a thread: chunk_grad_tc on mma.sync (kGradThreads),
// the forward scan at 128 columns (kScanThreads) and a per-channel gate's chunk preparation
// (kPrepareThreads). Each macro at 256 builds that kernel as before, with the same bits.
#if !defined(KCV_GDN_GRAD_THREADS)
#define KCV_GDN_GRAD_THREADS 512
#endif
#if !defined(KCV_GDN_SCAN_THREADS)
#define KCV_GDN_SCAN_THREADS 512
#endif
#if !defined(KCV_GDN_PREPARE_THREADS)
#define KCV_GDN_PREPARE_THREADS 512
#endif
constexpr int kGradThreads = KCV_GDN_GRAD_THREADS, kScanThreads = KCV_GDN_SCAN_THREADS;
constexpr int kPrepareThreads = KCV_GDN_PREPARE_THREADS;
constexpr bool is_block_width(int threads) { return threads == kThreads || threads == 2 * kThreads; }
static_assert(is_block_width(kGradThreads) && is_block_width(kScanThreads) && is_block_width(kPrepareThreads),
              "KCV_GDN_{GRAD,SCAN,PREPARE}_THREADS are 256 or 512");
constexpr size_t kMaxSmemBytes = 227 * 1024;   // dynamic shared memory a Hopper block may have

// The block's dynamic shared memory, as float32.
#if defined(KCV_GDN_HOST_EMULATION)
inline float* shared_floats() { return emulation::shared_memory; }
#else
__device__ __forceinline__ float* shared_floats() {
    extern __shared__ float dynamic_shared[];
    return dynamic_shared;
}
#endif

// e^x in float32 as the float64 exponential rounded to float32: correctly rounded but for rare
// double roundings, and the CPU implementation's function too (gdn/cpu/gdn_chunked.cpp), where
// CUDA's expf may be 2 ulp off. ORD-03 holds the kernels' error to that implementation's; every
// decay factor of the recurrence goes through here.
__device__ __forceinline__ float exp_rn(float x) { return static_cast<float>(::exp(static_cast<double>(x))); }

template <class T> __device__ __forceinline__ float to_float(T x);
template <> __device__ __forceinline__ float to_float<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }

template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// Sizes every kernel needs, from kcv_gdn_params.
struct Dims {
    int B, T, H, HV, K, V, N, group;
    int chunks_per_seq;    // batched layout: ceil(T / C)
    int slots;             // bound on the number of chunks (grid size)
    const int64_t* cu;     // varlen offsets or null
    const int* chunk_offsets;   // varlen: first chunk slot of each sequence, N + 1 entries
    float scale;
    // The version 2 scans split each sequence into segments of seg_chunks chunks (0: scanned
    // whole), at most `segments` per sequence (1 when whole); gdn_launch.cuh, split_scans.
    int seg_chunks, segments;
};

// d with K = V = KV when KV > 0. The launches take that instantiation of a version 2 kernel when
// both head sizes equal KV (gdn_launch.cuh), so every loop bound, index product and edge test
// that depends on K or V is a constant the compiler folds, and the products' loops unroll. Only
// integer work changes: the same float operations run in the same order (no contraction,
// -fmad=false), so the results are the same bits as with the sizes read at run time.
template <int KV>
__device__ __forceinline__ Dims with_head_size(Dims d) {
    if constexpr (KV > 0) d.K = d.V = KV;
    return d;
}

// One chunk of one sequence: tokens [row0, row0 + L) of the flattened B·T token axis.
struct ChunkPos {
    int n;        // sequence
    int j;        // chunk within the sequence
    int row0;     // first token row
    int L;        // tokens in the chunk
    int slot;     // workspace slot
    bool last;    // the sequence's last chunk
};

__device__ __forceinline__ bool locate_chunk(const Dims& d, int slot, ChunkPos& c) {
    if (d.cu == nullptr) {
        c.n = slot / d.chunks_per_seq;
        c.j = slot % d.chunks_per_seq;
        if (c.n >= d.B) return false;
        c.row0 = c.n * d.T + c.j * kChunk;
        c.L = min(kChunk, d.T - c.j * kChunk);
        c.last = c.j == d.chunks_per_seq - 1;
    } else {
        if (slot >= d.chunk_offsets[d.N]) return false;
        int lo = 0, hi = d.N - 1;   // the last n with chunk_offsets[n] <= slot
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (d.chunk_offsets[mid] <= slot) lo = mid;
            else hi = mid - 1;
        }
        c.n = lo;
        c.j = slot - d.chunk_offsets[lo];
        const int start = static_cast<int>(d.cu[lo]), end = static_cast<int>(d.cu[lo + 1]);
        c.row0 = start + c.j * kChunk;
        c.L = min(kChunk, end - c.row0);
        c.last = c.j == d.chunk_offsets[lo + 1] - d.chunk_offsets[lo] - 1;
    }
    c.slot = slot;
    return true;
}

// Tokens and chunk slots of one sequence.
struct SequenceExtent {
    int row0, length, first_slot, chunks;
};

__device__ __forceinline__ SequenceExtent sequence_extent(const Dims& d, int n) {
    SequenceExtent s;
    if (d.cu == nullptr) {
        s.row0 = n * d.T;
        s.length = d.T;
        s.first_slot = n * d.chunks_per_seq;
        s.chunks = d.chunks_per_seq;
    } else {
        s.row0 = static_cast<int>(d.cu[n]);
        s.length = static_cast<int>(d.cu[n + 1] - d.cu[n]);
        s.first_slot = d.chunk_offsets[n];
        s.chunks = d.chunk_offsets[n + 1] - d.chunk_offsets[n];
    }
    return s;
}

// The chunks [first, end) that a split scan's block steps through (Dims::seg_chunks > 0): segment
// s of the sequence seq, every sequence having max(1, ceil(chunks / seg_chunks)) segments, so that
// an empty sequence still has one (it carries h0 to ht). Unsplit: the whole sequence, for s = 0.
// False for a segment past the sequence's last.
struct SegmentRange {
    int first, end;
    bool last;   // the sequence's last segment
};

// The segments of a sequence of chunks chunks in a split scan (d.seg_chunks > 0).
__host__ __device__ __forceinline__ int segment_count(const Dims& d, int chunks) {
    return chunks == 0 ? 1 : (chunks + d.seg_chunks - 1) / d.seg_chunks;
}

__device__ __forceinline__ bool segment_range(const Dims& d, const SequenceExtent& seq, int s, SegmentRange& r) {
    if (d.seg_chunks == 0) {
        r = {0, seq.chunks, true};
        return s == 0;
    }
    const int count = segment_count(d, seq.chunks);
    r.first = s * d.seg_chunks;
    r.end = min(seq.chunks, r.first + d.seg_chunks);
    r.last = s == count - 1;
    return s < count;
}

// A float32 running sum with Kahan's compensation, as in gdn/cpu/gdn_chunked.cpp. Log decays are
// summed this way: an exponent's absolute error is the decay factor's relative error, and a
// plain running sum of 64 decays of size |γ| leaves about √64·u·|γ|.
struct KahanSum {
    float sum = 0.0f, carry = 0.0f;
    __device__ __forceinline__ void add(float x) {
        const float y = x - carry;
        const float t = sum + y;
        carry = (t - sum) - y;
        sum = t;
    }
};

// γ_t − γ_j = Σ_{j<s≤t} g_s for channel i of a C×GK tile of log decays, summed over the range
// itself (Kahan) rather than taken as a difference of prefix sums, whose rounding grows with the
// chunk's total decay; j = −1 gives the prefix γ_t bit for bit.
__device__ __forceinline__ float log_decay_between(const float* g, int GK, int j, int t, int i) {
    KahanSum acc;
    for (int s = j + 1; s <= t; ++s) acc.add(g[s * GK + i]);
    return acc.sum;
}

// x·e^γ as (x·e^{γ/2})·e^{γ/2}, given half = e^{γ/2}: a value carried out of the chunk (the
// state, dS, the terms of dh0) keeps its significant bits where e^γ alone would be subnormal or
// zero.
__device__ __forceinline__ float decayed(float x, float half) { return (x * half) * half; }

// Workspace: float32 arrays indexed by (slot, value head). GK is the gate width (K for a
// per-channel gate, 1 otherwise).
struct Workspace {
    float* gamma;     // [slots][HV][C][GK]  inclusive cumulative log decay within the chunk (Kahan)
    float* to_end;    // [slots][HV][C][GK]  e^{γ_C − γ_t}, the exponent summed over (t, C]
    float* P;         // [slots][HV][C][C]   tril(P)
    float* Tm;        // [slots][HV][C][C]   T = (I + A)⁻¹            (delta)
    float* W;         // [slots][HV][C][K]   W = T Λ(b ⊙ K)            (delta)
    float* U;         // [slots][HV][C][V]   U = T (w ⊙ V)             (delta)
    float* delta;     // [slots][HV][C][V]   Δ
    float* states;    // [slots][HV][K][V]   chunk-start states
    // backward
    float* dstates;   // [slots][HV][K][V]   gradient of the state after each chunk
    float* ddelta;    // [slots][HV][C][V]   dΔ
    float* scratch;   // [slots][HV][kScratch][C][K]
    float* dq_heads;  // [B*T][HV][K]        dq, dk per value head before the group sum (HV > H)
    float* dk_heads;
    float* dvt;       // [slots][HV][C][V]   Tᵀ dΔ for dβ (delta): U's slot, or its own where the
                      //                     preparation is kept apart (which a backward only reads)
    int* chunk_offsets;   // [N + 1]
    // The split scans (Dims::seg_chunks > 0), per segment r = n·segments + s of sequence n:
    float* seg_map;   // [N·segments][HV][K][K]  M, the segment's map of its start state to its end state
                      //                          (delta rule; without it M is diagonal, and not kept)
    float* seg_end;   // [N·segments][HV][K][V]  E, its end state from a zero start (backward: dS at its
                      //                          start from a zero gradient at its end)
    float* seg_in;    // [N·segments][HV][K][V]  its start state (backward: the gradient at its end)
};
constexpr int kScratch = 8;   // dq̃, dk̃, dW, dR̃, dq, dk, and the anchored factors (see gdn_backward.cuh)

inline size_t align_up(size_t x) { return (x + 255) & ~size_t(255); }

// The chunk preparation's arrays (γ, e^{γ_C − γ} and P; T, W and U for the delta rule), which
// prepare_chunks writes and nothing else does, laid out from `base` (null: only counts); returns
// the bytes used. A forward can write them apart from the rest of the workspace and a backward of
// the same inputs read them there instead of preparing the chunks again (kcv_gdn_params.prepared).
inline size_t layout_prepared(const Dims& d, int gate, bool delta, void* base, Workspace& w) {
    size_t off = 0;
    auto take = [&](size_t floats) {
        float* p = base ? reinterpret_cast<float*>(static_cast<char*>(base) + off) : nullptr;
        off += align_up(floats * sizeof(float));
        return p;
    };
    const size_t sh = size_t(d.slots) * d.HV;
    const size_t GK = gate == 2 ? d.K : 1;
    w.gamma = take(sh * kChunk * GK);
    w.to_end = take(sh * kChunk * GK);
    w.P = take(sh * kChunk * kChunk);
    w.Tm = delta ? take(sh * kChunk * kChunk) : nullptr;
    w.W = delta ? take(sh * kChunk * d.K) : nullptr;
    w.U = delta ? take(sh * kChunk * d.V) : nullptr;
    return off;
}

// Lays the workspace out from `base` (null: only counts); returns the bytes used. apart: the
// preparation's arrays are not in it (layout_prepared lays them out elsewhere, and leaves w's
// pointers to them as they were).
inline size_t layout_workspace(const Dims& d, bool backward, int gate, bool delta, void* base, Workspace& w,
                               bool apart = false) {
    size_t off = 0;
    if (!apart) off = layout_prepared(d, gate, delta, base, w);
    auto take = [&](size_t floats) {
        float* p = base ? reinterpret_cast<float*>(static_cast<char*>(base) + off) : nullptr;
        off += align_up(floats * sizeof(float));
        return p;
    };
    const size_t sh = size_t(d.slots) * d.HV;
    w.delta = take(sh * kChunk * d.V);
    w.states = take(sh * size_t(d.K) * d.V);
    if (backward) {
        w.dstates = take(sh * size_t(d.K) * d.V);
        w.ddelta = take(sh * kChunk * d.V);
        w.scratch = take(sh * kScratch * kChunk * d.K);
        // Only where a query/key head has several value heads (else chunk_grad writes dq, dk).
        const bool grouped = d.group > 1;
        w.dq_heads = grouped ? take(size_t(d.B) * d.T * d.HV * d.K) : nullptr;
        w.dk_heads = grouped ? take(size_t(d.B) * d.T * d.HV * d.K) : nullptr;
        w.dvt = !delta ? nullptr : apart ? take(sh * kChunk * d.V) : w.U;
    } else {
        w.dstates = w.ddelta = w.scratch = w.dq_heads = w.dk_heads = w.dvt = nullptr;
    }
    float* offsets = take(size_t(d.N) + 1);
    w.chunk_offsets = reinterpret_cast<int*>(offsets);
    if (d.seg_chunks > 0) {
        const size_t rh = size_t(d.N) * d.segments * d.HV;
        w.seg_map = delta ? take(rh * d.K * d.K) : nullptr;   // diagonal without the delta rule
        w.seg_end = take(rh * d.K * d.V);
        w.seg_in = take(rh * d.K * d.V);
    } else {
        w.seg_map = w.seg_end = w.seg_in = nullptr;
    }
    return off;
}

// Chunk jc of a sequence as the state scans step through it: its slot, first token row, tokens,
// its (slot, value head) index into the workspace, and its γ and e^{γ_C − γ_t} (C×GK).
struct ScanStep {
    int slot, r0, L;
    size_t sh;
    const float* gam;
    const float* to_end;
};

__device__ __forceinline__ ScanStep scan_step(const SequenceExtent& seq, int jc, const Workspace& w, int HV, int hv,
                                              int GK) {
    ScanStep s;
    s.slot = seq.first_slot + jc;
    s.r0 = seq.row0 + jc * kChunk;
    s.L = min(kChunk, seq.length - jc * kChunk);
    s.sh = size_t(s.slot) * HV + hv;
    s.gam = w.gamma + s.sh * kChunk * GK;
    s.to_end = w.to_end + s.sh * kChunk * GK;
    return s;
}

// The state slice a scan block carries: value columns [v0, v0 + VS) of value head hv's K×V
// state, held in shared memory as K×cols (cols ≥ VS) with row stride ld. load and store address a
// [rows][HV][K][V] float32 array at row r (a sequence, or a workspace slot).
struct StateSlice {
    float* s;
    int ld, K, V, v0, VS, HV, hv;
    int cols = kScanCols;

    // From src (zero where src is null and in the columns past VS), then a barrier.
    __device__ __forceinline__ void load(const float* src, int r) const {
        const int tid = threadIdx.x, nt = blockDim.x;
        for (int e = tid; e < K * cols; e += nt) {
            const int i = e / cols, col = e % cols;
            // Unpadded rows (ld = cols) are written at e itself, the same element.
            s[ld == cols ? e : i * ld + col] =
                (src && col < VS) ? src[((size_t(r) * HV + hv) * K + i) * V + v0 + col] : 0.0f;
        }
        __syncthreads();
    }
    __device__ __forceinline__ void store(float* dst, int r) const {
        const int tid = threadIdx.x, nt = blockDim.x;
        for (int e = tid; e < K * VS; e += nt) {
            const int i = e / VS, col = e % VS;
            dst[((size_t(r) * HV + hv) * K + i) * V + v0 + col] = s[i * ld + col];
        }
    }
};

// The helpers' loops step by a thread index and block size read once into locals, as the kernels'
// own loops do: read in the loop, they compile to a loop that is not unrolled.

// The rows t of one row sub-chunk [a, end) of x (C×K) anchored at a, xa_t = x_t e^{γ_t − γ_a}.
__device__ __forceinline__ void anchor_rows(const float* x, const float* g, int a, int end, int K, float* xa) {
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int e = tid; e < (end - a) * K; e += nt) {
        const int t = a + e / K, i = e % K;
        xa[t * K + i] = x[t * K + i] * exp_rn(log_decay_between(g, K, a, t, i));
    }
}

// The operands of one row sub-chunk [a, end) of the per-channel gated scores (C×K each): xa as
// anchor_rows, and the earlier rows j < a of k anchored back to a, ka_j = k_j e^{γ_a − γ_j};
// then a barrier.
__device__ __forceinline__ void anchor_subchunk(const float* x, const float* k, const float* g, int a, int end, int K,
                                                float* xa, float* ka) {
    anchor_rows(x, g, a, end, K, xa);
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int e = tid; e < a * K; e += nt) {
        const int j = e / K, i = e % K;
        ka[j * K + i] = k[j * K + i] * exp_rn(log_decay_between(g, K, j, a, i));
    }
    __syncthreads();
}

// Gated scores, the block-level form of gated_scores() in gdn/cpu/gdn_chunked.cpp:
//   M_tj = Σ_i x_ti k_ji e^{γ_ti − γ_ji} for j ≤ t (j < t when strict), t, j < L; zero elsewhere.
// x, k are C×K tiles and g the C×GK log decays of the chunk (zero past L), all in shared memory;
// M is C×C (shared or global). Every exponent is a range sum of g (log_decay_between), never a
// difference of prefix sums, and never positive. A scalar gate factors out of the sum over
// channels, e^{γ_t − γ_j}·Σ_i x_ti k_ji. A per-channel gate splits across sub-chunks at the row
// sub-chunk's first token a, e^{γ_t − γ_a}·e^{γ_a − γ_j}, with both factors applied to the
// operands, staged in xa and ka (C×K shared scratch), so the cross-sub-chunk part is a plain
// matrix product.
template <int GATE>
__device__ void gated_scores(const float* x, const float* k, const float* g, int L, int K, bool strict, float* M,
                             float* xa, float* ka) {
    const int tid = threadIdx.x, nt = blockDim.x;
    if constexpr (GATE != 2) {
        for (int e = tid; e < kChunk * kChunk; e += nt) {
            const int t = e / kChunk, j = e % kChunk;
            float out = 0.0f;
            if (t < L && j < L && (strict ? j < t : j <= t)) {
                float acc = 0.0f;
                for (int i = 0; i < K; ++i) acc += x[t * K + i] * k[j * K + i];
                out = GATE == 1 ? acc * exp_rn(log_decay_between(g, 1, j, t, 0)) : acc;
            }
            M[e] = out;
        }
        __syncthreads();
    } else {
        for (int e = tid; e < kChunk * kChunk; e += nt) M[e] = 0.0f;
        __syncthreads();
        for (int a = 0; a < L; a += kSub) {
            const int end = min(L, a + kSub);
            anchor_subchunk(x, k, g, a, end, K, xa, ka);
            for (int e = tid; e < (end - a) * kChunk; e += nt) {
                const int t = a + e / kChunk, j = e % kChunk;
                if (j < a) {
                    float acc = 0.0f;
                    for (int i = 0; i < K; ++i) acc += xa[t * K + i] * ka[j * K + i];
                    M[t * kChunk + j] = acc;
                } else if (strict ? j < t : j <= t) {
                    float acc = 0.0f;
                    for (int i = 0; i < K; ++i)
                        acc += x[t * K + i] * k[j * K + i] * exp_rn(log_decay_between(g, K, j, t, i));
                    M[t * kChunk + j] = acc;
                }
            }
            __syncthreads();
        }
    }
}

// The factors e^{γ_t − γ_j} of a scalar gate for j ≤ t < L (zero elsewhere) into F (C×C), each
// exponent a range sum; gated_scores_backward reads them for GATE 1.
__device__ inline void scalar_gate_factors(const float* g, int L, float* F) {
    for (int e = threadIdx.x; e < kChunk * kChunk; e += blockDim.x) {
        const int t = e / kChunk, j = e % kChunk;
        F[e] = t < L && j <= t ? exp_rn(log_decay_between(g, 1, j, t, 0)) : 0.0f;
    }
    __syncthreads();
}

// The parts of a per-channel gate's score gradients that pass through the anchor a of the row
// sub-chunk [a, end), for channel i: gx_ti's Σ_{j<a} dM_tj k_j e^{γ_a−γ_j} (to be scaled by
// e^{γ_t−γ_a}), and gk_ji's Σ_t dM_tj (x_t e^{γ_t−γ_a}) e^{γ_a−γ_j} for j < a added to acc, with
// xa the anchored rows and ea the anchor factors.
__device__ __forceinline__ float anchored_gx(const float* dM, const float* k, const float* ea, int a, int K, int t,
                                             int i) {
    float anchored = 0.0f;
    for (int j = 0; j < a; ++j) anchored += dM[t * kChunk + j] * (k[j * K + i] * ea[j * K + i]);
    return anchored;
}
__device__ __forceinline__ float add_anchored_gk(float acc, const float* dM, const float* xa, const float* ea, int a,
                                                 int end, int K, int j, int i) {
    for (int t = a; t < end; ++t) acc += dM[t * kChunk + j] * xa[t * K + i] * ea[j * K + i];
    return acc;
}

// gk of a per-channel gate for the row sub-chunk [a, end) with anchor a: one thread per (j, i),
//   gk_j += Σ_t dM_tj (x_t e^{γ_t−γ_a}) e^{γ_a−γ_j}   (j < a: xa anchored rows, ea anchor factors),
//   gk_j += Σ_t dM_tj x_t e^{γ_t−γ_j}                 (a ≤ j ≤ t),
// over t ascending, the exponents over (j, t] for t = j, j + 1, … from one running Kahan sum (the
// same bits as summing each range afresh).
__device__ inline void add_subchunk_gk(const float* dM, const float* x, const float* g, const float* xa,
                                       const float* ea, int a, int end, int K, bool strict, float* gk) {
    for (int e = threadIdx.x; e < end * K; e += blockDim.x) {
        const int j = e / K, i = e % K;
        float acc = gk[e];
        if (j < a) {
            acc = add_anchored_gk(acc, dM, xa, ea, a, end, K, j, i);
        } else {
            KahanSum range;
            for (int t = j; t < end; ++t) {
                if (t > j) range.add(g[t * K + i]);
                if (t > j || !strict) acc += dM[t * kChunk + j] * x[t * K + i] * exp_rn(range.sum);
            }
        }
        gk[e] = acc;
    }
}

// Its adjoint: given dM on the same support (C×C), writes the gradients of x and k into gx, gk
// (C×K) and adds x ⊙ gx − k ⊙ gk to dgam (the anchor's contributions cancel; for a scalar gate
// summed over channels into dgam[t]). Gradients of rows ≥ L are zero. F holds the scalar gate's
// factors (GATE 1); xa, ea are C×K scratch (GATE 2). For a per-channel gate the sums run in the
// order of gated_scores_backward() in gdn/cpu/gdn_chunked.cpp: per row sub-chunk with anchor a,
//   gx_t = (Σ_{j<a} dM_tj k_j e^{γ_a−γ_j}) e^{γ_t−γ_a} + Σ_{a≤j≤t} dM_tj k_j e^{γ_t−γ_j},
//   gk_j += dM_tj (x_t e^{γ_t−γ_a}) e^{γ_a−γ_j} (j < a),  dM_tj x_t e^{γ_t−γ_j} (a ≤ j ≤ t),
// over t ascending; a thread owns one (j, i) of gk throughout, so its order is fixed.
template <int GATE>
__device__ void gated_scores_backward(const float* dM, const float* x, const float* k, const float* g, const float* F,
                                      int L, int K, bool strict, float* gx, float* gk, float* dgam, float* xa,
                                      float* ea) {
    const int tid = threadIdx.x, nt = blockDim.x;
    if constexpr (GATE != 2) {
        auto factor = [&](int t, int j) { return GATE == 1 ? F[t * kChunk + j] : 1.0f; };
        for (int e = tid; e < kChunk * K; e += nt) {
            const int t = e / K, i = e % K;
            float accx = 0.0f, acck = 0.0f;
            if (t < L) {
                for (int j = 0; j < (strict ? t : t + 1); ++j) accx += dM[t * kChunk + j] * k[j * K + i] * factor(t, j);
                for (int s = strict ? t + 1 : t; s < L; ++s) acck += dM[s * kChunk + t] * x[s * K + i] * factor(s, t);
            }
            gx[e] = accx;
            gk[e] = acck;
        }
        __syncthreads();
    } else {
        for (int e = tid; e < kChunk * K; e += nt) gx[e] = gk[e] = 0.0f;
        __syncthreads();
        for (int a = 0; a < L; a += kSub) {
            const int end = min(L, a + kSub);
            anchor_rows(x, g, a, end, K, xa);
            for (int e = tid; e < a * K; e += nt) {
                const int j = e / K, i = e % K;
                ea[j * K + i] = exp_rn(log_decay_between(g, K, j, a, i));
            }
            __syncthreads();
            for (int e = tid; e < (end - a) * K; e += nt) {
                const int t = a + e / K, i = e % K;
                float acc = gx[t * K + i];
                acc += anchored_gx(dM, k, ea, a, K, t, i) * exp_rn(log_decay_between(g, K, a, t, i));
                for (int j = a; j < (strict ? t : t + 1); ++j)
                    acc += dM[t * kChunk + j] * k[j * K + i] * exp_rn(log_decay_between(g, K, j, t, i));
                gx[t * K + i] = acc;
            }
            add_subchunk_gk(dM, x, g, xa, ea, a, end, K, strict, gk);
            __syncthreads();
        }
    }
    if (GATE == 2) {
        for (int e = tid; e < L * K; e += nt) dgam[e] += x[e] * gx[e] - k[e] * gk[e];
    } else if (GATE == 1) {
        for (int t = tid; t < L; t += nt) {
            float acc = 0.0f;
            for (int i = 0; i < K; ++i) acc += x[t * K + i] * gx[t * K + i] - k[t * K + i] * gk[t * K + i];
            dgam[t] += acc;
        }
    }
    __syncthreads();
}

// Elements per thread at a time where a kernel copies a tile from global memory: every load of a
// batch before its stores. A store may alias the next load as far as the compiler knows, so one
// element at a time would wait out a global-memory latency per element.
constexpr int kLoadBatch = 8;

// store(e, load(e)) for every e < n over the block, kLoadBatch elements per thread at a time,
// every load of a batch before its stores. The value's type is load's.
template <class Load, class Store>
__device__ __forceinline__ void copy_batched(int n, Load load, Store store) {
    using Value = decltype(load(0));
    const int nt = blockDim.x;
    for (int e0 = threadIdx.x; e0 < n; e0 += kLoadBatch * nt) {
        Value v[kLoadBatch];
        for (int u = 0; u < kLoadBatch; ++u) {
            const int e = e0 + u * nt;
            v[u] = e < n ? load(e) : Value{};
        }
        for (int u = 0; u < kLoadBatch; ++u)
            if (e0 + u * nt < n) store(e0 + u * nt, v[u]);
    }
}

// One 16-byte copy from global to shared memory that completes asynchronously (cp.async, sm_80
// on): it holds no register while in flight, so every copy a thread issues is in flight at once.
// async_copies_wait() waits for this thread's; a barrier after it makes all of them visible.
#if defined(KCV_GDN_HOST_EMULATION)
inline void copy16_async(void* dst, const void* src) { std::memcpy(dst, src, 16); }
inline void async_copies_wait() {}
#else
__device__ __forceinline__ void copy16_async(void* dst, const void* src) {
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(src) : "memory");
}
__device__ __forceinline__ void async_copies_wait() {
    asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
}
#endif

// Four consecutive floats from a 16-byte aligned address, one 16-byte load on the GPU: a thread
// that walks a row of its own (the other threads' rows a row's length apart, so no two of a
// warp's loads share a memory transaction) then makes a quarter of the requests for the same
// values.
struct Floats4 {
    float x[4];
};
// Whether load4 may read at every one of these addresses (a caller's workspace need not be aligned).
template <class... P>
__device__ __forceinline__ bool aligned_for_load4(const P*... p) {
    return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}
#if defined(KCV_GDN_HOST_EMULATION)
inline Floats4 load4(const float* p) {
    Floats4 f;
    std::memcpy(f.x, p, sizeof f.x);
    return f;
}
#else
__device__ __forceinline__ Floats4 load4(const float* p) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    return {{v.x, v.y, v.z, v.w}};
}
#endif

// f(i, p0[i], p1[i], …) for i = 0 … n − 1 in increasing order: rows that a thread walks alone, by
// 16-byte loads where n is a multiple of four and every row is 16-byte aligned, else one float at
// a time. The same values reach f in the same order either way, so a sum that f keeps has the same
// bits.
template <size_t... J, class F>
__device__ __forceinline__ void call_at_lane(std::index_sequence<J...>, F& f, int i, const Floats4* v, int u) {
    f(i, v[J].x[u]...);
}
template <class F, class... P>
__device__ __forceinline__ void walk_rows(int n, F&& f, const P*... p) {
    if (n % 4 == 0 && aligned_for_load4(p...)) {
#pragma unroll 4
        for (int i = 0; i < n; i += 4) {
            const Floats4 v[] = {load4(p + i)...};
            for (int u = 0; u < 4; ++u) call_at_lane(std::index_sequence_for<P...>{}, f, i + u, v, u);
        }
    } else {
        for (int i = 0; i < n; ++i) f(i, p[i]...);
    }
}

// The first 16-byte boundary at or after p, as a T*: where a tile that copy_rows fills by 16-byte
// copies starts, past the float tiles before it (its size counts 16 bytes of slack).
template <class T>
__device__ __forceinline__ T* aligned16(float* p) {
    return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 15) & ~uintptr_t(15));
}

// dst[r·dst_ld + x] = src[r·src_ld + x] for r < rows, x < cols, a block-wide copy of a tile's rows
// from global into shared memory: 16-byte asynchronous copies where both tiles' rows are 16-byte
// aligned (then nothing waits until async_copies_wait), element by element in batches otherwise.
// The values are the same bits either way.
template <class T>
__device__ __forceinline__ void copy_rows(T* dst, int dst_ld, const T* src, size_t src_ld, int rows, int cols) {
    constexpr int per = 16 / sizeof(T);
    const bool aligned = cols % per == 0 && dst_ld % per == 0 && src_ld % per == 0 &&
                         reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
    if (aligned) {
        const int pieces = cols / per;
        for (int e = threadIdx.x; e < rows * pieces; e += blockDim.x) {
            const int r = e / pieces, x = (e % pieces) * per;
            copy16_async(dst + size_t(r) * dst_ld + x, src + r * src_ld + x);
        }
    } else {
        copy_batched(
            rows * cols, [&](int e) { return src[(e / cols) * src_ld + e % cols]; },
            [&](int e, T x) { dst[size_t(e / cols) * dst_ld + e % cols] = x; });
    }
}

// Loads rows [row0, row0 + L) of a [rows][heads][D] tensor at head `head` into a C×D float
// tile, zero past L, kLoadBatch elements per thread at a time.
template <class T>
__device__ void load_tile(const T* src, int row0, int L, int heads, int head, int D, float* dst) {
    copy_batched(
        kChunk * D,
        [&](int e) { return e / D < L ? to_float(src[(size_t(row0 + e / D) * heads + head) * D + e % D]) : 0.0f; },
        [&](int e, float x) { dst[e] = x; });
}

}  // namespace kcv::gdn::cuda
