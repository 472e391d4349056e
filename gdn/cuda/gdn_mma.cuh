// Block-level matrix products on tensor cores for the version 2 kernels: warp-level
// mma.sync.m16n8k8 with TF32 operands and float32 accumulation, with float32 operands split
// into TF32 parts, so that a product keeps float32 accuracy.
//
// Splitting. Within one m16n8k8 product, row m of A is split on a grid common to its eight
// values: with 2^E ≤ max_k |A(m, k)| < 2^(E+1), hi = A(m, k) rounded to a multiple of
// q = 2^(E − 9), so that hi/q is an integer of magnitude at most 2^10 (exact in TF32), and
// r = A(m, k) − hi, |r| ≤ q/2, exactly. Column n of B likewise. Then every product hi_a·hi_b is an
// integer multiple of q_a·q_b of magnitude at most 2^20, and a sum of eight of them at most 2^23: the
// tensor core forms hi_a·hi_b's tile sum exactly whatever it does when it aligns and truncates its
// terms (below). The remainders are split into TF32 parts, r = 2^-13·(lo + lo2) with lo = tf32(r·2^13)
// and lo2 = tf32(r·2^13 − lo) (lo2 = 0 for a 16-bit input, whose remainder is exact in TF32), and
// a·b = hi_a·hi_b + 2^-13·(lo_a + lo2_a)·hi_b + 2^-13·hi_a·(lo_b + lo2_b) + 2^-26·lo_a·lo_b + …,
// where what is dropped (lo·lo2 terms) is at most 2^-30 of the tile's largest |a|·|b|. The
// remainders' products are 2^-10 of the tile's scale or less, so the tensor core's truncation of
// their sums costs about 2^-33 of it.
//
// Small values: TF32 has float32's exponent range but only 10 fraction bits, so below 2^-126 its
// step is 2^-136 where float32's is 2^-149 (measured on an H200 by bench/mma_subnormals.cu: a
// TF32 operand of 2^-140 contributes nothing, while products and accumulators that are subnormal
// are kept exactly). So E is taken as −126 at least (q ≥ 2^-135, on TF32's grid), and the
// remainders are scaled by 2^13 before their split, where their step is float32's: without that,
// EXC-02 caught a flush to zero in all but name in the backward (every gradient of a subnormal q
// lives at that scale). The remainders' products are summed in accumulators of their own, scaled
// back by 2^-13 and 2^-26 and added to the high one once, after the last k. The scalings are exact
// (powers of two) unless |a| ≥ 2^114, where the grid's rounding constant would overflow; values
// that large overflow the recurrence's float32 state anyway.
//
// Accumulation: an mma aligns its terms (the products and the accumulator) to the largest one's
// exponent, truncates each toward zero two bits under float32's precision there and truncates the
// sum toward zero (bench/mma_subnormals.cu on an H200; host_emulation.hpp models it). Truncation of
// a running sum of one sign accumulates as a bias: splitting each operand at its own exponent, as
// version 2.1 did, put the float32 outputs at up to twice the float32 control's error (ORD-03). So
// the high products, which carry the sum, go into a zeroed fragment, where their sum is exact by
// the construction above, and are added to the accumulator in float32 (rounded to nearest), one
// rounding per 8-term tile step. Each tile product is added in a fixed order (k ascending), so
// results are bitwise reproducible. When both operands are 16-bit inputs, one plain mma a tile.
//
// Rounded operands (an experiment, not the library's build): compiled with
// KCV_GDN_TF32_OPERANDS, block_mma rounds every operand that is not exact in TF32 to TF32 once
// (nearest) instead of splitting it, one mma a tile, as a kernel with reduced-precision
// intermediates would. bench/gdn_tf32_operands.sh builds the library that way and times it beside
// the float32-accurate one: what the splits cost, and what the products' accuracy becomes.
//
// This is the warp-synchronous mma.sync of sm_80. gdn_wgmma.cuh ports block_mma to wgmma (sm_90a,
// asynchronous, operands in shared memory), with the same bits.
//
// Fragment layouts of mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 (PTX ISA), with
// g = lane / 4 and c = lane % 4:
//   A (16×8, row):  a0 (g, c), a1 (g + 8, c), a2 (g, c + 4), a3 (g + 8, c + 4)
//   B (8×8, col):   b0 (k = c, n = g), b1 (k = c + 4, n = g)
//   D (16×8):       d0 (g, 2c), d1 (g, 2c + 1), d2 (g + 8, 2c), d3 (g + 8, 2c + 1)
// host_emulation.hpp implements the same instruction from this table for the host build.
#pragma once

#include "gdn_common.cuh"

