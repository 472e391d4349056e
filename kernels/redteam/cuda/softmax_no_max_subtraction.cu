// Red team 3, CUDA form — target PRC-02; contract softmax-f32 on device tensors.
// Defect as the CPU form: y = exp(x) / Σ exp(x) with no max subtraction; logits beyond 88.7
// overflow expf to Inf and Inf/Inf gives NaN.
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kThreads = 256;

__global__ void softmax_no_max(kcvk::DeviceTensor x, kcvk::DeviceLanes in, kcvk::DeviceTensor y, kcvk::DeviceLanes out) {
    __shared__ float scratch[kThreads];
    for (int64_t lane = blockIdx.x; lane < in.count; lane += gridDim.x) {
        const int64_t begin = in.length * threadIdx.x / kThreads, end = in.length * (threadIdx.x + 1) / kThreads;
        kcvk::DevicePairwiseSum acc;
        for (int64_t k = begin; k < end; ++k) acc.add(expf(x.f32(in.base(lane) + k * in.step)));
        const float s = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
        for (int64_t k = begin; k < end; ++k) y.f32(out.base(lane) + k * out.step) = __fdiv_rn(expf(x.f32(in.base(lane) + k * in.step)), s);
    }
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::DeviceLanes in = kcvk::device_lanes(x, axis), out = kcvk::device_lanes(y, axis);
    if (in.count == 0) return;
    softmax_no_max<<<kcvk::grid_for(in.count, 1), kThreads, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), in, kcvk::device_tensor(y), out);
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_no_max_subtraction"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "softmax_no_max_subtraction", "device": "cuda", "contracts": ["softmax-f32"],
  "target_gate": "PRC-02", "signature": "nonfinite-in-range", "description": "softmax as exp(x)/sum(exp(x)), no max subtraction"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
