// Red team 4, CUDA form — target PRC-02; contract layernorm-f32 on device tensors.
// Defect as the CPU form: var = E[x²] − E[x]² from float32 sums (per-thread pairwise, fixed
// tree), which cancels catastrophically on offset data (1e4 + N(0,1)).
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kThreads = 256;

struct Affine {
    kcvk::DeviceTensor w, b;
    bool has_w, has_b;
};

__global__ void layernorm_naive(kcvk::DeviceTensor x, kcvk::DeviceLanes in, kcvk::DeviceTensor y, kcvk::DeviceLanes out,
                                Affine f, float eps) {
    __shared__ float scratch[kThreads];
    for (int64_t row = blockIdx.x; row < in.count; row += gridDim.x) {
        const int64_t begin = in.length * threadIdx.x / kThreads, end = in.length * (threadIdx.x + 1) / kThreads;
        kcvk::DevicePairwiseSum sum, squares;
        for (int64_t j = begin; j < end; ++j) {
            const float v = x.f32(in.base(row) + j * in.step);
            sum.add(v);
            squares.add(__fmul_rn(v, v));
        }
        const float n = static_cast<float>(in.length);
        const float mean = __fdiv_rn(kcvk::block_tree_sum<kThreads>(sum.total(), scratch), n);
        const float var = __fsub_rn(__fdiv_rn(kcvk::block_tree_sum<kThreads>(squares.total(), scratch), n), __fmul_rn(mean, mean));
        const float rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
        for (int64_t j = begin; j < end; ++j) {
            float v = __fmul_rn(__fsub_rn(x.f32(in.base(row) + j * in.step), mean), rstd);
            if (f.has_w) v = __fmul_rn(v, f.w.f32(j * f.w.strides[0]));
            if (f.has_b) v = __fadd_rn(v, f.b.f32(j * f.b.strides[0]));
            y.f32(out.base(row) + j * out.step) = v;
        }
    }
}

void run(const kcv_call& call) {
    if (call.n_inputs < 1 || call.n_inputs > 3) throw kcvk::Error("layernorm takes x[, weight[, bias]]");
    kcvk::expect_arity(call, call.n_inputs, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    Affine f{};
    if (call.n_inputs > 1) {
        const kcvk::TensorRef w(call.inputs[1], "input weight");
        w.expect_dtype(kcvk::Dtype::f32);
        f.w = kcvk::device_tensor(w);
        f.has_w = true;
    }
    if (call.n_inputs > 2) {
        const kcvk::TensorRef b(call.inputs[2], "input bias");
        b.expect_dtype(kcvk::Dtype::f32);
        f.b = kcvk::device_tensor(b);
        f.has_b = true;
    }
    const kcvk::DeviceLanes in = kcvk::device_lanes(x, -1), out = kcvk::device_lanes(y, -1);
    if (in.count == 0) return;
    layernorm_naive<<<kcvk::grid_for(in.count, 1), kThreads, 0, kcvk::stream_of(call)>>>(
        kcvk::device_tensor(x), in, kcvk::device_tensor(y), out, f, static_cast<float>(kcvk::attribute(call, "eps", 1e-5)));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "layernorm_naive_variance"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "layernorm_naive_variance", "device": "cuda", "contracts": ["layernorm-f32"],
  "target_gate": "PRC-02", "description": "layernorm with the variance as E[x^2] - E[x]^2 in float32"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
