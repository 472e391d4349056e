// Positive control, CUDA form: softmax-f32 and log_softmax-f32 along one axis (attribute dim,
// default the last) of device tensors with any strides. One block of 256 threads per lane: the
// NaN-propagating maximum by a fixed tree, d_k = x_k − m, S = Σ exp(d_k) by per-thread pairwise
// sums and a fixed tree, then y = exp(d)/S or d − log S. Every d_k ≤ 0, so nothing overflows;
// IEEE arithmetic gives PyTorch's special cases (a NaN, a +Inf or a row of −Inf: the row is NaN).
// expf/logf are CUDA's accurate versions (no --use_fast_math). Bitwise reproducible.
// Build: nvcc -std=c++20 -O2 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a
//        -gencode=arch=compute_80,code=[compute_80,sm_80] -Iinclude -Ikernels/common
//        kernels/controls/cuda/softmax_maxsub.cu -o kcv_controls_softmax_maxsub.so
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kThreads = 256;

__global__ void softmax(kcvk::DeviceTensor x, kcvk::DeviceLanes in, kcvk::DeviceTensor y, kcvk::DeviceLanes out,
                        bool log_space) {
    __shared__ float scratch[kThreads];
    for (int64_t lane = blockIdx.x; lane < in.count; lane += gridDim.x) {
        const int64_t xb = in.base(lane), yb = out.base(lane);
        const int64_t begin = in.length * threadIdx.x / kThreads, end = in.length * (threadIdx.x + 1) / kThreads;
        float m = -INFINITY;
        for (int64_t k = begin; k < end; ++k) {
            const float v = x.f32(xb + k * in.step);
            if (!isnan(m) && (isnan(v) || v > m)) m = v;
        }
        m = kcvk::block_tree_max<kThreads>(m, scratch);
        kcvk::DevicePairwiseSum acc;
        for (int64_t k = begin; k < end; ++k) acc.add(expf(__fsub_rn(x.f32(xb + k * in.step), m)));
        const float s = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
        const float log_s = logf(s);
        for (int64_t k = begin; k < end; ++k) {
            const float d = __fsub_rn(x.f32(xb + k * in.step), m);
            y.f32(yb + k * out.step) = log_space ? __fsub_rn(d, log_s) : __fdiv_rn(expf(d), s);
        }
    }
}

void run(const kcv_call& call) {
    const std::string op = kcvk::operation(call);
    if (op != "softmax" && op != "log_softmax")
        throw kcvk::Error(std::string("softmax_maxsub serves softmax and log_softmax, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::DeviceLanes in = kcvk::device_lanes(x, axis), out = kcvk::device_lanes(y, axis);
    if (in.count == 0) return;
    softmax<<<kcvk::grid_for(in.count, 1), kThreads, 0, kcvk::stream_of(call)>>>(kcvk::device_tensor(x), in,
                                                                                  kcvk::device_tensor(y), out, op == "log_softmax");
    kcvk::check_cuda(cudaGetLastError(), "softmax launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_maxsub"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "softmax_maxsub", "device": "cuda", "contracts": ["softmax-f32", "log_softmax-f32"],
  "description": "max-subtracted softmax and log_softmax, one block per lane, fixed-order reductions"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