// A loop over a warp's tiles or a fragment's registers, unrolled in full: indexed at run time, the
// accumulators of block_mma would live in local memory (a 384-byte stack frame at MT = 2,
// NT = 4), and every mma would wait on it.
#if defined(__CUDA_ARCH__)
#define KCV_GDN_UNROLL _Pragma("unroll")
#else
#define KCV_GDN_UNROLL
#endif

namespace kcv::gdn::cuda {

#if !defined(KCV_GDN_HOST_EMULATION)
// Round to TF32 (nearest, ties away from zero); the low 13 bits of the result are zero.
__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// d += a·b for one 16×8×8 tile, a warp-wide instruction.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A warp's values exchanged between lanes lane and lane ^ mask.
__device__ __forceinline__ uint32_t shfl_xor(uint32_t v, int mask) { return __shfl_xor_sync(0xFFFFFFFFu, v, mask); }
#else
inline uint32_t to_tf32(float x) { return emulation::to_tf32(x); }
inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) { emulation::mma_tf32(d, a, b); }
inline uint32_t shfl_xor(uint32_t v, int mask) { return emulation::shfl_xor(v, mask); }
#endif

// A float32 value's bits, and back (TF32 operands travel as float32 bit patterns).
__device__ __forceinline__ float bits_float(uint32_t bits) {
#if defined(KCV_GDN_HOST_EMULATION)
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
#else
    return __uint_as_float(bits);
#endif
}

__device__ __forceinline__ uint32_t float_bits(float f) {
#if defined(KCV_GDN_HOST_EMULATION)
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
#else
    return __float_as_uint(f);
#endif
}

// The remainders' scale: 2^13 lifts float32's subnormal step 2^-149 to TF32's 2^-136.
constexpr float kLowScale = 0x1p13f, kLowUnscale = 0x1p-13f;

// The rounding constant of the grid of values whose largest magnitude has the bits m (sign
// cleared): 1.5·2^(E + 14) for 2^E ≤ it < 2^(E+1), E clamped to [−126, 113]. (x + s) − s is then x
// rounded to a multiple of 2^(E − 9).
__device__ __forceinline__ float grid_for(uint32_t m) {
    const uint32_t field = min(max(m >> 23, 1u), 240u);
    return bits_float(((field + 14u) << 23) | 0x400000u);
}

// The grid shared by the four lanes of a quad (lane % 4 = 0…3, which hold one row of an A tile
// or one column of a B tile): grid_for the largest |x0|, |x1| of the quad.
__device__ __forceinline__ float quad_grid(float x0, float x1) {
    uint32_t m = max(float_bits(x0) & 0x7FFFFFFFu, float_bits(x1) & 0x7FFFFFFFu);
    m = max(m, shfl_xor(m, 1));
    m = max(m, shfl_xor(m, 2));
    return grid_for(m);
}

// x = hi + 2^-13·(lo + lo2) on the grid of s (quad_grid), exactly; EXACT: x is exact in TF32 (a
// 16-bit input), and so is its remainder, lo2 = 0.
template <bool EXACT>
__device__ __forceinline__ void split_on_grid(float x, float s, uint32_t& hi, uint32_t& lo, uint32_t& lo2) {
    const float h = (x + s) - s;
    hi = float_bits(h);
    const float r = (x - h) * kLowScale;
    if (EXACT) {
        lo = float_bits(r);
        lo2 = 0u;
        return;
    }
    lo = to_tf32(r);
    lo2 = to_tf32(r - bits_float(lo));
}

// acc += a·b for one 16×8×8 tile, the tile's sum formed in a zeroed fragment and added to acc in
// float32, rounded to nearest.
__device__ __forceinline__ void mma_tf32_added(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_tf32(part, a, b);
    KCV_GDN_UNROLL
    for (int r = 0; r < 4; ++r) acc[r] += part[r];
}

// out(m, n, Σ_{k<Kd} A(m, k)·B(k, n)) for every m < M, n < N, the products on tensor cores.
// A(m, k) and B(k, n) are called only for m < M, k < Kd, n < N (operands past those are zero),
// so M, N and Kd need not be multiples of the tile. Each warp of the block owns whole
// (16·MT)×(8·NT) output tiles, taken round robin, and calls `out` once per element it owns: an
// element's sum has one owner and one order. A warp splits each fragment of A once for its NT
// column tiles and each fragment of B once for its MT row tiles, so larger tiles split less per
// product, at MT·NT·12 accumulator registers; every element's sum is the same whatever MT and NT
// (the same tile products, in the same order). AEXACT / BEXACT: every value of that operand is
// exact in TF32. Every thread of the block must call it (it is warp-synchronous); it has no
// barrier of its own.
template <int NT, bool AEXACT, bool BEXACT, int MT = 1, bool AHEAD = true, class FA, class FB, class FOut>
__device__ void block_mma(int M, int N, int Kd, FA A, FB B, FOut out) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int g = lane / 4, c = lane % 4;
    const int mtiles = (M + 16 * MT - 1) / (16 * MT), ntiles = (N + 8 * NT - 1) / (8 * NT);
    // Two 16-bit operands: their products are exact and each tile's sum is one mma.
