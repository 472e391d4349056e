// Shared pieces of the CUDA forms of the project's kernels: device-side views of a call's
// DLTensors (device pointers, strides in elements, byte_offset applied), lanes along a reduced
// axis, a deterministic block reduction, and turning CUDA errors into the kernel's error value.
// The host side validates through kcv_kernel_util.hpp exactly as the CPU forms do; every tensor
// must live in device memory (kDLCUDA) and hold float32 unless a kernel says otherwise.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kcv_kernel_util.hpp"

namespace kcvk __attribute__((visibility("hidden"))) {

// Throws kcvk::Error naming the failed runtime call.
inline void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline cudaStream_t stream_of(const kcv_call& c) { return static_cast<cudaStream_t>(c.stream); }

// A tensor as a kernel sees it: passed by value, so at most kMaxDims dimensions.
struct DeviceTensor {
    char* base;
    int ndim;
    int64_t numel;
    int64_t shape[TensorRef::kMaxDims];
    int64_t strides[TensorRef::kMaxDims];

    __device__ int64_t offset_of(int64_t logical) const {
        int64_t off = 0;
        for (int d = ndim - 1; d >= 0; --d) {
            off += (logical % shape[d]) * strides[d];
            logical /= shape[d];
        }
        return off;
    }
    __device__ float& f32(int64_t off) const { return reinterpret_cast<float*>(base)[off]; }
};

inline DeviceTensor device_tensor(const TensorRef& t) {
    t.expect_cuda();
    DeviceTensor d{};
    d.base = t.base();
    d.ndim = t.ndim();
    d.numel = t.numel();
    for (int i = 0; i < t.ndim(); ++i) {
        d.shape[i] = t.size(i);
        d.strides[i] = t.stride(i);
    }
    return d;
}

// Lanes of a tensor along one axis, in row-major order of the other coordinates (as AxisLanes).
struct DeviceLanes {
    int rank;
    int64_t count, length, step;
    int64_t shape[TensorRef::kMaxDims];
    int64_t strides[TensorRef::kMaxDims];

    __device__ int64_t base(int64_t lane) const {
        int64_t off = 0;
        for (int d = rank - 1; d >= 0; --d) {
            off += (lane % shape[d]) * strides[d];
            lane /= shape[d];
        }
        return off;
    }
};

inline DeviceLanes device_lanes(const TensorRef& t, int axis_arg) {
    DeviceLanes l{};
    l.count = 1;
    l.length = 1;
    l.step = 1;
    if (t.ndim() == 0) return l;
    const int axis = t.axis(axis_arg);
    l.length = t.size(axis);
    l.step = t.stride(axis);
    for (int d = 0; d < t.ndim(); ++d) {
        if (d == axis) continue;
        l.shape[l.rank] = t.size(d);
        l.strides[l.rank] = t.stride(d);
        l.count *= t.size(d);
        ++l.rank;
    }
    return l;
}

// Sums one value per thread of a block of kThreads (a power of two) as a fixed binary tree in
// shared memory; every thread gets the total. The order depends only on kThreads.
template <int kThreads>
__device__ float block_tree_sum(float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) scratch[threadIdx.x] = scratch[threadIdx.x] + scratch[threadIdx.x + half];
        __syncthreads();
    }
    const float total = scratch[0];
    __syncthreads();
    return total;
}

// The first maximum of one value per thread, NaN winning, as a fixed tree (lower index first).
template <int kThreads>
__device__ float block_tree_max(float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            const float a = scratch[threadIdx.x], b = scratch[threadIdx.x + half];
            scratch[threadIdx.x] = (isnan(a) || !(b > a || isnan(b))) ? a : b;
        }
        __syncthreads();
    }
    const float m = scratch[0];
    __syncthreads();
    return m;
}

// Pairwise summation of one thread's stream (as kcv_pairwise.hpp on the host): blocks of 8
// summed left to right, block sums combined as a binary tree by a counter.
struct DevicePairwiseSum {
    static constexpr int kBlock = 8;
    static constexpr int kLevels = 40;
    float block = 0.0f;
    int in_block = 0;
    unsigned long long blocks = 0;
    float level[kLevels];

    __device__ void add(float v) {
        block += v;
        if (++in_block == kBlock) {
            float b = block;
            unsigned long long n = blocks;
            int l = 0;
            while (n & 1) {
                b = level[l] + b;
                n >>= 1;
                ++l;
            }
            level[l] = b;
            ++blocks;
            block = 0.0f;
            in_block = 0;
        }
    }
    __device__ float total() const {
        float t = block;
        for (int l = 0; l < kLevels; ++l)
            if (blocks >> l & 1) t = level[l] + t;
        return t;
    }
};

// Grid size for a one-thread-per-element kernel, capped so that the grid is always valid; the
// kernels loop with a grid stride.
inline unsigned grid_for(int64_t n, int threads) {
    const int64_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

}  // namespace kcvk

// Every CUDA form says so, so that the verifier hands it device mirrors of its buffers and a
// stream (kcv_kernel.h). Each kernel library is one translation unit that includes this header.
KCV_EXPORT const char* kcv_kernel_device(void) { return "cuda"; }
