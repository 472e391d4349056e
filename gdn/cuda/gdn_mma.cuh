// Block-level matrix products on tensor cores for the version 2 kernels: warp-level
// mma.sync.m16n8k8 with TF32 operands and float32 accumulation, with float32 operands split
// into a TF32 high part and a TF32 low part (3xTF32), so that a product keeps float32 accuracy.
//
// A float32 value a is split as a = hi + lo + r with hi = tf32(a), lo = tf32(a − hi), |r| ≤
// 2^-22·|a| (tf32 keeps 10 fraction bits, rounded to nearest). A product a·b is taken as
// hi_a·hi_b + hi_a·lo_b + lo_a·hi_b: the dropped lo_a·lo_b and the two residuals leave at most
// about 3·2^-22·|a·b|, a few float32 unit roundoffs, against the float32 FMA of version 1. Each
// tile product of 8 terms is exact in the tensor core and added to a float32 accumulator, in a
// fixed order (k ascending, low terms before the high one), so results are bitwise reproducible.
// An operand known to be exactly representable in TF32 (raw bf16 or fp16 inputs: at most 11
// significant bits, exponent in range) has lo = 0 and its low term is skipped.
//
// This is the warp-synchronous mma.sync of sm_80, a first tensor-core step; wgmma (sm_90a,
// asynchronous, shared-memory descriptors) is the next one.
//
// Fragment layouts of mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 (PTX ISA), with
// g = lane / 4 and c = lane % 4:
//   A (16×8, row):  a0 (g, c), a1 (g + 8, c), a2 (g, c + 4), a3 (g + 8, c + 4)
//   B (8×8, col):   b0 (k = c, n = g), b1 (k = c + 4, n = g)
//   D (16×8):       d0 (g, 2c), d1 (g, 2c + 1), d2 (g + 8, 2c), d3 (g + 8, 2c + 1)
// host_emulation.hpp implements the same instruction from this table for the host build.
#pragma once

#include "gdn_common.cuh"

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
#else
inline uint32_t to_tf32(float x) { return emulation::to_tf32(x); }
inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) { emulation::mma_tf32(d, a, b); }
#endif

__device__ __forceinline__ float tf32_value(uint32_t bits) {
#if defined(KCV_GDN_HOST_EMULATION)
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
#else
    return __uint_as_float(bits);
#endif
}

// hi = tf32(x), lo = tf32(x − hi) (zero when x is exact in TF32).
template <bool EXACT>
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
    hi = to_tf32(x);
    lo = EXACT ? 0u : to_tf32(x - tf32_value(hi));
}

// out(m, n, Σ_{k<Kd} A(m, k)·B(k, n)) for every m < M, n < N, the products on tensor cores.
// A(m, k) and B(k, n) are called only for m < M, k < Kd, n < N (operands past those are zero),
// so M, N and Kd need not be multiples of the tile. Each warp of the block owns whole 16×(8·NT)
// output tiles, taken round robin, and calls `out` once per element it owns: an element's sum has
// one owner and one order. AEXACT / BEXACT: every value of that operand is exact in TF32.
// Every thread of the block must call it (it is warp-synchronous); it has no barrier of its own.
template <int NT, bool AEXACT, bool BEXACT, class FA, class FB, class FOut>
__device__ void block_mma(int M, int N, int Kd, FA A, FB B, FOut out) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int g = lane / 4, c = lane % 4;
    const int mtiles = (M + 15) / 16, ntiles = (N + 8 * NT - 1) / (8 * NT);
    for (int tile = warp; tile < mtiles * ntiles; tile += warps) {
        const int m0 = (tile / ntiles) * 16, n0 = (tile % ntiles) * 8 * NT;
        float acc[NT][4];
        for (int j = 0; j < NT; ++j)
            for (int r = 0; r < 4; ++r) acc[j][r] = 0.0f;
        for (int k0 = 0; k0 < Kd; k0 += 8) {
            uint32_t ahi[4], alo[4];
            for (int r = 0; r < 4; ++r) {
                const int m = m0 + g + (r & 1) * 8, k = k0 + c + (r >> 1) * 4;
                split_tf32<AEXACT>(m < M && k < Kd ? A(m, k) : 0.0f, ahi[r], alo[r]);
            }
            for (int j = 0; j < NT; ++j) {
                const int n = n0 + 8 * j + g;
                uint32_t bhi[2], blo[2];
                for (int r = 0; r < 2; ++r) {
                    const int k = k0 + c + r * 4;
                    split_tf32<BEXACT>(n < N && k < Kd ? B(k, n) : 0.0f, bhi[r], blo[r]);
                }
                if (!AEXACT) mma_tf32(acc[j], alo, bhi);
                if (!BEXACT) mma_tf32(acc[j], ahi, blo);
                mma_tf32(acc[j], ahi, bhi);
            }
        }
        for (int j = 0; j < NT; ++j)
            for (int r = 0; r < 4; ++r) {
                const int m = m0 + g + (r >> 1) * 8, n = n0 + 8 * j + 2 * c + (r & 1);
                if (m < M && n < N) out(m, n, acc[j][r]);
            }
    }
}