#if defined(KCV_GDN_TF32_OPERANDS)
    constexpr bool kPlain = true;
    auto operand = [](bool exact, float x) { return exact ? float_bits(x) : to_tf32(x); };
#else
    constexpr bool kPlain = AEXACT && BEXACT;
    auto operand = [](bool, float x) { return float_bits(x); };
#endif
    for (int tile = warp; tile < mtiles * ntiles; tile += warps) {
        const int m0 = (tile / ntiles) * 16 * MT, n0 = (tile % ntiles) * 8 * NT;
        float acc[MT][NT][4], low[MT][NT][4], low2[MT][NT][4];
        KCV_GDN_UNROLL
        for (int i = 0; i < MT; ++i)
            KCV_GDN_UNROLL
            for (int j = 0; j < NT; ++j)
                KCV_GDN_UNROLL
                for (int r = 0; r < 4; ++r) acc[i][j][r] = low[i][j][r] = low2[i][j][r] = 0.0f;
        // This thread's operand values of one k step. AHEAD: fetched one step ahead, so that the
        // loads of step k0 + 8 (often from global memory) are in flight while step k0 is split and
        // multiplied, at MT·4 + NT·2 more registers (a kernel held to 128 registers spills them).
        auto fetch = [&](int k0, float (&av)[MT][4], float (&bv)[NT][2]) {
            KCV_GDN_UNROLL
            for (int i = 0; i < MT; ++i)
                KCV_GDN_UNROLL
                for (int r = 0; r < 4; ++r) {
                    const int m = m0 + 16 * i + g + (r & 1) * 8, k = k0 + c + (r >> 1) * 4;
                    av[i][r] = m < M && k < Kd ? A(m, k) : 0.0f;
                }
            KCV_GDN_UNROLL
            for (int j = 0; j < NT; ++j)
                KCV_GDN_UNROLL
                for (int r = 0; r < 2; ++r) {
                    const int n = n0 + 8 * j + g, k = k0 + c + r * 4;
                    bv[j][r] = n < N && k < Kd ? B(k, n) : 0.0f;
                }
        };
        float av[MT][4], bvs[NT][2];
        if (AHEAD) fetch(0, av, bvs);
        for (int k0 = 0; k0 < Kd; k0 += 8) {
            float av_next[MT][4], bv_next[NT][2];
            if (!AHEAD) fetch(k0, av, bvs);
            else if (k0 + 8 < Kd) fetch(k0 + 8, av_next, bv_next);
            uint32_t ahi[MT][4], alo[MT][4], alo2[MT][4];
            KCV_GDN_UNROLL
            for (int i = 0; i < MT; ++i) {
                if (kPlain) {
                    KCV_GDN_UNROLL
                    for (int r = 0; r < 4; ++r) ahi[i][r] = operand(AEXACT, av[i][r]);
                } else {
                    const float s0 = quad_grid(av[i][0], av[i][2]), s1 = quad_grid(av[i][1], av[i][3]);
                    KCV_GDN_UNROLL
                    for (int r = 0; r < 4; ++r)
                        split_on_grid<AEXACT>(av[i][r], r & 1 ? s1 : s0, ahi[i][r], alo[i][r], alo2[i][r]);
                }
            }
            KCV_GDN_UNROLL
            for (int j = 0; j < NT; ++j) {
                const float* bv = bvs[j];
                uint32_t bhi[2], blo[2], blo2[2];
                if (kPlain) {
                    KCV_GDN_UNROLL
                    for (int r = 0; r < 2; ++r) bhi[r] = operand(BEXACT, bv[r]);
                    KCV_GDN_UNROLL
                    for (int i = 0; i < MT; ++i) mma_tf32_added(acc[i][j], ahi[i], bhi);
                    continue;
                }
                const float s = quad_grid(bv[0], bv[1]);
                KCV_GDN_UNROLL
                for (int r = 0; r < 2; ++r) split_on_grid<BEXACT>(bv[r], s, bhi[r], blo[r], blo2[r]);
                KCV_GDN_UNROLL
                for (int i = 0; i < MT; ++i) {
                    mma_tf32(low[i][j], alo[i], bhi);
                    if (!AEXACT) mma_tf32(low[i][j], alo2[i], bhi);
                    mma_tf32(low[i][j], ahi[i], blo);
                    if (!BEXACT) mma_tf32(low[i][j], ahi[i], blo2);
                    mma_tf32(low2[i][j], alo[i], blo);
                    mma_tf32_added(acc[i][j], ahi[i], bhi);
                }
            }
            if (AHEAD && k0 + 8 < Kd) {
                KCV_GDN_UNROLL
                for (int i = 0; i < MT; ++i)
                    KCV_GDN_UNROLL
                    for (int r = 0; r < 4; ++r) av[i][r] = av_next[i][r];
                KCV_GDN_UNROLL
                for (int j = 0; j < NT; ++j)
                    KCV_GDN_UNROLL
                    for (int r = 0; r < 2; ++r) bvs[j][r] = bv_next[j][r];
            }
        }
        KCV_GDN_UNROLL
        for (int i = 0; i < MT; ++i)
            KCV_GDN_UNROLL
            for (int j = 0; j < NT; ++j)
                KCV_GDN_UNROLL
                for (int r = 0; r < 4; ++r) {
                    const int m = m0 + 16 * i + g + (r >> 1) * 8, n = n0 + 8 * j + 2 * c + (r & 1);
                    if (m < M && n < N)
                        out(m, n, kPlain ? acc[i][j][r]
                                         : acc[i][j][r] + (low[i][j][r] + low2[i][j][r] * kLowUnscale) * kLowUnscale);
                }
    }
}

