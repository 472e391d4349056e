// Red team 10 — target ORD-02 (determinism and buffer integrity), class input-mutation;
// contract relu-f32 (not in-place).
// Defect: the kernel applies relu to its input in place and then copies the input to the output,
// as a kernel written for an in-place interface and wrapped into an out-of-place one. The output
// is exactly right (relu is idempotent, so even a caller that recomputes from the mutated input
// agrees), but the input's bytes change during the call, which ORD-02's input hashes see.
// Layout: any strides (the input is rewritten through its own strides, never in its gaps).
#include <string>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"

namespace {

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t at = x.offset_of(i);
        const float v = x.load_f32(at);
        x.store_f32(at, v < 0.0f ? 0.0f : v);
    }
    for (int64_t i = 0; i < x.numel(); ++i) y.store_f32(y.offset_of(i), x.load_f32(x.offset_of(i)));
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "relu_mutates_input"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "relu_mutates_input", "device": "cpu", "contracts": ["relu-f32"],
  "target_gate": "ORD-02", "signature": "input-mutation",
  "description": "relu computed in place in its input, then copied to the output"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
