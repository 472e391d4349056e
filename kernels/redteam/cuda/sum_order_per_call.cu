// Red team 9, CUDA form — target ORD-02 (run-to-run); contract sum-f32 on device tensors.
// Defect: an atomics-order reduction. The output is zeroed, each row is cut into 32 chunks, and 32
// blocks per row add their chunk's sum into the output with atomicAdd, so the order of the float
// additions is whatever order the blocks arrive in. Which chunk a block takes also rotates with a
// per-process call counter, so the arrival order (and the rounding) changes between calls even
// when the hardware schedules the blocks identically.
#include <atomic>
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kChunks = 32;
constexpr int kThreads = 128;
std::atomic<unsigned> calls{0};

__global__ void zero(kcvk::DeviceTensor y) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < y.numel; i += int64_t(gridDim.x) * blockDim.x)
        y.f32(y.offset_of(i)) = 0.0f;
}

__global__ void chunk_sums(kcvk::DeviceTensor x, kcvk::DeviceLanes lanes, kcvk::DeviceTensor y, unsigned rotation) {
    __shared__ float scratch[kThreads];
    const int64_t lane = blockIdx.y;
    const int64_t chunk = (blockIdx.x + rotation) % kChunks;
    const int64_t begin = lanes.length * chunk / kChunks, end = lanes.length * (chunk + 1) / kChunks;
    kcvk::DevicePairwiseSum acc;
    for (int64_t k = begin + threadIdx.x; k < end; k += kThreads) acc.add(x.f32(lanes.base(lane) + k * lanes.step));
    const float s = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
    if (threadIdx.x == 0) atomicAdd(&y.f32(y.offset_of(lane)), s);
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    const kcvk::DeviceLanes lanes = kcvk::device_lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count) throw kcvk::Error("output y does not hold one value per lane");
    if (lanes.count == 0) return;
    if (lanes.count > 65535) throw kcvk::Error("too many rows for one launch");
    const cudaStream_t s = kcvk::stream_of(call);
    zero<<<kcvk::grid_for(lanes.count, 256), 256, 0, s>>>(kcvk::device_tensor(y));
    chunk_sums<<<dim3(kChunks, static_cast<unsigned>(lanes.count)), kThreads, 0, s>>>(kcvk::device_tensor(x), lanes,
                                                                                      kcvk::device_tensor(y), calls.fetch_add(1));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sum_order_per_call"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "sum_order_per_call", "device": "cuda", "contracts": ["sum-f32"],
  "target_gate": "ORD-02", "signature": "run-to-run", "description": "row sum by atomicAdd of 32 chunk sums, chunk order rotating per call"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
