// Red team 17 — target EXC-02 (subnormal handling), class daz-input; contract relu-f32.
// Defect: the kernel turns on flush-to-zero and denormals-are-zero in MXCSR for its loop (a
// "denormals are slow" habit) and restores the caller's state afterwards. With DAZ the
// comparison x > 0 reads a positive subnormal x as 0, so relu returns 0 where the exact result is
// x itself: EXC-02's subnormal inputs come out flushed. Normal inputs, ±0, ±Inf and NaN are
// unaffected, so no other gate sees it. (An approximate kernel on x86-64 only: elsewhere the
// MXCSR calls compile to nothing.)
// Layout: any strides.
#include <cmath>
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

// Sets FTZ and DAZ for its lifetime, restoring the caller's MXCSR after.
class FlushDenormals {
public:
    FlushDenormals() : saved_(kcvk::read_mxcsr()) {
        kcvk::write_mxcsr((kcvk::kMxcsrDefault | kcvk::kMxcsrFlushToZero | kcvk::kMxcsrDenormalsAreZero));
    }
    ~FlushDenormals() { kcvk::write_mxcsr(saved_); }
    FlushDenormals(const FlushDenormals&) = delete;
    FlushDenormals& operator=(const FlushDenormals&) = delete;

private:
    uint32_t saved_;
};

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    const FlushDenormals flush;
    for (int64_t i = 0; i < x.numel(); ++i) {
        const float v = x.load_f32(x.offset_of(i));
        y.store_f32(y.offset_of(i), v > 0.0f ? v : std::isnan(v) ? v : 0.0f);
    }
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "relu_ftz_daz"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "relu_ftz_daz", "device": "cpu", "contracts": ["relu-f32"],
  "target_gate": "EXC-02", "signature": "daz-input",
  "description": "relu computed with MXCSR flush-to-zero and denormals-are-zero set"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) { return kcvk::run_kernel(call, run); }
