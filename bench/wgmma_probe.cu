// The Hopper building blocks the next recurrence kernels will stand on, each checked on its own:
// wgmma.mma_async with operands in shared memory, loaded there by TMA (cp.async.bulk.tensor) with
// the 128-byte swizzle, through matrix descriptors written by hand, and the accumulator written
// back in the documented fragment layout. Every correctness case either prints PASS or names the
// first element that differs (row, column, expected, got), so a wrong descriptor field, swizzle or
// fragment index shows up as the case that broke and where.
//
//   A  bf16 × bf16 → f32, wgmma m64n128k16, A (64×64) and B (128×64) both K-major in shared
//      memory (D = A·Bᵀ, four k-steps), TMA 2-D loads with SWIZZLE_128B and an mbarrier. Small
//      integer inputs make every product and partial sum exact in float32, so the result must match
//      the host bit for bit; random normal inputs are then checked against float64 with a tolerance.
//      The first k-step runs with scale-d = 0 over accumulators holding garbage, so that path is
//      checked too.
//   B  the same with A from registers (four .b32 per thread per k-step, the m64nNk16 A fragment).
//   C  tf32 wgmma m64n128k8, both operands K-major in shared memory, integer inputs bit for bit;
//      then 3xTF32 (a = a_hi + a_lo, a_hi = cvt.rna.tf32(a), a_lo = cvt.rna.tf32(a - a_hi), product
//      ≈ a_lo·b_hi + a_hi·b_lo + a_hi·b_hi) on random normal inputs, its error against float64 next
//      to a single tf32 product's and a float32 host loop's: does the split recover float32 accuracy
//      through wgmma?
//   R  how wgmma adds: the rounding and alignment cases that settled mma.sync's sums on an H200
//      (bench/mma_subnormals.cu; bench/RESULTS.md, "How mma.sync adds"), through case C's tf32
//      kernel and case A's bf16 kernel. The first k-step (scale-d = 0) leaves D[0][0] = C exactly,
//      one product C·1; the second adds the case's products; the others add zeros. Each row prints
//      the exact sum rounded to nearest, what mma.sync gave on an H200, and what wgmma gives. A
//      measurement, not a gate: it says whether gdn/cuda/host_emulation.hpp's model of the tensor
//      cores' sums (every term aligned to the largest and cut toward zero two bits under float32's
//      precision, the sum cut toward zero) also holds for wgmma, which an emulated wgmma kernel
//      would rely on. Three more bf16 cases ask whether a k = 16 tile's products are aligned as one
//      group or as two groups of eight (bench/mma_subnormals.cu asks mma.sync the same; on an H200
//      both sum the sixteen as one group).
//   T  throughput: 2 CTAs per SM, one warpgroup each, looping wgmma m64n256k16 bf16 (and m64n128k8
//      tf32) on operands resident in shared memory; TFLOP/s, median of 7 timed runs after a warm-up,
//      and the ratio to the H200's nominal dense peaks (989 bf16, 494 tf32).
//   P  the recurrence kernels' float32-accurate product (gdn/cuda/gdn_mma.cuh's block_mma: every
//      operand split on a grid shared by a row's eight values of a k step, five remainder products
//      and the high product added to the float32 sum per k step) on wgmma: the library's port
//      (gdn/cuda/gdn_wgmma.cuh's block_mma_wgmma, two warpgroups of m64n32k8 from shared memory,
//      the split operands written there in the 128-byte swizzle) against block_mma itself on the
//      same float32 inputs, at 64×64×32 and at a shape whose rows, columns and k end inside a tile:
//      are the outputs the same bits? A wgmma version of the kernels can then be checked against
//      today's by the digests of every output. Its control, which accumulates the high products
//      across k in wgmma as a plain GEMM would, must differ.
//   S  the float32-accurate products of the recurrence kernels (gdn/cuda/gdn_mma.cuh) through wgmma:
//      per 8-wide k step, five tf32 m64n64k8 products of the operands' remainders chained into two
//      accumulators of their own and one of the high parts into a zeroed accumulator, which is then
//      added to the float32 sum (so that the tensor cores' truncating sums never carry the result
//      across k steps). That addition needs the product done: a wait per k step, or per P k steps
//      with P zeroed accumulators, or the high products committed as a group of their own so that
//      the remainders' chain runs on while the sum is added. Rates of each, with two CTAs and with
//      one CTA per SM, against the same six products a k step issued with no wait inside the loop:
//      what a wgmma port that keeps float32 accuracy could reach. Throughput only; the operands are
//      not checked.
//   M  TMA bandwidth: 1 GiB of bf16 streamed through a 6-stage ring in shared memory (one producer
//      thread, four consumer warps summing the words so the loads are live, full/empty mbarriers),
//      GB/s next to plain vector loads and cudaMemcpy device-to-device; the sums are checked against
//      the host, so the stream also checks that TMA delivered every byte.
//
// Errors of random cases are max over elements of |got - exact| / sum_k |a_ik b_kj|: the error of a
// dot product relative to the size of its terms, which is what rounding of inputs and partial sums
// is measured against (an element-wise relative error is unbounded where terms cancel).
//
// Exit status 0 only if every correctness case passes. Needs sm_90a (H100/H200); no library beyond
// the CUDA runtime: cuTensorMapEncodeTiled is taken through the runtime's driver entry point, so no
// -lcuda. Built as the kernels are, without contraction (-fmad=false), so that case P's block_mma
// is the kernels' own (their header is included by a path relative to this file).
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -fmad=false bench/wgmma_probe.cu -o wgmma_probe
//   ./wgmma_probe
#include "../gdn/cuda/gdn_wgmma.cuh"  // block_mma, its split and the wgmma primitives the kernels use

#include <cuda.h>  // CUtensorMap and the enums of cuTensorMapEncodeTiled; types only, nothing linked
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

const char* g_stage = "setup";  // the case under way, named by any CUDA error

#define CHECK(x)                                                                                     \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            std::fprintf(stderr, "%s:%d: [%s] %s: %s\n", __FILE__, __LINE__, g_stage, #x,            \
                         cudaGetErrorString(e_));                                                    \
            std::exit(1);                                                                            \
        }                                                                                            \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Device primitives: shared-memory addresses, mbarriers, TMA, wgmma. Those the recurrence
// kernels use too come from gdn/cuda/gdn_wgmma.cuh: shared-memory addresses and their 1024-byte
// alignment, the async-proxy fence, wgmma's fence, commit and wait, the accumulators' compiler
// fence, the 128-byte-swizzle descriptor of a K-major tile and its element offsets.
// ---------------------------------------------------------------------------------------------

using kcv::gdn::cuda::align_1024;
using kcv::gdn::cuda::desc_k_sw128;
using kcv::gdn::cuda::fence_operands;
using kcv::gdn::cuda::fence_proxy_async_smem;
using kcv::gdn::cuda::smem_u32;
using kcv::gdn::cuda::sw128_offset;
using kcv::gdn::cuda::wgmma_commit;
using kcv::gdn::cuda::wgmma_fence;
using kcv::gdn::cuda::wgmma_wait;

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Makes initialised barriers visible to the other threads and to the async proxy, through which
// the TMA unit signals them. Followed by __syncthreads().
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrives once and adds `bytes` to the transaction count the phase waits for; TMA's complete_tx
// takes them off as the data lands.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
    return ok != 0;
}

// Waits for the phase of parity `parity` to complete. A barrier that never completes (a wrong
// transaction count, a TMA that faulted) would hang the probe; after about ten seconds the kernel
// traps instead, and the host names the case in the launch error.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    if (mbar_try_wait(bar, parity)) return;
    const long long start = clock64();
    while (!mbar_try_wait(bar, parity))
        if (clock64() - start > 20000000000LL) __trap();
}

// One 2-D box of the tensor `map` at element coordinates (c0 along the contiguous dimension, c1
// along rows) into shared memory at `dst`, completing `bar`'s transaction bytes. The map must be a
// __grid_constant__ kernel parameter (or in global/const memory): its generic address is passed.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

__device__ __forceinline__ void fence_operand(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// The accumulator operands of the asm statements below: "%0, ..., %63" and "%0, ..., %127".
#define KCV_D64                                                                                  \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                     \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "           \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "           \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define KCV_D128                                                                                 \
    KCV_D64 ", "                                                                                 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "           \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "           \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define KCV_F8(d, i)                                                                                    \
    "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]),           \
        "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define KCV_F64(d, i)                                                                                   \
    KCV_F8(d, (i) + 0), KCV_F8(d, (i) + 8), KCV_F8(d, (i) + 16), KCV_F8(d, (i) + 24), KCV_F8(d, (i) + 32), \
        KCV_F8(d, (i) + 40), KCV_F8(d, (i) + 48), KCV_F8(d, (i) + 56)

// D (64×128 f32) = A (64×16 bf16, smem) · B (128×16 bf16, smem)ᵀ + (scale_d ? D : 0). Both operands
// K-major, so imm-trans-a = imm-trans-b = 0; imm-scale-a = imm-scale-b = 1.
__device__ __forceinline__ void wgmma_m64n128k16_bf16_ss(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" KCV_D64 "}, %64, %65, p, 1, 1, 0, 0;\n"
        "}\n"
        : KCV_F64(d, 0)
        : "l"(da), "l"(db), "r"(scale_d)
        : "memory");
}

