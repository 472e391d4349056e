// Positive control: gather along the last dimension, y[r, j] = x[r, idx[r, j]], with the policy
// for an index outside [0, N) (negative indices are out of range, not counted from the end)
// taken from the attribute "policy" or, without it, from the contract id:
//   0 raise (gather-f32): the call is refused with status 1 and a message naming the first such
//     index, and y is not written at all (every index is checked before anything is written);
//   1 clamp (gather-clamp-f32): the nearest valid index;
//   2 zero (gather-zero-f32): the element is +0.
// x any float dtype, idx any integer dtype, y x's values (an exact copy: bits, NaN payloads).
// Layout: arbitrary strides and byte offsets on every tensor; x and idx share leading dimensions.
// Build: g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -ffp-contract=off
//        -Iinclude -Ikernels/common kernels/controls/gather.cpp -o kcv_controls_gather.so
#include <cstring>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

enum Policy : int64_t { raise = 0, clamp = 1, zero = 2 };

Policy policy_of(const kcv_call& call) {
    if (kcvk::find_attribute(call, "policy")) return static_cast<Policy>(kcvk::int_attribute(call, "policy", 0, 0, 2));
    const std::string op = kcvk::operation(call);
    if (op == "gather") return raise;
    if (op == "gather-clamp") return clamp;
    if (op == "gather-zero") return zero;
    throw kcvk::Error(std::string("gather serves gather contracts, not ") + (call.contract_id ? call.contract_id : "(null)"));
}

void run(const kcv_call& call) {
    const Policy policy = policy_of(call);
    kcvk::expect_arity(call, 2, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef idx(call.inputs[1], "input idx");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    idx.expect_cpu();
    y.expect_cpu();
    if (!kcvk::is_integer(idx.dtype())) throw kcvk::Error("input idx must have an integer dtype");
    if (x.dtype() != y.dtype()) throw kcvk::Error("output y must have x's dtype");
    bool leading_match = x.ndim() >= 1 && x.ndim() == idx.ndim();
    for (int d = 0; leading_match && d + 1 < x.ndim(); ++d) leading_match = x.size(d) == idx.size(d);
    if (!leading_match)
        throw kcvk::Error("x " + x.shape_str() + " and idx " + idx.shape_str() + " must share rank and leading dimensions");
    kcvk::expect_same_shape(idx, y);
    if (kcvk::find_attribute(call, "dim") && x.axis(kcvk::reduced_axis(call, x)) != x.ndim() - 1)
        throw kcvk::Error("gather works along the last dimension only");

    const int64_t n = x.size(-1);
    const kcvk::AxisLanes xr(x, -1), ir(idx, -1), yr(y, -1);
    if (policy == raise) {
        for (int64_t row = 0; row < ir.count(); ++row) {
            for (int64_t j = 0; j < ir.length(); ++j) {
                const int64_t k = idx.load_index(ir.base(row) + j * ir.step());
                if (k < 0 || k >= n)
                    throw kcvk::Error("index " + std::to_string(k) + " at idx[" + std::to_string(row) + ", " +
                                      std::to_string(j) + "] is outside [0, " + std::to_string(n) + ")");
            }
        }
    }
    const size_t bytes = static_cast<size_t>(kcvk::dtype_bytes(x.dtype()));
    for (int64_t row = 0; row < ir.count(); ++row) {
        for (int64_t j = 0; j < ir.length(); ++j) {
            int64_t k = idx.load_index(ir.base(row) + j * ir.step());
            char* dst = y.base() + (yr.base(row) + j * yr.step()) * static_cast<int64_t>(bytes);
            if (k < 0 || k >= n) {
                if (policy == zero) {
                    std::memset(dst, 0, bytes);
                    continue;
                }
                if (n == 0) throw kcvk::Error("cannot clamp an index into an empty dimension");
                k = k < 0 ? 0 : n - 1;
            }
            std::memcpy(dst, x.base() + (xr.base(row) + k * xr.step()) * static_cast<int64_t>(bytes), bytes);
        }
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "gather"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "control", "name": "gather", "device": "cpu", "contracts": ["gather-f32", "gather-clamp-f32", "gather-zero-f32"],
  "description": "gather along the last dimension with the raise, clamp and zero index policies"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
