// Normalisations over the last dimension, N = x.shape[-1] (attribute "dim" may only name it).
//   layernorm(x, weight?, bias?; eps = 1e-5, PyTorch's default):
//     μ = Σx / N, var = Σ(x − μ)² / N (biased, two passes, each sum Sum2),
//     r = 1/√(var + eps), z_j = (x_j − μ)·r, y*_j = z_j·w_j + b_j.
//   rmsnorm(x, weight?; eps required, since PyTorch's default depends on the input dtype):
//     r = 1/√(Σx²/N + eps), y*_j = x_j·r·w_j.
// A NaN or ±Inf in a row makes the whole layernorm row NaN (μ is not finite); in rmsnorm an Inf
// makes r = 0, so finite entries give 0 and the Inf entry NaN. Both as PyTorch.
//
// Scales (constant factors per rounding absorbed into c; u is the candidate's unit roundoff;
// τ = c·u·√K·s with K = N):
//   layernorm: the computed mean is off by about √N·u·mean|x|, which the subtraction passes on
//     to every x_j − μ and r scales: u·√N·|w_j|·r·mean|x|. This is the term that grows with an
//     offset (1e4 + N(0,1)) for every correct algorithm. The variance is a sum of positive
//     terms, relative error √N·u, halved by the square root: u·√N·|w_j·z_j|; rounding x_j − μ
//     and the products add u·|w_j·z_j|. The bias addition rounds at u·(|b_j| + |y*_j|). So
//       s_j = |w_j|·(r·mean|x| + |z_j|) + |b_j| + |y*_j|.
//     A variance formed as E[x²] − E[x]² has error of order u·mean(x²)/var instead, far beyond
//     this scale for offset data: that is the failure PRC-02 exists to catch.
//   rmsnorm: the mean of squares is a sum of positive terms (relative error √N·u), the root
//     halves it and the products add a few roundings, all relative to the output:
//       s_j = |y*_j|.
#include "registry.hpp"

namespace kcv::oracles {
namespace {

struct Affine {
    std::vector<double> weight, bias;   // empty: 1 and 0
    double w(int64_t j) const { return weight.empty() ? 1.0 : weight[j]; }
    double b(int64_t j) const { return bias.empty() ? 0.0 : bias[j]; }
};

// Checks x (rank ≥ 1) and the optional per-feature operands; returns N.
int64_t check_features(const OracleArgs& a, const Signature& sig) {
    check_operands(a, sig);
    const Tensor& x = a.inputs[0];
    if (x.shape.empty()) fail(sig, "input 0 (x) is a scalar; it needs a feature dimension");
    check_last_dim(a, sig, x.shape.size());
    const int64_t n = x.shape.back();
    for (size_t i = 1; i < a.inputs.size(); ++i) check_shape(sig, "input", i, a.inputs[i], {n});
    check_output_shapes(a, sig, x.shape);
    return n;
}

Affine read_affine(const OracleArgs& a) {
    Affine f;
    if (a.inputs.size() > 1) f.weight = read_values(a.inputs[1]);
    if (a.inputs.size() > 2) f.bias = read_values(a.inputs[2]);
    return f;
}

}  // namespace

void layernorm(const OracleArgs& a) {
    static const Signature sig{"layernorm", {{"x"}, {"weight"}, {"bias"}}, {{"y"}}, 1};
    const int64_t n = check_features(a, sig);
    const double eps = attribute(a, "eps", 1e-5);
    const Affine f = read_affine(a);
    const std::vector<double> xv = read_values(a.inputs[0]);
    std::vector<double> y(xv.size()), s(xv.size());
    const int64_t rows = n == 0 ? 0 : static_cast<int64_t>(xv.size()) / n;
    for (int64_t r = 0; r < rows; ++r) {
        const double* row = xv.data() + r * n;
        CompensatedSum total;
        double magnitude = 0;
        for (int64_t j = 0; j < n; ++j) {
            total.add(row[j]);
            magnitude += std::fabs(row[j]);
        }
        const double mu = total.value() / static_cast<double>(n);
        CompensatedSum squares;
        for (int64_t j = 0; j < n; ++j) squares.add_product(row[j] - mu, row[j] - mu);
        const double var = squares.value() / static_cast<double>(n);
        const double rstd = 1.0 / std::sqrt(var + eps);
        const double mean_abs = magnitude / static_cast<double>(n);
        for (int64_t j = 0; j < n; ++j) {
            const double z = (row[j] - mu) * rstd;
            const double out = z * f.w(j) + f.b(j);
            y[r * n + j] = out;
            s[r * n + j] = std::fabs(f.w(j)) * (rstd * mean_abs + std::fabs(z)) + std::fabs(f.b(j)) + std::fabs(out);
        }
    }
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

void rmsnorm(const OracleArgs& a) {
    static const Signature sig{"rmsnorm", {{"x"}, {"weight"}}, {{"y"}}, 1};
    const int64_t n = check_features(a, sig);
    const double eps = required_attribute(a, sig, "eps");
    const Affine f = read_affine(a);
    const std::vector<double> xv = read_values(a.inputs[0]);
    std::vector<double> y(xv.size()), s(xv.size());
    const int64_t rows = n == 0 ? 0 : static_cast<int64_t>(xv.size()) / n;
    for (int64_t r = 0; r < rows; ++r) {
        const double* row = xv.data() + r * n;
        CompensatedSum squares;
        for (int64_t j = 0; j < n; ++j) squares.add_product(row[j], row[j]);
        const double rstd = 1.0 / std::sqrt(squares.value() / static_cast<double>(n) + eps);
        for (int64_t j = 0; j < n; ++j) {
            const double out = row[j] * rstd * f.w(j);
            y[r * n + j] = out;
            s[r * n + j] = std::fabs(out);
        }
    }
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

}  // namespace kcv::oracles
