// Positive control: matrix products with a float32 accumulator.
//   matmul-f32, matmul-bf16, matmul-tf32: c[M,N] = a[M,K]·b[K,N];  bmm-f32: c[B,M,N] = a[B,M,K]·b[B,K,N];
//   matmul-nt-f32: b given as [N,K] (attribute trans_b = 1); trans_a = 1 takes a as [K,M].
// Operands of any float dtype are widened exactly to float32 (bf16 and fp16 exactly), products
// and sums are float32 (no fused multiply-add: built with -ffp-contract=off), and the result is
// rounded once to c's dtype. Under matmul-tf32, whose contract allows tf32 operands, every
// operand is first rounded to tf32 as a TF32 tensor core takes it (kcvk::tf32_rounded), so that
// ORD-03's envelope is that of the rounding the contract allows.
//
// Loops are blocked: a tile of TM×TN outputs is computed from packed slices of a and b, KB = 8
// values of k at a time. Each output's dot product is a pairwise sum: the 8 products of a slice
// are summed left to right, and the slice sums are combined as a binary tree by a counter (as
// kcv_pairwise.hpp does for a stream). A running sum over k would let alike products (PRC-01's
// U(0,1) and repeated-value probes) accumulate same-signed roundings, an error growing like K
// that leaves the bound c·u·√K·Σ|a·b| for K in the thousands; the tree keeps each product
// within 8 + 2·log2(K/8) roundings, below 4·√K for every K. The order depends only on K, so the
// result is bitwise reproducible and independent of M, N and the tiling.
// Layout: arbitrary strides and byte offsets on every tensor.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/tiled_matmul.cpp -o kcv_controls_tiled_matmul.so
#include <algorithm>
#include <string>
#include <vector>

#include "kcv_float_env.hpp"
#include "kcv_half.hpp"
#include "kcv_kernel_util.hpp"

namespace {

constexpr int64_t TM = 16;   // rows of a tile
constexpr int64_t TN = 64;   // columns of a tile
constexpr int64_t KB = 8;    // values of k summed left to right before entering the tree
constexpr int kLevels = 64;

// Element (i, j) of one matrix of a stack is at origin + i·row_step + j·col_step.
struct Matrix {
    const kcvk::TensorRef* t;
    int64_t origin, row_step, col_step;
    bool tf32 = false;   // operands rounded to tf32 on load
    float at(int64_t i, int64_t j) const {
        const float v = t->load_f32(origin + i * row_step + j * col_step);
        return tf32 ? kcvk::tf32_rounded(v) : v;
    }
};

// The matrix `batch` of a rank-2 or rank-3 tensor; `transposed` swaps its two dimensions.
Matrix matrix_of(const kcvk::TensorRef& t, int64_t batch, bool transposed, bool tf32) {
    const int r = t.ndim() - 2;
    const int64_t origin = t.ndim() == 3 ? batch * t.stride(0) : 0;
    return transposed ? Matrix{&t, origin, t.stride(r + 1), t.stride(r), tf32}
                      : Matrix{&t, origin, t.stride(r), t.stride(r + 1), tf32};
}

// The pairwise accumulators of one tile: level l holds, per output, the sum of 2^l slices.
class TileTree {
public:
    explicit TileTree(int64_t elements) : n_(elements), level_(static_cast<size_t>(kLevels * elements)) {}

    void reset() { slices_ = 0; }

    // Enters one slice sum per output; `partial` is consumed.
    void push(std::vector<float>& partial) {
        uint64_t count = slices_;
        int level = 0;
        while (count & 1) {
            const float* held = &level_[static_cast<size_t>(level * n_)];
            for (int64_t e = 0; e < n_; ++e) partial[e] = held[e] + partial[e];
            count >>= 1;
            ++level;
        }
        std::copy(partial.begin(), partial.begin() + n_, level_.begin() + level * n_);
        ++slices_;
    }

