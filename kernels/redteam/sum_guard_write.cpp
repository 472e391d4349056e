// Red team 18 — target RES-01 (memory bounds), class oob-write; contract sum-f32.
// Defect: an off-by-one in the loop that clears the row accumulators before the reduction: it
// zeroes R + 1 output elements, so the float32 just past the end of y — the first bytes of the
// guard band after it — is overwritten with +0 on every call. The sums themselves are exact
// pairwise float32 sums, so every gate that looks only at the outputs passes; RES-01's guard
// check finds four changed bytes right after the output.
// Layout: any input strides; y is written through its own strides, and the stray element lies one
// step past its last element.
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    y.expect_dtype(kcvk::Dtype::f32);
    const kcvk::AxisLanes lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count()) throw kcvk::Error("output y does not hold one value per lane");
    if (y.numel() == 0) return;
    const int64_t step = y.ndim() == 0 ? 1 : y.stride(-1);
    const int64_t past_end = y.offset_of(y.numel() - 1) + step;
    for (int64_t lane = 0; lane <= lanes.count(); ++lane) y.store_f32(lane < lanes.count() ? y.offset_of(lane) : past_end, 0.0f);
    for (int64_t lane = 0; lane < lanes.count(); ++lane) {
        kcvk::PairwiseSum acc;
        for (int64_t k = 0; k < lanes.length(); ++k) acc.add(x.load_f32(lanes.base(lane) + k * lanes.step()));
        y.store_f32(y.offset_of(lane), acc.total());
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sum_guard_write"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "sum_guard_write", "device": "cpu", "contracts": ["sum-f32"],
  "target_gate": "RES-01", "signature": "oob-write",
  "description": "row sum that zeroes one element past the end of its output"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