// True for the 16-bit input types, whose raw values are exact TF32 operands.
template <class TI>
constexpr bool exact_in_tf32 = sizeof(TI) == 2;

// scalar_gate_factors (gdn_common.cuh) with version 1's bits, e^{γ_t − γ_j} for j ≤ t < L and
// zero elsewhere into F (C×C), but one thread per column j walking t upwards with a running
// Kahan sum, one addition per exponent instead of a range sum of up to 63 per element. The walks
// leave their sums in F, whose exponentials every thread then takes in place, rather than each
// walk waiting out its 64 exponentials in turn; then a barrier.
__device__ inline void scalar_gate_factors_running(const float* g, int L, float* F) {
    for (int j = threadIdx.x; j < kChunk; j += blockDim.x) {
        KahanSum range;
        for (int t = 0; t < kChunk; ++t) {
            if (t > j && t < L) range.add(g[t]);
            F[t * kChunk + j] = range.sum;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kChunk * kChunk; e += blockDim.x) {
        const int t = e / kChunk, j = e % kChunk;
        F[e] = t < L && j <= t ? exp_rn(F[e]) : 0.0f;
    }
    __syncthreads();
}

// The operands of one row sub-chunk [a, end) of the per-channel gated scores, as
// anchor_subchunk (gdn_common.cuh) computes them, xa_t = x_t e^{γ_t − γ_a} (a ≤ t < end) and
// ka_j = k_j e^{γ_a − γ_j} (j < a), but with one running Kahan sum per channel instead of a
// range sum per element: xa's exponents over (a, t] for t ascending (the same bits as summing
// each range afresh), ka's over (j, a] for j descending (the same terms added in the opposite
// order, the same error bound: Kahan's ≤ 2u·Σ|g| + O(n u²) does not depend on the order). Every
// exponent is still a sum of the g it spans, never a difference, and never positive. With k null,
// ka receives the factors e^{γ_a − γ_j} alone (the backward's ea). With b and xb, also
// (b_t k_t) e^{γ_t − γ_a} into xb's row t − a, from xa's factors. One thread per channel and
// operand walks its sums into xa and ka; after a barrier every thread takes exponentials of them
// in place (the same floats go to exp_rn, so the same bits). A walk's exponentials were never a
// chain (each takes one partial sum), but with this form and diagonal_factors' KDA's forward took
// 0.96 of its time on an H100 (bench/RESULTS.md), presumably since the exponentials are spread
// over the whole block rather than the walks' threads. Ends with a barrier.
__device__ __forceinline__ void anchor_subchunk_running(const float* x, const float* k, const float* g, int a,
                                                        int end, int K, float* xa, float* ka,
                                                        const float* b = nullptr, float* xb = nullptr) {
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int e = tid; e < 2 * K; e += nt) {
        if (e < K) {
            const int i = e;
            KahanSum back;
            for (int j = a - 1; j >= 0; --j) {
                back.add(g[(j + 1) * K + i]);
                ka[j * K + i] = back.sum;
            }
        } else {
            const int i = e - K;
            KahanSum up;
            for (int t = a; t < end; ++t) {
                if (t > a) up.add(g[t * K + i]);
                xa[t * K + i] = up.sum;
            }
        }
    }
    __syncthreads();
    // ka's rows j < a, then xa's rows a ≤ t < end.
    for (int e = tid; e < end * K; e += nt) {
        const float f = exp_rn(e < a * K ? ka[e] : xa[e]);
        if (e < a * K) {
            ka[e] = k ? k[e] * f : f;
        } else {
            const int t = e / K, i = e % K;
            xa[e] = x[e] * f;
            if (xb) xb[(t - a) * K + i] = (b[t] * k[e]) * f;
        }
    }
    __syncthreads();
}

