// Red team 9 — target ORD-02 (determinism and buffer integrity), class run-to-run;
// contract sum-f32 (which declares run-to-run determinism).
// Defect: each row is shared between two workers at a boundary that moves with a per-process
// call counter, as dynamic work distribution (work stealing, a persistent kernel's tile queue)
// would move it between runs. Each worker sums its part in float64 and rounds it to float32,
// and the two float32 partials are added. Every split gives an accurate sum (within about an
// ulp: ORD-01 and the other numeric gates pass, and ORD-03 too but for rare inputs), but the two
// roundings of the partials change with the split, so consecutive calls on identical inputs
// differ in their last bits and ORD-02's byte comparison across runs fails. The counter, not the
// clock, moves the boundary: a fresh process repeats the same sequence, so a failure replays
// from its seed.
// Layout: any strides; reduces the axis of attribute dim (default the last).
#include <algorithm>
#include <atomic>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

std::atomic<uint64_t> calls{0};

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    const kcvk::AxisLanes lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count()) throw kcvk::Error("output y does not hold one value per lane");
    const int64_t n = lanes.length();
    // The boundary sits at the middle, one 32nd of the row before it, or one after, in turn.
    const int64_t shift = static_cast<int64_t>(calls.fetch_add(1) % 3) - 1;
    const int64_t split = std::clamp<int64_t>(n / 2 + shift * std::max<int64_t>(n / 32, 1), 0, n);
    for (int64_t lane = 0; lane < lanes.count(); ++lane) {
        double first = 0, second = 0;
        for (int64_t k = 0; k < split; ++k) first += x.load_f32(lanes.base(lane) + k * lanes.step());
        for (int64_t k = split; k < n; ++k) second += x.load_f32(lanes.base(lane) + k * lanes.step());
        y.store_f32(y.offset_of(lane), static_cast<float>(first) + static_cast<float>(second));
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sum_order_per_call"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "sum_order_per_call", "device": "cpu", "contracts": ["sum-f32"],
  "target_gate": "ORD-02", "signature": "run-to-run",
  "description": "row sum split between two workers at a boundary that moves with every call"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
