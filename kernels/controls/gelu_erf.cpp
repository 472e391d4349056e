// Positive control: exact GELU, gelu(x) = x·Φ(x) = 0.5·x·erfc(−x/√2), for f32 and f16 tensors
// (gelu-f32, gelu-f16). Evaluated in float64 and rounded once to the output dtype. The erfc form
// is the same function as 0.5·x·(1 + erf(x/√2)) without that form's cancellation for negative x,
// so the tail keeps its relative accuracy (gelu(−10) ≈ −7.6e−23, not −0). gelu(−Inf) is NaN
// (−Inf·0) and gelu(+Inf) = +Inf, as PyTorch; NaN propagates.
// Layout: arbitrary strides and byte offsets.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/gelu_erf.cpp -o kcv_controls_gelu_erf.so
#include <cmath>
#include <numbers>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

double gelu(double x) { return 0.5 * x * std::erfc(-x * (std::numbers::sqrt2 / 2)); }

void run(const kcv_call& call) {
    if (kcvk::operation(call) != "gelu")
        throw kcvk::Error(std::string("gelu_erf serves gelu contracts, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    if (!kcvk::is_float(x.dtype()) || !kcvk::is_float(y.dtype())) throw kcvk::Error("gelu takes float tensors");
    for (int64_t i = 0; i < x.numel(); ++i) y.store(y.offset_of(i), gelu(x.load(x.offset_of(i))));
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "gelu_erf"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "gelu_erf", "device": "cpu", "contracts": ["gelu-f32", "gelu-f16"],
  "description": "exact GELU 0.5*x*erfc(-x/sqrt(2)) in float64, rounded once"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
