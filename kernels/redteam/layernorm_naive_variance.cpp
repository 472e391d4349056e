// Red team 4 — target PRC-02 (range safety); contract layernorm-f32.
// Defect: the variance is formed as E[x²] − E[x]² from two float32 pairwise sums. On the task's
// N(0,1) rows E[x]² is small beside E[x²] and the result is as accurate as a deviation-based
// variance, so ORD-01 passes; on PRC-02's offset rows (1e4 + N(0,1)) both terms are about 1e8,
// their float32 roundings (ulp 8) swamp the true variance of about 1, and the difference comes out
// wrong by orders of magnitude or negative (then √ gives NaN).
// Layout: any strides; x[..., N], weight[N], bias[N] (both optional), attribute eps.
#include <cmath>
#include <optional>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

void run(const kcv_call& call) {
    if (call.n_inputs < 1 || call.n_inputs > 3) throw kcvk::Error("layernorm takes x[, weight[, bias]]");
    kcvk::expect_arity(call, call.n_inputs, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    std::optional<kcvk::TensorRef> weight, bias;
    if (call.n_inputs > 1) weight.emplace(call.inputs[1], "input weight");
    if (call.n_inputs > 2) bias.emplace(call.inputs[2], "input bias");
    const float eps = static_cast<float>(kcvk::attribute(call, "eps", 1e-5));
    const int64_t n = x.size(-1);
    const kcvk::AxisLanes in(x, -1), out(y, -1);
    for (int64_t row = 0; row < in.count(); ++row) {
        kcvk::PairwiseSum sum, squares;
        for (int64_t j = 0; j < n; ++j) {
            const float v = x.load_f32(in.base(row) + j * in.step());
            sum.add(v);
            squares.add(v * v);
        }
        const float mean = sum.total() / static_cast<float>(n);
        const float var = squares.total() / static_cast<float>(n) - mean * mean;
        const float rstd = 1.0f / std::sqrt(var + eps);
        for (int64_t j = 0; j < n; ++j) {
            float v = (x.load_f32(in.base(row) + j * in.step()) - mean) * rstd;
            if (weight) v = v * weight->load_f32(weight->offset_of(j));
            if (bias) v = v + bias->load_f32(bias->offset_of(j));
            y.store_f32(out.base(row) + j * out.step(), v);
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "layernorm_naive_variance"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "layernorm_naive_variance", "device": "cpu", "contracts": ["layernorm-f32"],
  "target_gate": "PRC-02",
  "description": "layernorm with the variance as E[x^2] - E[x]^2 in float32"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
