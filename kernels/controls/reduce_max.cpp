// Positive control: maximum over one axis (attribute "dim", default the last), as PyTorch's
// max: a NaN anywhere in the lane makes the result NaN (the first NaN, payload kept); otherwise
// the first maximum is returned unchanged (so max(-0, +0) is -0 when -0 comes first; taking a
// maximum rounds nothing). Any float dtype in and out; max-f32.
// Layout: arbitrary strides and byte offsets; the output keeps or drops the reduced axis.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/reduce_max.cpp -o kcv_controls_reduce_max.so
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

void run(const kcv_call& call) {
    if (kcvk::operation(call) != "max")
        throw kcvk::Error(std::string("reduce_max serves max, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    if (!kcvk::is_float(x.dtype()) || !kcvk::is_float(y.dtype())) throw kcvk::Error("max takes float tensors");
    const kcvk::AxisLanes lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count())
        throw kcvk::Error("output y " + y.shape_str() + " does not hold one value per lane of x " + x.shape_str());
    if (lanes.length() == 0 && lanes.count() > 0) throw kcvk::Error("max over an empty axis has no value");

    for (int64_t lane = 0; lane < lanes.count(); ++lane) {
        const int64_t base = lanes.base(lane);
        double best = x.load(base);
        for (int64_t k = 1; k < lanes.length() && !std::isnan(best); ++k) {
            const double v = x.load(base + k * lanes.step());
            if (std::isnan(v) || v > best) best = v;
        }
        y.store(y.offset_of(lane), best);
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "reduce_max"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "reduce_max", "device": "cpu", "contracts": ["max-f32"],
  "description": "NaN-propagating first maximum"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