// The same with A from registers: a[0..3] is this thread's part of the 64×16 A tile (below).
// Register-sourced A has no transpose immediate; imm-trans-b = 0 (B K-major).
__device__ __forceinline__ void wgmma_m64n128k16_bf16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db,
                                                         int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" KCV_D64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n"
        "}\n"
        : KCV_F64(d, 0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d)
        : "memory");
}

// D (64×128 f32) = A (64×8 tf32, smem) · B (128×8 tf32, smem)ᵀ + (scale_d ? D : 0). tf32 takes only
// K-major operands and has no transpose immediates.
__device__ __forceinline__ void wgmma_m64n128k8_tf32_ss(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" KCV_D64 "}, %64, %65, p, 1, 1;\n"
        "}\n"
        : KCV_F64(d, 0)
        : "l"(da), "l"(db), "r"(scale_d)
        : "memory");
}

// D (64×256 f32) = A (64×16 bf16, smem) · B (256×16 bf16, smem)ᵀ + D: the throughput loop's shape.
__device__ __forceinline__ void wgmma_m64n256k16_bf16_ss(float (&d)[128], uint64_t da, uint64_t db) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" KCV_D128 "}, %128, %129, p, 1, 1, 0, 0;\n"
        "}\n"
        : KCV_F64(d, 0), KCV_F64(d, 64)
        : "l"(da), "l"(db), "r"(1)
        : "memory");
}

// Writes the accumulators of an m64nN wgmma (R = N/2 registers per thread) to out (64×N,
// row-major). Thread t of the warpgroup, warp w = t/32, lane l: register 4j + 2h + e holds
// row 16w + l/4 + 8h, column 8j + 2(l%4) + e (h, e in {0, 1}), the m16n8 accumulator layout
// repeated down the four warps and along N.
template <int R>
__device__ __forceinline__ void store_accumulators(const float (&d)[R], float* out) {
    constexpr int N = 2 * R;
    const int t = threadIdx.x & 127, w = t >> 5, l = t & 31;
    const int row = 16 * w + (l >> 2), col = 2 * (l & 3);
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
        out[row * N + 8 * j + col] = d[4 * j + 0];
        out[row * N + 8 * j + col + 1] = d[4 * j + 1];
        out[(row + 8) * N + 8 * j + col] = d[4 * j + 2];
        out[(row + 8) * N + 8 * j + col + 1] = d[4 * j + 3];
    }
}

// Accumulators start as this, not zero, so that a first wgmma with scale-d = 0 that read them anyway
// would show.
constexpr float kGarbage = -1.0e30f;

// ---------------------------------------------------------------------------------------------
// Correctness kernels: one CTA, one warpgroup.
// ---------------------------------------------------------------------------------------------

constexpr int kM = 64, kN = 128;
constexpr int kKBf16 = 64;  // four k-steps of 16; one 128-byte swizzle row per tile row
constexpr int kKTf32 = 32;  // four k-steps of 8; likewise 128 bytes
constexpr uint32_t kTileA = kM * 128, kTileB = kN * 128;  // bytes: 8 KiB and 16 KiB

// Case A: D = A·Bᵀ, A 64×64 and B 128×64 bf16, both by TMA into 128B-swizzled shared memory.
__global__ void __launch_bounds__(128) bf16_ss_kernel(const __grid_constant__ CUtensorMap map_a,
                                                      const __grid_constant__ CUtensorMap map_b, float* out) {
    extern __shared__ uint8_t smem_raw[];
    __shared__ alignas(8) uint64_t bar;
    uint8_t* sa = align_1024(smem_raw);
    uint8_t* sb = sa + kTileA;
    const uint32_t b = smem_u32(&bar);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_expect_tx(b, kTileA + kTileB);
        tma_load_2d(smem_u32(sa), &map_a, b, 0, 0);
        tma_load_2d(smem_u32(sb), &map_b, b, 0, 0);
    }
    mbar_wait(b, 0);

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = kGarbage;
    fence_operands(d);
    wgmma_fence();
    const uint64_t da = desc_k_sw128(smem_u32(sa)), db = desc_k_sw128(smem_u32(sb));
#pragma unroll
    for (int kk = 0; kk < kKBf16 / 16; ++kk)  // k-step kk starts 32·kk bytes into each row: +2·kk in >>4 units
        wgmma_m64n128k16_bf16_ss(d, da + 2 * kk, db + 2 * kk, kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(d);
    store_accumulators(d, out);
}

// Case B: A from registers, read straight from global (row-major 64×64 bf16); B by TMA as in A.
// A fragment of warp w, lane l, g = l/4, c = 2(l%4), k-step kk (k0 = 16kk), each .b32 two
// consecutive-k bf16 with the lower k in the low half:
//   a0 = A[16w+g][k0+c..+1], a1 = A[16w+g+8][k0+c..+1], a2 = A[16w+g][k0+c+8..+9], a3 = A[16w+g+8][k0+c+8..+9]
__global__ void __launch_bounds__(128) bf16_rs_kernel(const uint16_t* a_global,
                                                      const __grid_constant__ CUtensorMap map_b, float* out) {
    extern __shared__ uint8_t smem_raw[];
    __shared__ alignas(8) uint64_t bar;
    uint8_t* sb = align_1024(smem_raw);
    const uint32_t b = smem_u32(&bar);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_expect_tx(b, kTileB);
        tma_load_2d(smem_u32(sb), &map_b, b, 0, 0);
    }

    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, row = 16 * w + (l >> 2), c = 2 * (l & 3);
    auto pair = [&](int r, int k) { return *reinterpret_cast<const uint32_t*>(a_global + r * kKBf16 + k); };
    uint32_t a[kKBf16 / 16][4];
#pragma unroll
    for (int kk = 0; kk < kKBf16 / 16; ++kk) {
        a[kk][0] = pair(row, 16 * kk + c);
        a[kk][1] = pair(row + 8, 16 * kk + c);
        a[kk][2] = pair(row, 16 * kk + c + 8);
        a[kk][3] = pair(row + 8, 16 * kk + c + 8);
    }
    mbar_wait(b, 0);

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = kGarbage;
    fence_operands(d);
    wgmma_fence();  // orders the register writes of a[] and d[] before the wgmmas that read them
    const uint64_t db = desc_k_sw128(smem_u32(sb));
#pragma unroll
    for (int kk = 0; kk < kKBf16 / 16; ++kk) wgmma_m64n128k16_bf16_rs(d, a[kk], db + 2 * kk, kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(d);
#pragma unroll
    for (int kk = 0; kk < kKBf16 / 16; ++kk)  // a[] must stay put until the wgmmas have read it
        for (int i = 0; i < 4; ++i) fence_operand(a[kk][i]);
    store_accumulators(d, out);
}

__device__ __forceinline__ float tf32_rna(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
}

// hi = tf32(x), lo = tf32(x - hi), both as float32 bit patterns with the low 13 bits zero.
__global__ void tf32_split_kernel(const float* x, float* hi, float* lo, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float h = tf32_rna(x[i]);
    hi[i] = h;
    lo[i] = tf32_rna(x[i] - h);
}

// Case C: D = A·Bᵀ in tf32, A 64×32 and B 128×32 float32 (hi and lo parts), all four tiles by TMA.
// Split = false: A_hi·B_hiᵀ. Split = true: per k-step A_lo·B_hiᵀ, A_hi·B_loᵀ, then A_hi·B_hiᵀ, the
// small terms first, into the same accumulators.
template <bool Split>
__global__ void __launch_bounds__(128) tf32_ss_kernel(const __grid_constant__ CUtensorMap map_ahi,
                                                      const __grid_constant__ CUtensorMap map_alo,
                                                      const __grid_constant__ CUtensorMap map_bhi,
                                                      const __grid_constant__ CUtensorMap map_blo, float* out) {
    extern __shared__ uint8_t smem_raw[];
    __shared__ alignas(8) uint64_t bar;
    uint8_t* ahi = align_1024(smem_raw);
    uint8_t* alo = ahi + kTileA;
    uint8_t* bhi = alo + kTileA;
    uint8_t* blo = bhi + kTileB;
    const uint32_t b = smem_u32(&bar);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_expect_tx(b, 2 * (kTileA + kTileB));
        tma_load_2d(smem_u32(ahi), &map_ahi, b, 0, 0);
        tma_load_2d(smem_u32(alo), &map_alo, b, 0, 0);
        tma_load_2d(smem_u32(bhi), &map_bhi, b, 0, 0);
        tma_load_2d(smem_u32(blo), &map_blo, b, 0, 0);
    }
    mbar_wait(b, 0);

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = kGarbage;
    fence_operands(d);
    wgmma_fence();
    const uint64_t dah = desc_k_sw128(smem_u32(ahi)), dal = desc_k_sw128(smem_u32(alo));
    const uint64_t dbh = desc_k_sw128(smem_u32(bhi)), dbl = desc_k_sw128(smem_u32(blo));
