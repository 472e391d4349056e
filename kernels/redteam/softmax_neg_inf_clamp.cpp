// Red team 16 — target EXC-01 (non-finite propagation), class nan-swallowed;
// contract softmax-f32.
// Defect: a max-subtracted softmax that first clamps −Inf logits to the lowest finite float32
// (a "mask value" guard against Inf − Inf). A −Inf among finite logits still gets probability 0,
// so every finite probe passes; but a row that is entirely −Inf, which PyTorch's softmax (and the
// contract) turns into NaN, becomes the uniform distribution 1/N: finite values where the
// reference is NaN.
// Layout: any strides; softmax over the axis of attribute dim (default the last).
#include <cmath>
#include <limits>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

float clamp_mask(float v) { return v == -INFINITY ? std::numeric_limits<float>::lowest() : v; }

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::AxisLanes in(x, axis), out(y, axis);
    for (int64_t lane = 0; lane < in.count(); ++lane) {
        auto at = [&](int64_t k) { return clamp_mask(x.load_f32(in.base(lane) + k * in.step())); };
        float m = -INFINITY;
        for (int64_t k = 0; k < in.length(); ++k) {
            const float v = at(k);
            if (!std::isnan(m) && (std::isnan(v) || v > m)) m = v;
        }
        kcvk::PairwiseSum total;
        for (int64_t k = 0; k < in.length(); ++k) total.add(std::exp(at(k) - m));
        const float s = total.total();
        for (int64_t k = 0; k < in.length(); ++k) y.store_f32(out.base(lane) + k * out.step(), std::exp(at(k) - m) / s);
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_neg_inf_clamp"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "softmax_neg_inf_clamp", "device": "cpu", "contracts": ["softmax-f32"],
  "target_gate": "EXC-01", "signature": "nan-swallowed",
  "description": "softmax that clamps -Inf logits to the lowest finite float: an all -Inf row gives 1/N, not NaN"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
