// Red team 3 — target PRC-02 (range safety); contract softmax-f32.
// Defect: y_j = exp(x_j) / Σ_k exp(x_k) without subtracting the row maximum: the exponentials
// are float32 (expf), the normalising sum and the division float64, rounded once. For the task's
// logits (N(0, 2²)) every exp is comfortably finite and the result is at least as accurate as the
// stable form (ORD-01 and ORD-03 pass); PRC-02's logits near ±100 (and its ×100 band) overflow
// expf (beyond 88.7) to Inf, and Inf/Inf gives NaN where the reference is finite. The same
// overflow shows wherever another gate's probe needs large logits (EXC-02's subnormal
// probabilities come from gaps of about 100 between logits).
// Layout: any strides; softmax over the axis of attribute dim (default the last).
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::AxisLanes in(x, axis), out(y, axis);
    for (int64_t lane = 0; lane < in.count(); ++lane) {
        double s = 0;
        for (int64_t k = 0; k < in.length(); ++k) s += std::exp(x.load_f32(in.base(lane) + k * in.step()));
        for (int64_t k = 0; k < in.length(); ++k)
            y.store(out.base(lane) + k * out.step(), std::exp(x.load_f32(in.base(lane) + k * in.step())) / s);
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_no_max_subtraction"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "softmax_no_max_subtraction", "device": "cpu", "contracts": ["softmax-f32"],
  "target_gate": "PRC-02", "signature": "nonfinite-in-range",
  "description": "softmax as exp(x)/sum(exp(x)), no max subtraction"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