#pragma unroll
    for (int kk = 0; kk < kKTf32 / 8; ++kk) {  // 8 tf32 = 32 bytes per k-step, as for bf16
        if (Split) {
            wgmma_m64n128k8_tf32_ss(d, dal + 2 * kk, dbh + 2 * kk, kk > 0);
            wgmma_m64n128k8_tf32_ss(d, dah + 2 * kk, dbl + 2 * kk, 1);
            wgmma_m64n128k8_tf32_ss(d, dah + 2 * kk, dbh + 2 * kk, 1);
        } else {
            wgmma_m64n128k8_tf32_ss(d, dah + 2 * kk, dbh + 2 * kk, kk > 0);
        }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(d);
    store_accumulators(d, out);
}

// ---------------------------------------------------------------------------------------------
// Throughput: operands written once into shared memory, then many wgmmas on them.
// ---------------------------------------------------------------------------------------------

__host__ __device__ inline uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

// A value in [-1, 1] with three significant bits: exact in bf16 and tf32, and not zero-heavy (the
// tensor cores' power, and so their clock, depends on the data).
__device__ __forceinline__ float small_value(uint32_t i) {
    return static_cast<float>(static_cast<int>(hash32(i) % 17u) - 8) * 0.125f;
}

constexpr int kRateIters = 20000;  // per launch; each iteration is four wgmmas (one 64-wide K tile)
constexpr uint32_t kRateBf16A = 64 * 128, kRateBf16B = 256 * 128;   // 64×64 and 256×64 bf16
constexpr uint32_t kRateTf32A = 64 * 128, kRateTf32B = 128 * 128;   // 64×32 and 128×32 f32
// Each rate CTA asks for more shared memory than it uses so that no more than two fit on an SM
// (2 × 101 KiB of the 228): the grid of 2 × SMs then lands as exactly two warpgroups per SM.
constexpr int kRateSmem = 100 * 1024;

// bf16 m64n256k16: per iteration 4 × 2·64·256·16 flops per CTA.
__global__ void __launch_bounds__(128) bf16_rate_kernel(int iters, float* out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t* sa = align_1024(smem_raw);
    uint8_t* sb = sa + kRateBf16A;
    uint32_t* words = reinterpret_cast<uint32_t*>(sa);
    for (uint32_t i = threadIdx.x; i < (kRateBf16A + kRateBf16B) / 4; i += blockDim.x) {
        const uint32_t lo = __float_as_uint(small_value(2 * i + blockIdx.x)) >> 16;  // exact: truncation is bf16
        const uint32_t hi = __float_as_uint(small_value(2 * i + 1 + blockIdx.x)) >> 16;
        words[i] = lo | (hi << 16);
    }
    fence_proxy_async_smem();
    __syncthreads();

    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    fence_operands(d);
    const uint64_t da = desc_k_sw128(smem_u32(sa)), db = desc_k_sw128(smem_u32(sb));
    for (int it = 0; it < iters; ++it) {
        // A fence at the top of each iteration, as a GEMM main loop has one per K tile: ptxas cannot
        // tell that the accumulators entering the loop were last written by wgmma and would insert
        // one itself. It orders register accesses and does not wait for the wgmmas in flight.
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) wgmma_m64n256k16_bf16_ss(d, da + 2 * kk, db + 2 * kk);
        wgmma_commit();
        wgmma_wait<1>();  // at most two groups (eight wgmmas) in flight
    }
    wgmma_wait<0>();
    fence_operands(d);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 128; ++i) s += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;  // keeps the work live
}

// tf32 m64n128k8: per iteration 4 × 2·64·128·8 flops per CTA.
__global__ void __launch_bounds__(128) tf32_rate_kernel(int iters, float* out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t* sa = align_1024(smem_raw);
    uint8_t* sb = sa + kRateTf32A;
    float* words = reinterpret_cast<float*>(sa);
    for (uint32_t i = threadIdx.x; i < (kRateTf32A + kRateTf32B) / 4; i += blockDim.x)
        words[i] = small_value(i + blockIdx.x);
    fence_proxy_async_smem();
    __syncthreads();

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.0f;
    fence_operands(d);
    const uint64_t da = desc_k_sw128(smem_u32(sa)), db = desc_k_sw128(smem_u32(sb));
    for (int it = 0; it < iters; ++it) {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) wgmma_m64n128k8_tf32_ss(d, da + 2 * kk, db + 2 * kk, 1);
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    fence_operands(d);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) s += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// D (64×64 f32) = A (64×8 tf32, smem) · B (64×8 tf32, smem)ᵀ + (scale_d ? D : 0).
#define KCV_D32                                                                                  \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                     \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
__device__ __forceinline__ void wgmma_m64n64k8_tf32_ss(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" KCV_D32 "}, %32, %33, p, 1, 1;\n"
        "}\n"
        : KCV_F8(d, 0), KCV_F8(d, 8), KCV_F8(d, 16), KCV_F8(d, 24)
        : "l"(da), "l"(db), "r"(scale_d)
        : "memory");
}

// Case S. Six 64×32 tf32 tiles (A's high part, remainder and second remainder, then B's), each 64
// rows of 128 bytes; an iteration is four k steps of eight. MODE 0: the six products of each k step
// chained with no wait inside the iteration (the issue rate's ceiling; one wait per iteration as in
// the T loop). MODE 1: P k steps' high products into P zeroed accumulators and their remainders'
// chain, one commit, a full wait, then the P partial sums added to the float32 sum in k order.
// MODE 2: the same, the high products committed first and the chain second, waiting only for the
// first group, so the chain overlaps the additions and the next steps' issue.
constexpr uint32_t kSplitTile = 64 * 128;

// Descriptors of the six split tiles from base on, kSplitTile bytes each (case S).
struct SplitTiles {
    uint64_t ahi, alo, alo2, bhi, blo, blo2;
};
__device__ __forceinline__ SplitTiles split_tiles(uint8_t* base) {
    auto at = [&](int i) { return desc_k_sw128(smem_u32(base + i * kSplitTile)); };
    return {at(0), at(1), at(2), at(3), at(4), at(5)};
}

// The remainders' five products of k step k, in gdn_mma.cuh's order (block_mma).
__device__ __forceinline__ void split_remainders(float (&low)[32], float (&low2)[32], const SplitTiles& t, int k) {
    const uint64_t o = 2 * k;   // 32 bytes a k step, in the descriptor's 16-byte units
    wgmma_m64n64k8_tf32_ss(low, t.alo + o, t.bhi + o, 1);
    wgmma_m64n64k8_tf32_ss(low, t.alo2 + o, t.bhi + o, 1);
    wgmma_m64n64k8_tf32_ss(low, t.ahi + o, t.blo + o, 1);
    wgmma_m64n64k8_tf32_ss(low, t.ahi + o, t.blo2 + o, 1);
    wgmma_m64n64k8_tf32_ss(low2, t.alo + o, t.blo + o, 1);
}
template <int MODE, int P>
__global__ void __launch_bounds__(128) split_rate_kernel(int iters, float* out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t* base = align_1024(smem_raw);
    float* words = reinterpret_cast<float*>(base);
    for (uint32_t i = threadIdx.x; i < 6 * kSplitTile / 4; i += blockDim.x) words[i] = small_value(i + blockIdx.x);
    fence_proxy_async_smem();
    __syncthreads();
    const SplitTiles t = split_tiles(base);
    float acc[32], low[32], low2[32], part[P][32];
#pragma unroll
    for (int r = 0; r < 32; ++r) {
        acc[r] = low[r] = low2[r] = 0.0f;
#pragma unroll
        for (int p = 0; p < P; ++p) part[p][r] = 0.0f;
    }
    fence_operands(acc);
    fence_operands(low);
    fence_operands(low2);
#pragma unroll
    for (int p = 0; p < P; ++p) fence_operands(part[p]);
    for (int it = 0; it < iters; ++it) {
        if constexpr (MODE == 0) {
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                split_remainders(low, low2, t, k);
                wgmma_m64n64k8_tf32_ss(acc, t.ahi + 2 * k, t.bhi + 2 * k, 1);
            }
            wgmma_commit();
            wgmma_wait<1>();
        } else {
#pragma unroll
            for (int k0 = 0; k0 < 4; k0 += P) {
                wgmma_fence();
#pragma unroll
                for (int p = 0; p < P; ++p)
                    wgmma_m64n64k8_tf32_ss(part[p], t.ahi + 2 * (k0 + p), t.bhi + 2 * (k0 + p), 0);
                if (MODE == 2) wgmma_commit();
#pragma unroll
                for (int p = 0; p < P; ++p) split_remainders(low, low2, t, k0 + p);
                wgmma_commit();
                if (MODE == 2) wgmma_wait<1>();
                else wgmma_wait<0>();
#pragma unroll
                for (int p = 0; p < P; ++p) {
                    fence_operands(part[p]);
#pragma unroll
                    for (int r = 0; r < 32; ++r) acc[r] += part[p][r];
                }
            }
        }
    }
    wgmma_wait<0>();
    fence_operands(acc);
    fence_operands(low);
    fence_operands(low2);
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < 32; ++r) s += acc[r] + (low[r] + low2[r] * kcv::gdn::cuda::kLowUnscale) * kcv::gdn::cuda::kLowUnscale;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;  // keeps the work live
}

