// Red team 2 — target PRC-01 (accumulator precision); contract sum-f32.
// Defect: the running sum of each row is kept in bf16 (acc = bf16(acc + x)), u = 2^-8 instead
// of the declared float32's 2^-24. On PRC-01's all-positive U(0,1) rows the total stagnates once
// its ulp exceeds the terms (error growing like K), and the gate's fit names bf16. The
// accumulator is wrong at every length, so the numeric gates at the nominal shape (ORD-01,
// ORD-03, CMP-01, CMP-02, PRC-02, PRC-03) fail with it; a defect confined to long rows could not
// fail PRC-01 in its quick sweep (K up to 1024), which is the nominal N of sum-f32.
// Layout: any strides; reduces the axis of attribute dim (default the last).
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
    const kcvk::AxisLanes lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count()) throw kcvk::Error("output y does not hold one value per lane");
    for (int64_t lane = 0; lane < lanes.count(); ++lane) {
        uint16_t acc = kcvk::bf16_from_f32(0.0f);
        for (int64_t k = 0; k < lanes.length(); ++k)
            acc = kcvk::bf16_from_f32(kcvk::f32_from_bf16(acc) + x.load_f32(lanes.base(lane) + k * lanes.step()));
        y.store_f32(y.offset_of(lane), kcvk::f32_from_bf16(acc));
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sum_bf16_accumulator"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "sum_bf16_accumulator", "device": "cpu", "contracts": ["sum-f32"],
  "target_gate": "PRC-01",
  "description": "row sum with a bf16 running accumulator"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
