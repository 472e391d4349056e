// softmax and log_softmax along one axis (attribute "dim", default -1), max-subtracted in
// float64. For a lane x with maximum m (NaN if the lane holds one), d_k = x_k − m,
// S = Σ_k exp(d_k) (Sum2), p_k = exp(d_k) / S:
//   softmax:     y*_j = p_j
//   log_softmax: y*_j = d_j − log S
// IEEE arithmetic then gives PyTorch's special cases by itself: a NaN anywhere, a +Inf
// anywhere (Inf − Inf) or a lane of only −Inf (−Inf − (−Inf)) makes the whole lane NaN, and a
// −Inf among finite values gives p = 0 (log_softmax −Inf).
//
// Scales (constant factors per rounding are absorbed into the error model's c, as they are for
// a dot product; u below is the candidate's unit roundoff). Every correct algorithm, naive
// two-pass or online, must form d_k (or an equivalent rescaling exponent) in its own precision:
//   - rounding d_k costs an absolute u·|d_k|, which exp turns into a relative error u·|d_k|
//     of exp(d_k);
//   - S is a sum of positive terms: relative error about √K·u from the additions, plus
//     Σ_k p_k·u·|d_k| from the errors of its terms;
//   - the division (or the logarithm and the final subtraction) adds one rounding.
// So |δp_j| ≲ u·p_j·(√K + |d_j| + T) with T = Σ_k p_k·|d_k|, and since √K ≥ 1,
//   softmax:     s_j = p_j·(1 + |d_j| + T)            (s_j = 0 where p_j = 0),
// which τ = c·u·√K·s_j bounds. For log_softmax the error of log S is the relative error of S
// (√K·u + u·T) plus the rounding of the logarithm (u·log S), and the subtraction adds u·|y*_j|:
//   log_softmax: s_j = 1 + |d_j| + log S + T + |y*_j|.
// Terms with p_k = 0 (exp underflow or a −Inf logit) contribute nothing to T: they carry no
// mass whatever their argument's rounding. These scales grow with the spread of the logits
// (|d_k|), which is the genuine conditioning of the computation, and not with their offset:
// an unstabilised exp(x_k) overflows or loses the offset, and PRC-02 is there to see it.
#include "registry.hpp"

namespace kcv::oracles {
namespace {

void softmax_family(const OracleArgs& a, const Signature& sig, bool log_space) {
    check_operands(a, sig);
    const Tensor& x = a.inputs[0];
    const size_t dim = reduction_dim(a, sig, x.shape.size());
    check_output_shapes(a, sig, x.shape);
    const AxisView view(x.shape, dim);

    const std::vector<double> xv = read_values(x);
    std::vector<double> y(xv.size()), s(xv.size());
    std::vector<double> d(static_cast<size_t>(view.n)), e(d.size());
    for (int64_t lane = 0; lane < view.lanes(); ++lane) {
        FirstMax m;
        for (int64_t k = 0; k < view.n; ++k) m.add(xv[view.at(lane, k)], k);
        CompensatedSum total;
        for (int64_t k = 0; k < view.n; ++k) {
            d[k] = xv[view.at(lane, k)] - m.value;
            e[k] = std::exp(d[k]);
            total.add(e[k]);
        }
        const double sum = total.value();
        double spread = 0;   // T = Σ p_k·|d_k| over the terms with mass
        for (int64_t k = 0; k < view.n; ++k)
            if (e[k] != 0) spread += (e[k] / sum) * std::fabs(d[k]);
        const double log_sum = std::log(sum);
        for (int64_t k = 0; k < view.n; ++k) {
            const int64_t at = view.at(lane, k);
            if (log_space) {
                y[at] = d[k] - log_sum;
                s[at] = 1 + std::fabs(d[k]) + log_sum + spread + std::fabs(y[at]);
            } else {
                const double p = e[k] / sum;
                y[at] = p;
                s[at] = p == 0 ? 0.0 : p * (1 + std::fabs(d[k]) + spread);
            }
        }
    }
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

}  // namespace

void softmax(const OracleArgs& a) {
    static const Signature sig{"softmax", {{"x"}}, {{"y"}}};
    softmax_family(a, sig, false);
}

void log_softmax(const OracleArgs& a) {
    static const Signature sig{"log_softmax", {{"x"}}, {{"y"}}};
    softmax_family(a, sig, true);
}

}  // namespace kcv::oracles
