// Red team 12 — target CMP-01 (shape polymorphism); contract relu-f32.
// Defect: each row (the last dimension) is processed in vectors of 16 elements and the tail
// after the last full vector is never handled, as a vectorised loop without its remainder loop
// or tail mask. At the nominal N = 1024 every element is written and all gates pass; at CMP-01's
// N = 1, 2, 3, 15, 17, 63, 65, ... the last N mod 16 elements of each row keep the output's
// poison.
// Layout: any strides.
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

constexpr int64_t kVector = 16;

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    const kcvk::AxisLanes in(x, -1), out(y, -1);
    const int64_t full = in.length() / kVector * kVector;
    for (int64_t row = 0; row < in.count(); ++row) {
        for (int64_t j0 = 0; j0 < full; j0 += kVector) {
            for (int64_t j = j0; j < j0 + kVector; ++j) {
                const float v = x.load_f32(in.base(row) + j * in.step());
                y.store_f32(out.base(row) + j * out.step(), v < 0.0f ? 0.0f : v);
            }
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "relu_missing_tail_mask"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "relu_missing_tail_mask", "device": "cpu", "contracts": ["relu-f32"],
  "target_gate": "CMP-01",
  "description": "relu in vectors of 16 along each row with no tail handling"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
