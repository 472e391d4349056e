// Positive control: RMS normalisation over the last dimension (rmsnorm-f32),
//   y_j = x_j·rstd·w_j, rstd = 1/√(Σx²/n + eps); weight optional (inputs x[, weight]);
//   attribute eps required (PyTorch's default depends on the dtype, so the contract states it).
// Two passes over each row in float32: the mean of squares by pairwise summation, then the
// scaling. An Inf in a row makes rstd = 0: finite entries give 0 and the Inf entry NaN, as
// PyTorch; a NaN makes the row NaN.
// Layout: arbitrary strides and byte offsets on every tensor.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/rmsnorm_twopass.cpp -o kcv_controls_rmsnorm_twopass.so
#include <cmath>
#include <optional>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

void run(const kcv_call& call) {
    if (kcvk::operation(call) != "rmsnorm")
        throw kcvk::Error(std::string("rmsnorm_twopass serves rmsnorm, not ") + (call.contract_id ? call.contract_id : "(null)"));
    if (call.n_inputs < 1 || call.n_inputs > 2 || call.n_outputs != 1)
        throw kcvk::Error("rmsnorm takes x[, weight] and one output");
    kcvk::expect_arity(call, call.n_inputs, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    if (x.ndim() < 1) throw kcvk::Error("rmsnorm needs a feature dimension");
    if (x.axis(kcvk::reduced_axis(call, x)) != x.ndim() - 1) throw kcvk::Error("rmsnorm normalises the last dimension only");
    const int64_t n = x.size(-1);
    std::optional<kcvk::TensorRef> weight;
    if (call.n_inputs > 1) {
        weight.emplace(call.inputs[1], "input weight");
        weight->expect_cpu();
        if (weight->ndim() != 1 || weight->size(0) != n)
            throw kcvk::Error("input weight " + weight->shape_str() + " must be [" + std::to_string(n) + "]");
    }
    if (!kcvk::find_attribute(call, "eps")) throw kcvk::Error("rmsnorm needs the attribute eps");
    const float eps = static_cast<float>(kcvk::attribute(call, "eps", 0.0));
    const kcvk::AxisLanes in(x, -1), out(y, -1);

    for (int64_t row = 0; row < in.count(); ++row) {
        const int64_t xb = in.base(row), yb = out.base(row);
        kcvk::PairwiseSum squares;
        for (int64_t j = 0; j < n; ++j) {
            const float v = x.load_f32(xb + j * in.step());
            squares.add(v * v);
        }
        const float rstd = 1.0f / std::sqrt(squares.total() / static_cast<float>(n) + eps);
        for (int64_t j = 0; j < n; ++j) {
            float v = x.load_f32(xb + j * in.step()) * rstd;
            if (weight) v = v * weight->load_f32(weight->offset_of(j));
            y.store_f32(yb + j * out.step(), v);
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "rmsnorm_twopass"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "rmsnorm_twopass", "device": "cpu", "contracts": ["rmsnorm-f32"],
  "description": "RMS norm: pairwise mean of squares, then scaling, float32"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
