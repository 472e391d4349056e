// The float64 reference oracles: exact results on small integers (bit for bit), known values,
// IEEE special values as PyTorch applies them, the scales s_i, the refusal of anything but
// float64, the gather policies and the registry. Random cases use fixed seeds, printed on
// failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kcv/oracle.hpp"
#include "kcv/rng.hpp"
#include "kcv/tensor.hpp"
#include "../../src/oracles/registry.hpp"

namespace kcv {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMinSub = std::numeric_limits<double>::denorm_min();

using Attrs = std::map<std::string, double>;
using Shape = std::vector<int64_t>;

uint64_t bits_of(double x) {
    uint64_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

// Bit equality, so -0 differs from +0 and two NaNs with the same payload are equal.
::testing::AssertionResult same_bits(double expected, double actual) {
    if (bits_of(expected) == bits_of(actual)) return ::testing::AssertionSuccess();
    char buf[160];
    std::snprintf(buf, sizeof buf, "expected %.17g (0x%016llx), got %.17g (0x%016llx)", expected,
                  static_cast<unsigned long long>(bits_of(expected)), actual,
                  static_cast<unsigned long long>(bits_of(actual)));
    return ::testing::AssertionFailure() << buf;
}

Tensor make(DType t, const Shape& shape, const std::vector<double>& values, Layout layout = {}) {
    Tensor x = Tensor::empty(t, shape, layout);
    EXPECT_EQ(static_cast<size_t>(x.numel()), values.size()) << "test set-up: shape " << shape_str(shape);
    for (size_t i = 0; i < values.size(); ++i) x.set(static_cast<int64_t>(i), values[i]);
    return x;
}
Tensor f64(const Shape& shape, const std::vector<double>& values, Layout layout = {}) {
    return make(DType::f64, shape, values, layout);
}

std::vector<double> values(const Tensor& t) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(static_cast<int64_t>(i));
    return v;
}

struct Result {
    std::vector<double> y, s;
};

Result run(const std::string& name, const std::vector<Tensor>& inputs, const Attrs& attrs, const Shape& out) {
    std::vector<Tensor> outputs, scales;
    run_oracle(name, inputs, attrs, {out}, outputs, scales);
    return {values(outputs[0]), values(scales[0])};
}

void expect_all_bits(const std::vector<double>& expected, const std::vector<double>& actual, const std::string& what) {
    ASSERT_EQ(expected.size(), actual.size()) << what;
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_TRUE(same_bits(expected[i], actual[i])) << what << " at " << i;
}

// Small integers in [lo, hi], a pure function of (seed, stream, i).
std::vector<double> ints(uint64_t seed, uint64_t stream, int64_t n, int64_t lo, int64_t hi) {
    CounterRng rng(seed, stream);
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(rng.integer(static_cast<uint64_t>(i), lo, hi));
    return v;
}

std::vector<double> normals(uint64_t seed, uint64_t stream, int64_t n) {
    CounterRng rng(seed, stream);
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = rng.normal(static_cast<uint64_t>(i));
    return v;
}

// Dimension sizes for a case: the boundary sizes every run, then random ones.
std::vector<int64_t> sizes(uint64_t seed, int64_t randoms, int64_t max) {
    std::vector<int64_t> s = {1, 2, 3, 15, 16, 17};
    CounterRng rng(seed, 99);
    for (int64_t i = 0; i < randoms; ++i) s.push_back(rng.integer(static_cast<uint64_t>(i), 1, max));
    return s;
}

// ---------------------------------------------------------------------------------------------
// Registry

TEST(OracleRegistry, KnowsEveryBuiltinAndNothingElse) {
    const std::vector<std::string> expected = {"matmul", "bmm", "sum", "mean", "max", "argmax", "cumsum",
                                               "softmax", "log_softmax", "layernorm", "rmsnorm", "relu", "gelu",
                                               "silu", "exp", "log", "sqrt", "reciprocal", "div", "gather"};
    const std::vector<std::string> names = oracle_names();
    for (const std::string& n : expected) {
        EXPECT_NE(find_oracle(n), nullptr) << n;
        EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    }
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
    EXPECT_EQ(find_oracle("no_such_oracle"), nullptr);
    EXPECT_EQ(find_oracle(""), nullptr);
    std::vector<Tensor> out, sc;
    try {
        run_oracle("no_such_oracle", {}, {}, {}, out, sc);
        FAIL() << "an unknown oracle must throw";
    } catch (const OracleError& e) {
        EXPECT_NE(std::string(e.what()).find("no_such_oracle"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos) << e.what();
    }
}

void negate_oracle(const OracleArgs& a) {
    static const oracles::Signature sig{"registry_test_negate", {{"x"}}, {{"y"}}};
    oracles::check_operands(a, sig);
    std::vector<double> v = oracles::read_values(a.inputs[0]);
    for (double& x : v) x = -x;
    oracles::write_values(a.outputs[0], v);
    oracles::write_values(a.scales[0], std::vector<double>(v.size(), 0.0));
}

TEST(OracleRegistry, RegistrarAddsAnOracleAndRefusesDuplicates) {
    static const oracles::OracleRegistrar registrar("registry_test_negate", negate_oracle);
    EXPECT_EQ(find_oracle("registry_test_negate"), &negate_oracle);
    const std::vector<std::string> names = oracle_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "registry_test_negate"), names.end());
    const Result r = run("registry_test_negate", {f64({2}, {1.5, -0.0})}, {}, {2});
    expect_all_bits({-1.5, 0.0}, r.y, "negate");
    EXPECT_THROW(oracles::OracleRegistrar("registry_test_negate", negate_oracle), std::logic_error);
    EXPECT_THROW(oracles::OracleRegistrar("matmul", negate_oracle), std::logic_error);
    EXPECT_THROW(oracles::OracleRegistrar("registry_test_null", nullptr), std::logic_error);
}

TEST(OracleRegistry, RunOracleAllocatesFloat64OutputsOfTheGivenShapes) {
    std::vector<Tensor> out, sc;
    run_oracle("relu", {f64({2, 3}, {1, -2, 3, -4, 5, -6})}, {}, {{2, 3}}, out, sc);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(out[0].dtype, DType::f64);
    EXPECT_EQ(sc[0].dtype, DType::f64);
    EXPECT_EQ(out[0].shape, (Shape{2, 3}));
    EXPECT_EQ(sc[0].shape, (Shape{2, 3}));
}

// ---------------------------------------------------------------------------------------------
// Refusal of anything but float64

void expect_refused(const std::string& oracle, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
                    std::vector<Tensor> scales, const std::vector<std::string>& fragments) {
    const OracleFn fn = find_oracle(oracle);
    ASSERT_NE(fn, nullptr);
    const Attrs attrs;
    try {
        fn(OracleArgs{inputs, attrs, outputs, scales});
        FAIL() << oracle << " accepted operands it must refuse";
    } catch (const OracleError& e) {
        for (const std::string& f : fragments)
            EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "missing '" << f << "' in: " << e.what();
    }
}

