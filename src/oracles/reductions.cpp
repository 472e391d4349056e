// Reductions over one axis (attribute "dim", default -1; the output drops the axis or keeps it
// with size 1).
//   sum:    y* = Σ x (Sum2, about twice float64's precision), s = Σ |x|.
//   mean:   y* = (Σ x) / n, s = (Σ |x|) / n: the error of a computed mean is the error of its
//           sum divided by n, plus the rounding of the division, which u(out)·|y*| covers.
//           An empty axis gives 0/0 = NaN, as PyTorch's mean does.
//           Where the contract allows rounded operands, sum's and mean's terms are floored by
//           term_magnitude.
//   max:    y* = the first maximum, NaN if the lane holds one (PyTorch's max propagates NaN).
//           Taking a maximum rounds nothing, so s = |y*| as for an elementwise map.
//   argmax: the index of the first maximum, or of the first NaN (as PyTorch), written as an
//           exact integer into a float64 or integer output. s = 0: an index has no rounding
//           error to allow for.
// max and argmax of an empty axis have no value and are refused, as PyTorch refuses them.
#include "registry.hpp"

namespace kcv::oracles {
namespace {

enum class Reduction : uint8_t { sum, mean, max, argmax };

void reduce(const OracleArgs& a, const Signature& sig, Reduction kind) {
    check_operands(a, sig);
    const Tensor& x = a.inputs[0];
    const size_t dim = reduction_dim(a, sig, x.shape.size());
    check_reduced_shapes(a, sig, x.shape, dim);
    const AxisView view(x.shape, dim);
    if ((kind == Reduction::max || kind == Reduction::argmax) && view.n == 0 && view.lanes() > 0)
        fail(sig, "dim " + std::to_string(dim) + " of " + shape_str(x.shape) + " is empty; there is no maximum");

    const std::vector<double> xv = read_values(x);
    std::vector<double> y(static_cast<size_t>(view.lanes())), s(y.size());
    for (int64_t lane = 0; lane < view.lanes(); ++lane) {
        if (kind == Reduction::max || kind == Reduction::argmax) {
            FirstMax best;
            for (int64_t k = 0; k < view.n; ++k) best.add(xv[view.at(lane, k)], k);
            y[lane] = kind == Reduction::max ? best.value : static_cast<double>(best.index);
            s[lane] = kind == Reduction::max ? std::fabs(best.value) : 0.0;
            continue;
        }
        CompensatedSum total;
        double magnitude = 0;
        for (int64_t k = 0; k < view.n; ++k) {
            const double v = xv[view.at(lane, k)];
            total.add(v);
            magnitude += term_magnitude(v, a.operand_floor);
        }
        const double n = static_cast<double>(view.n);
        y[lane] = kind == Reduction::mean ? total.value() / n : total.value();
        s[lane] = kind == Reduction::mean ? magnitude / n : magnitude;
    }
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

}  // namespace

void sum(const OracleArgs& a) {
    static const Signature sig{"sum", {{"x"}}, {{"y"}}};
    reduce(a, sig, Reduction::sum);
}

void mean(const OracleArgs& a) {
    static const Signature sig{"mean", {{"x"}}, {{"y"}}};
    reduce(a, sig, Reduction::mean);
}

void max(const OracleArgs& a) {
    static const Signature sig{"max", {{"x"}}, {{"y"}}};
    reduce(a, sig, Reduction::max);
}

void argmax(const OracleArgs& a) {
    static const Signature sig{"argmax", {{"x"}}, {{"index", Operand::real_or_integer}}};
    reduce(a, sig, Reduction::argmax);
}

}  // namespace kcv::oracles
