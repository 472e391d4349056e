// block_mma (gdn_mma.cuh) through wgmma, sm_90a's asynchronous warpgroup product: the same split
// operands, the same tile products in the same order, the same bits, for an output of at most
// 64×64.
//
// How. The operands are staged in shared memory 32 values of k at a time (a slice), each row of A
// and each column of B split per k step of eight on block_mma's grid (the largest |x| of the eight,
// grid_for) into its high part and its two remainders, written as six K-major tiles of 64 rows of
// 128 bytes in the 128-byte swizzle, which is the layout wgmma's descriptors read; each thread
// loads its values of the next slice while this slice's products run. Then, per k step,
// each warpgroup of the block's two multiplies its 32 columns: the high product m64n32k8 into a zeroed
// accumulator, committed as a group of its own, and the remainders' chain (block_mma's five
// products, in its order, into two accumulators of their own) as a second group; once the first
// group is done, the high product is added to the float32 sum, rounded to nearest, while the chain
// runs on. wgmma's k = 8 product adds as mma.sync's m16n8k8 does (aligned to the largest term,
// truncated), so each output is block_mma's value bit for bit. bench/wgmma_probe.cu case P checks
// this port against block_mma on an H200 (0 of 262,144 outputs differ; a control that accumulates
// the high products in wgmma differs on 21%); bench/gdn_wgmma_check.sh builds the library with
// and without it and compares every output's digest, and the times, on an H200.
//
// The host emulation (host_emulation.hpp) runs it too: shared memory is its host array, the
// fences and waits are nothing (its wgmma completes at once), and its wgmma reads the tiles through
// the descriptors and the swizzle and sums as mma.sync's model does. The kernels that call it run
// there with the GPU's two warpgroups (the Launcher's full_block, gdn_launch.cuh).
#pragma once

#include <cstring>

#include "gdn_mma.cuh"

namespace kcv::gdn::cuda {

// The staged slice: 32 values of k, six tiles of 64 rows × 128 bytes (A's high part, remainder
// and second remainder, then B's), and the slack that aligns them.
constexpr int kWgmmaSlice = 32;
constexpr uint32_t kWgmmaTile = 64 * 128;
constexpr size_t kWgmmaScratchBytes = 6 * kWgmmaTile + 1024;

// Whether the GPU library's chunk_output_tc multiplies on wgmma (block_mma_wgmma) or on mma.sync
// (block_mma), the same bits either way: wgmma unless built with KCV_GDN_WGMMA=0. On an H200 the
// two builds gave the same digest for every output of all 57 cases, and the wgmma product took
// chunk_output_tc from 2.81 to 2.02 ms for Gated DeltaNet at B4 T4096 H32 (bench/gdn_wgmma_check.sh,
// bench/RESULTS.md). The host emulation runs either (HostLauncher::output_on_wgmma, host_run.hpp;
// mma.sync unless a test asks). The experiment of rounded operands (KCV_GDN_TF32_OPERANDS,
// gdn_mma.cuh) is block_mma's alone.
#if (!defined(KCV_GDN_WGMMA) || KCV_GDN_WGMMA) && !defined(KCV_GDN_TF32_OPERANDS)
constexpr bool kOutputOnWgmma = true;
#else
constexpr bool kOutputOnWgmma = false;
#endif
// Whether reverse_scan_tc's products (members without a per-channel gate) run on wgmma as well
// (block_mma_tiled below), the same bits again: with the output kernel's, unless built with
// KCV_GDN_REVERSE_WGMMA=0, which keeps them on mma.sync so that one tree builds both libraries for
// a comparison. state_scan_tc stays on mma.sync: on wgmma, W read from global memory where it is
// split in place of its staged tile, it took 1.07–1.19 times as long (bench/RESULTS.md).
#if !defined(KCV_GDN_REVERSE_WGMMA) || KCV_GDN_REVERSE_WGMMA
constexpr bool kReverseOnWgmma = kOutputOnWgmma;
#else
constexpr bool kReverseOnWgmma = false;
#endif
// Whether chunk_grad_tc's products (members without a per-channel gate, whose shared memory leaves
// room for the split tiles) run on wgmma too, the same bits: only when built with
// KCV_GDN_GRAD_WGMMA=1. On an H100 it made forward+backward 1.05–1.11 times as long for those
// members, the split tiles having displaced the staged dO and V: the kernel then waits on operands
// read from global memory (long scoreboard 41% of its warp samples, issue slots 14% busy, one block
// per SM), which mma.sync's warps, each fetching a step ahead, hide better (bench/RESULTS.md).
#if defined(KCV_GDN_GRAD_WGMMA) && KCV_GDN_GRAD_WGMMA
constexpr bool kGradOnWgmma = kOutputOnWgmma;
#else
constexpr bool kGradOnWgmma = false;
#endif

// A shared-memory address: its offset in the emulation's array.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
#if defined(KCV_GDN_HOST_EMULATION)
    return static_cast<uint32_t>(static_cast<const unsigned char*>(p) -
                                 reinterpret_cast<const unsigned char*>(emulation::shared_memory));
#else
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#endif
}

