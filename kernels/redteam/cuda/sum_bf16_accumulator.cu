// Red team 2, CUDA form — target PRC-01; contract sum-f32 on device tensors.
// Defect as the CPU form: one thread per lane keeps the running sum in __nv_bfloat16.
#include <cuda_bf16.h>

#include <string>

#include "kcv_cuda_util.cuh"

namespace {

__global__ void sum_bf16(kcvk::DeviceTensor x, kcvk::DeviceLanes lanes, kcvk::DeviceTensor y) {
    for (int64_t lane = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; lane < lanes.count; lane += int64_t(gridDim.x) * blockDim.x) {
        __nv_bfloat16 acc = __float2bfloat16_rn(0.0f);
        for (int64_t k = 0; k < lanes.length; ++k)
            acc = __float2bfloat16_rn(__fadd_rn(__bfloat162float(acc), x.f32(lanes.base(lane) + k * lanes.step)));
        y.f32(y.offset_of(lane)) = __bfloat162float(acc);
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
    sum_bf16<<<kcvk::grid_for(lanes.count, 128), 128, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), lanes, kcvk::device_tensor(y));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sum_bf16_accumulator"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "sum_bf16_accumulator", "device": "cuda", "contracts": ["sum-f32"],
  "target_gate": "PRC-01", "description": "row sum with a bf16 running accumulator"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
