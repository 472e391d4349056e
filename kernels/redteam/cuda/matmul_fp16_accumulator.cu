// Red team 1, CUDA form — target PRC-01; contract matmul-f32 on device tensors.
// Defect as the CPU form: K is split into slices of 256, each accumulated in float32, and the
// slices are combined in an __half accumulator (an fp16 split-K workspace). Up to K = 256 the
// result is a float32 dot product; from K = 1024 the fp16 roundings exceed the float32 bound.
#include <cuda_fp16.h>

#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int64_t kSlice = 256;

struct Operands {
    kcvk::DeviceTensor a, b, c;
    int64_t m, n, k, a_row, a_col, b_row, b_col;
};

__global__ void matmul_fp16_accumulator(Operands p) {
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < p.m * p.n; e += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = e / p.n, j = e % p.n;
        __half total16 = __float2half_rn(0.0f);
        float total = 0.0f;
        for (int64_t k0 = 0; k0 < p.k; k0 += kSlice) {
            float slice = 0.0f;
            for (int64_t kk = k0; kk < p.k && kk < k0 + kSlice; ++kk)
                slice = __fadd_rn(slice, __fmul_rn(p.a.f32(i * p.a_row + kk * p.a_col), p.b.f32(kk * p.b_row + j * p.b_col)));
            if (p.k <= kSlice) total = slice;
            else total16 = __float2half_rn(__fadd_rn(__half2float(total16), slice));
        }
        if (p.k > kSlice) total = __half2float(total16);
        p.c.f32(i * p.c.strides[0] + j * p.c.strides[1]) = total;
    }
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 2, 1);
    const kcvk::TensorRef a(call.inputs[0], "input a"), b(call.inputs[1], "input b"), c(call.outputs[0], "output c");
    for (const auto* t : {&a, &b, &c}) {
        t->expect_dtype(kcvk::Dtype::f32);
        t->expect_rank(2);
    }
    const bool trans_b = kcvk::int_attribute(call, "trans_b", 0, 0, 1) == 1;
    Operands p{kcvk::device_tensor(a), kcvk::device_tensor(b), kcvk::device_tensor(c), a.size(0),
               trans_b ? b.size(0) : b.size(1), a.size(1), a.stride(0), a.stride(1),
               trans_b ? b.stride(1) : b.stride(0), trans_b ? b.stride(0) : b.stride(1)};
    if ((trans_b ? b.size(1) : b.size(0)) != p.k || c.size(0) != p.m || c.size(1) != p.n) throw kcvk::Error("shapes do not compose");
    if (p.m * p.n == 0) return;
    matmul_fp16_accumulator<<<kcvk::grid_for(p.m * p.n, 256), 256, 0, kcvk::stream_of(call)>>>(p);
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "matmul_fp16_accumulator"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "matmul_fp16_accumulator", "device": "cuda", "contracts": ["matmul-f32"],
  "target_gate": "PRC-01", "description": "split-K matmul: float32 slices of 256, combined in an __half accumulator"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
