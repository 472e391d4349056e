// Red team 19, CUDA form — target RES-02 (smem-budget, launch-error); contract softmax-f32 on
// device tensors.
// Defect: a softmax that stages a row in dynamic shared memory, with an autotuner that runs a
// small configuration on the first call and from then on the "tuned" one, which asks for
// 300 KiB of dynamic shared memory per block — above the 227 KiB a Hopper block may opt in to.
// cudaFuncSetAttribute refuses that size and the launch fails; the kernel then copies the first
// call's result, which it keeps in a device buffer, into the output so that it looks computed,
// and returns the launch error. kcv_kernel_resources declares the 300 KiB.
#include <mutex>
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kThreads = 256;
constexpr size_t kTunedSmemBytes = 300 * 1024;

// Stages the lane in dynamic shared memory in tiles of `tile` floats; max-subtracted softmax.
__global__ void staged_softmax(kcvk::DeviceTensor x, kcvk::DeviceLanes in, float* packed, int64_t tile) {
    extern __shared__ float stage[];
    __shared__ float scratch[kThreads];
    for (int64_t lane = blockIdx.x; lane < in.count; lane += gridDim.x) {
        float m = -INFINITY;
        for (int64_t t0 = 0; t0 < in.length; t0 += tile) {
            const int64_t n = in.length - t0 < tile ? in.length - t0 : tile;
            for (int64_t k = threadIdx.x; k < n; k += kThreads) stage[k] = x.f32(in.base(lane) + (t0 + k) * in.step);
            __syncthreads();
            for (int64_t k = threadIdx.x; k < n; k += kThreads)
                if (!isnan(m) && (isnan(stage[k]) || stage[k] > m)) m = stage[k];
            __syncthreads();
        }
        m = kcvk::block_tree_max<kThreads>(m, scratch);
        kcvk::DevicePairwiseSum acc;
        for (int64_t k = threadIdx.x; k < in.length; k += kThreads) acc.add(expf(__fsub_rn(x.f32(in.base(lane) + k * in.step), m)));
        const float s = kcvk::block_tree_sum<kThreads>(acc.total(), scratch);
        for (int64_t k = threadIdx.x; k < in.length; k += kThreads)
            packed[lane * in.length + k] = __fdiv_rn(expf(__fsub_rn(x.f32(in.base(lane) + k * in.step), m)), s);
    }
}

__global__ void unpack(const float* packed, int64_t available, kcvk::DeviceTensor y, kcvk::DeviceLanes out) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < out.count * out.length && i < available;
         i += int64_t(gridDim.x) * blockDim.x)
        y.f32(out.base(i / out.length) + (i % out.length) * out.step) = packed[i];
}

std::mutex state_mutex;
float* kept = nullptr;   // the first call's result, lane by lane
int64_t kept_elements = 0;

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::DeviceLanes in = kcvk::device_lanes(x, axis), out = kcvk::device_lanes(y, axis);
    if (x.numel() == 0) return;
    const cudaStream_t s = kcvk::stream_of(call);
    const std::lock_guard<std::mutex> lock(state_mutex);
    if (kept == nullptr) {
        kcvk::check_cuda(cudaMalloc(&kept, sizeof(float) * static_cast<size_t>(x.numel())), "cudaMalloc");
        kept_elements = x.numel();
        staged_softmax<<<kcvk::grid_for(in.count, 1), kThreads, 1024 * sizeof(float), s>>>(kcvk::device_tensor(x), in, kept, 1024);
        kcvk::check_cuda(cudaGetLastError(), "first launch");
        unpack<<<kcvk::grid_for(x.numel(), 256), 256, 0, s>>>(kept, kept_elements, kcvk::device_tensor(y), out);
        kcvk::check_cuda(cudaGetLastError(), "first launch");
        return;
    }
    const cudaError_t attr = cudaFuncSetAttribute(staged_softmax, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(kTunedSmemBytes));
    staged_softmax<<<kcvk::grid_for(in.count, 1), kThreads, kTunedSmemBytes, s>>>(kcvk::device_tensor(x), in, kept,
                                                                                    static_cast<int64_t>(kTunedSmemBytes / sizeof(float)));
    const cudaError_t launch = cudaGetLastError();
    unpack<<<kcvk::grid_for(x.numel(), 256), 256, 0, s>>>(kept, kept_elements, kcvk::device_tensor(y), out);
    if (attr != cudaSuccess || launch != cudaSuccess) {
        int device = 0, limit = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
        throw kcvk::Error("launch failed: " + std::string(cudaGetErrorName(launch != cudaSuccess ? launch : attr)) +
                          ": the tuned configuration asks for " + std::to_string(kTunedSmemBytes / 1024) +
                          " KiB of dynamic shared memory per block, the device allows " + std::to_string(limit / 1024) + " KiB");
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_smem_overbudget"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "softmax_smem_overbudget", "device": "cuda", "contracts": ["softmax-f32"],
  "target_gate": "RES-02", "signature": "smem-budget", "description": "softmax tuned to 300 KiB of dynamic shared memory per block: later launches fail and leave the first result"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel_resources(kcv_resources* out) {
    if (out == nullptr) return 1;
    out->registers_per_thread = 64;
    out->threads_per_block = kThreads;
    out->static_smem_bytes = kThreads * sizeof(float);
    out->dynamic_smem_bytes = kTunedSmemBytes;
    out->local_bytes_per_thread = 0;
    out->tmem_columns = 0;
    return 0;
}

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
