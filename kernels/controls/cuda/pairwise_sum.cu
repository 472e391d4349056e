// Positive control, CUDA form: sum-f32 and mean-f32 over one axis (attribute dim, default the
// last) of a device tensor with any strides. One block of 256 threads per lane: thread t sums
// the contiguous t-th 256th of the lane by pairwise summation (blocks of 8 and a tree, as the
// CPU form), and the 256 partial sums are combined by a fixed binary tree in shared memory. The
// order depends only on the lane length: bitwise reproducible, no atomics.
// Build: nvcc -std=c++20 -O2 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a
//        -gencode=arch=compute_80,code=[compute_80,sm_80] -Iinclude -Ikernels/common
//        kernels/controls/cuda/pairwise_sum.cu -o kcv_controls_pairwise_sum.so
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kThreads = 256;

__global__ void pairwise_sum(kcvk::DeviceTensor x, kcvk::DeviceLanes lanes, kcvk::DeviceTensor y, bool mean) {
    __shared__ float scratch[kThreads];
    for (int64_t lane = blockIdx.x; lane < lanes.count; lane += gridDim.x) {
        const int64_t base = lanes.base(lane);
        const int64_t begin = lanes.length * threadIdx.x / kThreads, end = lanes.length * (threadIdx.x + 1) / kThreads;
        kcvk::DevicePairwiseSum acc;
        for (int64_t k = begin; k < end; ++k) acc.add(x.f32(base + k * lanes.step));
        float total = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
        if (threadIdx.x == 0) {
            if (mean) total = __fdiv_rn(total, static_cast<float>(lanes.length));
            y.f32(y.offset_of(lane)) = total;
        }
    }
}

void run(const kcv_call& call) {
    const std::string op = kcvk::operation(call);
    if (op != "sum" && op != "mean")
        throw kcvk::Error(std::string("pairwise_sum serves sum and mean, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    const kcvk::DeviceLanes lanes = kcvk::device_lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count) throw kcvk::Error("output y does not hold one value per lane");
    if (lanes.count == 0) return;
    pairwise_sum<<<kcvk::grid_for(lanes.count, 1), kThreads, 0, kcvk::stream_of(call)>>>(
        kcvk::device_tensor(x), lanes, kcvk::device_tensor(y), op == "mean");
    kcvk::check_cuda(cudaGetLastError(), "pairwise_sum launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "pairwise_sum"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "pairwise_sum", "device": "cuda", "contracts": ["sum-f32", "mean-f32"],
  "description": "per-lane block reduction: pairwise per thread, a fixed tree across threads"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
