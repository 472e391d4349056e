// Red team 13 — target CMP-01 (shape polymorphism); contract sum-f32.
// Defect: the launch is sized for the contract's nominal R = 8 rows (one "block" per row, a grid
// of kRows fixed at compile time); rows past the eighth are never computed, while each block
// masks itself off for rows that do not exist. At R ≤ 8 the sums are exact pairwise float32
// sums, so every gate probing the nominal shape, and PRC-01's sweep of N, passes; CMP-01's
// R = 15, 16, 17, ... leave rows 8 and up holding the output's poison. The manifest states the
// assumed value so that a test can check it still matches the contract.
// Layout: any strides; reduces the last dimension of x[R, N].
#include <algorithm>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

constexpr int64_t kRows = 8;

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    const kcvk::AxisLanes lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count()) throw kcvk::Error("output y does not hold one value per lane");
    for (int64_t block = 0; block < kRows; ++block) {
        if (block >= lanes.count()) continue;
        kcvk::PairwiseSum acc;
        for (int64_t k = 0; k < lanes.length(); ++k) acc.add(x.load_f32(lanes.base(block) + k * lanes.step()));
        y.store_f32(y.offset_of(block), acc.total());
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sum_hardcoded_rows"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "sum_hardcoded_rows", "device": "cpu", "contracts": ["sum-f32"],
  "target_gate": "CMP-01", "assumes": {"R": 8},
  "description": "row sum launched for the nominal 8 rows: rows past the eighth are never written"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
