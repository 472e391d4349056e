// Red team 13, CUDA form — target CMP-01; contract sum-f32 on device tensors.
// Defect as the CPU form: the grid is fixed at the contract's nominal R = 8 blocks, one row each,
// with no grid-stride loop; rows past the eighth are never computed.
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr unsigned kRows = 8;
constexpr int kThreads = 256;

__global__ void row_sums(kcvk::DeviceTensor x, kcvk::DeviceLanes lanes, kcvk::DeviceTensor y) {
    __shared__ float scratch[kThreads];
    const int64_t row = blockIdx.x;
    if (row >= lanes.count) return;
    const int64_t begin = lanes.length * threadIdx.x / kThreads, end = lanes.length * (threadIdx.x + 1) / kThreads;
    kcvk::DevicePairwiseSum acc;
    for (int64_t k = begin; k < end; ++k) acc.add(x.f32(lanes.base(row) + k * lanes.step));
    const float s = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
    if (threadIdx.x == 0) y.f32(y.offset_of(row)) = s;
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    const kcvk::DeviceLanes lanes = kcvk::device_lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count) throw kcvk::Error("output y does not hold one value per lane");
    row_sums<<<kRows, kThreads, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), lanes, kcvk::device_tensor(y));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sum_hardcoded_rows"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "sum_hardcoded_rows", "device": "cuda", "contracts": ["sum-f32"],
  "target_gate": "CMP-01", "assumes": {"R": 8}, "description": "row sum launched with a grid of 8 blocks: rows past the eighth are never written"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
