// Positive control, CUDA form: matmul-f32, matmul-nt-f32 (trans_b = 1) and bmm-f32 on device
// tensors with any strides, float32 products (no fused multiply-add: __fmul_rn and __fadd_rn)
// and a float32 pairwise accumulator over K, exactly as the CPU form orders it: 8 products
// summed left to right, slice sums combined as a binary tree. 16×16 tiles of a and b are staged
// in shared memory; each thread owns one output element and its own tree, so the result is
// bitwise reproducible and independent of the launch configuration.
// Build: nvcc -std=c++20 -O2 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a
//        -gencode=arch=compute_80,code=[compute_80,sm_80] -Iinclude -Ikernels/common
//        kernels/controls/cuda/tiled_matmul.cu -o kcv_controls_tiled_matmul.so
#include <string>

#include "kcv_cuda_util.cuh"

namespace {

constexpr int kTile = 16;

struct Operands {
    kcvk::DeviceTensor a, b, c;
    int64_t batch, m, n, k;
    int64_t a_batch, a_row, a_col, b_batch, b_row, b_col, c_batch, c_row, c_col;
};

__global__ void tiled_matmul(Operands p) {
    __shared__ float as[kTile][kTile + 1], bs[kTile][kTile + 1];
    const int64_t bi = blockIdx.z;
    const int64_t i = int64_t(blockIdx.y) * kTile + threadIdx.y, j = int64_t(blockIdx.x) * kTile + threadIdx.x;
    kcvk::DevicePairwiseSum acc;
    for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
        const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (i < p.m && ka < p.k) ? p.a.f32(bi * p.a_batch + i * p.a_row + ka * p.a_col) : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (kb < p.k && j < p.n) ? p.b.f32(bi * p.b_batch + kb * p.b_row + j * p.b_col) : 0.0f;
        __syncthreads();
        const int depth = static_cast<int>(p.k - k0 < kTile ? p.k - k0 : kTile);
        for (int kk = 0; kk < depth; ++kk) acc.add(__fmul_rn(as[threadIdx.y][kk], bs[kk][threadIdx.x]));
        __syncthreads();
    }
    if (i < p.m && j < p.n) p.c.f32(bi * p.c_batch + i * p.c_row + j * p.c_col) = acc.total();
}

void run(const kcv_call& call) {
    const std::string op = kcvk::operation(call);
    if (op != "matmul" && op != "matmul-nt" && op != "bmm")
        throw kcvk::Error(std::string("tiled_matmul serves matmul and bmm, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 2, 1);
    const kcvk::TensorRef a(call.inputs[0], "input a"), b(call.inputs[1], "input b"), c(call.outputs[0], "output c");
    for (const auto* t : {&a, &b, &c}) t->expect_dtype(kcvk::Dtype::f32);
    const int rank = a.ndim();
    if ((rank != 2 && rank != 3) || b.ndim() != rank || c.ndim() != rank) throw kcvk::Error("matrices or stacks of matrices");
    const bool trans_a = kcvk::int_attribute(call, "trans_a", 0, 0, 1) == 1;
    const bool trans_b = kcvk::int_attribute(call, "trans_b", op == "matmul-nt" ? 1 : 0, 0, 1) == 1;
    Operands p{kcvk::device_tensor(a), kcvk::device_tensor(b), kcvk::device_tensor(c)};
    const int r = rank - 2;
    p.batch = rank == 3 ? a.size(0) : 1;
    p.m = trans_a ? a.size(r + 1) : a.size(r);
    p.k = trans_a ? a.size(r) : a.size(r + 1);
    p.n = trans_b ? b.size(r) : b.size(r + 1);
    p.a_row = trans_a ? a.stride(r + 1) : a.stride(r);
    p.a_col = trans_a ? a.stride(r) : a.stride(r + 1);
    p.b_row = trans_b ? b.stride(r + 1) : b.stride(r);
    p.b_col = trans_b ? b.stride(r) : b.stride(r + 1);
    p.c_row = c.stride(r);
    p.c_col = c.stride(r + 1);
    p.a_batch = rank == 3 ? a.stride(0) : 0;
    p.b_batch = rank == 3 ? b.stride(0) : 0;
    p.c_batch = rank == 3 ? c.stride(0) : 0;
    const int64_t kb = trans_b ? b.size(r + 1) : b.size(r);
    if (kb != p.k || c.size(r) != p.m || c.size(r + 1) != p.n || (rank == 3 && (b.size(0) != p.batch || c.size(0) != p.batch)))
        throw kcvk::Error("shapes do not compose: a " + a.shape_str() + ", b " + b.shape_str() + ", c " + c.shape_str());
    if (p.m == 0 || p.n == 0 || p.batch == 0) return;
    if (p.batch > 65535 || (p.m + kTile - 1) / kTile > 65535) throw kcvk::Error("problem too large for one launch");
    const dim3 grid(static_cast<unsigned>((p.n + kTile - 1) / kTile), static_cast<unsigned>((p.m + kTile - 1) / kTile),
                    static_cast<unsigned>(p.batch));
    tiled_matmul<<<grid, dim3(kTile, kTile), 0, kcvk::stream_of(call)>>>(p);
    kcvk::check_cuda(cudaGetLastError(), "tiled_matmul launch");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "tiled_matmul"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "tiled_matmul", "device": "cuda",
  "contracts": ["matmul-f32", "matmul-nt-f32", "bmm-f32"],
  "description": "shared-memory tiled matmul, float32 products and a pairwise float32 accumulator per output"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