// Case P. A (64×32) and Bᵀ (64×32), row-major float32 in global memory; D = A·B (64×64).
constexpr int kPortK = 32;

// block_mma, as the kernels call it: four warps, two row tiles and four column tiles a warp; the
// first M×N outputs of the product over the first Kd values of k (rows of 64 in out).
__global__ void __launch_bounds__(128) port_reference_kernel(const float* a, const float* bt, float* out, int M,
                                                             int N, int Kd) {
    kcv::gdn::cuda::block_mma<4, false, false, 2>(
        M, N, Kd, [&](int m, int k) { return a[m * kPortK + k]; }, [&](int k, int n) { return bt[n * kPortK + k]; },
        [&](int m, int n, float v) { out[m * 64 + n] = v; });
}

// The same through the library's port, block_mma_wgmma (gdn/cuda/gdn_wgmma.cuh): two warpgroups
// of 32 output columns each (m64n32k8), the tiles split from global memory. RUNNING, its control
// that must differ: the high products accumulated across k in wgmma's own accumulator, as a plain
// GEMM would.
template <bool RUNNING>
__global__ void __launch_bounds__(256) library_wgmma_kernel(const float* a, const float* bt, float* out, int M,
                                                            int N, int Kd) {
    extern __shared__ uint8_t smem_raw[];
    kcv::gdn::cuda::block_mma_wgmma<false, false, RUNNING>(
        M, N, Kd, [&](int m, int k) { return a[m * kPortK + k]; }, [&](int k, int n) { return bt[n * kPortK + k]; },
        [&](int m, int n, float v) { out[m * 64 + n] = v; }, smem_raw);
}

// ---------------------------------------------------------------------------------------------
// TMA bandwidth: a 2-D bf16 tensor streamed through a ring of shared-memory stages.
// ---------------------------------------------------------------------------------------------

constexpr uint64_t kStreamCols = 8192, kStreamRows = 65536;  // 2^29 bf16 = 1 GiB, rows of 16 KiB
constexpr int kBoxCols = 64, kBoxRows = 256;                  // 128 bytes × 256 rows = 32 KiB a box
constexpr uint32_t kBoxBytes = kBoxCols * kBoxRows * 2;
constexpr int kStages = 6;
constexpr int kConsumerWarps = 4;

// Warp 0, lane 0 produces: for its i-th box it waits until stage i mod kStages is empty (the
// consumers released the box kStages before), arms the stage's full barrier with the box's bytes
// and issues the TMA. Warps 1-4 consume: wait for the stage to fill, sum its 32-bit words, and one
// lane per warp arrives on the stage's empty barrier. Box t of the CTA's share (t = blockIdx.x +
// i·gridDim.x) is column block t mod (cols/64), row block t / (cols/64), so CTAs running together
// read neighbouring boxes.
__global__ void __launch_bounds__(32 * (1 + kConsumerWarps)) tma_stream_kernel(
    const __grid_constant__ CUtensorMap map, int boxes_per_row, int n_boxes, unsigned int* sum) {
    extern __shared__ uint8_t smem_raw[];
    __shared__ alignas(8) uint64_t full[kStages], empty[kStages];
    uint8_t* ring = align_1024(smem_raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(smem_u32(&full[s]), 1);
            mbar_init(smem_u32(&empty[s]), kConsumerWarps);
        }
        mbar_init_fence();
    }
    __syncthreads();
    const int cta = static_cast<int>(blockIdx.x), ctas = static_cast<int>(gridDim.x);
    const int mine = n_boxes > cta ? (n_boxes - cta + ctas - 1) / ctas : 0;  // boxes cta, cta + ctas, ...

    if (warp == 0) {
        if (lane == 0) {
            for (int i = 0; i < mine; ++i) {
                const int s = i % kStages, round = i / kStages;
                if (round > 0) mbar_wait(smem_u32(&empty[s]), (round - 1) & 1);
                const int t = cta + i * ctas;
                mbar_expect_tx(smem_u32(&full[s]), kBoxBytes);
                tma_load_2d(smem_u32(ring + s * kBoxBytes), &map, smem_u32(&full[s]),
                            (t % boxes_per_row) * kBoxCols, (t / boxes_per_row) * kBoxRows);
            }
        }
        return;
    }

    const int ct = threadIdx.x - 32;  // 0 .. 127
    unsigned int acc = 0;
    for (int i = 0; i < mine; ++i) {
        const int s = i % kStages;
        mbar_wait(smem_u32(&full[s]), (i / kStages) & 1);
        const uint4* box = reinterpret_cast<const uint4*>(ring + s * kBoxBytes);
#pragma unroll
        for (int j = 0; j < static_cast<int>(kBoxBytes / 16) / (32 * kConsumerWarps); ++j) {
            const uint4 v = box[j * 32 * kConsumerWarps + ct];  // consecutive threads, consecutive 16 B
            acc += v.x + v.y + v.z + v.w;
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(smem_u32(&empty[s]));
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) atomicAdd(sum, acc);
}

// The same sum with ordinary 16-byte loads, four in flight per thread.
__global__ void plain_sum_kernel(const uint4* p, size_t n, unsigned int* sum) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    unsigned int acc = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const uint4 v0 = p[i], v1 = p[i + stride], v2 = p[i + 2 * stride], v3 = p[i + 3 * stride];
        acc += v0.x + v0.y + v0.z + v0.w + v1.x + v1.y + v1.z + v1.w;
        acc += v2.x + v2.y + v2.z + v2.w + v3.x + v3.y + v3.z + v3.w;
    }
    for (; i < n; i += stride) {
        const uint4 v = p[i];
        acc += v.x + v.y + v.z + v.w;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}

// Word i of the stream: two bf16 in [1, 2) drawn from hash32(i), so every bit pattern is a finite
// number and the host can recompute the sum without reading the GPU's copy.
__host__ __device__ inline uint32_t stream_word(uint32_t i) {
    const uint32_t h = hash32(i);
    return (0x3F80u | (h & 0x7Fu)) | ((0x3F80u | ((h >> 8) & 0x7Fu)) << 16);
}

__global__ void fill_stream_kernel(uint32_t* w, size_t n) {
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
        w[i] = stream_word(static_cast<uint32_t>(i));
}

// ---------------------------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------------------------

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn get_encode_tiled() {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
#else
    CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found));
#endif
    if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
        std::fprintf(stderr, "cuTensorMapEncodeTiled not found in the driver\n");
        std::exit(1);
    }
    return reinterpret_cast<EncodeTiledFn>(fn);
}

