// Operand checks, exact element access and attribute parsing shared by every oracle.
//
// Why an oracle refuses anything but float64: the reference must be computed from the exact
// values of the inputs the candidate received, in a precision far above any candidate's. A
// float32 (or narrower) operand would either be an input that was not widened, so that the
// reference silently inherits whatever rounding produced it, or an output or scale that
// rounds y* and s_i before a gate compares against them. Both are verifier bugs, so they are
// reported loudly instead of being converted behind the caller's back.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "registry.hpp"

namespace kcv::oracles {
namespace {

const char* kind_text(Operand k) {
    switch (k) {
        case Operand::real: return "float64";
        case Operand::integer: return "an integer dtype";
        case Operand::real_or_integer: return "float64 or an integer dtype";
    }
    return "?";
}

bool allowed(Operand k, DType t) {
    const bool is_float = info(t).is_float;
    const bool is_integer = !is_float && t != DType::boolean;
    switch (k) {
        case Operand::real: return t == DType::f64;
        case Operand::integer: return is_integer;
        case Operand::real_or_integer: return t == DType::f64 || is_integer;
    }
    return false;
}

void check_dtype(const Signature& sig, const char* role, size_t i, const char* operand, Operand k,
                 const Tensor& t) {
    if (allowed(k, t.dtype)) return;
    fail(sig, std::string(role) + " " + std::to_string(i) + " (" + operand + ") has dtype " + name(t.dtype) +
                  "; it must be " + kind_text(k) +
                  (info(t.dtype).is_float ? " (reference arithmetic is float64 only; widen inputs "
                                            "exactly with Tensor::to_f64)"
                                          : ""));
}

const double* contiguous_f64(const Tensor& t) {
    if (t.dtype != DType::f64 || !t.contiguous() || t.numel() == 0) return nullptr;
    return reinterpret_cast<const double*>(t.address_range().first);
}

}  // namespace

void fail(const Signature& sig, const std::string& message) {
    throw OracleError(std::string("oracle '") + sig.oracle + "': " + message);
}

void check_operands(const OracleArgs& a, const Signature& sig) {
    const size_t max_in = sig.inputs.size();
    const size_t min_in = std::min(sig.min_inputs, max_in);
    if (a.inputs.size() < min_in || a.inputs.size() > max_in)
        fail(sig, "takes " + (min_in == max_in ? std::to_string(max_in)
                                               : std::to_string(min_in) + " to " + std::to_string(max_in)) +
                      " inputs, got " + std::to_string(a.inputs.size()));
    if (a.outputs.size() != sig.outputs.size())
        fail(sig, "produces " + std::to_string(sig.outputs.size()) + " outputs, got " +
                      std::to_string(a.outputs.size()) + " output tensors");
    if (a.scales.size() != a.outputs.size())
        fail(sig, "needs one scale tensor per output, got " + std::to_string(a.scales.size()) + " for " +
                      std::to_string(a.outputs.size()) + " outputs");
    for (size_t i = 0; i < a.inputs.size(); ++i)
        check_dtype(sig, "input", i, sig.inputs[i].name, sig.inputs[i].kind, a.inputs[i]);
    for (size_t i = 0; i < a.outputs.size(); ++i) {
        check_dtype(sig, "output", i, sig.outputs[i].name, sig.outputs[i].kind, a.outputs[i]);
        check_dtype(sig, "scale", i, sig.outputs[i].name, Operand::real, a.scales[i]);
    }
}

void check_shape(const Signature& sig, const char* role, size_t i, const Tensor& t,
                 const std::vector<int64_t>& expected) {
    if (t.shape == expected) return;
    fail(sig, std::string(role) + " " + std::to_string(i) + " has shape " + shape_str(t.shape) + ", expected " +
                  shape_str(expected));
}

void check_output_shapes(const OracleArgs& a, const Signature& sig, const std::vector<int64_t>& expected) {
    for (size_t i = 0; i < a.outputs.size(); ++i) {
        check_shape(sig, "output", i, a.outputs[i], expected);
        check_shape(sig, "scale", i, a.scales[i], expected);
    }
}

void check_reduced_shapes(const OracleArgs& a, const Signature& sig, const std::vector<int64_t>& in_shape,
                          size_t dim) {
    std::vector<int64_t> dropped = in_shape, kept = in_shape;
    dropped.erase(dropped.begin() + static_cast<std::ptrdiff_t>(dim));
    kept[dim] = 1;
    const auto check = [&](const char* role, size_t i, const Tensor& t) {
        if (t.shape != dropped && t.shape != kept)
            fail(sig, std::string(role) + " " + std::to_string(i) + " has shape " + shape_str(t.shape) +
                          ", expected " + shape_str(dropped) + " or " + shape_str(kept) + " (reducing dim " +
                          std::to_string(dim) + " of " + shape_str(in_shape) + ")");
    };
    for (size_t i = 0; i < a.outputs.size(); ++i) {
        check("output", i, a.outputs[i]);
        check("scale", i, a.scales[i]);
    }
}

std::vector<double> read_values(const Tensor& t) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    if (const double* p = contiguous_f64(t)) {
        std::memcpy(v.data(), p, v.size() * sizeof(double));
        return v;
    }
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(static_cast<int64_t>(i));
    return v;
}

