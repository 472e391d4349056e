// Red team 15 — target EXC-01 (non-finite propagation), class nan-swallowed; contract relu-f32.
// Defect: relu as fmaxf(x, 0). IEEE maxNum returns the number when one operand is NaN, so a NaN
// input gives 0 where PyTorch's relu (and the contract) propagates NaN. Every finite input,
// ±Inf and subnormals come out right, so only EXC-01's NaN positions see it.
// Layout: any strides.
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
    for (int64_t i = 0; i < x.numel(); ++i) y.store_f32(y.offset_of(i), std::fmax(x.load_f32(x.offset_of(i)), 0.0f));
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "relu_fmaxf"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "relu_fmaxf", "device": "cpu", "contracts": ["relu-f32"],
  "target_gate": "EXC-01", "signature": "nan-swallowed",
  "description": "relu as fmaxf(x, 0), which turns NaN into 0"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
