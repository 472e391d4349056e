// Red team 15, CUDA form — target EXC-01 (nan-swallowed); contract relu-f32 on device tensors.
// Defect as the CPU form: relu as fmaxf(x, 0.0f), which returns 0 for a NaN input.
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

__global__ void relu_fmaxf(kcvk::DeviceTensor x, kcvk::DeviceTensor y) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < x.numel; i += int64_t(gridDim.x) * blockDim.x)
        y.f32(y.offset_of(i)) = fmaxf(x.f32(x.offset_of(i)), 0.0f);
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    if (x.numel() == 0) return;
    relu_fmaxf<<<kcvk::grid_for(x.numel(), 256), 256, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), kcvk::device_tensor(y));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "relu_fmaxf"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "relu_fmaxf", "device": "cuda", "contracts": ["relu-f32"],
  "target_gate": "EXC-01", "signature": "nan-swallowed", "description": "relu as fmaxf(x, 0), which turns NaN into 0"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