// The diagonal 16×16 block of one row sub-chunk [a, end) of the per-channel gated scores,
//   M_tj = Σ_i x_ti k_ji e^{γ_ti − γ_ji}   for a ≤ j ≤ t < end (j < t when strict),
// with version 1's bits: each exponent the Kahan sum of g over (j, t] in ascending order, each
// term (x_ti k_ji)·e^{…}, and the terms added for i ascending from zero. Version 1 gives each
// (t, j) one thread that sums every range afresh, O(16) additions per term; here the channels are
// taken in groups, and per group each (j, i) is one walk of t upwards with a running Kahan sum
// (each exponent one addition; balanced_walks pairs them over the threads) that writes the terms
// into a table, then one thread per (t, j) adds its row of the table to its partial sum. fd is
// scratch of kDiagScratch floats: the partial sums (kSub² of them) and, for small K, the table
// (one row of kDiagChannels per pair t ≥ j, an odd row length so that a warp's rows fall into
// distinct banks). xa is C×K scratch that the products before it read: where a group takes more
// channels there (wide_diag_channels, below: 43 against 27 at K = 128), the table lives in xa,
// after a barrier.
constexpr int kDiagChannels = 27;
constexpr int kDiagPairs = kSub * (kSub + 1) / 2;
constexpr int kDiagScratch = kSub * kSub + kDiagPairs * kDiagChannels;
static_assert(kDiagScratch <= kChunk * kChunk, "the diagonal blocks' scratch is one C×C tile");

__device__ __forceinline__ int diag_pair(int t, int j) { return t * (t + 1) / 2 + j; }   // j ≤ t < kSub

// The channels of a group of the diagonal blocks' table when the table (kDiagPairs rows) and
// `extra` more rows of the same length live in C×K scratch: an odd row length (a warp's rows in
// distinct banks) of at most kWideDiagChannels (one round of walks: kSub/2 walk pairs a channel,
// 8·63 ≤ 512 threads), as even over the channels as it can be (K = 128: three groups of 43, where
// fd's table takes five of 26 or 27); 0 where the scratch holds fewer than one row.
constexpr int kWideDiagChannels = 63;
__device__ __forceinline__ int wide_diag_channels(int K, int extra) {
    const int most = min(kWideDiagChannels, kChunk * K / (kDiagPairs + extra));
    if (most < 1) return 0;
    const int groups = (K + most - 1) / most;
    const int balanced = (K + groups - 1) / groups;   // at most `most`
    if (balanced % 2 == 1) return balanced;
    return balanced + 1 <= most ? balanced + 1 : balanced - 1;
}

// Where a group of the diagonal blocks' table lives and how many channels it takes: in xa (C×K
// scratch, free once the products before it are done) where wide_diag_channels gives more than
// `narrow`, the most that fd_table (in the C×C scratch, beside the partial sums) holds; else there.
struct DiagTable {
    int group;
    float* table;
};
__device__ __forceinline__ DiagTable diag_table(int K, int extra, int narrow, float* fd_table, float* xa) {
    const int wide = wide_diag_channels(K, extra);
    return wide > narrow ? DiagTable{wide, xa} : DiagTable{narrow, fd_table};
}

// walk(jj, c) for every jj < n and c < nc, spread over the block so that the threads' shares are
// about equally long: the walk from jj covers the n − jj rows from jj on, so jj and n − 1 − jj go to
// one thread (n + 1 rows together; with n = kSub and 27 channels, one round of 216 threads instead
// of two rounds whose first thread walks 16 + 7 rows). Each walk is the same computation wherever
// it runs.
template <class Walk>
__device__ __forceinline__ void balanced_walks(int n, int nc, Walk walk) {
    const int half = (n + 1) / 2;
    for (int e = threadIdx.x; e < half * nc; e += blockDim.x) {
        const int p = e / nc, c = e % nc;
        walk(p, c);
        if (n - 1 - p != p) walk(n - 1 - p, c);
    }
}