// A row-major rows×cols tensor at `base`, read in boxes of box_rows×box_cols with the 128-byte
// swizzle. The swizzle allows a box's inner extent up to 128 bytes; ours is exactly 128, one
// swizzle row, which is what the K-major descriptors assume.
CUtensorMap make_map_2d(EncodeTiledFn encode, void* base, CUtensorMapDataType type, uint32_t elem_bytes,
                        uint64_t cols, uint64_t rows, uint32_t box_cols, uint32_t box_rows,
                        CUtensorMapL2promotion promotion) {
    if (box_cols * elem_bytes != 128 || box_rows > 256) {
        std::fprintf(stderr, "[%s] box %u×%u of %u-byte elements does not fit the 128-byte swizzle\n", g_stage,
                     box_rows, box_cols, elem_bytes);
        std::exit(1);
    }
    CUtensorMap map;
    const cuuint64_t dims[2] = {cols, rows};
    const cuuint64_t strides[1] = {cols * elem_bytes};  // bytes between rows; dimension 0 is contiguous
    const cuuint32_t box[2] = {box_cols, box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult r = encode(&map, type, 2, base, dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        std::fprintf(stderr, "[%s] cuTensorMapEncodeTiled failed with CUresult %d\n", g_stage, static_cast<int>(r));
        std::exit(1);
    }
    return map;
}

uint16_t bf16_bits(float x) {  // round to nearest even; inputs here are finite
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

float bf16_value(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

uint32_t float_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}

// ref[m][n] = sum_k a[m][k] b[n][k] in float64, and mag[m][n] = sum_k |a[m][k] b[n][k]|.
void reference(const std::vector<double>& a, const std::vector<double>& b, int M, int N, int K,
               std::vector<double>& ref, std::vector<double>& mag) {
    ref.assign(static_cast<size_t>(M) * N, 0.0);
    mag.assign(static_cast<size_t>(M) * N, 0.0);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double s = 0.0, t = 0.0;
            for (int k = 0; k < K; ++k) {
                s += a[m * K + k] * b[n * K + k];
                t += std::fabs(a[m * K + k] * b[n * K + k]);
            }
            ref[m * N + n] = s;
            mag[m * N + n] = t;
        }
}

struct Row {
    std::string name, result, number;
    bool gate;  // a correctness case: a FAIL makes the exit status 1
    bool pass;
};
std::vector<Row> g_rows;

// One line now, one row of the closing table. Measurements (gate = false) read INFO.
void record(const std::string& name, bool gate, bool pass, const std::string& detail, const std::string& number) {
    const std::string verdict = gate ? (pass ? "PASS" : "FAIL") : "INFO";
    g_rows.push_back({name, verdict + (detail.empty() ? "" : " " + detail), number, gate, pass});
    std::printf("%s  %s: %s%s%s\n", verdict.c_str(), name.c_str(), detail.c_str(), number.empty() ? "" : "; ",
                number.c_str());
}

std::string fmt(const char* f, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, x);
    return buf;
}

// Bit-for-bit comparison of an M×N result with an exact reference (every value representable in
// float32). +0 and -0 count as equal: the sign of a sum that cancels to zero says nothing about
// layouts. On a mismatch, the detail names the first element and, if the value found there is
// expected somewhere else, where: the usual signature of a permuted row, column or k-step.
void check_exact(const std::string& name, const std::vector<float>& got, const std::vector<double>& ref, int M,
                 int N) {
    int bad = 0, first = -1, zero_signs = 0;
    for (int i = 0; i < M * N; ++i) {
        const float want = static_cast<float>(ref[i]);
        if (float_bits(want) == float_bits(got[i])) continue;
        if (want == 0.0f && got[i] == 0.0f) {
            ++zero_signs;
            continue;
        }
        if (first < 0) first = i;
        ++bad;
    }
    const std::string number = std::to_string(bad) + " of " + std::to_string(M * N) + " differ";
    if (bad == 0) {
        std::string detail = "bit-exact";
        if (zero_signs) detail += " (" + std::to_string(zero_signs) + " zeros of the other sign)";
        record(name, true, true, detail, number);
        return;
    }
    const int r = first / N, c = first % N;
    char buf[256];
    std::snprintf(buf, sizeof buf, "first at row %d, col %d: expected %.9g, got %.9g", r, c, ref[first],
                  static_cast<double>(got[first]));
    std::string detail = buf;
    for (int i = 0; i < M * N; ++i)
        if (got[first] != 0.0f && static_cast<float>(ref[i]) == got[first]) {
            std::snprintf(buf, sizeof buf, " (that value is expected at row %d, col %d)", i / N, i % N);
            detail += buf;
            break;
        }
    record(name, true, false, detail, number);
}

// Largest |got - ref| / sum_k |a b| over the elements, and where; NaN at the first NaN (an element
// never written reads as NaN).
double normwise_error(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& mag,
                      int& where) {
    double worst = 0.0;
    where = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::fabs(static_cast<double>(got[i]) - ref[i]) / std::max(mag[i], 1e-300);
        if (std::isnan(e)) {
            where = static_cast<int>(i);
            return e;
        }
        if (e > worst) {
            worst = e;
            where = static_cast<int>(i);
        }
    }
    return worst;
}

