// Red team 6, CUDA form — target ORD-01; contract gelu-f32 (exact erf GELU) on device tensors.
// Defect as the CPU form: the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

__global__ void gelu_tanh(kcvk::DeviceTensor x, kcvk::DeviceTensor y) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < x.numel; i += int64_t(gridDim.x) * blockDim.x) {
        const float v = x.f32(x.offset_of(i));
        const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y.f32(y.offset_of(i)) = 0.5f * v * (1.0f + tanhf(inner));
    }
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    if (x.numel() == 0) return;
    gelu_tanh<<<kcvk::grid_for(x.numel(), 256), 256, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), kcvk::device_tensor(y));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "gelu_tanh_approximation"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "gelu_tanh_approximation", "device": "cuda", "contracts": ["gelu-f32"],
  "target_gate": "ORD-01", "description": "tanh-approximate GELU where the contract is exact (erf) GELU"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
