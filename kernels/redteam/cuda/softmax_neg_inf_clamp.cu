// Red team 16, CUDA form — target EXC-01 (nan-swallowed); contract softmax-f32 on device tensors.
// Defect as the CPU form: −Inf logits are clamped to the lowest finite float before a
// max-subtracted softmax, so a row of −Inf becomes 1/N instead of NaN.
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kThreads = 256;

__device__ float clamp_mask(float v) { return v == -INFINITY ? -3.40282347e38f : v; }

__global__ void softmax_clamped(kcvk::DeviceTensor x, kcvk::DeviceLanes in, kcvk::DeviceTensor y, kcvk::DeviceLanes out) {
    __shared__ float scratch[kThreads];
    for (int64_t lane = blockIdx.x; lane < in.count; lane += gridDim.x) {
        const int64_t begin = in.length * threadIdx.x / kThreads, end = in.length * (threadIdx.x + 1) / kThreads;
        float m = -INFINITY;
        for (int64_t k = begin; k < end; ++k) {
            const float v = clamp_mask(x.f32(in.base(lane) + k * in.step));
            if (!isnan(m) && (isnan(v) || v > m)) m = v;
        }
        m = kcvk::block_tree_max<kThreads>(m, scratch);
        kcvk::DevicePairwiseSum acc;
        for (int64_t k = begin; k < end; ++k) acc.add(expf(__fsub_rn(clamp_mask(x.f32(in.base(lane) + k * in.step)), m)));
        const float s = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
        for (int64_t k = begin; k < end; ++k)
            y.f32(out.base(lane) + k * out.step) = __fdiv_rn(expf(__fsub_rn(clamp_mask(x.f32(in.base(lane) + k * in.step)), m)), s);
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
    softmax_clamped<<<kcvk::grid_for(in.count, 1), kThreads, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), in, kcvk::device_tensor(y), out);
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_neg_inf_clamp"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "softmax_neg_inf_clamp", "device": "cuda", "contracts": ["softmax-f32"],
  "target_gate": "EXC-01", "signature": "nan-swallowed", "description": "softmax that clamps -Inf logits to the lowest finite float: an all -Inf row gives 1/N, not NaN"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