// The 128-byte swizzle is a function of the shared-memory address (bits 4-6 XOR bits 7-9), and
// wgmma (and TMA) take a swizzled tile to start on a 1024-byte boundary (eight 128-byte rows).
// Dynamic shared memory is not promised that alignment: ask for 1 KiB more and round up.
__device__ __forceinline__ uint8_t* align_1024(uint8_t* p) {
    return p + ((1024u - (smem_u32(p) & 1023u)) & 1023u);
}

// Shared memory written by ordinary stores (the generic proxy) must be fenced before wgmma (the
// async proxy) reads it.
#if defined(KCV_GDN_HOST_EMULATION)
inline void fence_proxy_async_smem() {}
inline void wgmma_fence() {}
inline void wgmma_commit() {}
template <int N>
inline void wgmma_wait() {}
template <int R>
inline void fence_operands(float (&)[R]) {}
#else
__device__ __forceinline__ void fence_proxy_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// wgmma.fence: before the first wgmma, and whenever registers a wgmma reads (its accumulators)
// were accessed by other instructions. Chained wgmmas of one shape on the same accumulators need
// none between them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// The compiler sees a wgmma's accumulators as written when the asm statement issues, not when
// wgmma.wait_group returns. An empty asm that "rewrites" each register after the wait keeps reads
// of them from moving above it, and one before the first wgmma keeps their initialisation from
// moving past wgmma.fence.
template <int R>
__device__ __forceinline__ void fence_operands(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
#endif

// Matrix descriptor of a K-major operand tile in shared memory with the 128-byte swizzle: row r
// of the tile (an M or N index) is the 128 bytes at r·128, its 16-byte chunks permuted by r mod 8.
//   bits  0-13  start address >> 4
//   bits 16-29  leading-dimension byte offset >> 4: not read for swizzled K-major layouts whose
//               k step lies within one 128-byte row (8 tf32 = 32 bytes); 1 by convention.
//   bits 32-45  stride-dimension byte offset >> 4: the step between groups of 8 rows, 1024 bytes.
//   bits 49-51  base offset: 0, the tile starts on a 1024-byte boundary. Stepping the start address
//               by 32, 64, 96 bytes for the k steps leaves address bits 7-9 alone, so it stays 0.
//   bits 62-63  swizzle mode, 1 = 128-byte.
__device__ __forceinline__ uint64_t desc_k_sw128(uint32_t smem_addr) {
    return static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) |
           (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Byte offset of element (row r, k) of a K-major tile of 32 floats a row in the 128-byte swizzle:
// the row's 16-byte chunk k/4 moved to chunk (k/4) xor (r mod 8).
__device__ __forceinline__ uint32_t sw128_offset(int r, int k) {
    return r * 128 + ((((k >> 2) ^ r) & 7) << 4) + ((k & 3) << 2);
}

// D (64×32 f32) = A (64×8 tf32, smem) · B (32×8 tf32, smem)ᵀ + (scale_d ? D : 0). tf32 takes
// only K-major operands and has no transpose immediates. Thread t of the warpgroup, warp w = t/32,
// lane l: register 4j + 2h + e of d holds row 16w + l/4 + 8h, column 8j + 2(l%4) + e (h, e in
// {0, 1}), the m16n8 accumulator layout repeated down the four warps and along N.
#if defined(KCV_GDN_HOST_EMULATION)
inline void wgmma_m64n32k8_tf32(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
    emulation::wgmma_tf32(d, da, db, scale_d);
}

#else
__device__ __forceinline__ void wgmma_m64n32k8_tf32(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(scale_d)
        : "memory");
}
#endif

// Sixteen bytes x[0..3] to p, 16-byte aligned.
__device__ __forceinline__ void store16(uint8_t* p, const uint32_t* x) {
#if defined(KCV_GDN_HOST_EMULATION)
    std::memcpy(p, x, 16);
#else
    *reinterpret_cast<uint4*>(p) = make_uint4(x[0], x[1], x[2], x[3]);
#endif
}

// block_mma<NT, AEXACT, BEXACT>(M, N, Kd, A, B, out) for M, N ≤ 64: out(m, n, Σ_{k<Kd} A(m, k)·B(k, n))
// for every m < M, n < N, called once per element, with block_mma's value bit for bit (any NT,
// MT). A(m, k) and B(k, n) are called only for m < M, n < N, k < Kd, once each. scratch: at least
// kWgmmaScratchBytes of shared memory. A block of kThreads (two warpgroups) calls it, every thread;
// it ends with a barrier (the tiles are free again) and calls out after it. RUNNING is a control for
// the tests and the probe, never for the kernels: the high products accumulated across k in
// wgmma's own accumulator, as a plain GEMM would; it must differ from block_mma somewhere, or a
// comparison could not tell the two schedules apart.
template <bool AEXACT, bool BEXACT, bool RUNNING = false, class FA, class FB, class FOut>
__device__ void block_mma_wgmma(int M, int N, int Kd, FA A, FB B, FOut out, uint8_t* scratch) {
    static_assert(kThreads == 256, "two warpgroups, 32 columns each");
#if defined(KCV_GDN_HOST_EMULATION)
    if (blockDim.x != kThreads) std::abort();   // a kernel launched without the Launcher's full_block
#endif
    constexpr bool kPlain = AEXACT && BEXACT;   // one product a k step, of the raw values
    uint8_t* const tiles = align_1024(scratch);
    const int tid = threadIdx.x, wg = tid / 128;
    // Warpgroup wg multiplies B's rows (output columns) 32·wg on: 4096 bytes into each B tile, a
    // multiple of 1024, so the descriptors' base offset stays 0.
    auto desc = [&](int tile, int row0) { return desc_k_sw128(smem_u32(tiles + tile * kWgmmaTile + row0 * 128)); };
    const uint64_t ahi = desc(0, 0), alo = desc(1, 0), alo2 = desc(2, 0);
    const uint64_t bhi = desc(3, 32 * wg), blo = desc(4, 32 * wg), blo2 = desc(5, 32 * wg);
    float acc[16], low[16], low2[16], part[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) acc[r] = low[r] = low2[r] = part[r] = 0.0f;
    fence_operands(acc);
    fence_operands(low);
    fence_operands(low2);
    fence_operands(part);
    // One task per operand, row (A's m, B's n) and k step: 2·64·4, n fastest, so that a warp's
    // reads of B(k, n) are neighbours. Thread t takes row t mod 64 and k step t / 64 of both
    // operands. Its sixteen values are loaded a slice ahead: the next slice's loads (often from
    // global memory) are in flight while this slice's products run. The same values are split the
    // same way, so the bits are those of loading each slice where it is split.
    static_assert(2 * 64 * (kWgmmaSlice / 8) == 2 * kThreads, "one task of A and one of B a thread");
    const int row = tid % 64, kstep = tid / 64;
    float av[8], bv[8];
    auto load = [&](int s0) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int k = s0 + 8 * kstep + j;
            av[j] = row < M && k < Kd ? A(row, k) : 0.0f;
            bv[j] = row < N && k < Kd ? B(k, row) : 0.0f;
        }
    };
    // Eight values of one operand split on their grid into the operand's three tiles at t.
    const uint32_t at0 = sw128_offset(row, 8 * kstep), at1 = sw128_offset(row, 8 * kstep + 4);
    auto stage = [&]<bool EXACT>(const float(&v)[8], uint8_t* t) {
        uint32_t m = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) m = max(m, float_bits(v[j]) & 0x7FFFFFFFu);
        const float grid = grid_for(m);
        uint32_t hi[8], lo[8], lo2[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            if (kPlain) hi[j] = float_bits(v[j]);
            else split_on_grid<EXACT>(v[j], grid, hi[j], lo[j], lo2[j]);
        }
        auto put = [&](uint8_t* tile, const uint32_t(&x)[8]) {
            store16(tile + at0, x);
            store16(tile + at1, x + 4);
        };
        put(t, hi);
        if (!kPlain) {
            put(t + kWgmmaTile, lo);
            put(t + 2 * kWgmmaTile, lo2);
        }
    };
    load(0);
    for (int s0 = 0; s0 < Kd; s0 += kWgmmaSlice) {
        stage.template operator()<AEXACT>(av, tiles);
        stage.template operator()<BEXACT>(bv, tiles + 3 * kWgmmaTile);
        fence_proxy_async_smem();
        __syncthreads();
        if (s0 + kWgmmaSlice < Kd) load(s0 + kWgmmaSlice);
#pragma unroll
        for (int step = 0; step < kWgmmaSlice / 8; ++step) {
            if (s0 + 8 * step >= Kd) break;
            const uint64_t o = 2 * step;   // 32 bytes a k step, in the descriptors' 16-byte units
            wgmma_fence();
            if constexpr (RUNNING) wgmma_m64n32k8_tf32(acc, ahi + o, bhi + o, s0 + step > 0);
            else wgmma_m64n32k8_tf32(part, ahi + o, bhi + o, 0);
            wgmma_commit();
            if (!kPlain) {
                wgmma_m64n32k8_tf32(low, alo + o, bhi + o, 1);
                if (!AEXACT) wgmma_m64n32k8_tf32(low, alo2 + o, bhi + o, 1);
                wgmma_m64n32k8_tf32(low, ahi + o, blo + o, 1);
                if (!BEXACT) wgmma_m64n32k8_tf32(low, ahi + o, blo2 + o, 1);
                wgmma_m64n32k8_tf32(low2, alo + o, blo + o, 1);
            }
            wgmma_commit();
            wgmma_wait<1>();
            if constexpr (!RUNNING) {
                fence_operands(part);
#pragma unroll
                for (int r = 0; r < 16; ++r) acc[r] += part[r];
            }
        }
        wgmma_wait<0>();
        if constexpr (RUNNING) fence_operands(acc);
        fence_operands(low);
        fence_operands(low2);
        __syncthreads();   // the tiles are read; the next slice may overwrite them
    }
    const int w = tid % 128 / 32, l = tid % 32;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        const int m = 16 * w + l / 4 + 8 * (r / 2 % 2), n = 32 * wg + 8 * (r / 4) + 2 * (l % 4) + r % 2;
        if (m < M && n < N) out(m, n, kPlain ? acc[r] : acc[r] + (low[r] + low2[r] * kLowUnscale) * kLowUnscale);
    }
}

