// Red team 12, CUDA form — target CMP-01; contract relu-f32 on device tensors.
// Defect as the CPU form: each row is processed in vectors of 16 (one thread per vector) and the
// N mod 16 elements after the last full vector are never written.
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int64_t kVector = 16;

__global__ void relu_vectors(kcvk::DeviceTensor x, kcvk::DeviceLanes in, kcvk::DeviceTensor y, kcvk::DeviceLanes out) {
    const int64_t vectors_per_row = in.length / kVector;   // the remainder is dropped
    for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < in.count * vectors_per_row; v += int64_t(gridDim.x) * blockDim.x) {
        const int64_t row = v / vectors_per_row, j0 = (v % vectors_per_row) * kVector;
        for (int64_t j = j0; j < j0 + kVector; ++j) {
            const float e = x.f32(in.base(row) + j * in.step);
            y.f32(out.base(row) + j * out.step) = e < 0.0f ? 0.0f : e;
        }
    }
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    const kcvk::DeviceLanes in = kcvk::device_lanes(x, -1), out = kcvk::device_lanes(y, -1);
    const int64_t work = in.count * (in.length / kVector);
    if (work == 0) return;
    relu_vectors<<<kcvk::grid_for(work, 256), 256, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), in, kcvk::device_tensor(y), out);
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "relu_missing_tail_mask"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "relu_missing_tail_mask", "device": "cuda", "contracts": ["relu-f32"],
  "target_gate": "CMP-01", "description": "relu in vectors of 16 along each row with no tail handling"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
