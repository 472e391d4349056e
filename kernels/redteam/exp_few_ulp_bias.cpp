// Red team 7 — target ORD-03 (thin margin); contract exp-f32.
// Defect: a systematic bias of a few ulps: y = fl32(e^x·(1 + 3·2^-24)), e^x and the product in
// float64, one rounding to float32.
//
// It passes ORD-01. For exp, K = 1 and s = |y*|, so τ = 4·2^-24·|y*| + 2^-24·|y*| + 2^-149
// = 5·2^-24·|y*| + 2^-149. The float64 exponential and product are off by a few 2^-53 relative;
// the final rounding adds at most half an ulp of the result, and half an ulp of a normal float32
// y is at most 2^-24·|y*|·(1 + 2^-21). So |y − y*| ≤ 3·2^-24·|y*| + 2^-24·|y*| (+ negligible)
// = 4·2^-24·|y*|: r ≤ 0.8 everywhere in the normal range. Below it (|y*| < 2^-126) the shift
// 3·2^-24·|y*| is under 1.5·2^-149 and the rounding under 0.5·2^-149, within τ ≥ 2^-149 +
// 5·2^-24·|y*|.
//
// It fails ORD-03, whose error is err = max|y − y*| / max|y*|, an element equal to y* rounded
// counting 0. The control computes the same float64 e^x rounded once, so each of its elements is
// y* rounded and err_control = 0; ORD-03's threshold is then max(1.2·max(0, f), 0 + f) = 1.2·f,
// with the floor f = 2u = 2^-23. At the element with the largest |y*| = M the shift is 3·2^-24·M
// less at most the final half-ulp (≤ 2^-24·M), so err ≥ 2·2^-24 = f, which alone does not reach
// 1.2·f: the failure is not certain on every input. Measured on the contract's ORD-03 probes at seeds 0, 1, 2: 1.17–1.84
// times f, 20 of 21 probes failing, so the gate fails at every seed tried (bench/RESULTS.md).
// No other gate sees a defect this small.
// Layout: any strides.
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

constexpr double kBias = 1.0 + 3.0 * 0x1p-24;

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    for (int64_t i = 0; i < x.numel(); ++i) y.store(y.offset_of(i), std::exp(x.load(x.offset_of(i))) * kBias);
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "exp_few_ulp_bias"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "exp_few_ulp_bias", "device": "cpu", "contracts": ["exp-f32"],
  "target_gate": "ORD-03",
  "description": "exp with a systematic relative bias of 3*2^-24: passes ORD-01, exceeds 1.2x the controls' envelope"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