// True for the 16-bit input types, whose raw values are exact TF32 operands.
template <class TI>
constexpr bool exact_in_tf32 = sizeof(TI) == 2;

// gated_scores (gdn_common.cuh) with the sums over channels on tensor cores; the same support,
// zeros and exponents. XEXACT / KEXACT: x / k hold raw 16-bit inputs. For a per-channel gate
// only the cross-sub-chunk blocks (a plain product of the anchored operands) use tensor cores;
// the diagonal 16×16 blocks, whose factor e^{γ_ti − γ_ji} depends on the channel, stay scalar.
template <int GATE, bool XEXACT, bool KEXACT>
__device__ void gated_scores_tc(const float* x, const float* k, const float* g, int L, int K, bool strict, float* M,
                                float* xa, float* ka) {
    const int tid = threadIdx.x, nt = blockDim.x;
    if constexpr (GATE != 2) {
        block_mma<4, XEXACT, KEXACT>(
            kChunk, kChunk, K, [&](int t, int i) { return x[t * K + i]; }, [&](int i, int j) { return k[j * K + i]; },
            [&](int t, int j, float acc) {
                float out = 0.0f;
                if (t < L && j < L && (strict ? j < t : j <= t))
                    out = GATE == 1 ? acc * expf(log_decay_between(g, 1, j, t, 0)) : acc;
                M[t * kChunk + j] = out;
            });
        __syncthreads();
    } else {
        for (int e = tid; e < kChunk * kChunk; e += nt) M[e] = 0.0f;
        __syncthreads();
        for (int a = 0; a < L; a += kSub) {
            const int end = min(L, a + kSub);
            anchor_subchunk(x, k, g, a, end, K, xa, ka);
            block_mma<4, false, false>(
                end - a, a, K, [&](int r, int i) { return xa[(a + r) * K + i]; },
                [&](int i, int j) { return ka[j * K + i]; },
                [&](int r, int j, float acc) { M[(a + r) * kChunk + j] = acc; });
            for (int e = tid; e < (end - a) * kSub; e += nt) {
                const int t = a + e / kSub, j = a + e % kSub;
                if (j < end && (strict ? j < t : j <= t)) {
                    float acc = 0.0f;
                    for (int i = 0; i < K; ++i)
                        acc += x[t * K + i] * k[j * K + i] * expf(log_decay_between(g, K, j, t, i));
                    M[t * kChunk + j] = acc;
                }
            }
            __syncthreads();
        }
    }
}

// gated_scores_backward (gdn_common.cuh) for the gates without a per-channel factor (GATE 0, 1),
// the two products over the chunk's tokens on tensor cores:
//   gx = (dM ⊙ F) k,  gk = (dM ⊙ F)ᵀ x  on the support of M,
// then dgam as there. XEXACT / KEXACT: x / k hold raw 16-bit inputs.
template <int GATE, bool XEXACT, bool KEXACT>
__device__ void gated_scores_backward_tc(const float* dM, const float* x, const float* k, const float* F, int L,
                                         int K, bool strict, float* gx, float* gk, float* dgam) {
    static_assert(GATE != 2, "a per-channel gate uses gated_scores_backward");
    auto weight = [&](int t, int j) {
        if (t >= L || j >= L || (strict ? j >= t : j > t)) return 0.0f;
        return GATE == 1 ? dM[t * kChunk + j] * F[t * kChunk + j] : dM[t * kChunk + j];
    };
    block_mma<4, false, KEXACT>(
        kChunk, K, kChunk, weight, [&](int j, int i) { return k[j * K + i]; },
        [&](int t, int i, float acc) { gx[t * K + i] = acc; });
    block_mma<4, false, XEXACT>(
        kChunk, K, kChunk, [&](int j, int s) { return weight(s, j); }, [&](int s, int i) { return x[s * K + i]; },
        [&](int j, int i, float acc) { gk[j * K + i] = acc; });
    __syncthreads();
    if (GATE == 1) {
        for (int t = threadIdx.x; t < L; t += blockDim.x) {
            float acc = 0.0f;
            for (int i = 0; i < K; ++i) acc += x[t * K + i] * gx[t * K + i] - k[t * K + i] * gk[t * K + i];
            dgam[t] += acc;
        }
    }
    __syncthreads();
}

// The score gradient of version 2: on tensor cores for the gates without a per-channel factor,
// version 1's gated_scores_backward for a per-channel gate (F unused there; g, xa, ea unused
// otherwise).
template <int GATE, bool XEXACT, bool KEXACT>
__device__ __forceinline__ void score_gradients(const float* dM, const float* x, const float* k, const float* g,
                                                const float* F, int L, int K, bool strict, float* gx, float* gk,
                                                float* dgam, float* xa, float* ea) {
    if constexpr (GATE == 2)
        gated_scores_backward<GATE>(dM, x, k, g, F, L, K, strict, gx, gk, dgam, xa, ea);
    else
        gated_scores_backward_tc<GATE, XEXACT, KEXACT>(dM, x, k, F, L, K, strict, gx, gk, dgam);
}

}  // namespace kcv::gdn::cuda