TEST(OracleRefusal, NarrowFloatInputsOutputsAndScales) {
    const Tensor a64 = f64({2, 2}, {1, 2, 3, 4});
    const Tensor a32 = make(DType::f32, {2, 2}, {1, 2, 3, 4});
    const Tensor abf = make(DType::bf16, {2, 2}, {1, 2, 3, 4});
    const Tensor y64 = Tensor::empty(DType::f64, {2, 2});
    const Tensor y32 = Tensor::empty(DType::f32, {2, 2});
    expect_refused("matmul", {a32, a64}, {y64}, {y64}, {"matmul", "input 0", "(a)", "f32"});
    expect_refused("matmul", {a64, abf}, {y64}, {y64}, {"input 1", "(b)", "bf16"});
    expect_refused("matmul", {a64, a64}, {y32}, {y64}, {"output 0", "f32"});
    expect_refused("matmul", {a64, a64}, {y64}, {y32}, {"scale 0", "f32"});
    expect_refused("softmax", {a32}, {y64}, {y64}, {"softmax", "(x)", "f32"});
    expect_refused("div", {a64, make(DType::f16, {2, 2}, {1, 1, 1, 1})}, {y64}, {y64}, {"(b)", "f16"});
    // An integer tensor is not a real operand either.
    expect_refused("sum", {make(DType::i64, {2, 2}, {1, 2, 3, 4})}, {Tensor::empty(DType::f64, {2})},
                   {Tensor::empty(DType::f64, {2})}, {"(x)", "i64"});
    // And a float tensor is not an index.
    expect_refused("gather", {a64, f64({2, 1}, {0, 1})}, {Tensor::empty(DType::f64, {2, 1})},
                   {Tensor::empty(DType::f64, {2, 1})}, {"(idx)", "f64", "integer"});
}

TEST(OracleRefusal, CountsAndShapes) {
    const Tensor a = f64({2, 3}, {1, 2, 3, 4, 5, 6});
    const Tensor y = Tensor::empty(DType::f64, {2, 2});
    expect_refused("matmul", {a, a}, {y}, {y}, {"inner dimensions"});
    expect_refused("matmul", {a}, {y}, {y}, {"2 inputs", "got 1"});
    expect_refused("matmul", {a, f64({3, 2}, {1, 2, 3, 4, 5, 6})}, {y}, {}, {"scale"});
    expect_refused("matmul", {a, f64({3, 3}, std::vector<double>(9, 1.0))}, {y}, {y}, {"output 0", "[2, 3]"});
    expect_refused("sum", {a}, {Tensor::empty(DType::f64, {3})}, {Tensor::empty(DType::f64, {3})}, {"[2] or [2, 1]"});
}

TEST(OracleRefusal, WidenedNarrowInputsGiveTheSameResultAsFloat64) {
    // run_oracle widens exactly: f32 and bf16 inputs holding the same values give the same bits.
    const std::vector<double> v = {0.5, -1.25, 3.0, 1024.0, -0.0, 7.5};
    const Result r64 = run("softmax", {f64({2, 3}, v)}, {}, {2, 3});
    const Result r32 = run("softmax", {make(DType::f32, {2, 3}, v)}, {}, {2, 3});
    const Result rbf = run("softmax", {make(DType::bf16, {2, 3}, v)}, {}, {2, 3});
    expect_all_bits(r64.y, r32.y, "f32");
    expect_all_bits(r64.y, rbf.y, "bf16");
    expect_all_bits(r64.s, r32.s, "f32 scale");
}

// ---------------------------------------------------------------------------------------------
// matmul and bmm

// Exact integer product and scale, for comparison bit for bit.
void int_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k, int64_t n,
                std::vector<double>& y, std::vector<double>& s) {
    y.assign(static_cast<size_t>(m * n), 0);
    s.assign(y.size(), 0);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            int64_t acc = 0, mag = 0;
            for (int64_t kk = 0; kk < k; ++kk) {
                const int64_t p = static_cast<int64_t>(a[i * k + kk]) * static_cast<int64_t>(b[kk * n + j]);
                acc += p;
                mag += p < 0 ? -p : p;
            }
            y[i * n + j] = static_cast<double>(acc);
            s[i * n + j] = static_cast<double>(mag);
        }
}

std::vector<double> transpose(const std::vector<double>& v, int64_t rows, int64_t cols) {
    std::vector<double> t(v.size());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
    return t;
}

TEST(OracleMatmul, SmallIntegersAreExactBitForBit) {
    const uint64_t seed = 20251130;
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<int64_t> dims = sizes(seed, 3, 40);
    int64_t nonzero = 0;
    for (size_t t = 0; t < dims.size(); ++t) {
        const int64_t m = dims[t], k = dims[(t + 1) % dims.size()], n = dims[(t + 2) % dims.size()];
        SCOPED_TRACE("M=" + std::to_string(m) + " K=" + std::to_string(k) + " N=" + std::to_string(n));
        const std::vector<double> a = ints(seed, 2 * t, m * k, -8, 8);
        const std::vector<double> b = ints(seed, 2 * t + 1, k * n, -8, 8);
        std::vector<double> y, s;
        int_matmul(a, b, m, k, n, y, s);
        const Result r = run("matmul", {f64({m, k}, a), f64({k, n}, b)}, {}, {m, n});
        expect_all_bits(y, r.y, "y");
        expect_all_bits(s, r.s, "s");
        for (double v : r.y) nonzero += v != 0;
    }
    EXPECT_GT(nonzero, 0) << "an all-zero product cannot tell a correct oracle from a broken one";
}

