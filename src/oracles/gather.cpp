// gather along the last dimension (attribute "dim" may only name it): x[..., N] (float64),
// idx[..., J] (any integer dtype, the same leading dimensions) -> y[..., J] with
// y[r, j] = x[r, idx[r, j]].
// Attribute "policy" says what an index outside [0, N) means (negative indices are out of
// range, not counted from the end):
//   0 raise (default): the oracle throws OracleError naming the first such position; the
//     executor records that the reference raises, and the candidate must refuse the call too;
//   1 clamp: the nearest valid index (below 0 -> 0, N or more -> N − 1);
//   2 zero:  the element is +0.
// A gathered element is an exact copy (bits included, NaN payloads too), so s = |y*| as for an
// elementwise map, and 0 where the policy writes zero.
#include <algorithm>

#include "registry.hpp"

namespace kcv::oracles {

void gather(const OracleArgs& a) {
    static const Signature sig{"gather", {{"x"}, {"idx", Operand::integer}}, {{"y"}}};
    enum Policy : int64_t { raise = 0, clamp = 1, zero = 2 };
    check_operands(a, sig);
    const Tensor& x = a.inputs[0];
    const Tensor& idx = a.inputs[1];
    const Policy policy = static_cast<Policy>(int_attribute(a, sig, "policy", raise, raise, zero));
    if (x.shape.empty() || idx.shape.size() != x.shape.size() ||
        !std::equal(x.shape.begin(), x.shape.end() - 1, idx.shape.begin()))
        fail(sig, "x " + shape_str(x.shape) + " and idx " + shape_str(idx.shape) +
                      " must have the same rank (at least 1) and the same leading dimensions");
    check_last_dim(a, sig, x.shape.size());
    check_output_shapes(a, sig, idx.shape);
    const int64_t n = x.shape.back();
    const int64_t j_count = idx.shape.back();

    const std::vector<double> xv = read_values(x);
    const std::vector<int64_t> iv = read_indices(idx);
    std::vector<double> y(iv.size()), s(iv.size());
    for (size_t p = 0; p < iv.size(); ++p) {
        const int64_t row = static_cast<int64_t>(p) / j_count;
        int64_t k = iv[p];
        if (k < 0 || k >= n) {
            if (policy == raise)
                fail(sig, "idx" + shape_str(idx.coords(static_cast<int64_t>(p))) + " = " + std::to_string(k) +
                              " is outside [0, " + std::to_string(n) + ") and the policy is raise");
            if (policy == zero) {
                y[p] = 0.0;
                s[p] = 0.0;
                continue;
            }
            if (n == 0) fail(sig, "cannot clamp an index into an empty dimension (x " + shape_str(x.shape) + ")");
            k = k < 0 ? 0 : n - 1;
        }
        y[p] = xv[static_cast<size_t>(row * n + k)];
        s[p] = std::fabs(y[p]);
    }
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

}  // namespace kcv::oracles
