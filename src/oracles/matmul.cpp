// Matrix products in float64.
//   matmul: a[M,K] · b[K,N] -> [M,N];  bmm: a[B,M,K] · b[B,K,N] -> [B,M,N].
//   trans_a = 1: a is given as [K,M] ([B,K,M]); trans_b = 1: b is given as [N,K] ([B,N,K]).
// y*_ij = Σ_k a_ik·b_kj, accumulated with Sum2/TwoProduct so y* carries about twice float64's
// precision before its final rounding: the reference stays far more accurate than any
// candidate, float64 candidates included. s_ij = Σ_k |a_ik·b_kj|, the scale of the analytic
// error model for a dot product of length K; with an operand floor (a contract that allows tf32
// or bf16 operands), each term is product_magnitude's floored one.
#include <cstring>

#include "registry.hpp"

namespace kcv::oracles {
namespace {

// Copies a stack of matrices to row-major [rows, cols] each; `transposed` means the operand is
// given as [cols, rows].
std::vector<double> row_major(const std::vector<double>& given, int64_t batch, int64_t rows, int64_t cols,
                              bool transposed) {
    if (!transposed) return given;
    std::vector<double> out(given.size());
    for (int64_t b = 0; b < batch; ++b) {
        const double* src = given.data() + b * rows * cols;
        double* dst = out.data() + b * rows * cols;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[c * rows + r];
    }
    return out;
}

// True when x's product with any other such value is exact in float64: a significand of at
// most 24 bits and a binary exponent in [-149, 127] (every float32, bf16, fp16 and fp8 value
// qualifies), so a product has at most 48 significant bits and can neither overflow nor leave
// float64's normal range. Zero and non-finite values qualify too: their products are IEEE
// results with no rounding error to recover.
bool narrow(double x) {
    uint64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    const int64_t biased = static_cast<int64_t>((bits >> 52) & 0x7FF);
    if (biased == 0x7FF || (bits << 1) == 0) return true;
    if (biased == 0) return false;   // float64 subnormal: far below float32's range
    const int64_t exponent = biased - 1023;
    return (bits & ((uint64_t(1) << 29) - 1)) == 0 && exponent >= -149 && exponent <= 127;
}

bool all_narrow(const std::vector<double>& v) {
    for (double x : v)
        if (!narrow(x)) return false;
    return true;
}

struct Problem {
    int64_t batch, m, k, n;
};

// a: [batch, m, k], b: [batch, k, n], both row-major. The i-k-j order streams rows of b.
template <bool kExactProducts>
void multiply(const Problem& p, const std::vector<double>& a, const std::vector<double>& b, double floor,
              std::vector<double>& y, std::vector<double>& s) {
    std::vector<CompensatedSum> acc(static_cast<size_t>(p.n));
    std::vector<double> mag(static_cast<size_t>(p.n));
    for (int64_t bi = 0; bi < p.batch; ++bi) {
        const double* ab = a.data() + bi * p.m * p.k;
        const double* bb = b.data() + bi * p.k * p.n;
        for (int64_t i = 0; i < p.m; ++i) {
            std::fill(acc.begin(), acc.end(), CompensatedSum{});
            std::fill(mag.begin(), mag.end(), 0.0);
            for (int64_t kk = 0; kk < p.k; ++kk) {
                const double aik = ab[i * p.k + kk];
                const double* brow = bb + kk * p.n;
                for (int64_t j = 0; j < p.n; ++j) {
                    if constexpr (kExactProducts) acc[j].add(aik * brow[j]);
                    else acc[j].add_product(aik, brow[j]);
                    mag[j] += product_magnitude(aik, brow[j], floor);
                }
            }
            const int64_t row = (bi * p.m + i) * p.n;
            for (int64_t j = 0; j < p.n; ++j) {
                y[row + j] = acc[j].value();
                s[row + j] = mag[j];
            }
        }
    }
}

void matrix_product(const OracleArgs& a, const Signature& sig, size_t rank) {
    check_operands(a, sig);
    const Tensor& ta = a.inputs[0];
    const Tensor& tb = a.inputs[1];
    if (ta.shape.size() != rank || tb.shape.size() != rank)
        fail(sig, "a " + shape_str(ta.shape) + " and b " + shape_str(tb.shape) + " must both have " +
                      std::to_string(rank) + " dimensions");
    const bool trans_a = int_attribute(a, sig, "trans_a", 0, 0, 1) == 1;
    const bool trans_b = int_attribute(a, sig, "trans_b", 0, 0, 1) == 1;
    const size_t r = rank - 2;   // first matrix dimension
    const int64_t batch = rank == 3 ? ta.shape[0] : 1;
    if (rank == 3 && tb.shape[0] != batch)
        fail(sig, "batch sizes differ: a " + shape_str(ta.shape) + ", b " + shape_str(tb.shape));
    const int64_t m = trans_a ? ta.shape[r + 1] : ta.shape[r];
    const int64_t k = trans_a ? ta.shape[r] : ta.shape[r + 1];
    const int64_t kb = trans_b ? tb.shape[r + 1] : tb.shape[r];
    const int64_t n = trans_b ? tb.shape[r] : tb.shape[r + 1];
    if (k != kb)
        fail(sig, "inner dimensions differ: a " + shape_str(ta.shape) + (trans_a ? " (transposed)" : "") +
                      " has K = " + std::to_string(k) + ", b " + shape_str(tb.shape) +
                      (trans_b ? " (transposed)" : "") + " has K = " + std::to_string(kb));
    check_output_shapes(a, sig, rank == 3 ? std::vector<int64_t>{batch, m, n} : std::vector<int64_t>{m, n});

    const std::vector<double> av = row_major(read_values(ta), batch, m, k, trans_a);
    const std::vector<double> bv = row_major(read_values(tb), batch, k, n, trans_b);
    const Problem p{batch, m, k, n};
    std::vector<double> y(static_cast<size_t>(batch * m * n)), s(y.size());
    if (all_narrow(av) && all_narrow(bv)) multiply<true>(p, av, bv, a.operand_floor, y, s);
    else multiply<false>(p, av, bv, a.operand_floor, y, s);
    write_values(a.outputs[0], y);
    write_values(a.scales[0], s);
}

}  // namespace

void matmul(const OracleArgs& a) {
    static const Signature sig{"matmul", {{"a"}, {"b"}}, {{"y"}}};
    matrix_product(a, sig, 2);
}

void bmm(const OracleArgs& a) {
    static const Signature sig{"bmm", {{"a"}, {"b"}}, {{"y"}}};
    matrix_product(a, sig, 3);
}

}  // namespace kcv::oracles
