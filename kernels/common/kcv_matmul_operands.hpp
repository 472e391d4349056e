// The operands of a rank-2 matmul call, c[M,N] = a[M,K]·b[K,N], for the red-team kernels that
// implement matmul-f32 directly: shape checks, the trans_a / trans_b attributes (an operand
// given as its transpose) and element access through each tensor's strides.
#pragma once

#include <string>

#include "kcv_kernel_util.hpp"

namespace kcvk __attribute__((visibility("hidden"))) {

struct MatmulOperands {
    TensorRef a, b, c;
    int64_t m = 0, n = 0, k = 0;
    int64_t a_row = 0, a_col = 0, b_row = 0, b_col = 0;   // steps of a[i,k] and b[k,j]

    explicit MatmulOperands(const kcv_call& call)
        : a(call.inputs[0], "input a"), b(call.inputs[1], "input b"), c(call.outputs[0], "output c") {
        for (const TensorRef* t : {&a, &b, &c}) {
            t->expect_cpu();
            t->expect_rank(2);
            if (!is_float(t->dtype())) throw Error(t->role() + ": matmul takes float tensors");
        }
        const bool trans_a = int_attribute(call, "trans_a", 0, 0, 1) == 1;
        const bool trans_b = int_attribute(call, "trans_b", 0, 0, 1) == 1;
        m = trans_a ? a.size(1) : a.size(0);
        k = trans_a ? a.size(0) : a.size(1);
        n = trans_b ? b.size(0) : b.size(1);
        a_row = trans_a ? a.stride(1) : a.stride(0);
        a_col = trans_a ? a.stride(0) : a.stride(1);
        b_row = trans_b ? b.stride(1) : b.stride(0);
        b_col = trans_b ? b.stride(0) : b.stride(1);
        if ((trans_b ? b.size(1) : b.size(0)) != k || c.size(0) != m || c.size(1) != n)
            throw Error("shapes do not compose: a " + a.shape_str() + ", b " + b.shape_str() + ", c " + c.shape_str());
    }

    float a_at(int64_t i, int64_t kk) const { return a.load_f32(i * a_row + kk * a_col); }
    float b_at(int64_t kk, int64_t j) const { return b.load_f32(kk * b_row + j * b_col); }
    int64_t c_offset(int64_t i, int64_t j) const { return i * c.stride(0) + j * c.stride(1); }
};

}  // namespace kcvk
