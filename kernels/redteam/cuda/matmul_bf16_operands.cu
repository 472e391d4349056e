// Red team 5, CUDA form — target PRC-03; contract matmul-f32 on device tensors.
// Defect as the CPU form: from K = 1024 on, both operands are rounded to bf16 (__float2bfloat16_rn,
// as a bf16 tensor-core path would) before a float32 pairwise accumulation.
#include <cuda_bf16.h>

#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int64_t kTensorCorePathMinK = 1024;

struct Operands {
    kcvk::DeviceTensor a, b, c;
    int64_t m, n, k, a_row, a_col, b_row, b_col;
};

__device__ float operand(float v, bool to_bf16) { return to_bf16 ? __bfloat162float(__float2bfloat16_rn(v)) : v; }

__global__ void matmul_bf16_operands(Operands p) {
    const bool bf16 = p.k >= kTensorCorePathMinK;
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < p.m * p.n; e += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = e / p.n, j = e % p.n;
        kcvk::DevicePairwiseSum acc;
        for (int64_t kk = 0; kk < p.k; ++kk)
            acc.add(__fmul_rn(operand(p.a.f32(i * p.a_row + kk * p.a_col), bf16), operand(p.b.f32(kk * p.b_row + j * p.b_col), bf16)));
        p.c.f32(i * p.c.strides[0] + j * p.c.strides[1]) = acc.total();
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
    matmul_bf16_operands<<<kcvk::grid_for(p.m * p.n, 256), 256, 0, kcvk::stream_of(call)>>>(p);
    kcvk::check_cuda(cudaGetLastError(), "launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "matmul_bf16_operands"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "matmul_bf16_operands", "device": "cuda", "contracts": ["matmul-f32"],
  "target_gate": "PRC-03", "signature": "operands-rounded:bf16", "description": "matmul that rounds fp32 operands to bf16 when K >= 1024"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
