// Red team 14 — target CMP-02 (environment invariance); contract exp-f32.
// Defect: the kernel reads the calling thread's MXCSR and, when flush-to-zero or
// denormals-are-zero is set, assumes the caller wants fast math and switches to a cubic
// approximation of 2^f (relative error about 1e-4); otherwise it computes e^x in float64 and
// rounds once, which passes every gate. CMP-02 sets FTZ, then DAZ, for one call each, and ORD-01
// fails under those calls only: the result depends on ambient state the caller happened to leave.
// (The executor leaves MXCSR at IEEE defaults for every other gate.) On a processor without
// MXCSR the approximate path is never taken.
// Layout: any strides.
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

// e^x = 2^i·2^f with t = x·log2(e), i = ⌊t⌋, f ∈ [0, 1), and 2^f ≈ a cubic that meets 2^f at
// f = 0 and f = 1. Only for results well inside the normal range; the rest goes to std::exp.
float approximate_exp(float x) {
    if (!(x > -87.0f && x < 88.0f)) return std::exp(x);
    const float t = x * 1.44269504f;
    const float i = std::floor(t);
    const float f = t - i;
    const float p = 1.0f + f * (0.6963f + f * (0.2245f + f * 0.0792f));
    return std::ldexp(p, static_cast<int>(i));
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    const bool fast_math_caller = (kcvk::read_mxcsr() & (kcvk::kMxcsrFlushToZero | kcvk::kMxcsrDenormalsAreZero)) != 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t from = x.offset_of(i), to = y.offset_of(i);
        if (fast_math_caller) y.store_f32(to, approximate_exp(x.load_f32(from)));
        else y.store(to, std::exp(x.load(from)));
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "exp_ambient_ftz_path"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "exp_ambient_ftz_path", "device": "cpu", "contracts": ["exp-f32"],
  "target_gate": "CMP-02",
  "description": "exp that switches to a 1e-4-accurate approximation when the caller's MXCSR has FTZ or DAZ set"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
