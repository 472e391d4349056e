// Positive control: elementwise maps, the operation chosen by the contract id.
//   relu (x < 0 ? +0 : x, so NaN and -0 pass through), silu, exp, log, sqrt, reciprocal: one
//   input; div: two inputs of one shape. Any float dtype in and out (f32, bf16, f16, f64).
// Each result is evaluated in float64 from the exact input and rounded once to the output
// dtype (round to nearest even), so it is within about half an ulp: exp, log and the
// silu formula in float64 err by far less than a float32 ulp, and for +, /, sqrt the double
// rounding through float64 is innocuous. Subnormal inputs and results are kept: the caller's
// flush-to-zero state is replaced by IEEE defaults for the call.
// Layout: arbitrary strides and byte offsets on every tensor.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/elementwise.cpp -o kcv_controls_elementwise.so
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

using kcvk::Error;
using kcvk::TensorRef;

double relu(double x) { return x < 0 ? 0.0 : x; }

// x·σ(x) without an intermediate overflow: e^x for x < 0 and e^−x otherwise stay ≤ 1.
double silu(double x) {
    if (x < 0) {
        const double e = std::exp(x);
        return x * e / (1 + e);
    }
    return x / (1 + std::exp(-x));
}

double reciprocal(double x) { return 1.0 / x; }

using Unary = double (*)(double);

Unary unary_for(const std::string& op) {
    if (op == "relu") return relu;
    if (op == "silu") return silu;
    if (op == "exp") return [](double x) { return std::exp(x); };
    if (op == "log") return [](double x) { return std::log(x); };
    if (op == "sqrt") return [](double x) { return std::sqrt(x); };
    if (op == "reciprocal") return reciprocal;
    return nullptr;
}

void map_unary(const kcv_call& call, Unary f) {
    kcvk::expect_arity(call, 1, 1);
    const TensorRef x(call.inputs[0], "input x");
    const TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    if (!kcvk::is_float(x.dtype()) || !kcvk::is_float(y.dtype())) throw Error("elementwise maps take float tensors");
    for (int64_t i = 0; i < x.numel(); ++i) y.store(y.offset_of(i), f(x.load(x.offset_of(i))));
}

void divide(const kcv_call& call) {
    kcvk::expect_arity(call, 2, 1);
    const TensorRef a(call.inputs[0], "input x");
    const TensorRef b(call.inputs[1], "input y");
    const TensorRef z(call.outputs[0], "output z");
    a.expect_cpu();
    b.expect_cpu();
    z.expect_cpu();
    kcvk::expect_same_shape(a, b);
    kcvk::expect_same_shape(a, z);
    if (!kcvk::is_float(a.dtype()) || !kcvk::is_float(b.dtype()) || !kcvk::is_float(z.dtype()))
        throw Error("div takes float tensors");
    for (int64_t i = 0; i < a.numel(); ++i) z.store(z.offset_of(i), a.load(a.offset_of(i)) / b.load(b.offset_of(i)));
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "elementwise"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "elementwise", "device": "cpu",
  "contracts": ["relu-f32", "silu-f32", "exp-f32", "log-f32", "sqrt-f32", "reciprocal-f32", "div-f32", "relu-bf16"],
  "description": "elementwise maps evaluated in float64 and rounded once to the output dtype"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        const std::string op = kcvk::operation(c);
        if (op == "div") return divide(c);
        const Unary f = unary_for(op);
        if (f == nullptr) throw Error(std::string("elementwise: no operation for contract ") + (c.contract_id ? c.contract_id : "(null)"));
        map_unary(c, f);
    });
}
