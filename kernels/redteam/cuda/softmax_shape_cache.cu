// Red team 11, CUDA form — target ORD-02 (stale-or-cached); contract softmax-f32 on device
// tensors. Defect as the CPU form: the first call of a shape computes a max-subtracted softmax
// into a device buffer the library keeps (keyed on the shape); every later call of that shape
// copies the kept buffer into the output whatever its inputs.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kThreads = 256;

// The kept result is laid out lane by lane, [lane * length + k].
__global__ void softmax_packed(kcvk::DeviceTensor x, kcvk::DeviceLanes in, float* packed) {
    __shared__ float scratch[kThreads];
    for (int64_t lane = blockIdx.x; lane < in.count; lane += gridDim.x) {
        const int64_t begin = in.length * threadIdx.x / kThreads, end = in.length * (threadIdx.x + 1) / kThreads;
        float m = -INFINITY;
        for (int64_t k = begin; k < end; ++k) {
            const float v = x.f32(in.base(lane) + k * in.step);
            if (!isnan(m) && (isnan(v) || v > m)) m = v;
        }
        m = kcvk::block_tree_max<kThreads>(m, scratch);
        kcvk::DevicePairwiseSum acc;
        for (int64_t k = begin; k < end; ++k) acc.add(expf(__fsub_rn(x.f32(in.base(lane) + k * in.step), m)));
        const float s = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
        for (int64_t k = begin; k < end; ++k)
            packed[lane * in.length + k] = __fdiv_rn(expf(__fsub_rn(x.f32(in.base(lane) + k * in.step), m)), s);
    }
}

__global__ void unpack(const float* packed, kcvk::DeviceTensor y, kcvk::DeviceLanes out) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < out.count * out.length; i += int64_t(gridDim.x) * blockDim.x)
        y.f32(out.base(i / out.length) + (i % out.length) * out.step) = packed[i];
}

std::mutex cache_mutex;
std::map<std::vector<int64_t>, float*> cache;   // device buffers, kept for the life of the process

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::DeviceLanes in = kcvk::device_lanes(x, axis), out = kcvk::device_lanes(y, axis);
    if (x.numel() == 0) return;
    std::vector<int64_t> key;
    for (int d = 0; d < x.ndim(); ++d) key.push_back(x.size(d));
    const cudaStream_t s = kcvk::stream_of(call);
    const std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(key);
    if (it == cache.end()) {
        float* packed = nullptr;
        kcvk::check_cuda(cudaMalloc(&packed, sizeof(float) * static_cast<size_t>(x.numel())), "cudaMalloc");
        softmax_packed<<<kcvk::grid_for(in.count, 1), kThreads, 0, s>>>(kcvk::device_tensor(x), in, packed);
        it = cache.emplace(key, packed).first;
    }
    unpack<<<kcvk::grid_for(x.numel(), 256), 256, 0, s>>>(it->second, kcvk::device_tensor(y), out);
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_shape_cache"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "softmax_shape_cache", "device": "cuda", "contracts": ["softmax-f32"],
  "target_gate": "ORD-02", "signature": "stale-or-cached", "description": "softmax memoised on the input shape: later calls of a shape return the first result"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
