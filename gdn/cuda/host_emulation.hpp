// Runs the CUDA kernels of this folder on the host: each block's threads become std::threads
// meeting at a std::barrier for __syncthreads, blocks run one after another, dynamic shared
// memory is one host array. It lets a machine without a GPU execute the kernels' own indexing,
// masking, synchronisation and arithmetic, for float32 and the 16-bit input types, against the
// oracle (tests/cpp/test_gdn_cuda_emulated.cpp); it says nothing about speed.
#pragma once

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

// inline: a kernel that is not a template may be defined in several translation units.
#define __global__ inline
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The 16-bit input types, as the CUDA headers' conversions round them: to nearest, ties to even
// (NaN stays a quiet NaN). fp16 goes through the compiler's _Float16, whose conversions are
// IEEE's.
struct __nv_bfloat16 {
    uint16_t bits;
};
struct __half {
    _Float16 value;
};
inline float __bfloat162float(__nv_bfloat16 x) {
    const uint32_t b = uint32_t(x.bits) << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if (std::isnan(f)) return {uint16_t((b >> 16) | 0x40u)};
    return {uint16_t((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16)};
}
inline float __half2float(__half x) { return float(x.value); }
inline __half __float2half_rn(float f) { return {static_cast<_Float16>(f)}; }

using std::min;
using std::max;

namespace kcv::gdn::cuda::emulation {

inline thread_local dim3 thread_index, block_index;
inline dim3 block_dim, grid_dim;
inline std::barrier<>* block_barrier = nullptr;
// 228 KiB, the most a Hopper block may have.
alignas(16) inline float shared_memory[228 * 1024 / sizeof(float)];

// Runs kernel(args...) over the grid, blocks in order, each block's threads concurrently.
template <class Kernel, class... Args>
void launch(Kernel kernel, dim3 grid, unsigned threads, Args... args) {
    grid_dim = grid;
    block_dim = dim3(threads);
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                std::memset(shared_memory, 0xFF, sizeof shared_memory);   // NaN: unwritten reads show
                std::barrier<> bar(threads);
                block_barrier = &bar;
                std::vector<std::thread> pool;
                pool.reserve(threads);
                for (unsigned t = 0; t < threads; ++t)
                    pool.emplace_back([&, t] {
                        thread_index = dim3(t);
                        block_index = dim3(bx, by, bz);
                        kernel(args...);
                        // A thread that returns early must keep releasing the barrier.
                        bar.arrive_and_drop();
                    });
                for (auto& th : pool) th.join();
            }
}

// cvt.rna.tf32.f32: round to 10 fraction bits, nearest, ties away from zero.
inline uint32_t to_tf32(float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    if ((b & 0x7F800000u) == 0x7F800000u) return b;   // Inf, NaN
    return (b + 0x1000u) & 0xFFFFE000u;
}

// The tensor core's sum d + Σ_k a_k·b_k, as an H200 forms it (bench/mma_subnormals.cu, RESULTS):
// the products are exact; every term is aligned to the largest one's exponent E and truncated
// toward zero to a multiple of 2^(E − 23 − kMmaExtraBits); the aligned terms are summed exactly and
// the sum is truncated toward zero to float32. kMmaExtraBits = 2 is the one value that gives all of
// the H200's rounding cases: with C = 1, a product −2^-25 still moves the result to 1 − 2^-24 (two
// extra bits at least), while eight products 2^-26 are all lost (fewer than three). Rounding to
// nearest, as this emulation first did, left the kernels inside the float32 control's error where
// the H200 put them at 1.8–2.3 times it; truncating the final sum alone explained part of that.
// Subnormal terms are summed as normal ones here, which the H200 does not always do (a product
// 2^-140 added to 2^-120 is lost there); no kernel path depends on it.
// KCV_GDN_EMULATE_MMA_NEAREST (an experiment, never the default) rounds the terms and the sum to
// nearest instead, to measure what the truncation costs the kernels (bench/gdn_ord03_emulated.cpp).
constexpr int kMmaExtraBits = 2;
inline float tensor_core_sum(const double* terms, int n) {
    int emax = std::numeric_limits<int>::min();
    for (int i = 0; i < n; ++i)
        if (terms[i] != 0.0) emax = std::max(emax, std::ilogb(terms[i]));
    if (emax == std::numeric_limits<int>::min()) return 0.0f;
    const double quantum = std::ldexp(1.0, emax - 23 - kMmaExtraBits);
    double sum = 0.0;   // exact: at most 9 terms of at most 27 significant bits on one grid
#ifdef KCV_GDN_EMULATE_MMA_NEAREST
    for (int i = 0; i < n; ++i) sum += std::nearbyint(terms[i] / quantum) * quantum;
    return float(sum);
#else
    for (int i = 0; i < n; ++i) sum += std::trunc(terms[i] / quantum) * quantum;
    float rounded = float(sum);
    if (double(rounded) != sum && std::abs(double(rounded)) > std::abs(sum)) rounded = std::nextafter(rounded, 0.0f);
    return rounded;
#endif
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 for a block of one warp (HostLauncher's 32
// threads): each lane posts its fragments, then reads the whole tiles back through the PTX
// fragment layout (gdn_mma.cuh has the table) and forms its own four elements of C + A·B with
// tensor_core_sum.
inline uint32_t mma_a[32][4], mma_b[32][2];
inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    if (block_dim.x != 32) std::abort();
    const unsigned lane = thread_index.x;
    for (int r = 0; r < 4; ++r) mma_a[lane][r] = a[r];
    for (int r = 0; r < 2; ++r) mma_b[lane][r] = b[r];
    block_barrier->arrive_and_wait();
    auto value = [](uint32_t bits) {
        float f;
        std::memcpy(&f, &bits, 4);
        return double(f);
    };
    auto A = [&](int m, int k) { return value(mma_a[(m % 8) * 4 + k % 4][(m / 8) + 2 * (k / 4)]); };
    auto B = [&](int k, int n) { return value(mma_b[n * 4 + k % 4][k / 4]); };
    for (int r = 0; r < 4; ++r) {
        const int m = int(lane / 4) + (r / 2) * 8, n = int(lane % 4) * 2 + r % 2;
        double terms[9];
        for (int k = 0; k < 8; ++k) terms[k] = A(m, k) * B(k, n);   // exact: 11 by 11 bits
        terms[8] = double(d[r]);
        d[r] = tensor_core_sum(terms, 9);
    }
    block_barrier->arrive_and_wait();
}

// wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 with both operands in shared memory, K-major,
// 128-byte swizzle (the descriptors of gdn_wgmma.cuh), for thread t % 128 of its warpgroup, as if it
// completed at once: the tiles are read through their descriptors from shared memory, and each of
// the thread's N/2 accumulator registers (register 4j + 2h + e: row 16w + l/4 + 8h, column
// 8j + 2(l%4) + e, w = t%128 / 32, l = t % 32) gets tensor_core_sum of its eight products and,
// with scale_d, itself: wgmma adds as mma.sync does (bench/wgmma_probe.cu case R on an H200).
// A descriptor gives the tile's start address (bits 0-13) and the step between groups of eight
// rows (bits 32-45), both in 16-byte units; element (r, k) lies at start + (r/8)·step + (r%8)·128
// + 4k, bits 4-6 of that address XORed with bits 7-9 (the 128-byte swizzle).
inline double swizzled_tf32(uint64_t desc, int r, int k) {
    if ((desc >> 62) != 1u) std::abort();   // only the 128-byte swizzle is modelled
    const uint32_t start = uint32_t(desc & 0x3FFFu) << 4, step = uint32_t((desc >> 32) & 0x3FFFu) << 4;
    const uint32_t at = start + uint32_t(r / 8) * step + uint32_t(r % 8) * 128 + 4u * uint32_t(k);
    const uint32_t swizzled = at ^ (((at >> 7) & 7u) << 4);
    if (swizzled + 4 > sizeof(shared_memory)) std::abort();
    float f;
    std::memcpy(&f, reinterpret_cast<const unsigned char*>(shared_memory) + swizzled, 4);
    return double(f);
}
template <int R>
inline void wgmma_tf32(float (&d)[R], uint64_t da, uint64_t db, int scale_d) {
    const unsigned t = thread_index.x % 128, w = t / 32, l = t % 32;
    for (int r = 0; r < R; ++r) {
        const int m = int(16 * w + l / 4 + 8 * ((r >> 1) & 1)), n = int(8 * (r >> 2) + 2 * (l % 4) + (r & 1));
        double terms[9];
        for (int k = 0; k < 8; ++k) terms[k] = swizzled_tf32(da, m, k) * swizzled_tf32(db, n, k);
        terms[8] = scale_d ? double(d[r]) : 0.0;
        d[r] = tensor_core_sum(terms, 9);
    }
}

// __shfl_xor_sync over the block of one warp.
inline uint32_t shfl_slots[32];
inline uint32_t shfl_xor(uint32_t value, int mask) {
    if (block_dim.x != 32) std::abort();
    shfl_slots[thread_index.x] = value;
    block_barrier->arrive_and_wait();
    const uint32_t other = shfl_slots[thread_index.x ^ unsigned(mask)];
    block_barrier->arrive_and_wait();
    return other;
}

}  // namespace kcv::gdn::cuda::emulation

#define threadIdx (::kcv::gdn::cuda::emulation::thread_index)
#define blockIdx (::kcv::gdn::cuda::emulation::block_index)
#define blockDim (::kcv::gdn::cuda::emulation::block_dim)
#define gridDim (::kcv::gdn::cuda::emulation::grid_dim)
#define __syncthreads() (::kcv::gdn::cuda::emulation::block_barrier->arrive_and_wait())
