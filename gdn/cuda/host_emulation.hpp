// Runs the CUDA kernels of this folder on the host: each block's threads become std::threads
// meeting at a std::barrier for __syncthreads, blocks run one after another, dynamic shared
// memory is one host array. Only the float32 specialisations are meant to run here. It lets a
// machine without a GPU execute the kernels' own indexing, masking and synchronisation against
// the oracle (tests/cpp/test_gdn_cuda_emulated.cpp); it says nothing about speed.
#pragma once

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
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

// 16-bit float types, declared so that the templates name them; never instantiated here.
struct __nv_bfloat16 {
    uint16_t bits;
};
struct __half {
    uint16_t bits;
};
float __bfloat162float(__nv_bfloat16);
float __half2float(__half);
__nv_bfloat16 __float2bfloat16_rn(float);
__half __float2half_rn(float);

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

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 for a block of one warp (HostLauncher's 32
// threads): each lane posts its fragments, then reads the whole tiles back through the PTX
// fragment layout (gdn_mma.cuh has the table) and adds its own four elements of A·B. The eight
// products (exact: 11 by 11 significant bits) and the accumulator are summed in float64 and the
// sum is truncated toward zero to float32, as NVIDIA's tensor cores are reported to round
// (Fasi, Higham, Mikaitis and Pranesh, 2021, on V100, T4 and A100): rounding to nearest here left
// the kernels well inside the float32 control's error where an H200 put them at 1.8–2.3 times it,
// and truncation reproduces that (bench/RESULTS.md). bench/mma_subnormals.cu's rounding cases
// check it on a GPU.
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
        double sum = 0.0;
        for (int k = 0; k < 8; ++k) sum += A(m, k) * B(k, n);
        const double exact = double(d[r]) + sum;
        float rounded = float(exact);
        if (double(rounded) != exact && std::abs(double(rounded)) > std::abs(exact))
            rounded = std::nextafter(rounded, 0.0f);
        d[r] = rounded;
    }
    block_barrier->arrive_and_wait();
}

// The Launcher of gdn_launch.cuh for the host: runs each kernel through launch() with fewer
// threads than the GPU's blocks (the kernels stride over blockDim, and the emulation runs faster
// with fewer host threads per block); refuses a block needing more shared memory than Hopper has.
struct HostLauncher {
    unsigned threads = 32;

    template <class Kernel, class... Args>
    int operator()(Kernel kernel, dim3 grid, size_t smem, const char*, Args... args) {
        if (smem > sizeof(shared_memory)) return 1;
        if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;
        launch(kernel, grid, threads, args...);
        return 0;
    }
};

}  // namespace kcv::gdn::cuda::emulation

#define threadIdx (::kcv::gdn::cuda::emulation::thread_index)
#define blockIdx (::kcv::gdn::cuda::emulation::block_index)
#define blockDim (::kcv::gdn::cuda::emulation::block_dim)
#define gridDim (::kcv::gdn::cuda::emulation::grid_dim)
#define __syncthreads() (::kcv::gdn::cuda::emulation::block_barrier->arrive_and_wait())