template <class T>
T* to_device(const std::vector<T>& h) {
    T* d = nullptr;
    CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
    CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

constexpr int kCaseSmemBf16 = 1024 + kTileA + kTileB;
constexpr int kCaseSmemTf32 = 1024 + 2 * (kTileA + kTileB);

// Case A on the device: a (64×64) and b (128×64) bf16 bit patterns, row-major; returns D (64×128).
std::vector<float> run_bf16_ss(EncodeTiledFn encode, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
    uint16_t* da = to_device(a);
    uint16_t* db = to_device(b);
    float* dd = nullptr;
    CHECK(cudaMalloc(&dd, kM * kN * sizeof(float)));
    CHECK(cudaMemset(dd, 0xFF, kM * kN * sizeof(float)));  // NaN where nothing was written
    const CUtensorMap ma = make_map_2d(encode, da, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, kKBf16, kM, 64, kM,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    const CUtensorMap mb = make_map_2d(encode, db, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, kKBf16, kN, 64, kN,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    bf16_ss_kernel<<<1, 128, kCaseSmemBf16>>>(ma, mb, dd);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> d(kM * kN);
    CHECK(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dd));
    return d;
}

std::vector<float> run_bf16_rs(EncodeTiledFn encode, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
    uint16_t* da = to_device(a);
    uint16_t* db = to_device(b);
    float* dd = nullptr;
    CHECK(cudaMalloc(&dd, kM * kN * sizeof(float)));
    CHECK(cudaMemset(dd, 0xFF, kM * kN * sizeof(float)));
    const CUtensorMap mb = make_map_2d(encode, db, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, kKBf16, kN, 64, kN,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    bf16_rs_kernel<<<1, 128, 1024 + kTileB>>>(da, mb, dd);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> d(kM * kN);
    CHECK(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dd));
    return d;
}

// Case C on the device: a (64×32) and b (128×32) float32, split on the device into tf32 hi and lo.
std::vector<float> run_tf32(EncodeTiledFn encode, const std::vector<float>& a, const std::vector<float>& b,
                            bool split) {
    float* da = to_device(a);
    float* db = to_device(b);
    float *ahi, *alo, *bhi, *blo, *dd;
    CHECK(cudaMalloc(&ahi, a.size() * sizeof(float)));
    CHECK(cudaMalloc(&alo, a.size() * sizeof(float)));
    CHECK(cudaMalloc(&bhi, b.size() * sizeof(float)));
    CHECK(cudaMalloc(&blo, b.size() * sizeof(float)));
    CHECK(cudaMalloc(&dd, kM * kN * sizeof(float)));
    CHECK(cudaMemset(dd, 0xFF, kM * kN * sizeof(float)));
    tf32_split_kernel<<<static_cast<int>((a.size() + 255) / 256), 256>>>(da, ahi, alo, static_cast<int>(a.size()));
    tf32_split_kernel<<<static_cast<int>((b.size() + 255) / 256), 256>>>(db, bhi, blo, static_cast<int>(b.size()));
    CHECK(cudaGetLastError());
    auto map = [&](float* p, uint64_t rows) {
        return make_map_2d(encode, p, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, kKTf32, rows, 32,
                           static_cast<uint32_t>(rows), CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    };
    const CUtensorMap mah = map(ahi, kM), mal = map(alo, kM), mbh = map(bhi, kN), mbl = map(blo, kN);
    if (split)
        tf32_ss_kernel<true><<<1, 128, kCaseSmemTf32>>>(mah, mal, mbh, mbl, dd);
    else
        tf32_ss_kernel<false><<<1, 128, kCaseSmemTf32>>>(mah, mal, mbh, mbl, dd);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> d(kM * kN);
    CHECK(cudaMemcpy(d.data(), dd, d.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (float* p : {da, db, ahi, alo, bhi, blo, dd}) CHECK(cudaFree(p));
    return d;
}

// Median of `runs` timed launches after one warm-up, in milliseconds.
template <class Launch>
float median_ms(Launch launch, int runs = 7) {
    launch();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    std::vector<float> t(runs);
    for (int r = 0; r < runs; ++r) {
        CHECK(cudaEventRecord(e0));
        launch();
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaGetLastError());
        CHECK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return t[runs / 2];
}

void case_a(EncodeTiledFn encode, std::mt19937_64& rng) {
    g_stage = "A bf16 SS";
    std::uniform_int_distribution<int> small(-8, 8);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<uint16_t> a(kM * kKBf16), b(kN * kKBf16);
    std::vector<double> av(a.size()), bv(b.size()), ref, mag;

    // Integers in [-8, 8] for A and eighths of them for B: products are multiples of 1/8 below 8 in
    // magnitude and every partial sum of 64 of them a multiple of 1/8 below 512, exact in float32
    // whatever the order and alignment of the additions.
    for (size_t i = 0; i < a.size(); ++i) av[i] = small(rng), a[i] = bf16_bits(static_cast<float>(av[i]));
    for (size_t i = 0; i < b.size(); ++i) bv[i] = small(rng) / 8.0, b[i] = bf16_bits(static_cast<float>(bv[i]));
    reference(av, bv, kM, kN, kKBf16, ref, mag);
    check_exact("A bf16 m64n128k16 SS, TMA 128B swizzle, integers", run_bf16_ss(encode, a, b), ref, kM, kN);

    // Normal inputs rounded to bf16; the reference takes the rounded values, so what is measured is
    // the tensor cores' accumulation alone: float32 sums of 64 exact products (bf16·bf16 fits in
    // float32), a few ulps at most. A layout error is of the order of the values themselves.
    for (size_t i = 0; i < a.size(); ++i) a[i] = bf16_bits(static_cast<float>(normal(rng))), av[i] = bf16_value(a[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = bf16_bits(static_cast<float>(normal(rng))), bv[i] = bf16_value(b[i]);
    reference(av, bv, kM, kN, kKBf16, ref, mag);
    const std::vector<float> d = run_bf16_ss(encode, a, b);
    int where = 0;
    const double err = normwise_error(d, ref, mag, where);
    const double tol = 1e-4;
    char buf[160];
    std::snprintf(buf, sizeof buf, "max err %.3g of sum|ab| (tolerance %.0e; worst at row %d, col %d)", err, tol,
                  where / kN, where % kN);
    record("A bf16 m64n128k16 SS, normal inputs vs float64", true, err <= tol, buf, fmt("%.3g", err));
}

void case_b(EncodeTiledFn encode, std::mt19937_64& rng) {
    g_stage = "B bf16 RS";
    std::uniform_int_distribution<int> small(-8, 8);
    std::vector<uint16_t> a(kM * kKBf16), b(kN * kKBf16);
    std::vector<double> av(a.size()), bv(b.size()), ref, mag;
    for (size_t i = 0; i < a.size(); ++i) av[i] = small(rng), a[i] = bf16_bits(static_cast<float>(av[i]));
    for (size_t i = 0; i < b.size(); ++i) bv[i] = small(rng) / 8.0, b[i] = bf16_bits(static_cast<float>(bv[i]));
    reference(av, bv, kM, kN, kKBf16, ref, mag);
    check_exact("B bf16 m64n128k16 RS (A in registers), integers", run_bf16_rs(encode, a, b), ref, kM, kN);
}

void case_c(EncodeTiledFn encode, std::mt19937_64& rng) {
    g_stage = "C tf32 SS";
    std::uniform_int_distribution<int> small(-8, 8);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<float> a(kM * kKTf32), b(kN * kKTf32);
    std::vector<double> av(a.size()), bv(b.size()), ref, mag;

    // Integers are exact in tf32 (and their lo parts zero), so both paths must be exact.
    for (size_t i = 0; i < a.size(); ++i) av[i] = small(rng), a[i] = static_cast<float>(av[i]);
    for (size_t i = 0; i < b.size(); ++i) bv[i] = small(rng) / 8.0, b[i] = static_cast<float>(bv[i]);
    reference(av, bv, kM, kN, kKTf32, ref, mag);
    check_exact("C tf32 m64n128k8 SS, TMA 128B swizzle, integers", run_tf32(encode, a, b, false), ref, kM, kN);
    g_stage = "C 3xTF32";
    check_exact("C 3xTF32 (three wgmmas a k-step), integers", run_tf32(encode, a, b, true), ref, kM, kN);

    // Normal float32 inputs against float64 of the same float32 values.
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(normal(rng)), av[i] = a[i];
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(normal(rng)), bv[i] = b[i];
    reference(av, bv, kM, kN, kKTf32, ref, mag);
    std::vector<float> host32(kM * kN);  // what float32 arithmetic gives: a float fma chain in k order
    for (int m = 0; m < kM; ++m)
        for (int n = 0; n < kN; ++n) {
            float s = 0.0f;
            for (int k = 0; k < kKTf32; ++k) s = std::fma(a[m * kKTf32 + k], b[n * kKTf32 + k], s);
            host32[m * kN + n] = s;
        }
    int w1 = 0, w3 = 0, w32 = 0;
    g_stage = "C tf32 normal";
    const double e1 = normwise_error(run_tf32(encode, a, b, false), ref, mag, w1);
    g_stage = "C 3xTF32 normal";
    const double e3 = normwise_error(run_tf32(encode, a, b, true), ref, mag, w3);
    const double e32 = normwise_error(host32, ref, mag, w32);
    // Gates against bugs, not against the hardware: one tf32 product must be within tf32's input
    // rounding (about 2^-11 of each term) of the truth, and the split must gain at least a factor 8
    // on it. A lo part lost or misplaced leaves the split's error at the single product's level.
    char buf[200];
    std::snprintf(buf, sizeof buf, "single tf32 %.3g, 3xTF32 %.3g, float32 host loop %.3g (of sum|ab|)", e1, e3, e32);
    const bool ok = e1 <= 2e-3 && e3 * 8.0 <= e1;
    record("C tf32 vs 3xTF32, normal inputs vs float64", true, ok, ok ? "" : "(needs tf32 <= 2e-3, 3xTF32 <= tf32/8)",
           buf);
}

// Case R (the header above): D[0][0] = C + Σ a_j·b_j, C in the first k-step, the products in the
// second, against mma.sync's sums of the same cases on an H200.
void case_r(EncodeTiledFn encode) {
    struct SumCase {
        const char* name;
        bool bf16;
        float c;
        std::vector<float> a, b;   // exact in the operand format
        float mma_sync;            // what mma.sync.m16n8k8 (m16n8k16 for bf16) gave on an H200
    };
    auto p2 = [](int e) { return std::ldexp(1.0f, e); };
    const std::vector<float> ones(8, 1.0f);
    const std::vector<SumCase> cases = {
        {"1 + 0.75 ulp(1)", false, 1.0f, {0.75f}, {p2(-23)}, 1.0f},
        {"-1 - 0.75 ulp(1)", false, -1.0f, {-0.75f}, {p2(-23)}, -1.0f},
        {"1 + 0.25 ulp(1)", false, 1.0f, {0.25f}, {p2(-23)}, 1.0f},
        {"1 + eight products 2^-26", false, 1.0f, std::vector<float>(8, p2(-26)), ones, 1.0f},
        {"1 - 2^-25", false, 1.0f, {-1.0f}, {p2(-25)}, 1.0f - p2(-24)},
        {"0 + products 1 and 3*2^-25", false, 0.0f, {1.0f, 0.75f}, {1.0f, p2(-23)}, 1.0f},
        {"1 + four products 2^-25", false, 1.0f, std::vector<float>(4, p2(-25)), ones, 1.0f + p2(-23)},
        {"1 + 2^-24 at k = 0 and at k = 4", false, 1.0f, {p2(-24), 0.0f, 0.0f, 0.0f, p2(-24)}, ones, 1.0f + p2(-23)},
        {"1 + 2^-26 + 2^-26 + 2^-25 + 2^-24", false, 1.0f, {p2(-26), p2(-26), p2(-25), p2(-24)}, ones, 1.0f},
        {"1 - 2^-26", false, 1.0f, {-p2(-26)}, {1.0f}, 1.0f},
        {"bf16: 1 + 0.75 ulp(1)", true, 1.0f, {0.75f}, {p2(-23)}, 1.0f},
        // A bf16 tile's sixteen products: one aligned group gives 1 + 2^-23, two groups of eight
        // (each cut to float32 before the next is added) give 1. mma.sync's answers are
        // bench/mma_subnormals.cu's "align: bf16" cases on an H200 (one group).
        {"bf16: 1 + 2^-24 at k = 0 and at k = 4", true, 1.0f, {p2(-24), 0, 0, 0, p2(-24)}, ones, 1.0f + p2(-23)},
        {"bf16: 1 + 2^-24 at k = 0 and at k = 8", true, 1.0f, {p2(-24), 0, 0, 0, 0, 0, 0, 0, p2(-24)},
         std::vector<float>(9, 1.0f), 1.0f + p2(-23)},
        {"bf16: 1 + 2^-24 at k = 7 and at k = 15", true, 1.0f,
         {0, 0, 0, 0, 0, 0, 0, p2(-24), 0, 0, 0, 0, 0, 0, 0, p2(-24)}, std::vector<float>(16, 1.0f),
         1.0f + p2(-23)},
    };
    int as_mma_sync = 0, as_nearest = 0;
    for (const SumCase& cs : cases) {
        float got;
        if (cs.bf16) {
            g_stage = "R bf16 sums";
            std::vector<uint16_t> a(kM * kKBf16, 0), b(kN * kKBf16, 0);
            a[0] = bf16_bits(cs.c), b[0] = bf16_bits(1.0f);
            for (size_t j = 0; j < cs.a.size(); ++j) a[16 + j] = bf16_bits(cs.a[j]), b[16 + j] = bf16_bits(cs.b[j]);
            got = run_bf16_ss(encode, a, b)[0];
        } else {
            g_stage = "R tf32 sums";
            std::vector<float> a(kM * kKTf32, 0.0f), b(kN * kKTf32, 0.0f);
            a[0] = cs.c, b[0] = 1.0f;
            for (size_t j = 0; j < cs.a.size(); ++j) a[8 + j] = cs.a[j], b[8 + j] = cs.b[j];
            got = run_tf32(encode, a, b, false)[0];
        }
        double exact = cs.c;
        for (size_t j = 0; j < cs.a.size(); ++j) exact += double(cs.a[j]) * double(cs.b[j]);
        const float nearest = static_cast<float>(exact);
        const bool same_as_mma = std::memcmp(&got, &cs.mma_sync, sizeof got) == 0;
        as_mma_sync += same_as_mma;
        as_nearest += std::memcmp(&got, &nearest, sizeof got) == 0;
        std::printf("R %-40s nearest %-16.10g mma.sync %-16.10g wgmma %-16.10g %s\n", cs.name, nearest,
                    cs.mma_sync, got, same_as_mma ? "as mma.sync" : "DIFFERS FROM mma.sync");
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "%d of %zu as mma.sync's on an H200, %d as rounding to nearest", as_mma_sync,
                  cases.size(), as_nearest);
    record("R wgmma's sums of mma.sync's rounding cases", false, true, "", buf);
}

void throughput(int sms) {
    float* out = nullptr;
    const int grid = 2 * sms;
    CHECK(cudaMalloc(&out, static_cast<size_t>(grid) * 128 * sizeof(float)));
    {
        g_stage = "T bf16 throughput";
        const float ms = median_ms([&] { bf16_rate_kernel<<<grid, 128, kRateSmem>>>(kRateIters, out); });
        const double flops = double(grid) * kRateIters * 4 * 2.0 * 64 * 256 * 16;
        const double tf = flops / (ms * 1e-3) / 1e12;
        char buf[160];
        std::snprintf(buf, sizeof buf, "%.1f TFLOP/s, %.0f%% of 989 (%.2f ms, %d CTAs × 1 warpgroup)", tf,
                      100.0 * tf / 989.0, ms, grid);
        record("T bf16 wgmma m64n256k16 SS dense", false, true, "", buf);
    }
    {
        g_stage = "T tf32 throughput";
        const float ms = median_ms([&] { tf32_rate_kernel<<<grid, 128, kRateSmem>>>(kRateIters, out); });
        const double flops = double(grid) * kRateIters * 4 * 2.0 * 64 * 128 * 8;
        const double tf = flops / (ms * 1e-3) / 1e12;
        char buf[160];
        std::snprintf(buf, sizeof buf, "%.1f TFLOP/s, %.0f%% of 494 (%.2f ms, %d CTAs × 1 warpgroup)", tf,
                      100.0 * tf / 494.0, ms, grid);
        record("T tf32 wgmma m64n128k8 SS dense", false, true, "", buf);
    }
    CHECK(cudaFree(out));
}

// Case S: rates of the float32-accurate product's schedules. "useful" counts one 64×64×8 product
// per k step (the product the six stand for); "issued" all six.
// smem: kRateSmem lands two CTAs on an SM; kSplitOneSmem one.
constexpr int kSplitOneSmem = 120 * 1024;
template <int MODE, int P>
void split_rate(int grid, int smem, float* out, const char* name, double& ceiling) {
    g_stage = name;
    CHECK(cudaFuncSetAttribute(split_rate_kernel<MODE, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const float ms = median_ms([&] { split_rate_kernel<MODE, P><<<grid, 128, smem>>>(kRateIters, out); });
    const double useful = double(grid) * kRateIters * 4 * 2.0 * 64 * 64 * 8 / (ms * 1e-3) / 1e12;
    if (MODE == 0) ceiling = useful;
    char buf[200];
    std::snprintf(buf, sizeof buf, "useful %.1f TFLOP/s, issued %.1f, %.2f of the no-wait rate (%.2f ms)", useful,
                  6 * useful, useful / ceiling, ms);
    record(name, false, true, "", buf);
}

void split_throughput(int sms) {
    static_assert(1024 + 6 * kSplitTile <= kRateSmem, "split operands must fit the shared memory asked for");
    float* out = nullptr;
    const int grid = 2 * sms;
    CHECK(cudaMalloc(&out, static_cast<size_t>(grid) * 128 * sizeof(float)));
    double ceiling = 0;
    split_rate<0, 1>(grid, kRateSmem, out, "S split tf32 m64n64k8, no wait in the loop", ceiling);
    split_rate<1, 1>(grid, kRateSmem, out, "S split, wait every k step", ceiling);
    split_rate<1, 2>(grid, kRateSmem, out, "S split, wait every 2 k steps", ceiling);
    split_rate<1, 4>(grid, kRateSmem, out, "S split, wait every 4 k steps", ceiling);
    split_rate<2, 1>(grid, kRateSmem, out, "S split, high first, chain overlapped", ceiling);
    split_rate<2, 2>(grid, kRateSmem, out, "S split, 2 high first, chain overlapped", ceiling);
    // One CTA per SM, as the recurrence kernels' heavy kernels run: no other CTA fills a wait.
    split_rate<0, 1>(sms, kSplitOneSmem, out, "S 1 CTA/SM: no wait in the loop", ceiling);
    split_rate<1, 1>(sms, kSplitOneSmem, out, "S 1 CTA/SM: wait every k step", ceiling);
    split_rate<1, 4>(sms, kSplitOneSmem, out, "S 1 CTA/SM: wait every 4 k steps", ceiling);
    split_rate<2, 1>(sms, kSplitOneSmem, out, "S 1 CTA/SM: high first, chain overlapped", ceiling);
    split_rate<2, 2>(sms, kSplitOneSmem, out, "S 1 CTA/SM: 2 high first, chain overlapped", ceiling);
    CHECK(cudaFree(out));
}

// Case P: trials of random float32 operands, each row scaled by its own power of two (2^-40 to
// 2^40, some rows zero, some values subnormal), through block_mma and the library's
// block_mma_wgmma; every output compared bit for bit, at 64×64×32 and at 37×50×29, where rows,
// columns and k end inside a tile. In odd trials each k step of a row gets a power of two of its
// own as well (2^-12 to 2^12), so that its high parts lie on other grids and the float32 sum of
// the steps' high products rounds: where the control's truncating running sum (RUNNING, at
// 64×64×32) and block_mma's rounded one part.
void case_p(std::mt19937_64& rng) {
    g_stage = "P block_mma on wgmma";
    constexpr int kLibrarySmem = static_cast<int>(kcv::gdn::cuda::kWgmmaScratchBytes);
    CHECK(cudaFuncSetAttribute(library_wgmma_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kLibrarySmem));
    CHECK(cudaFuncSetAttribute(library_wgmma_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kLibrarySmem));
    struct Shape {
        int M, N, Kd;
    };
    const Shape shapes[2] = {{64, 64, kPortK}, {37, 50, kPortK - 3}};
    struct Count {
        long differ = 0, compared = 0;
        int trial = -1, at = -1;
        float want = 0, got = 0;
        void add(int t, int i, float w, float g) {
            ++compared;
            if (std::memcmp(&w, &g, sizeof(float)) == 0) return;
            if (differ++ == 0) trial = t, at = i, want = w, got = g;
        }
    } library[2], running;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> expo(-40, 40), pick(0, 15), step(-12, 12);
    const size_t n_in = 64 * kPortK;
    float *da = nullptr, *db = nullptr, *dref = nullptr, *dlib = nullptr, *drun = nullptr;
    CHECK(cudaMalloc(&da, n_in * sizeof(float)));
    CHECK(cudaMalloc(&db, n_in * sizeof(float)));
    CHECK(cudaMalloc(&dref, 64 * 64 * sizeof(float)));
    CHECK(cudaMalloc(&dlib, 64 * 64 * sizeof(float)));
    CHECK(cudaMalloc(&drun, 64 * 64 * sizeof(float)));
    constexpr int kTrials = 64;
    for (int trial = 0; trial < kTrials; ++trial) {
        std::vector<float> a(n_in), bt(n_in);
        for (std::vector<float>* x : {&a, &bt})
            for (int r = 0; r < 64; ++r) {
                const int kind = pick(rng);
                const float scale = std::ldexp(1.0f, kind == 0 ? -140 : expo(rng));   // kind 0: subnormal
                float step_scale[kPortK / 8];
                for (float& f : step_scale) f = trial % 2 ? std::ldexp(1.0f, step(rng)) : 1.0f;
                for (int k = 0; k < kPortK; ++k)
                    (*x)[r * kPortK + k] =
                        kind == 1 ? 0.0f : (trial == 0 ? 1.0f : normal(rng)) * scale * step_scale[k / 8];
            }
        CHECK(cudaMemcpy(da, a.data(), n_in * sizeof(float), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(db, bt.data(), n_in * sizeof(float), cudaMemcpyHostToDevice));
        for (int z = 0; z < 2; ++z) {
            const Shape sh = shapes[z];
            port_reference_kernel<<<1, 128>>>(da, db, dref, sh.M, sh.N, sh.Kd);
            library_wgmma_kernel<false><<<1, 256, kLibrarySmem>>>(da, db, dlib, sh.M, sh.N, sh.Kd);
            if (z == 0) library_wgmma_kernel<true><<<1, 256, kLibrarySmem>>>(da, db, drun, sh.M, sh.N, sh.Kd);
            CHECK(cudaGetLastError());
            // The control runs at the full tile only.
            std::vector<float> ref(64 * 64), lib(64 * 64), run(z == 0 ? 64 * 64 : 0);
            CHECK(cudaMemcpy(ref.data(), dref, ref.size() * sizeof(float), cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(lib.data(), dlib, lib.size() * sizeof(float), cudaMemcpyDeviceToHost));
            if (z == 0) CHECK(cudaMemcpy(run.data(), drun, run.size() * sizeof(float), cudaMemcpyDeviceToHost));
            for (int m = 0; m < sh.M; ++m)
                for (int n = 0; n < sh.N; ++n) {
                    const int i = m * 64 + n;
                    library[z].add(trial, i, ref[i], lib[i]);
                    if (z == 0) running.add(trial, i, ref[i], run[i]);
                }
        }
    }
    for (float* p : {da, db, dref, dlib, drun}) CHECK(cudaFree(p));
    char buf[240];
    for (int z = 0; z < 2; ++z) {
        const Count& c = library[z];
        if (c.differ == 0)
            std::snprintf(buf, sizeof buf, "0 of %ld outputs differ from block_mma's (%d trials of %d×%d×%d)",
                          c.compared, kTrials, shapes[z].M, shapes[z].N, shapes[z].Kd);
        else
            std::snprintf(buf, sizeof buf,
                          "%ld of %ld differ; first: trial %d, row %d col %d, block_mma %.9g, wgmma %.9g", c.differ,
                          c.compared, c.trial, c.at / 64, c.at % 64, c.want, c.got);
        record(z == 0 ? "P the library's block_mma_wgmma, bit for bit" : "P the library's block_mma_wgmma, partial tiles",
               true, c.differ == 0, "", buf);
    }
    // The control: the comparison can tell schedules apart only if this one differs somewhere.
    std::snprintf(buf, sizeof buf, "%ld of %ld outputs differ from block_mma's", running.differ, running.compared);
    record("P control: high products accumulated in wgmma", true, running.differ > 0, "", buf);
}

void tma_bandwidth(EncodeTiledFn encode, int sms) {
    g_stage = "M TMA stream";
    const size_t bytes = kStreamCols * kStreamRows * 2, words = bytes / 4;
    uint32_t *src = nullptr, *dst = nullptr;
    unsigned int* sum = nullptr;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMalloc(&dst, bytes));
    CHECK(cudaMalloc(&sum, sizeof(unsigned int)));
    fill_stream_kernel<<<4 * sms, 256>>>(src, words);
    CHECK(cudaGetLastError());
    unsigned int want = 0;  // wrapping sum of all words, recomputed here from the same formula
    for (size_t i = 0; i < words; ++i) want += stream_word(static_cast<uint32_t>(i));

    const CUtensorMap map = make_map_2d(encode, src, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, kStreamCols, kStreamRows,
                                        kBoxCols, kBoxRows, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
    const int boxes_per_row = static_cast<int>(kStreamCols / kBoxCols);
    const int n_boxes = static_cast<int>(kStreamRows / kBoxRows) * boxes_per_row;
    const int smem = 1024 + kStages * kBoxBytes;
    auto stream = [&] {
        tma_stream_kernel<<<sms, 32 * (1 + kConsumerWarps), smem>>>(map, boxes_per_row, n_boxes, sum);
    };
    const size_t n_vec = bytes / 16;
    auto plain = [&] { plain_sum_kernel<<<8 * sms, 256>>>(reinterpret_cast<const uint4*>(src), n_vec, sum); };

    unsigned int got_tma = 0, got_plain = 0;
    CHECK(cudaMemset(sum, 0, sizeof sum[0]));
    stream();
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(&got_tma, sum, sizeof got_tma, cudaMemcpyDeviceToHost));
    g_stage = "M plain loads";
    CHECK(cudaMemset(sum, 0, sizeof sum[0]));
    plain();
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(&got_plain, sum, sizeof got_plain, cudaMemcpyDeviceToHost));

    g_stage = "M TMA stream";
    const float ms_tma = median_ms(stream);
    g_stage = "M plain loads";
    const float ms_plain = median_ms(plain);
    g_stage = "M cudaMemcpy";
    const float ms_copy = median_ms([&] { CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
    const double gbs_tma = bytes / (ms_tma * 1e-3) / 1e9, gbs_plain = bytes / (ms_plain * 1e-3) / 1e9;
    const double gbs_copy = 2.0 * bytes / (ms_copy * 1e-3) / 1e9;  // reads and writes `bytes` each

    char detail[200], number[240];
    std::snprintf(detail, sizeof detail, "checksum %08x, host %08x, plain loads %08x", got_tma, want, got_plain);
    std::snprintf(number, sizeof number,
                  "TMA %.0f GB/s (%.0f%% of 4800); plain loads %.0f GB/s; cudaMemcpy D2D %.0f GB/s (read+write)",
                  gbs_tma, 100.0 * gbs_tma / 4800.0, gbs_plain, gbs_copy);
    record("M TMA 2-D stream of 1 GiB bf16, 6 stages × 32 KiB", true, got_tma == want && got_plain == want, detail,
           number);
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    CHECK(cudaFree(sum));
}

}  // namespace

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, compute capability %d.%d, %d SMs\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount);
    if (prop.major != 9) {
        std::fprintf(stderr, "wgmma and this build (sm_90a) need a compute capability 9.0 GPU\n");
        return 1;
    }
    const EncodeTiledFn encode = get_encode_tiled();

    // Kernels that ask for more than 48 KiB of dynamic shared memory must say so first.
    CHECK(cudaFuncSetAttribute(tf32_ss_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kCaseSmemTf32));
    CHECK(cudaFuncSetAttribute(tf32_ss_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kCaseSmemTf32));
    CHECK(cudaFuncSetAttribute(tma_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               1024 + kStages * kBoxBytes));
    CHECK(cudaFuncSetAttribute(bf16_rate_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRateSmem));
    CHECK(cudaFuncSetAttribute(tf32_rate_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRateSmem));
    static_assert(1024 + kRateBf16A + kRateBf16B <= kRateSmem && 1024 + kRateTf32A + kRateTf32B <= kRateSmem,
                  "rate operands must fit the shared memory asked for");

    std::mt19937_64 rng(20261201);
    case_a(encode, rng);
    case_b(encode, rng);
    case_c(encode, rng);
    case_r(encode);
    case_p(rng);
    throughput(prop.multiProcessorCount);
    split_throughput(prop.multiProcessorCount);
    tma_bandwidth(encode, prop.multiProcessorCount);

    bool all = true;
    std::printf("\n%-50s | %-44s | %s\n", "case", "result", "number");
    for (const Row& r : g_rows) {
        std::printf("%-50s | %-44s | %s\n", r.name.c_str(), r.result.c_str(), r.number.c_str());
        all = all && (r.pass || !r.gate);
    }
    std::printf("%s\n", all ? "all correctness cases pass" : "SOME CORRECTNESS CASES FAIL");
    return all ? 0 : 1;
}