// The factors e^{γ_t − γ_j} of the diagonal block of the sub-chunk [a, a + n), channels i0 to
// i0 + nc − 1, into table[diag_pair(tt, jj)·stride + c] (t = a + tt, j = a + jj, i = i0 + c): one
// walk per (jj, c), t upwards with a running Kahan sum (balanced_walks), writes the exponents;
// after a barrier every thread takes exponentials of them in place (the same bits). Unlike
// diagonal_scores' walks, these gained from it: with the exponentials inside the walks KDA's
// forward took 1.04 times as long on an H100, and GLA's and KDA's forward+backward 1.01–1.04
// (bench/RESULTS.md). Ends without a barrier after those.
__device__ __forceinline__ void diagonal_factors(const float* g, int a, int n, int K, int i0, int nc, int stride,
                                                 float* table) {
    balanced_walks(n, nc, [&](int jj, int c) {
        const int i = i0 + c;
        KahanSum range;
        for (int tt = jj; tt < n; ++tt) {
            if (tt > jj) range.add(g[(a + tt) * K + i]);
            table[diag_pair(tt, jj) * stride + c] = range.sum;
        }
    });
    __syncthreads();
    for (int e = threadIdx.x; e < diag_pair(n, 0) * nc; e += blockDim.x) {
        float& f = table[(e / nc) * stride + e % nc];
        f = exp_rn(f);
    }
}

__device__ __forceinline__ void diagonal_scores(const float* x, const float* k, const float* g, int a, int end, int K,
                                                bool strict, float* M, float* fd, float* xa) {
    const int tid = threadIdx.x, nt = blockDim.x, n = end - a;
    float* part = fd;
    // The table in xa where a group takes more channels there: fewer groups, so fewer barriers
    // and more threads walking.
    const DiagTable placed = diag_table(K, 0, kDiagChannels, fd + kSub * kSub, xa);
    const int group = placed.group;
    float* const table = placed.table;
    if (table == xa) __syncthreads();
    for (int i0 = 0; i0 < K; i0 += group) {
        const int nc = min(group, K - i0);
        const bool first = i0 == 0, last = i0 + nc == K;
        // Each term where its walk reaches it: a walk's exponentials are independent of one another
        // (only its sum is a chain). Taken after the walks, by every thread, behind a barrier (with
        // the anchored operands' likewise), GLA's forward took 1.2 times as long on an H100
        // (bench/RESULTS.md).
        balanced_walks(n, nc, [&](int jj, int c) {
            const int i = i0 + c, j = a + jj;
            KahanSum range;
            for (int tt = jj; tt < n; ++tt) {
                const int t = a + tt;
                if (tt > jj) range.add(g[t * K + i]);
                if (tt > jj || !strict)
                    table[diag_pair(tt, jj) * group + c] = x[t * K + i] * k[j * K + i] * exp_rn(range.sum);
            }
        });
        __syncthreads();
        for (int e = tid; e < kSub * kSub; e += nt) {
            const int tt = e / kSub, jj = e % kSub;
            if (tt >= n || (strict ? jj >= tt : jj > tt)) continue;
            float acc = first ? 0.0f : part[e];
            const float* row = table + diag_pair(tt, jj) * group;
            for (int c = 0; c < nc; ++c) acc += row[c];
            if (last) M[(a + tt) * kChunk + a + jj] = acc;
            else part[e] = acc;
        }
        __syncthreads();
    }
}

// gated_scores (gdn_common.cuh) with the sums over channels on tensor cores; the same support,
// zeros and exponents. XEXACT / KEXACT: x / k hold raw 16-bit inputs. For a per-channel gate
// the cross-sub-chunk blocks are a plain product of the anchored operands on tensor cores; the
// diagonal 16×16 blocks, whose factor e^{γ_ti − γ_ji} depends on the channel, stay scalar
// (diagonal_scores). fd is C×C scratch: the scalar gate's factors, or the diagonal blocks' partial
// sums and, for small K, their table (unused without a gate).
template <int GATE, bool XEXACT, bool KEXACT, bool AHEAD = true>
__device__ void gated_scores_tc(const float* x, const float* k, const float* g, int L, int K, bool strict, float* M,
                                float* xa, float* ka, float* fd) {
    const int tid = threadIdx.x, nt = blockDim.x;
    if constexpr (GATE != 2) {
        if (GATE == 1) scalar_gate_factors_running(g, L, fd);
        block_mma<4, XEXACT, KEXACT, 1, AHEAD>(
            kChunk, kChunk, K, [&](int t, int i) { return x[t * K + i]; }, [&](int i, int j) { return k[j * K + i]; },
            [&](int t, int j, float acc) {
                float out = 0.0f;
                if (t < L && j < L && (strict ? j < t : j <= t)) out = GATE == 1 ? acc * fd[t * kChunk + j] : acc;
                M[t * kChunk + j] = out;
            });
        __syncthreads();
    } else {
        for (int e = tid; e < kChunk * kChunk; e += nt) M[e] = 0.0f;
        __syncthreads();
        for (int a = 0; a < L; a += kSub) {
            const int end = min(L, a + kSub);
            anchor_subchunk_running(x, k, g, a, end, K, xa, ka);
            block_mma<4, false, false, 1, AHEAD>(
                end - a, a, K, [&](int r, int i) { return xa[(a + r) * K + i]; },
                [&](int i, int j) { return ka[j * K + i]; },
                [&](int r, int j, float acc) { M[(a + r) * kChunk + j] = acc; });
            // Ends with a barrier, after which xa and ka are free again.
            diagonal_scores(x, k, g, a, end, K, strict, M, fd, xa);
        }
    }
}