    // The total per output, combining the occupied levels from the most recent one.
    void total(std::vector<float>& out) const {
        std::fill(out.begin(), out.begin() + n_, 0.0f);
        bool first = true;
        for (int level = 0; level < kLevels; ++level) {
            if (!(slices_ >> level & 1)) continue;
            const float* held = &level_[static_cast<size_t>(level * n_)];
            for (int64_t e = 0; e < n_; ++e) out[e] = first ? held[e] : held[e] + out[e];
            first = false;
        }
    }

private:
    int64_t n_;
    uint64_t slices_ = 0;
    std::vector<float> level_;
};

struct Problem {
    int64_t batch, m, n, k;
    bool trans_a, trans_b, tf32;
};

void multiply(const Problem& p, const kcvk::TensorRef& ta, const kcvk::TensorRef& tb, const kcvk::TensorRef& tc) {
    std::vector<float> a_pack(TM * KB), b_pack(KB * TN), partial(TM * TN), result(TM * TN);
    TileTree tree(TM * TN);
    for (int64_t bi = 0; bi < p.batch; ++bi) {
        const Matrix a = matrix_of(ta, bi, p.trans_a, p.tf32);
        const Matrix b = matrix_of(tb, bi, p.trans_b, p.tf32);
        const Matrix c = matrix_of(tc, bi, false, false);
        for (int64_t i0 = 0; i0 < p.m; i0 += TM) {
            const int64_t rows = std::min(TM, p.m - i0);
            for (int64_t j0 = 0; j0 < p.n; j0 += TN) {
                const int64_t cols = std::min(TN, p.n - j0);
                tree.reset();
                for (int64_t k0 = 0; k0 < p.k; k0 += KB) {
                    const int64_t depth = std::min(KB, p.k - k0);
                    for (int64_t i = 0; i < rows; ++i)
                        for (int64_t kk = 0; kk < depth; ++kk) a_pack[i * KB + kk] = a.at(i0 + i, k0 + kk);
                    for (int64_t kk = 0; kk < depth; ++kk)
                        for (int64_t j = 0; j < cols; ++j) b_pack[kk * TN + j] = b.at(k0 + kk, j0 + j);
                    std::fill(partial.begin(), partial.end(), 0.0f);
                    for (int64_t i = 0; i < rows; ++i) {
                        float* row = &partial[static_cast<size_t>(i * TN)];
                        for (int64_t kk = 0; kk < depth; ++kk) {
                            const float aik = a_pack[i * KB + kk];
                            const float* brow = &b_pack[static_cast<size_t>(kk * TN)];
                            for (int64_t j = 0; j < cols; ++j) row[j] += aik * brow[j];
                        }
                    }
                    tree.push(partial);
                }
                tree.total(result);
                for (int64_t i = 0; i < rows; ++i)
                    for (int64_t j = 0; j < cols; ++j)
                        tc.store_f32(c.origin + (i0 + i) * c.row_step + (j0 + j) * c.col_step, result[i * TN + j]);
            }
        }
    }
}

void run(const kcv_call& call) {
    const std::string op = kcvk::operation(call);
    if (op != "matmul" && op != "matmul-nt" && op != "bmm")
        throw kcvk::Error(std::string("tiled_matmul serves matmul and bmm, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 2, 1);
    const kcvk::TensorRef a(call.inputs[0], "input a");
    const kcvk::TensorRef b(call.inputs[1], "input b");
    const kcvk::TensorRef c(call.outputs[0], "output c");
    for (const auto* t : {&a, &b, &c}) {
        t->expect_cpu();
        if (!kcvk::is_float(t->dtype())) throw kcvk::Error(t->role() + ": matmul takes float tensors");
    }
    const int rank = a.ndim();
    if ((rank != 2 && rank != 3) || b.ndim() != rank || c.ndim() != rank)
        throw kcvk::Error("a " + a.shape_str() + ", b " + b.shape_str() + ", c " + c.shape_str() +
                          " must all be matrices or all stacks of matrices");
    Problem p{};
    p.trans_a = kcvk::int_attribute(call, "trans_a", 0, 0, 1) == 1;
    p.trans_b = kcvk::int_attribute(call, "trans_b", op == "matmul-nt" ? 1 : 0, 0, 1) == 1;
    p.tf32 = std::string(call.contract_id).ends_with("-tf32");
    p.batch = rank == 3 ? a.size(0) : 1;
    p.m = p.trans_a ? a.size(-1) : a.size(-2);
    p.k = p.trans_a ? a.size(-2) : a.size(-1);
    const int64_t kb = p.trans_b ? b.size(-1) : b.size(-2);
    p.n = p.trans_b ? b.size(-2) : b.size(-1);
    const bool batches_agree = rank == 2 || (b.size(0) == p.batch && c.size(0) == p.batch);
    if (kb != p.k || !batches_agree || c.size(-2) != p.m || c.size(-1) != p.n)
        throw kcvk::Error("shapes do not compose: a " + a.shape_str() + (p.trans_a ? " (transposed)" : "") + ", b " + b.shape_str() +
                          (p.trans_b ? " (transposed)" : "") + ", c " + c.shape_str());
    multiply(p, a, b, c);
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "tiled_matmul"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "tiled_matmul", "device": "cpu",
  "contracts": ["matmul-f32", "matmul-nt-f32", "matmul-bf16", "matmul-tf32", "bmm-f32"],
  "description": "blocked matmul, float32 products and a pairwise float32 accumulator over K; under matmul-tf32 the operands are rounded to tf32 first"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
