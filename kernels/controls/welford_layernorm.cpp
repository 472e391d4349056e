// Positive control: layer normalisation over the last dimension (layernorm-f32),
//   y_j = (x_j − μ)·rstd·w_j + b_j, rstd = 1/√(var + eps), var biased; weight and bias optional
//   (inputs x[, weight[, bias]]); attribute eps, default 1e-5 as PyTorch.
// μ and var come from Welford's update in float32 over blocks of 8 elements, the blocks' moments
// merged as a binary tree with Chan's formula: the variance is accumulated from deviations, never
// as E[x²] − E[x]², so offset data (1e4 + N(0,1)) loses nothing to cancellation, and the tree
// keeps the error growing like log n for alike data (PRC-01) where a running update grows like n.
// A NaN or ±Inf in a row makes the whole row NaN (the moments are not finite), as PyTorch.
// Layout: arbitrary strides and byte offsets on every tensor.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/welford_layernorm.cpp -o kcv_controls_welford_layernorm.so
#include <cmath>
#include <optional>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

struct Moments {
    float n = 0, mean = 0, m2 = 0;   // count, mean, sum of squared deviations
};

void welford_add(Moments& m, float x) {
    m.n += 1.0f;
    const float d = x - m.mean;
    m.mean += d / m.n;
    m.m2 += d * (x - m.mean);
}

// Chan, Golub and LeVeque's combination of two partitions' moments.
Moments merge(const Moments& a, const Moments& b) {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    Moments r;
    r.n = a.n + b.n;
    const float d = b.mean - a.mean;
    r.mean = a.mean + d * (b.n / r.n);
    r.m2 = a.m2 + b.m2 + d * d * (a.n * b.n / r.n);
    return r;
}

// The moments of a stream: Welford inside blocks of kBlock, blocks merged by a binary counter
// (as kcv_pairwise.hpp sums), so the merge order depends only on the length.
class MomentTree {
public:
    static constexpr int kBlock = 8;

    void add(float x) {
        welford_add(block_, x);
        if (++in_block_ == kBlock) {
            push(block_);
            block_ = {};
            in_block_ = 0;
        }
    }

    Moments total() const {
        Moments t = block_;
        for (int level = 0; level < kLevels; ++level) {
            if (blocks_ >> level & 1) t = merge(level_[level], t);
        }
        return t;
    }

private:
    static constexpr int kLevels = 64;

    void push(Moments b) {
        uint64_t n = blocks_;
        int level = 0;
        while (n & 1) {
            b = merge(level_[level], b);
            n >>= 1;
            ++level;
        }
        level_[level] = b;
        ++blocks_;
    }

    Moments block_;
    int in_block_ = 0;
    uint64_t blocks_ = 0;
    Moments level_[kLevels];
};

void run(const kcv_call& call) {
    if (kcvk::operation(call) != "layernorm")
        throw kcvk::Error(std::string("welford_layernorm serves layernorm, not ") + (call.contract_id ? call.contract_id : "(null)"));
    if (call.n_inputs < 1 || call.n_inputs > 3 || call.n_outputs != 1)
        throw kcvk::Error("layernorm takes x[, weight[, bias]] and one output");
    kcvk::expect_arity(call, call.n_inputs, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    if (x.ndim() < 1) throw kcvk::Error("layernorm needs a feature dimension");
    if (x.axis(kcvk::reduced_axis(call, x)) != x.ndim() - 1)
        throw kcvk::Error("layernorm normalises the last dimension only");
    const int64_t n = x.size(-1);
    std::optional<kcvk::TensorRef> weight, bias;
    if (call.n_inputs > 1) weight.emplace(call.inputs[1], "input weight");
    if (call.n_inputs > 2) bias.emplace(call.inputs[2], "input bias");
    for (const auto* p : {&weight, &bias}) {
        if (!*p) continue;
        (*p)->expect_cpu();
        if ((*p)->ndim() != 1 || (*p)->size(0) != n)
            throw kcvk::Error((*p)->role() + " " + (*p)->shape_str() + " must be [" + std::to_string(n) + "]");
    }
    const float eps = static_cast<float>(kcvk::attribute(call, "eps", 1e-5));
    const kcvk::AxisLanes in(x, -1), out(y, -1);

    for (int64_t row = 0; row < in.count(); ++row) {
        const int64_t xb = in.base(row), yb = out.base(row);
        MomentTree tree;
        for (int64_t j = 0; j < n; ++j) tree.add(x.load_f32(xb + j * in.step()));
        const Moments m = tree.total();
        const float rstd = 1.0f / std::sqrt(m.m2 / m.n + eps);
        for (int64_t j = 0; j < n; ++j) {
            float v = (x.load_f32(xb + j * in.step()) - m.mean) * rstd;
            if (weight) v = v * weight->load_f32(weight->offset_of(j));
            if (bias) v = v + bias->load_f32(bias->offset_of(j));
            y.store_f32(yb + j * out.step(), v);
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "welford_layernorm"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "welford_layernorm", "device": "cpu", "contracts": ["layernorm-f32"],
  "description": "layernorm with Welford moments merged pairwise (Chan), float32"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