// With an operand floor N (a contract allowing tf32 or bf16 operands) each term of a scale is
// ½·(max(|a|, N)·|b| + |a|·max(|b|, N)): rounding an operand below N errs by up to u·N, not u·|a|.
// Where no operand is below N the scale keeps its bits, and y* never depends on the floor.
TEST(OracleScales, OperandFloorCountsOperandsBelowTheSmallestNormalAtIt) {
    constexpr double N = 0x1p-126;
    const auto floored = [&](const std::string& name, const std::vector<Tensor>& in, const Shape& out) {
        std::vector<Tensor> outputs, scales;
        run_oracle(name, in, {}, {out}, outputs, scales, {}, nullptr, N);
        return Result{values(outputs[0]), values(scales[0])};
    };
    // a = [2^-130, 2^-140], b = [1, 1]ᵀ: ½(2^-126 + 2^-130) + ½(2^-126 + 2^-140).
    const std::vector<Tensor> tiny = {f64({1, 2}, {0x1p-130, 0x1p-140}), f64({2, 1}, {1, 1})};
    const Result plain = run("matmul", tiny, {}, {1, 1});
    const Result low = floored("matmul", tiny, {1, 1});
    EXPECT_TRUE(same_bits(0x1p-130 + 0x1p-140, plain.s[0]));
    EXPECT_TRUE(same_bits(0x1p-126 + 0x1p-131 + 0x1p-141, low.s[0]));
    EXPECT_TRUE(same_bits(plain.y[0], low.y[0]));
    expect_all_bits(run("bmm", {f64({1, 1, 2}, {0x1p-130, 0x1p-140}), f64({1, 2, 1}, {1, 1})}, {}, {1, 1, 1}).s,
                    plain.s, "bmm, no floor");
    expect_all_bits(floored("bmm", {f64({1, 1, 2}, {0x1p-130, 0x1p-140}), f64({1, 2, 1}, {1, 1})}, {1, 1, 1}).s,
                    low.s, "bmm, floored");

    // Operands at or above N, or zero (which rounds exactly): the same bits with or without it.
    const std::vector<Tensor> normal = {f64({3, 4}, ints(5, 0, 12, -9, 9)), f64({4, 2}, ints(5, 1, 8, -9, 9))};
    expect_all_bits(run("matmul", normal, {}, {3, 2}).s, floored("matmul", normal, {3, 2}).s, "matmul scale");

    // Sums: the term is the only rounded operand, ½(max(|x|, N) + |x|).
    const std::vector<Tensor> x = {f64({2}, {0x1p-140, -0x1p-130})};
    const double t0 = 0x1p-127 + 0x1p-141, t1 = 0x1p-127 + 0x1p-131;
    expect_all_bits({t0 + t1}, floored("sum", x, {}).s, "sum");
    expect_all_bits({(t0 + t1) / 2}, floored("mean", x, {}).s, "mean");
    expect_all_bits({t0, t0 + t1}, floored("cumsum", x, {2}).s, "cumsum");
    expect_all_bits({0x1p-140 + 0x1p-130}, run("sum", x, {}, {}).s, "sum, no floor");
    const std::vector<Tensor> big = {f64({3}, {1, -2, 0.5})};
    expect_all_bits(run("cumsum", big, {}, {3}).s, floored("cumsum", big, {3}).s, "cumsum of normal terms");
}

TEST(OracleMatmul, TransposedOperandsEqualExplicitTransposes) {
    const uint64_t seed = 77;
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {3, 5, 2}, {17, 16, 15}}) {
        SCOPED_TRACE("M=" + std::to_string(m) + " K=" + std::to_string(k) + " N=" + std::to_string(n));
        const std::vector<double> a = normals(seed, 1, m * k), b = normals(seed, 2, k * n);
        const Result plain = run("matmul", {f64({m, k}, a), f64({k, n}, b)}, {}, {m, n});
        const Tensor at = f64({k, m}, transpose(a, m, k)), bt = f64({n, k}, transpose(b, k, n));
        const Result ta = run("matmul", {at, f64({k, n}, b)}, {{"trans_a", 1}}, {m, n});
        const Result tb = run("matmul", {f64({m, k}, a), bt}, {{"trans_b", 1}}, {m, n});
        const Result tab = run("matmul", {at, bt}, {{"trans_a", 1}, {"trans_b", 1}}, {m, n});
        expect_all_bits(plain.y, ta.y, "trans_a");
        expect_all_bits(plain.y, tb.y, "trans_b");
        expect_all_bits(plain.y, tab.y, "trans_a trans_b");
        expect_all_bits(plain.s, tab.s, "scale trans_a trans_b");
        // A column-major layout of the same logical matrix reads the same values.
        const OracleFn fn = find_oracle("matmul");
        std::vector<Tensor> in = {f64({m, k}, a, {Layout::Kind::transposed, 1}), f64({k, n}, b, {Layout::Kind::strided, 3})};
        std::vector<Tensor> out = {Tensor::empty(DType::f64, {m, n}, {Layout::Kind::transposed, 0})};
        std::vector<Tensor> sc = {Tensor::empty(DType::f64, {m, n}, {Layout::Kind::strided, 2})};
        const Attrs none;
        fn(OracleArgs{in, none, out, sc});
        expect_all_bits(plain.y, values(out[0]), "non-contiguous layouts");
        expect_all_bits(plain.s, values(sc[0]), "non-contiguous layouts, scale");
    }
}

TEST(OracleMatmul, BadTransposeAttributeIsRefused) {
    EXPECT_THROW(run("matmul", {f64({1, 1}, {1}), f64({1, 1}, {1})}, {{"trans_a", 2}}, {1, 1}), OracleError);
    EXPECT_THROW(run("matmul", {f64({1, 1}, {1}), f64({1, 1}, {1})}, {{"trans_b", 0.5}}, {1, 1}), OracleError);
}

