// Red team 6 — target ORD-01 (the main numeric gate); contract gelu-f32 (exact erf GELU).
// Defect: the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) where the contract
// asks for x·Φ(x). The two differ by up to about 1e-3 near |x| ≈ 2 to 3, thousands of times the
// float32 bound 4u·s + u·|y| on the task's N(0,1) inputs. Being numerically wrong at the nominal
// shape, it fails the gates that require ORD-01 to hold (CMP-01, CMP-02, PRC-02, ORD-03) with it.
// Non-finite inputs behave as PyTorch's gelu (NaN stays NaN, −Inf gives NaN, +Inf gives +Inf).
// Layout: any strides.
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

float gelu_tanh(float x) {
    const float k = 0.7978845608028654f;   // √(2/π)
    return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    for (int64_t i = 0; i < x.numel(); ++i) y.store_f32(y.offset_of(i), gelu_tanh(x.load_f32(x.offset_of(i))));
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "gelu_tanh_approximation"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "gelu_tanh_approximation", "device": "cpu", "contracts": ["gelu-f32"],
  "target_gate": "ORD-01",
  "description": "tanh-approximate GELU where the contract is exact (erf) GELU"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
