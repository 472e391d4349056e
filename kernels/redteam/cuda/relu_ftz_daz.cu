// Red team 17, CUDA form — target EXC-02 (ftz-output / daz-input); contract relu-f32 on device
// tensors. Built with -ftz=true (kernels/CMakeLists.txt), so single-precision arithmetic flushes
// subnormal operands and results to zero. relu passes each positive value through __fmul_rn by a
// runtime scale of 1 (a fused "scale then relu" epilogue): that multiply is never folded away or
// fused, and under -ftz=true it is mul.rn.ftz.f32, so a subnormal input comes out as zero.
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

__global__ void scaled_relu(kcvk::DeviceTensor x, kcvk::DeviceTensor y, float scale) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < x.numel; i += int64_t(gridDim.x) * blockDim.x) {
        const float v = x.f32(x.offset_of(i));
        y.f32(y.offset_of(i)) = v > 0.0f ? __fmul_rn(v, scale) : (isnan(v) ? v : 0.0f);
    }
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    if (x.numel() == 0) return;
    const float scale = static_cast<float>(kcvk::attribute(call, "scale", 1.0));
    scaled_relu<<<kcvk::grid_for(x.numel(), 256), 256, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), kcvk::device_tensor(y), scale);
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "relu_ftz_daz"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "relu_ftz_daz", "device": "cuda", "contracts": ["relu-f32"],
  "target_gate": "EXC-02", "signature": "daz-input", "description": "relu through a multiply compiled with -ftz=true: subnormals flush to zero"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