std::vector<int64_t> read_indices(const Tensor& t) {
    // Values beyond ±2^62 are out of range for any tensor, and clamping them keeps the
    // conversion from double defined.
    constexpr double kLimit = 0x1p62;
    std::vector<int64_t> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) {
        const double x = t.get(static_cast<int64_t>(i));
        v[i] = static_cast<int64_t>(std::max(-kLimit, std::min(kLimit, x)));
    }
    return v;
}

void write_values(Tensor& t, const std::vector<double>& v) {
    if (const double* p = contiguous_f64(t)) {
        std::memcpy(const_cast<double*>(p), v.data(), v.size() * sizeof(double));
        return;
    }
    for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
}

double attribute(const OracleArgs& a, const char* key, double fallback) {
    const auto it = a.attributes.find(key);
    return it == a.attributes.end() ? fallback : it->second;
}

double required_attribute(const OracleArgs& a, const Signature& sig, const char* key) {
    const auto it = a.attributes.find(key);
    if (it == a.attributes.end()) fail(sig, std::string("attribute '") + key + "' is required");
    return it->second;
}

int64_t int_attribute(const OracleArgs& a, const Signature& sig, const char* key, int64_t fallback, int64_t lo,
                      int64_t hi) {
    const auto it = a.attributes.find(key);
    if (it == a.attributes.end()) return fallback;
    const double v = it->second;
    if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)) || v != std::floor(v))
        fail(sig, std::string("attribute '") + key + "' = " + std::to_string(v) + " must be an integer in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int64_t>(v);
}

size_t reduction_dim(const OracleArgs& a, const Signature& sig, size_t rank) {
    if (rank == 0) fail(sig, "input 0 is a scalar; it needs at least one dimension to reduce over");
    const int64_t r = static_cast<int64_t>(rank);
    const int64_t d = int_attribute(a, sig, "dim", -1, -r, r - 1);
    return static_cast<size_t>(d < 0 ? d + r : d);
}

void check_last_dim(const OracleArgs& a, const Signature& sig, size_t rank) {
    if (reduction_dim(a, sig, rank) != rank - 1)
        fail(sig, "works along the last dimension only; attribute 'dim' = " +
                      std::to_string(static_cast<int64_t>(attribute(a, "dim", -1))) + " names another of " + std::to_string(rank));
}

AxisView::AxisView(const std::vector<int64_t>& shape, size_t dim) {
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i < dim) outer *= shape[i];
        else if (i == dim) n = shape[i];
        else inner *= shape[i];
    }
}

int64_t product(const std::vector<int64_t>& dims) {
    int64_t p = 1;
    for (int64_t d : dims) p *= d;
    return p;
}

}  // namespace kcv::oracles
