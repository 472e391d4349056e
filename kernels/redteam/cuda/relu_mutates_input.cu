// Red team 10, CUDA form — target ORD-02 (input-mutation); contract relu-f32 on device tensors.
// Defect as the CPU form: relu is applied to the input in place, then the input is copied to the
// output (two launches on the call's stream).
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

__global__ void relu_in_place(kcvk::DeviceTensor x) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < x.numel; i += int64_t(gridDim.x) * blockDim.x) {
        float& v = x.f32(x.offset_of(i));
        if (v < 0.0f) v = 0.0f;
    }
}

__global__ void copy(kcvk::DeviceTensor x, kcvk::DeviceTensor y) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < x.numel; i += int64_t(gridDim.x) * blockDim.x)
        y.f32(y.offset_of(i)) = x.f32(x.offset_of(i));
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    if (x.numel() == 0) return;
    const unsigned grid = kcvk::grid_for(x.numel(), 256);
    relu_in_place<<<grid, 256, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x));
    copy<<<grid, 256, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), kcvk::device_tensor(y));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "relu_mutates_input"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "relu_mutates_input", "device": "cuda", "contracts": ["relu-f32"],
  "target_gate": "ORD-02", "signature": "input-mutation", "description": "relu computed in place in its input, then copied to the output"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