// The forward's two per-channel gated score matrices of the delta rule at once, the same bits as
// gated_scores_tc<2, ...> called for P (x = q, j ≤ t) and then for A (x = β ⊙ k, j < t) into two
// arrays, with each exponential taken once for both where those two calls took it twice:
// - per sub-chunk, the anchored operands as anchor_subchunk_running with x = q, and β ⊙ k's rows
//   e^{γ_t − γ_a} from the same factors (ka, the anchored k, is the same for both), then the two
//   cross-sub-chunk products;
// - the diagonal blocks from one table of e^{γ_t − γ_j} per group of channels (diagonal_factors;
//   in xa with the staged rows below where a group takes more channels there, 43 at K = 128,
//   else kDiagPairChannels a group in fd), each term (x_ti k_ji)·e^{…} formed where the sums
//   read it, one thread per entry of either matrix, the channels added in increasing order as
//   there (the grouping does not change the order of any sum). The group's channels of the
//   sub-chunk's rows of k, q and bk are first copied into xa (free once the products are done)
//   with an odd row length: read in place, with rows K floats apart, the sixteen columns j of a
//   warp's entries fell into one bank (a 16-way conflict on every k load; in Nsight Compute
//   these two loops held 18% of KDA's prepare_chunks_tc, throttled on shared memory). The same
//   floats, so the same bits.
// bk_t = β_t k_t is formed from b (C, zero past L) and k as prepare_chunks_tc's tile of it is.
// xb is scratch of kSub rows of K past the anchored k's rows (a < C − kSub + 1 always leaves
// ka's rows from C − kSub on unused); fd is C×C scratch. Ends with a barrier.
constexpr int kDiagPairChannels = 26;
static_assert(2 * kSub * kSub + kDiagPairs * kDiagPairChannels <= kChunk * kChunk, "two sums' partials and a table");

template <bool AHEAD = true>
__device__ void gated_score_pair_tc(const float* q, const float* k, const float* b, const float* g, int L, int K,
                                    float* P, float* A, float* xa, float* ka, float* fd) {
    const int tid = threadIdx.x, nt = blockDim.x;
    float* const xb = ka + (kChunk - kSub) * K;
    for (int e = tid; e < kChunk * kChunk; e += nt) P[e] = A[e] = 0.0f;
    __syncthreads();
    float* const part_p = fd;
    float* const part_a = fd + kSub * kSub;
    // The table and the staged rows in xa where a group takes more channels there; else the
    // table in fd.
    const DiagTable placed = diag_table(K, 3 * kSub, kDiagPairChannels, fd + 2 * kSub * kSub, xa);
    const int group = placed.group;
    float* const table = placed.table;
    float* const stage = table == xa ? xa + kDiagPairs * group : xa;
    for (int a = 0; a < L; a += kSub) {
        const int end = min(L, a + kSub), n = end - a;
        anchor_subchunk_running(q, k, g, a, end, K, xa, ka, b, xb);
        block_mma<4, false, false, 1, AHEAD>(
            n, a, K, [&](int r, int i) { return xa[(a + r) * K + i]; }, [&](int i, int j) { return ka[j * K + i]; },
            [&](int r, int j, float acc) { P[(a + r) * kChunk + j] = acc; });
        block_mma<4, false, false, 1, AHEAD>(
            n, a, K, [&](int r, int i) { return xb[r * K + i]; }, [&](int i, int j) { return ka[j * K + i]; },
            [&](int r, int j, float acc) { A[(a + r) * kChunk + j] = acc; });
        // Past this barrier no warp reads xa (the products are done), so the table may take it.
        __syncthreads();
        for (int i0 = 0; i0 < K; i0 += group) {
            const int nc = min(group, K - i0);
            const bool first = i0 == 0, last = i0 + nc == K;
            diagonal_factors(g, a, n, K, i0, nc, group, table);
            // Copied beside the exponentials (other threads first, other scratch): 3·kSub rows of
            // S floats, S odd, past the table in xa (which wide_diag_channels sized for both), or at
            // xa's start, where 3·kSub rows of S ≤ K + 1 floats fit for any K ≥ 3.
            const int S = table == xa ? group : nc | 1;
            float* const kT = stage;
            float* const qT = stage + kSub * S;
            float* const bkT = stage + 2 * kSub * S;
            for (int e = nt - 1 - tid; e < n * nc; e += nt) {   // from the block's last thread down
                const int r = e / nc, c = e % nc, t = a + r, i = i0 + c;
                kT[r * S + c] = k[t * K + i];
                qT[r * S + c] = q[t * K + i];
                bkT[r * S + c] = b[t] * k[t * K + i];
            }
            __syncthreads();
            // Entries e < kSub² of P's block (jj ≤ tt), then those of A's (jj < tt).
            for (int e = tid; e < 2 * kSub * kSub; e += nt) {
                const bool strict = e >= kSub * kSub;
                const int f = e % (kSub * kSub), tt = f / kSub, jj = f % kSub;
                if (tt >= n || (strict ? jj >= tt : jj > tt)) continue;
                const int t = a + tt, j = a + jj;
                float* part = strict ? part_a : part_p;
                float acc = first ? 0.0f : part[f];
                const float* row = table + diag_pair(tt, jj) * group;
                const float* xt = (strict ? bkT : qT) + tt * S;
                const float* kt = kT + jj * S;
                for (int c = 0; c < nc; ++c) acc += (xt[c] * kt[c]) * row[c];
                if (last) (strict ? A : P)[t * kChunk + j] = acc;
                else part[f] = acc;
            }
            __syncthreads();
        }
    }
}

