// Positive control: inclusive prefix sum along one axis (attribute "dim", default the last) by
// a sequential, compensated (Kahan) running sum in float32; cumsum-f32.
//
// Why compensated: a plain float32 running sum passes each prefix through j roundings, and for
// alike terms (PRC-01's U(0,1) and repeated-value probes) those roundings share a sign: the error
// grows like j·u·Σ|x| and exceeds the scan bound c·u·√N·Σ|x| for N in the thousands (for one
// repeated value at N = 16384, typically by a factor of 2 to 8). Kahan's compensation carries
// each addition's rounding error into the next term, so every prefix is within 2u·|y| +
// O(j·u²)·Σ|x| of the exact one, in the same single pass and the same order. The order of the
// operations depends only on the axis length: results are bitwise reproducible.
//
// Special values follow the IEEE running sum, as PyTorch's cumsum: once a prefix is ±Inf or
// NaN the compensation (Inf − Inf) would turn it into NaN, so it is dropped there and the prefix
// carries on as plain IEEE addition ([1, Inf, 2, -Inf] -> [1, Inf, Inf, NaN]). The sum starts at
// +0, so a prefix of -0 terms is +0.
// Layout: arbitrary strides and byte offsets on input and output.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/sequential_cumsum.cpp -o kcv_controls_sequential_cumsum.so
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

void run(const kcv_call& call) {
    if (kcvk::operation(call) != "cumsum")
        throw kcvk::Error(std::string("sequential_cumsum serves cumsum, not ") + (call.contract_id ? call.contract_id : "(null)"));
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    if (!kcvk::is_float(x.dtype()) || !kcvk::is_float(y.dtype())) throw kcvk::Error("cumsum takes float tensors");
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::AxisLanes in(x, axis), out(y, axis);

    for (int64_t lane = 0; lane < in.count(); ++lane) {
        const int64_t xb = in.base(lane), yb = out.base(lane);
        float sum = 0.0f, compensation = 0.0f;
        for (int64_t k = 0; k < in.length(); ++k) {
            const float term = x.load_f32(xb + k * in.step()) - compensation;
            const float next = sum + term;
            // (next − sum) is what the addition kept of term; minus term, what it lost.
            compensation = std::isfinite(next) ? (next - sum) - term : 0.0f;
            sum = next;
            y.store_f32(yb + k * out.step(), sum);
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "sequential_cumsum"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "sequential_cumsum", "device": "cpu", "contracts": ["cumsum-f32"],
  "description": "prefix sum by a sequential Kahan-compensated running sum in float32"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
