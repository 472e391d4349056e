// Inclusive prefix sum along one axis (attribute "dim", default -1); the output has the input's
// shape. y*_j = Σ_{k≤j} x_k with one running Sum2, so every prefix carries about twice
// float64's precision before its rounding; s_j = Σ_{k≤j} |x_k|, the scale of the sum that
// produced y*_j (the error model's scan over T uses K_j up to the axis length), each term
// floored by term_magnitude where the contract allows rounded operands.
// The running sum starts at +0, so a prefix of -0 terms is +0, as PyTorch's cumsum gives, and
// once it meets Inf or NaN it keeps the IEEE value ([1, Inf, -Inf, 1] -> [1, Inf, NaN, NaN]).
#include "registry.hpp"

namespace kcv::oracles {

void cumsum(const OracleArgs& a) {
    static const Signature sig{"cumsum", {{"x"}}, {{"y"}}};
    check_operands(a, sig);
    const Tensor& x = a.inputs[0];
    const size_t dim = reduction_dim(a, sig, x.shape.size());
    check_output_shapes(a, sig, x.shape);
    const AxisView view(x.shape, dim);

    const std::vector<double> xv = read_values(x);
    std::vector<double> y(xv.size()), s(xv.size());
    for (int64_t lane = 0; lane < view.lanes(); ++lane) {
        CompensatedSum running;
        double magnitude = 0;
        for (int64_t k = 0; k < view.n; ++k) {
            const int64_t at = view.at(lane, k);
            running.add(xv[at]);
            magnitude += term_magnitude(xv[at], a.operand_floor);
            y[at] = running.value();
            s[at] = magnitude;
        }
    }
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

}  // namespace kcv::oracles
