// Positive control: sum and mean over one axis (attribute "dim", default the last) by pairwise
// summation in float32 (kcv_pairwise.hpp: blocks of 8, block sums combined as a binary tree).
// Serves sum-f32, sum-f16 (fp16 in and out, fp32 accumulation) and mean-f32 (sum / n, one more
// rounding). An empty axis gives 0 (sum) and 0/0 = NaN (mean), as PyTorch. The order of the
// additions depends only on the axis length, so results are bitwise reproducible.
// Layout: arbitrary strides and byte offsets; the output keeps or drops the reduced axis.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/pairwise_sum.cpp -o kcv_controls_pairwise_sum.so
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

void run(const kcv_call& call) {
    const std::string op = kcvk::operation(call);
    if (op != "sum" && op != "mean")
        throw kcvk::Error(std::string("pairwise_sum serves sum and mean, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    if (!kcvk::is_float(x.dtype()) || !kcvk::is_float(y.dtype())) throw kcvk::Error("sum takes float tensors");
    const kcvk::AxisLanes lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count())
        throw kcvk::Error("output y " + y.shape_str() + " does not hold one value per lane of x " + x.shape_str());

    for (int64_t lane = 0; lane < lanes.count(); ++lane) {
        const int64_t base = lanes.base(lane);
        kcvk::PairwiseSum acc;
        for (int64_t k = 0; k < lanes.length(); ++k) acc.add(x.load_f32(base + k * lanes.step()));
        float v = acc.total();
        if (op == "mean") v = v / static_cast<float>(lanes.length());
        y.store_f32(y.offset_of(lane), v);
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "pairwise_sum"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "pairwise_sum", "device": "cpu", "contracts": ["sum-f32", "sum-f16", "mean-f32"],
  "description": "sum and mean by pairwise summation in float32"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
