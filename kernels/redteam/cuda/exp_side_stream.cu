// Red team 14, CUDA form — target CMP-02 (environment invariance: unsynchronised side stream);
// contract exp-f32 on device tensors.
// Defect: the kernel runs its work on a private non-blocking stream. The side stream waits for the
// caller's stream (so it reads complete inputs), but the caller's stream is never made to wait
// for the side stream: after synchronising only the current stream the output may be unwritten.
// A device or context synchronisation hides the race, which is why the other gates pass; CMP-02
// synchronises the current stream only. A prologue of 2^26 clock cycles (tens of milliseconds)
// on the side stream, standing in for the real work that makes such overlap attractive, makes
// the race lose every time.
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

__global__ void prologue(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

__global__ void exp_map(kcvk::DeviceTensor x, kcvk::DeviceTensor y) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < x.numel; i += int64_t(gridDim.x) * blockDim.x)
        y.f32(y.offset_of(i)) = static_cast<float>(exp(static_cast<double>(x.f32(x.offset_of(i)))));
}

cudaStream_t side_stream() {
    static cudaStream_t side = [] {
        cudaStream_t s = nullptr;
        kcvk::check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        return s;
    }();
    return side;
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x"), y(call.outputs[0], "output y");
    x.expect_dtype(kcvk::Dtype::f32);
    y.expect_dtype(kcvk::Dtype::f32);
    kcvk::expect_same_shape(x, y);
    if (x.numel() == 0) return;
    const cudaStream_t side = side_stream();
    cudaEvent_t inputs_ready;
    kcvk::check_cuda(cudaEventCreateWithFlags(&inputs_ready, cudaEventDisableTiming), "cudaEventCreate");
    kcvk::check_cuda(cudaEventRecord(inputs_ready, kcvk::stream_of(call)), "cudaEventRecord");
    kcvk::check_cuda(cudaStreamWaitEvent(side, inputs_ready, 0), "cudaStreamWaitEvent");
    kcvk::check_cuda(cudaEventDestroy(inputs_ready), "cudaEventDestroy");
    prologue<<<1, 1, 0, side>>>(1ll << 26);
    exp_map<<<kcvk::grid_for(x.numel(), 256), 256, 0, side>>>(kcvk::device_tensor(x), kcvk::device_tensor(y));
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "exp_side_stream"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "exp_side_stream", "device": "cuda", "contracts": ["exp-f32"],
  "target_gate": "CMP-02", "description": "exp computed on a private stream the caller's stream never waits for"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
