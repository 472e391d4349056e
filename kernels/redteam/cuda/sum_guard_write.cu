// Red team 18, CUDA form — target RES-01 (oob-write); contract sum-f32 on device tensors.
// Defect as the CPU form: the kernel that clears the row accumulators covers R + 1 elements
// (`lane <= count`), zeroing the float32 just past the end of y, in the guard band after it.
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kThreads = 256;

__global__ void clear_accumulators(kcvk::DeviceTensor y, int64_t count, int64_t past_end) {
    for (int64_t lane = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; lane <= count; lane += int64_t(gridDim.x) * blockDim.x)
        y.f32(lane < count ? y.offset_of(lane) : past_end) = 0.0f;
}

__global__ void row_sums(kcvk::DeviceTensor x, kcvk::DeviceLanes lanes, kcvk::DeviceTensor y) {
    __shared__ float scratch[kThreads];
    for (int64_t lane = blockIdx.x; lane < lanes.count; lane += gridDim.x) {
        const int64_t begin = lanes.length * threadIdx.x / kThreads, end = lanes.length * (threadIdx.x + 1) / kThreads;
        kcvk::DevicePairwiseSum acc;
        for (int64_t k = begin; k < end; ++k) acc.add(x.f32(lanes.base(lane) + k * lanes.step));
        const float s = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
        if (threadIdx.x == 0) y.f32(y.offset_of(lane)) = s;
    }
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    const kcvk::DeviceLanes lanes = kcvk::device_lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count) throw kcvk::Error("output y does not hold one value per lane");
    if (lanes.count == 0) return;
    const int64_t step = y.ndim() == 0 ? 1 : y.stride(-1);
    const int64_t past_end = y.offset_of(y.numel() - 1) + step;
    const cudaStream_t s = kcvk::stream_of(call);
    clear_accumulators<<<kcvk::grid_for(lanes.count + 1, 256), 256, 0, s>>>(kcvk::device_tensor(y), lanes.count, past_end);
    row_sums<<<kcvk::grid_for(lanes.count, 1), kThreads, 0, s>>>(kcvk::device_tensor(x), lanes, kcvk::device_tensor(y));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sum_guard_write"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "sum_guard_write", "device": "cuda", "contracts": ["sum-f32"],
  "target_gate": "RES-01", "signature": "oob-write", "description": "row sum that zeroes one element past the end of its output"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