// gated_scores_backward (gdn_common.cuh) for a per-channel gate, in its order and with its
// terms, but with the exponents from running sums: the anchored operands as
// anchor_subchunk_running (xa the same bits, ea's range sums in the opposite order), and for the
// diagonal blocks, per group of kDiagChannels channels, a table of e^{γ_t − γ_j} (a ≤ j ≤ t
// < end) that one walk per (j, i) fills, t upwards with a running Kahan sum (balanced_walks; version 1's
// bits, one addition per exponent instead of a range sum per term), then one thread per (t, i)
// forms gx_ti and one per (j, i) the diagonal block's part of gk_ji as version 1 does, both from
// the table (add_subchunk_gk took each of gk's exponentials again). fd is scratch of
// kDiagPairs·kDiagChannels floats.
__device__ inline void gated_scores_backward_running(const float* dM, const float* x, const float* k, const float* g,
                                                     int L, int K, bool strict, float* gx, float* gk, float* dgam,
                                                     float* xa, float* ea, float* fd) {
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int e = tid; e < kChunk * K; e += nt) gx[e] = gk[e] = 0.0f;
    __syncthreads();
    for (int a = 0; a < L; a += kSub) {
        const int end = min(L, a + kSub), n = end - a;
        anchor_subchunk_running(x, nullptr, g, a, end, K, xa, ea);
        // add_subchunk_gk's rows j < a, whose factors are anchored; rows a ≤ j < end below.
        for (int e = tid; e < a * K; e += nt) gk[e] = add_anchored_gk(gk[e], dM, xa, ea, a, end, K, e / K, e % K);
        for (int i0 = 0; i0 < K; i0 += kDiagChannels) {
            const int nc = min(kDiagChannels, K - i0);
            diagonal_factors(g, a, n, K, i0, nc, kDiagChannels, fd);
            __syncthreads();
            for (int e = tid; e < n * nc; e += nt) {
                const int tt = e / nc, c = e % nc, t = a + tt, i = i0 + c;
                const float* f = fd + c;
                float acc = gx[t * K + i];
                acc += anchored_gx(dM, k, ea, a, K, t, i) * f[diag_pair(tt, 0) * kDiagChannels];
                for (int jj = 0; jj < (strict ? tt : tt + 1); ++jj)
                    acc += dM[t * kChunk + a + jj] * k[(a + jj) * K + i] * f[diag_pair(tt, jj) * kDiagChannels];
                gx[t * K + i] = acc;
            }
            for (int e = tid; e < n * nc; e += nt) {
                const int jj = e / nc, c = e % nc, j = a + jj, i = i0 + c;
                const float* f = fd + c;
                float acc = gk[j * K + i];
                for (int tt = jj; tt < n; ++tt)
                    if (tt > jj || !strict)
                        acc += dM[(a + tt) * kChunk + j] * x[(a + tt) * K + i] * f[diag_pair(tt, jj) * kDiagChannels];
                gk[j * K + i] = acc;
            }
            __syncthreads();
        }
    }
    for (int e = tid; e < L * K; e += nt) dgam[e] += x[e] * gx[e] - k[e] * gk[e];
    __syncthreads();
}

}  // namespace kcv::gdn::cuda
