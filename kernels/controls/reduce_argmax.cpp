// Positive control: index of the maximum over one axis (attribute "dim", default the last), as
// PyTorch's argmax: the first NaN wins if the lane holds one, otherwise the first maximum (a
// lane of -Inf gives 0). Float input, integer output (i64, as argmax-f32 declares; i32 and a
// float output holding the exact index are accepted too).
// Layout: arbitrary strides and byte offsets; the output keeps or drops the reduced axis.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/reduce_argmax.cpp -o kcv_controls_reduce_argmax.so
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

void run(const kcv_call& call) {
    if (kcvk::operation(call) != "argmax")
        throw kcvk::Error(std::string("reduce_argmax serves argmax, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    if (!kcvk::is_float(x.dtype())) throw kcvk::Error("argmax takes a float input");
    if (y.dtype() == kcvk::Dtype::boolean) throw kcvk::Error("argmax cannot write indices into a bool output");
    const kcvk::AxisLanes lanes(x, kcvk::reduced_axis(call, x));
    if (y.numel() != lanes.count())
        throw kcvk::Error("output y " + y.shape_str() + " does not hold one index per lane of x " + x.shape_str());
    if (lanes.length() == 0 && lanes.count() > 0) throw kcvk::Error("argmax over an empty axis has no value");

    for (int64_t lane = 0; lane < lanes.count(); ++lane) {
        const int64_t base = lanes.base(lane);
        double best = x.load(base);
        int64_t at = 0;
        for (int64_t k = 1; k < lanes.length() && !std::isnan(best); ++k) {
            const double v = x.load(base + k * lanes.step());
            if (std::isnan(v) || v > best) {
                best = v;
                at = k;
            }
        }
        y.store_index(y.offset_of(lane), at);
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "reduce_argmax"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "reduce_argmax", "device": "cpu", "contracts": ["argmax-f32"],
  "description": "index of the first maximum, the first NaN winning"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