// block_mma_wgmma for any M and N: its 64×64 output tiles one after another, row tiles outer. Each
// output's sum reads its row of A and its column of B alone, split on the same grids whatever
// the tile, so every output is block_mma's value bit for bit; an operand read by two tiles is
// split again for each. Same contract as block_mma_wgmma otherwise (every thread calls it, out is
// called after each tile's closing barrier).
template <bool AEXACT, bool BEXACT, class FA, class FB, class FOut>
__device__ void block_mma_tiled(int M, int N, int Kd, FA A, FB B, FOut out, uint8_t* scratch) {
    for (int m0 = 0; m0 < M; m0 += 64)
        for (int n0 = 0; n0 < N; n0 += 64)
            block_mma_wgmma<AEXACT, BEXACT>(
                min(64, M - m0), min(64, N - n0), Kd, [&](int m, int k) { return A(m0 + m, k); },
                [&](int k, int n) { return B(k, n0 + n); }, [&](int m, int n, float acc) { out(m0 + m, n0 + n, acc); },
                scratch);
}

// One product of a kernel built both ways: on mma.sync (block_mma<NT, AEXACT, BEXACT, MT>, no
// barrier of its own, scratch unused) or on wgmma (WG: block_mma_tiled, its split tiles in
// scratch, a barrier after each output tile). The same bits either way; every thread calls it.
template <bool WG, int NT, bool AEXACT, bool BEXACT, int MT = 1, class FA, class FB, class FOut>
__device__ __forceinline__ void block_product(int M, int N, int Kd, FA A, FB B, FOut out, uint8_t* scratch) {
    if constexpr (WG) block_mma_tiled<AEXACT, BEXACT>(M, N, Kd, A, B, out, scratch);
    else block_mma<NT, AEXACT, BEXACT, MT>(M, N, Kd, A, B, out);
}

}  // namespace kcv::gdn::cuda