TEST(OracleMatmul, BmmEqualsMatmulPerBatch) {
    const uint64_t seed = 4242;
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int64_t batch = 3, m = 4, k = 17, n = 5;
    const std::vector<double> a = normals(seed, 1, batch * m * k), b = normals(seed, 2, batch * k * n);
    std::vector<double> bt;   // b given as [B, N, K]
    for (int64_t i = 0; i < batch; ++i) {
        const std::vector<double> slice(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
        const std::vector<double> t = transpose(slice, k, n);
        bt.insert(bt.end(), t.begin(), t.end());
    }
    const Result all = run("bmm", {f64({batch, m, k}, a), f64({batch, k, n}, b)}, {}, {batch, m, n});
    const Result all_t = run("bmm", {f64({batch, m, k}, a), f64({batch, n, k}, bt)}, {{"trans_b", 1}}, {batch, m, n});
    expect_all_bits(all.y, all_t.y, "bmm trans_b");
    for (int64_t i = 0; i < batch; ++i) {
        const std::vector<double> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
        const std::vector<double> bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
        const Result one = run("matmul", {f64({m, k}, ai), f64({k, n}, bi)}, {}, {m, n});
        expect_all_bits(one.y, std::vector<double>(all.y.begin() + i * m * n, all.y.begin() + (i + 1) * m * n),
                        "batch " + std::to_string(i));
        expect_all_bits(one.s, std::vector<double>(all.s.begin() + i * m * n, all.s.begin() + (i + 1) * m * n),
                        "scale, batch " + std::to_string(i));
    }
    EXPECT_THROW(run("bmm", {f64({2, 1, 1}, {1, 1}), f64({3, 1, 1}, {1, 1, 1})}, {}, {2, 1, 1}), OracleError);
}

TEST(OracleMatmul, AccumulationIsCompensated) {
    // Plain float64 accumulation gives 0 in both cases: 2^60 + 1 rounds to 2^60, and
    // (1 + 2^-30)(1 - 2^-30) = 1 - 2^-60 rounds to 1.
    const double big = std::ldexp(1.0, 60);
    Result r = run("matmul", {f64({1, 3}, {big, 1, -big}), f64({3, 1}, {1, 1, 1})}, {}, {1, 1});
    EXPECT_TRUE(same_bits(1.0, r.y[0]));
    EXPECT_TRUE(same_bits(2 * big + 1, r.s[0]));
    const double e = std::ldexp(1.0, -30);
    r = run("matmul", {f64({1, 2}, {1 + e, -1}), f64({2, 1}, {1 - e, 1})}, {}, {1, 1});
    EXPECT_TRUE(same_bits(-std::ldexp(1.0, -60), r.y[0])) << "the product's rounding error must be recovered";
    r = run("sum", {f64({3}, {1e16, 1, -1e16})}, {}, {});
    EXPECT_TRUE(same_bits(1.0, r.y[0]));
}

TEST(OracleMatmul, NonFiniteValuesPropagateAsIeee) {
    struct Case {
        std::vector<double> a, b, y;
    };
    const std::vector<Case> cases = {
        {{1, kNaN}, {1, 1}, {kNaN}},        // NaN term
        {{kInf, 1}, {1, 1}, {kInf}},        // Inf term
        {{kInf, 1}, {-1, 1}, {-kInf}},      // Inf with a negative factor
        {{kInf, -kInf}, {1, 1}, {kNaN}},    // Inf − Inf
        {{0, 1}, {kInf, 1}, {kNaN}},        // 0·Inf
        {{kInf, 0.1}, {1, 0.3}, {kInf}},    // Inf among values whose products round
        {{1e308, 1e308}, {10, -10}, {kNaN}} // overflowing products of opposite sign
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        const Result r = run("matmul", {f64({1, 2}, c.a), f64({2, 1}, c.b)}, {}, {1, 1});
        EXPECT_EQ(std::isnan(r.y[0]), std::isnan(c.y[0])) << "case " << i << ": " << r.y[0];
        if (!std::isnan(c.y[0])) {
            EXPECT_TRUE(same_bits(c.y[0], r.y[0])) << "case " << i;
        }
    }
    // A NaN in a poisons its row only, a NaN in b its column only.
    const Result r = run("matmul", {f64({2, 2}, {1, kNaN, 1, 2}), f64({2, 2}, {1, 2, 3, 4})}, {}, {2, 2});
    EXPECT_TRUE(std::isnan(r.y[0]) && std::isnan(r.y[1]));
    EXPECT_TRUE(same_bits(7, r.y[2]));
    EXPECT_TRUE(same_bits(10, r.y[3]));
}

TEST(OracleMatmul, EmptyInnerDimensionGivesZeros) {
    const Result r = run("matmul", {Tensor::empty(DType::f64, {2, 0}), Tensor::empty(DType::f64, {0, 3})}, {}, {2, 3});
    expect_all_bits(std::vector<double>(6, 0.0), r.y, "y");
    expect_all_bits(std::vector<double>(6, 0.0), r.s, "s");
}

// ---------------------------------------------------------------------------------------------
// sum, mean, max, argmax, cumsum

// Integer reference along `dim` of a row-major tensor.
struct IntReduction {
    std::vector<double> sum, abs_sum, cumsum, cum_abs;
};
IntReduction int_reduce(const std::vector<double>& x, const Shape& shape, size_t dim) {
    const oracles::AxisView view(shape, dim);
    IntReduction r;
    r.sum.assign(static_cast<size_t>(view.lanes()), 0);
    r.abs_sum = r.sum;
    r.cumsum.assign(x.size(), 0);
    r.cum_abs = r.cumsum;
    for (int64_t lane = 0; lane < view.lanes(); ++lane) {
        int64_t acc = 0, mag = 0;
        for (int64_t k = 0; k < view.n; ++k) {
            const int64_t at = view.at(lane, k);
            const int64_t v = static_cast<int64_t>(x[at]);
            acc += v;
            mag += v < 0 ? -v : v;
            r.cumsum[at] = static_cast<double>(acc);
            r.cum_abs[at] = static_cast<double>(mag);
        }
        r.sum[lane] = static_cast<double>(acc);
        r.abs_sum[lane] = static_cast<double>(mag);
    }
    return r;
}

TEST(OracleReduction, SumMeanCumsumOfIntegersAreExactAlongEveryDim) {
    const uint64_t seed = 9001;
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<int64_t> dims = sizes(seed, 4, 70);
    for (size_t t = 0; t < dims.size(); ++t) {
        const Shape shape = {dims[t], dims[(t + 3) % dims.size()], dims[(t + 5) % dims.size()]};
        const std::vector<double> x = ints(seed, t, oracles::product(shape), -1000, 1000);
        for (int64_t d : {0, 1, 2, -1, -2, -3}) {
            SCOPED_TRACE("shape " + shape_str(shape) + " dim " + std::to_string(d));
            const size_t dim = static_cast<size_t>(d < 0 ? d + 3 : d);
            const IntReduction ref = int_reduce(x, shape, dim);
            Shape reduced = shape;
            reduced.erase(reduced.begin() + static_cast<std::ptrdiff_t>(dim));
            const Result s = run("sum", {f64(shape, x)}, {{"dim", double(d)}}, reduced);
            expect_all_bits(ref.sum, s.y, "sum");
            expect_all_bits(ref.abs_sum, s.s, "sum scale");
            Shape kept = shape;
            kept[dim] = 1;
            const Result m = run("mean", {f64(shape, x)}, {{"dim", double(d)}}, kept);
            std::vector<double> mean(ref.sum.size()), mean_s(ref.sum.size());
            for (size_t i = 0; i < mean.size(); ++i) {
                mean[i] = ref.sum[i] / static_cast<double>(shape[dim]);
                mean_s[i] = ref.abs_sum[i] / static_cast<double>(shape[dim]);
            }
            expect_all_bits(mean, m.y, "mean");
            expect_all_bits(mean_s, m.s, "mean scale");
            const Result c = run("cumsum", {f64(shape, x)}, {{"dim", double(d)}}, shape);
            expect_all_bits(ref.cumsum, c.y, "cumsum");
            expect_all_bits(ref.cum_abs, c.s, "cumsum scale");
        }
    }
}

TEST(OracleReduction, DimAttributeIsChecked) {
    const Tensor x = f64({2, 3}, {1, 2, 3, 4, 5, 6});
    EXPECT_THROW(run("sum", {x}, {{"dim", 2}}, {2}), OracleError);
    EXPECT_THROW(run("sum", {x}, {{"dim", -3}}, {2}), OracleError);
    EXPECT_THROW(run("sum", {x}, {{"dim", 0.5}}, {2}), OracleError);
    EXPECT_THROW(run("sum", {x}, {{"dim", kNaN}}, {2}), OracleError);
    EXPECT_THROW(run("sum", {f64({}, {1})}, {}, {}), OracleError);
}

TEST(OracleReduction, SignedZerosAndSpecialValues) {
    Result r = run("sum", {f64({2, 2}, {-0.0, -0.0, kInf, -kInf})}, {}, {2});
    EXPECT_TRUE(same_bits(0.0, r.y[0])) << "PyTorch's sum of -0 terms is +0";
    EXPECT_TRUE(std::isnan(r.y[1]));
    r = run("sum", {f64({3}, {1, kNaN, kInf})}, {}, {});
    EXPECT_TRUE(std::isnan(r.y[0]));
    r = run("sum", {f64({2}, {kMinSub, kMinSub})}, {}, {});
    EXPECT_TRUE(same_bits(2 * kMinSub, r.y[0])) << "subnormal terms add exactly";
    r = run("sum", {Tensor::empty(DType::f64, {2, 0})}, {}, {2});
    expect_all_bits({0.0, 0.0}, r.y, "empty sum");
    r = run("mean", {Tensor::empty(DType::f64, {1, 0})}, {}, {1});
    EXPECT_TRUE(std::isnan(r.y[0])) << "the mean of nothing is 0/0, as PyTorch's";
    r = run("cumsum", {f64({4}, {1, kInf, -kInf, 1})}, {}, {4});
    EXPECT_TRUE(same_bits(1, r.y[0]));
    EXPECT_TRUE(same_bits(kInf, r.y[1]));
    EXPECT_TRUE(std::isnan(r.y[2]) && std::isnan(r.y[3]));
    r = run("cumsum", {f64({2}, {-0.0, -0.0})}, {}, {2});
    expect_all_bits({0.0, 0.0}, r.y, "cumsum of -0");
    r = run("cumsum", {f64({3}, {1e16, 1, -1e16})}, {}, {3});
    // 1e16 + 1 lies halfway between two doubles and rounds to even (1e16); the last prefix is 1.
    expect_all_bits({1e16, 1e16, 1.0}, r.y, "compensated prefixes");
}

TEST(OracleReduction, MaxAndArgmaxFollowPyTorch) {
    struct Case {
        std::vector<double> x;
        double max;
        int64_t index;
    };
    const std::vector<Case> cases = {
        {{1, 3, 3, 2}, 3, 1},               // first of equal maxima
        {{1, kInf, kNaN, 2, kNaN}, kNaN, 2},// first NaN wins
        {{kNaN, kNaN, 1, 1, 1}, kNaN, 0},
        {{-0.0, 0.0, -1, -1, -1}, -0.0, 0}, // -0 and +0 are equal: the first is kept
        {{0.0, -0.0, -1, -1, -1}, 0.0, 0},
        {{-kInf, -kInf, -kInf, -kInf, -kInf}, -kInf, 0},
        {{-5, -kInf, kInf, kInf, 7}, kInf, 2},
        {{kMinSub, 0, -kMinSub, 0, 0}, kMinSub, 0},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        const Shape shape = {1, static_cast<int64_t>(c.x.size())};
        const Result m = run("max", {f64(shape, c.x)}, {}, {1});
        const Result a = run("argmax", {f64(shape, c.x)}, {}, {1, 1});
        if (std::isnan(c.max)) {
            EXPECT_TRUE(std::isnan(m.y[0])) << "case " << i;
        } else {
            EXPECT_TRUE(same_bits(c.max, m.y[0])) << "case " << i;
        }
        EXPECT_TRUE(same_bits(static_cast<double>(c.index), a.y[0])) << "case " << i;
        EXPECT_TRUE(same_bits(0.0, a.s[0])) << "case " << i;
        if (!std::isnan(c.max)) {
            EXPECT_TRUE(same_bits(std::fabs(c.max), m.s[0])) << "case " << i;
        }
    }
    // Along dim 0, and an integer index output.
    const OracleFn fn = find_oracle("argmax");
    std::vector<Tensor> in = {f64({3, 2}, {1, 9, 5, 9, 5, kNaN})};
    std::vector<Tensor> out = {Tensor::empty(DType::i64, {2})}, sc = {Tensor::empty(DType::f64, {2})};
    const Attrs dim0 = {{"dim", 0}};
    fn(OracleArgs{in, dim0, out, sc});
    EXPECT_EQ(out[0].get(0), 1.0);
    EXPECT_EQ(out[0].get(1), 2.0);
    EXPECT_THROW(run("max", {Tensor::empty(DType::f64, {2, 0})}, {}, {2}), OracleError);
    EXPECT_THROW(run("argmax", {Tensor::empty(DType::f64, {2, 0})}, {}, {2}), OracleError);
}

TEST(OracleReduction, ArgmaxOfRandomIntegersMatchesALinearScan) {
    const uint64_t seed = 31337;
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (int64_t n : sizes(seed, 4, 300)) {
        const std::vector<double> x = ints(seed, static_cast<uint64_t>(n), 4 * n, -3, 3);   // many ties
        const Result a = run("argmax", {f64({4, n}, x)}, {}, {4});
        const Result m = run("max", {f64({4, n}, x)}, {}, {4});
        for (int64_t r = 0; r < 4; ++r) {
            int64_t best = 0;
            for (int64_t k = 1; k < n; ++k)
                if (x[r * n + k] > x[r * n + best]) best = k;
            EXPECT_TRUE(same_bits(static_cast<double>(best), a.y[r])) << "n " << n << " row " << r;
            EXPECT_TRUE(same_bits(x[r * n + best], m.y[r])) << "n " << n << " row " << r;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// softmax, log_softmax

TEST(OracleSoftmax, EqualLogitsGiveExactlyOneOverN) {
    for (int64_t n : {1, 2, 4, 16, 64, 1024, 4096}) {
        for (double logit : {0.0, -3.5, 1e4, -1e300}) {
            SCOPED_TRACE("N=" + std::to_string(n) + " logit " + std::to_string(logit));
            const Tensor x = f64({2, n}, std::vector<double>(static_cast<size_t>(2 * n), logit));
            const Result p = run("softmax", {x}, {}, {2, n});
            const Result lp = run("log_softmax", {x}, {}, {2, n});
            const double inv = 1.0 / static_cast<double>(n);
            const double log_n = std::log(static_cast<double>(n));
            for (size_t i = 0; i < p.y.size(); ++i) {
                ASSERT_TRUE(same_bits(inv, p.y[i])) << i;
                // d = 0 and T = 0, so s = p.
                ASSERT_TRUE(same_bits(inv, p.s[i])) << i;
                ASSERT_TRUE(same_bits(n == 1 ? 0.0 : -log_n, lp.y[i])) << i;
                ASSERT_TRUE(same_bits(1 + log_n + log_n, lp.s[i])) << i;
            }
        }
    }
}

TEST(OracleSoftmax, MaxSubtractionMakesAnOffsetIrrelevant) {
    const uint64_t seed = 5;
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<double> x = ints(seed, 0, 3 * 33, -20, 20);
    std::vector<double> shifted = x;
    for (double& v : shifted) v += 1e6;   // exact: integers below 2^53
    const Result a = run("softmax", {f64({3, 33}, x)}, {}, {3, 33});
    const Result b = run("softmax", {f64({3, 33}, shifted)}, {}, {3, 33});
    expect_all_bits(a.y, b.y, "softmax y");
    expect_all_bits(a.s, b.s, "softmax s");
    for (int64_t r = 0; r < 3; ++r) {
        double total = 0;
        for (int64_t j = 0; j < 33; ++j) {
            EXPECT_GT(a.y[r * 33 + j], 0.0);
            total += a.y[r * 33 + j];
        }
        EXPECT_NEAR(total, 1.0, 64 * 0x1p-53) << "row " << r;
    }
}

TEST(OracleSoftmax, TwoLogitsMatchTheClosedForm) {
    // softmax([0, t]) = [1/(1+e^t), 1/(1+e^-t)], scales from the definition in softmax.cpp.
    for (double t : {-30.0, -1.0, 0.25, 2.0, 40.0}) {
        const Result r = run("softmax", {f64({2}, {0, t})}, {}, {2});
        const double p0 = 1 / (1 + std::exp(t)), p1 = 1 / (1 + std::exp(-t));
        EXPECT_NEAR(r.y[0], p0, 4 * 0x1p-53 * p0) << t;
        EXPECT_NEAR(r.y[1], p1, 4 * 0x1p-53 * p1) << t;
        const double m = std::max(0.0, t), d0 = 0 - m, d1 = t - m;
        const double spread = p0 * std::fabs(d0) + p1 * std::fabs(d1);
        EXPECT_NEAR(r.s[0], p0 * (1 + std::fabs(d0) + spread), 1e-14 * r.s[0]) << t;
        EXPECT_NEAR(r.s[1], p1 * (1 + std::fabs(d1) + spread), 1e-14 * r.s[1]) << t;
        EXPECT_GT(r.s[0], r.y[0] * std::fabs(d0)) << "the scale grows with the spread of the logits";
    }
}

TEST(OracleSoftmax, SpecialRowsFollowPyTorch) {
    // Rows: all −Inf; −Inf with a finite value; +Inf with a finite value; NaN; two +Inf; finite.
    const std::vector<double> x = {-kInf, -kInf, -kInf, 1, kInf, 1, kNaN, 1, kInf, kInf, 0, 0};
    const Result p = run("softmax", {f64({6, 2}, x)}, {}, {6, 2});
    const Result lp = run("log_softmax", {f64({6, 2}, x)}, {}, {6, 2});
    for (int row : {0, 2, 3, 4})
        for (int j : {0, 1}) {
            EXPECT_TRUE(std::isnan(p.y[row * 2 + j])) << "softmax row " << row;
            EXPECT_TRUE(std::isnan(lp.y[row * 2 + j])) << "log_softmax row " << row;
        }
    EXPECT_TRUE(same_bits(0.0, p.y[2]));
    EXPECT_TRUE(same_bits(1.0, p.y[3]));
    EXPECT_TRUE(same_bits(0.0, p.s[2])) << "a term without mass has no error scale";
    EXPECT_TRUE(same_bits(1.0, p.s[3]));
    EXPECT_TRUE(same_bits(-kInf, lp.y[2]));
    EXPECT_TRUE(same_bits(0.0, lp.y[3]));
    EXPECT_TRUE(same_bits(1.0, lp.s[3]));
    expect_all_bits({0.5, 0.5}, {p.y[10], p.y[11]}, "finite row");
}

TEST(OracleSoftmax, AlongDimZeroEqualsTheTransposedRows) {
    const uint64_t seed = 8;
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<double> x = normals(seed, 0, 5 * 7);   // [5, 7]
    const std::vector<double> xt = transpose(x, 5, 7);        // [7, 5]
    for (const char* op : {"softmax", "log_softmax"}) {
        const Result along0 = run(op, {f64({5, 7}, x)}, {{"dim", 0}}, {5, 7});
        const Result rows = run(op, {f64({7, 5}, xt)}, {}, {7, 5});
        expect_all_bits(transpose(rows.y, 7, 5), along0.y, op);
        expect_all_bits(transpose(rows.s, 7, 5), along0.s, op);
    }
}

TEST(OracleSoftmax, SubnormalProbabilitiesSurvive) {
    // e^-740 is a float64 subnormal; the reference keeps it rather than flushing it.
    const Result p = run("softmax", {f64({2}, {0, -740})}, {}, {2});
    EXPECT_GT(p.y[1], 0.0);
    EXPECT_LT(p.y[1], std::numeric_limits<double>::min());
}

// ---------------------------------------------------------------------------------------------
// layernorm, rmsnorm

TEST(OracleNorms, LayernormExactCases) {
    // Rows with mean c and variance 1 (±1 around c) or 4 (±2): r is a power of two, so every
    // step is exact, with and without a large offset.
    for (double c : {0.0, 1e4, -3.0}) {
        SCOPED_TRACE("offset " + std::to_string(c));
        const std::vector<double> x = {c - 1, c + 1, c - 1, c + 1, c - 2, c + 2, c + 2, c - 2};
        const std::vector<double> w = {1, 2, -3, 0.5}, b = {0.5, -1, 0, 4};
        const Result r = run("layernorm", {f64({2, 4}, x), f64({4}, w), f64({4}, b)}, {{"eps", 0}}, {2, 4});
        const std::vector<double> z = {-1, 1, -1, 1, -1, 1, 1, -1};
        const double rstd[2] = {1.0, 0.5};
        for (size_t i = 0; i < 8; ++i) {
            const size_t j = i % 4, row = i / 4;
            const double y = z[i] * w[j] + b[j];
            EXPECT_TRUE(same_bits(y, r.y[i])) << i;
            double mean_abs = 0;
            for (size_t k = 0; k < 4; ++k) mean_abs += std::fabs(x[row * 4 + k]);
            mean_abs /= 4;
            const double s = std::fabs(w[j]) * (rstd[row] * mean_abs + std::fabs(z[i])) + std::fabs(b[j]) + std::fabs(y);
            EXPECT_TRUE(same_bits(s, r.s[i])) << i;
        }
        // Without weight and bias.
        const Result plain = run("layernorm", {f64({2, 4}, x)}, {{"eps", 0}}, {2, 4});
        expect_all_bits(z, plain.y, "no affine");
    }
}

TEST(OracleNorms, LayernormEpsAndSpecialRows) {
    // Constant row: variance 0, so y = 0·r·w + b with r = 1/√eps.
    Result r = run("layernorm", {f64({1, 4}, {3, 3, 3, 3}), f64({4}, {1, 1, 1, 1}), f64({4}, {0, -2, 0, 0})},
                   {{"eps", 0.25}}, {1, 4});
    expect_all_bits({0, -2, 0, 0}, r.y, "constant row");
    // Default eps is PyTorch's 1e-5: x = [-a, a] gives z = ∓a/√(a² + 1e-5).
    r = run("layernorm", {f64({2}, {-0.5, 0.5})}, {}, {2});
    EXPECT_NEAR(r.y[1], 0.5 / std::sqrt(0.25 + 1e-5), 1e-15);
    EXPECT_LT(r.y[1], 1.0);
    // A NaN or Inf makes its whole row NaN; other rows are untouched.
    r = run("layernorm", {f64({3, 3}, {1, kNaN, 2, 1, kInf, 2, -1, 0, 1})}, {{"eps", 0}}, {3, 3});
    for (int i = 0; i < 6; ++i) EXPECT_TRUE(std::isnan(r.y[i])) << i;
    EXPECT_NEAR(r.y[6], -std::sqrt(1.5), 1e-15);
    EXPECT_TRUE(same_bits(0.0, r.y[7]));
    EXPECT_THROW(run("layernorm", {f64({2, 4}, std::vector<double>(8, 1)), f64({3}, {1, 1, 1})}, {}, {2, 4}),
                 OracleError);
    // The contracts pass dim = -1; naming the last dimension either way is accepted, any other refused.
    const Tensor x = f64({2, 2}, {-1, 1, 1, -1});
    expect_all_bits({-1, 1, 1, -1}, run("layernorm", {x}, {{"eps", 0}, {"dim", -1}}, {2, 2}).y, "dim -1");
    expect_all_bits({-1, 1, 1, -1}, run("layernorm", {x}, {{"eps", 0}, {"dim", 1}}, {2, 2}).y, "dim 1");
    EXPECT_THROW(run("layernorm", {x}, {{"eps", 0}, {"dim", 0}}, {2, 2}), OracleError);
    EXPECT_THROW(run("rmsnorm", {x}, {{"eps", 0}, {"dim", -2}}, {2, 2}), OracleError);
}

TEST(OracleNorms, RmsnormExactCasesAndSpecials) {
    Result r = run("rmsnorm", {f64({2, 4}, {1, -1, 1, -1, 2, 2, -2, 2}), f64({4}, {1, 2, 3, -4})}, {{"eps", 0}},
                   {2, 4});
    expect_all_bits({1, -2, 3, 4, 1, 2, -3, -4}, r.y, "rmsnorm");
    expect_all_bits({1, 2, 3, 4, 1, 2, 3, 4}, r.s, "rmsnorm scale = |y|");
    // PyTorch: an Inf makes r = 0, so finite entries give 0 and the Inf entry NaN; -0 keeps its sign.
    r = run("rmsnorm", {f64({2, 3}, {1, kInf, 2, -0.0, 0, 0})}, {{"eps", 1e-6}}, {2, 3});
    EXPECT_TRUE(same_bits(0.0, r.y[0]));
    EXPECT_TRUE(std::isnan(r.y[1]));
    EXPECT_TRUE(same_bits(0.0, r.y[2]));
    EXPECT_TRUE(same_bits(-0.0, r.y[3]));
    EXPECT_THROW(run("rmsnorm", {f64({1, 2}, {1, 2})}, {}, {1, 2}), OracleError) << "eps is required";
}

TEST(OracleNorms, NormsOfRandomRowsAreNormalised) {
    const uint64_t seed = 123;
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (int64_t n : sizes(seed, 3, 500)) {
        if (n < 2) continue;
        std::vector<double> x = normals(seed, static_cast<uint64_t>(n), n);
        for (double& v : x) v = 1e4 + v;   // offset data: PRC-02's probe for norms
        const Result r = run("layernorm", {f64({1, n}, x)}, {{"eps", 0}}, {1, n});
        double mean = 0, sq = 0;
        for (double v : r.y) mean += v;
        mean /= static_cast<double>(n);
        for (double v : r.y) sq += (v - mean) * (v - mean);
        EXPECT_NEAR(mean, 0.0, 1e-9) << "n " << n;
        EXPECT_NEAR(sq / static_cast<double>(n), 1.0, 1e-9) << "n " << n;
        for (size_t j = 0; j < r.y.size(); ++j)
            ASSERT_GT(r.s[j], 1e4 * 0.5) << "the mean's error scales with the offset, n " << n;
    }
}

// ---------------------------------------------------------------------------------------------
// Elementwise maps

struct Elementwise {
    double x, y;
};

void expect_map(const char* op, const std::vector<Elementwise>& cases) {
    std::vector<double> x;
    for (const Elementwise& c : cases) x.push_back(c.x);
    const int64_t n = static_cast<int64_t>(x.size());
    const Result r = run(op, {f64({n}, x)}, {}, {n});
    for (size_t i = 0; i < cases.size(); ++i) {
        if (std::isnan(cases[i].y)) {
            EXPECT_TRUE(std::isnan(r.y[i])) << op << "(" << cases[i].x << ") = " << r.y[i];
        } else {
            EXPECT_TRUE(same_bits(cases[i].y, r.y[i])) << op << "(" << cases[i].x << ")";
        }
    }
}

TEST(OracleElementwise, ReluFollowsPyTorch) {
    expect_map("relu", {{-0.0, -0.0}, {0.0, 0.0}, {-1.0, 0.0}, {2.5, 2.5}, {kNaN, kNaN}, {-kInf, 0.0},
                        {kInf, kInf}, {kMinSub, kMinSub}, {-kMinSub, 0.0}, {-1e308, 0.0}});
}

TEST(OracleElementwise, IeeeSpecialValues) {
    expect_map("exp", {{0.0, 1.0}, {-0.0, 1.0}, {-kInf, 0.0}, {kInf, kInf}, {kNaN, kNaN}, {1000, kInf},
                       {-740, std::exp(-740.0)}});
    expect_map("log", {{1.0, 0.0}, {0.0, -kInf}, {-0.0, -kInf}, {-1.0, kNaN}, {kInf, kInf}, {kNaN, kNaN},
                       {kMinSub, std::log(kMinSub)}});
    expect_map("sqrt", {{4.0, 2.0}, {-0.0, -0.0}, {0.0, 0.0}, {-1.0, kNaN}, {kInf, kInf}, {kNaN, kNaN},
                        {4 * kMinSub, 2 * std::sqrt(kMinSub)}});
    expect_map("reciprocal", {{2.0, 0.5}, {-0.0, -kInf}, {0.0, kInf}, {kInf, 0.0}, {-kInf, -0.0}, {kNaN, kNaN},
                              {std::ldexp(1.0, 1023), std::ldexp(1.0, -1023)}});
    EXPECT_LT(std::ldexp(1.0, -1023), std::numeric_limits<double>::min()) << "the reciprocal above is subnormal";
}

TEST(OracleElementwise, GeluIsExactErfGelu) {
    expect_map("gelu", {{0.0, 0.0}, {-0.0, -0.0}, {kInf, kInf}, {-kInf, kNaN}, {kNaN, kNaN}, {40.0, 40.0}});
    // Against the defining formula where it does not cancel.
    for (double x : {0.5, 1.0, 3.0, -0.25, -1.0}) {
        const Result r = run("gelu", {f64({1}, {x})}, {}, {1});
        const double ref = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
        EXPECT_NEAR(r.y[0], ref, 4 * 0x1p-53 * std::fabs(ref) + 1e-300) << x;
        EXPECT_TRUE(same_bits(0.5 * std::fabs(x) * (1 + std::fabs(std::erf(x * (std::sqrt(2.0) / 2)))), r.s[0])) << x;
    }
    // The negative tail is a tiny negative number, not the −0 of 0.5·x·(1 + erf(x/√2)).
    const Result tail = run("gelu", {f64({2}, {-10.0, -13.5})}, {}, {2});
    EXPECT_LT(tail.y[0], 0.0);
    EXPECT_NEAR(tail.y[0], -10.0 * 0.5 * std::erfc(10.0 / std::sqrt(2.0)), 1e-36);
    EXPECT_LT(tail.y[1], 0.0);
    EXPECT_GT(tail.s[0], 4.9) << "the scale allows the formula's cancellation: 0.5·|x|·(1 + |erf|)";
    // A subnormal input maps to x/2 (Φ(0) = 1/2), exactly.
    const Result sub = run("gelu", {f64({2}, {4 * kMinSub, -4 * kMinSub})}, {}, {2});
    expect_all_bits({2 * kMinSub, -2 * kMinSub}, sub.y, "subnormal gelu");
}

TEST(OracleElementwise, SiluWithoutIntermediateOverflow) {
    expect_map("silu", {{0.0, 0.0}, {-0.0, -0.0}, {kInf, kInf}, {-kInf, kNaN}, {kNaN, kNaN}, {800.0, 800.0},
                        {-800.0, -0.0}});
    const Result r = run("silu", {f64({4}, {1.0, -1.0, -89.0, -710.0})}, {}, {4});
    EXPECT_NEAR(r.y[0], 1 / (1 + std::exp(-1.0)), 0x1p-52);
    EXPECT_NEAR(r.y[1], -1 / (1 + std::exp(1.0)), 0x1p-53);
    EXPECT_NEAR(r.y[2], -89.0 * std::exp(-89.0), 1e-50);
    EXPECT_LT(r.y[3], 0.0) << "silu(-710) ≈ -3.2e-306 is representable; x/(1+e^-x) would overflow to -0";
    expect_all_bits({std::fabs(r.y[0]), std::fabs(r.y[1]), std::fabs(r.y[2]), std::fabs(r.y[3])}, r.s, "silu scale");
}

TEST(OracleElementwise, DivAndScales) {
    const std::vector<double> a = {1, -1, 0, -0.0, kInf, 1, kNaN, 3, kMinSub * 4, 0};
    const std::vector<double> b = {3, 0, 0, 5, kInf, -kInf, 1, -0.0, 2, -2};
    const Result r = run("div", {f64({10}, a), f64({10}, b)}, {}, {10});
    for (size_t i = 0; i < a.size(); ++i) {
        const double y = a[i] / b[i];
        if (std::isnan(y)) {
            EXPECT_TRUE(std::isnan(r.y[i])) << i;
            EXPECT_TRUE(std::isnan(r.s[i])) << i;
        } else {
            EXPECT_TRUE(same_bits(y, r.y[i])) << i;
            EXPECT_TRUE(same_bits(std::fabs(y), r.s[i])) << i;
        }
    }
    EXPECT_TRUE(same_bits(2 * kMinSub, r.y[8])) << "a subnormal quotient is kept";
    EXPECT_THROW(run("div", {f64({2}, {1, 2}), f64({3}, {1, 2, 3})}, {}, {2}), OracleError);
}

TEST(OracleElementwise, ScaleIsTheMagnitudeOfTheResult) {
    const uint64_t seed = 606;
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<double> x = normals(seed, 0, 257);
    std::vector<double> pos(x.size());
    for (size_t i = 0; i < x.size(); ++i) pos[i] = std::fabs(x[i]) + 0.125;
    for (const char* op : {"relu", "silu", "exp", "reciprocal"}) {
        const Result r = run(op, {f64({257}, x)}, {}, {257});
        for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE(same_bits(std::fabs(r.y[i]), r.s[i])) << op << " " << i;
    }
    for (const char* op : {"log", "sqrt"}) {
        const Result r = run(op, {f64({257}, pos)}, {}, {257});
        for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE(same_bits(std::fabs(r.y[i]), r.s[i])) << op << " " << i;
    }
}

// ---------------------------------------------------------------------------------------------
// gather

Result gather(const std::vector<double>& idx, DType idx_type, double policy) {
    const Tensor x = f64({2, 4}, {10, 11, -0.0, 13, 20, kNaN, 22, 23});
    return run("gather", {x, make(idx_type, {2, 3}, idx)}, {{"policy", policy}}, {2, 3});
}

TEST(OracleGather, InRangeIndicesCopyExactly) {
    for (DType t : {DType::i64, DType::i32, DType::i16, DType::u8}) {
        SCOPED_TRACE(name(t));
        const Result r = gather({3, 0, 2, 1, 1, 3}, t, 0);
        expect_all_bits({13, 10, -0.0, kNaN, kNaN, 23}, r.y, "gather");
        expect_all_bits({13, 10, 0.0, kNaN, kNaN, 23}, r.s, "gather scale");
    }
}

TEST(OracleGather, RaisePolicyThrowsNamingTheIndex) {
    for (double bad : {4.0, -1.0, 1e12}) {
        try {
            gather({0, 1, 2, 3, bad, 0}, DType::i64, 0);
            FAIL() << "index " << bad << " must raise";
        } catch (const OracleError& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("idx[1, 1]"), std::string::npos) << msg;
            EXPECT_NE(msg.find(std::to_string(static_cast<int64_t>(bad))), std::string::npos) << msg;
            EXPECT_NE(msg.find("raise"), std::string::npos) << msg;
        }
    }
    EXPECT_THROW(gather({0, 1, 2, 3, 9, 0}, DType::i64, 3), OracleError) << "unknown policy";
    // Raise is the default policy.
    EXPECT_THROW(run("gather", {f64({1, 2}, {1, 2}), make(DType::i64, {1, 1}, {2})}, {}, {1, 1}), OracleError);
}

TEST(OracleGather, ClampAndZeroPolicies) {
    const std::vector<double> idx = {-1, 4, 100, -100, 0, 3};
    const Result c = gather(idx, DType::i64, 1);
    expect_all_bits({10, 13, 13, 20, 20, 23}, c.y, "clamp");
    const Result z = gather(idx, DType::i64, 2);
    expect_all_bits({0, 0, 0, 0, 20, 23}, z.y, "zero");
    expect_all_bits({0, 0, 0, 0, 20, 23}, z.s, "zero scale");
    EXPECT_THROW(run("gather", {Tensor::empty(DType::f64, {1, 0}), make(DType::i64, {1, 1}, {0})}, {{"policy", 1}}, {1, 1}),
                 OracleError);
    EXPECT_THROW(run("gather", {f64({2, 2}, {1, 2, 3, 4}), make(DType::i64, {3, 1}, {0, 0, 0})}, {}, {3, 1}),
                 OracleError) << "leading dimensions differ";
    EXPECT_THROW(run("gather", {f64({2, 2}, {1, 2, 3, 4}), make(DType::i64, {2, 1}, {0, 0})}, {{"dim", 0}}, {2, 1}),
                 OracleError) << "dim 0 is not the gathered axis";
    expect_all_bits({2, 3}, run("gather", {f64({2, 2}, {1, 2, 3, 4}), make(DType::i64, {2, 1}, {1, 0})},
                                {{"dim", -1}}, {2, 1}).y, "dim -1");
}

}  // namespace
}  // namespace kcv
