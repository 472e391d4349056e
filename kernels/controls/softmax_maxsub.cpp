// Positive control: softmax and log_softmax along one axis (attribute "dim", default the last),
// stabilised by subtracting the lane's maximum; softmax-f32 and log_softmax-f32.
//   m = max_k x_k (NaN if the lane holds one), d_k = x_k − m, e_k = exp(d_k),
//   S = Σ e_k by pairwise summation, softmax: y_j = e_j / S, log_softmax: y_j = d_j − log S.
// All in float32 arithmetic (expf, logf), as a standard implementation computes it. Since every
// d_k ≤ 0, no exponential overflows and S ∈ [1, n]. IEEE arithmetic then yields PyTorch's
// special cases by itself: a NaN or +Inf in the lane makes it all NaN (Inf − Inf), a lane of
// −Inf is all NaN (−Inf − (−Inf)), and a −Inf among finite values gives 0 (log_softmax: −Inf).
// Layout: arbitrary strides and byte offsets on input and output.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/softmax_maxsub.cpp -o kcv_controls_softmax_maxsub.so
#include <cmath>
#include <string>
#include <vector>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

void run(const kcv_call& call) {
    const std::string op = kcvk::operation(call);
    if (op != "softmax" && op != "log_softmax")
        throw kcvk::Error(std::string("softmax_maxsub serves softmax and log_softmax, not ") +
                          (call.contract_id ? call.contract_id : "(null)"));
    const bool log_space = op == "log_softmax";
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    if (!kcvk::is_float(x.dtype()) || !kcvk::is_float(y.dtype())) throw kcvk::Error("softmax takes float tensors");
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::AxisLanes in(x, axis), out(y, axis);

    std::vector<float> d(static_cast<size_t>(in.length()));
    for (int64_t lane = 0; lane < in.count(); ++lane) {
        const int64_t xb = in.base(lane), yb = out.base(lane);
        float m = -INFINITY;
        for (int64_t k = 0; k < in.length(); ++k) {
            const float v = x.load_f32(xb + k * in.step());
            d[k] = v;
            if (!std::isnan(m) && (std::isnan(v) || v > m)) m = v;
        }
        kcvk::PairwiseSum total;
        for (int64_t k = 0; k < in.length(); ++k) {
            d[k] = d[k] - m;
            total.add(std::exp(d[k]));
        }
        const float s = total.total();
        if (log_space) {
            const float log_s = std::log(s);
            for (int64_t k = 0; k < in.length(); ++k) y.store_f32(yb + k * out.step(), d[k] - log_s);
        } else {
            for (int64_t k = 0; k < in.length(); ++k) y.store_f32(yb + k * out.step(), std::exp(d[k]) / s);
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_maxsub"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "softmax_maxsub", "device": "cpu", "contracts": ["softmax-f32", "log_softmax-f32"],
  "description": "max-subtracted softmax and log_softmax in float32 with a pairwise sum"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
