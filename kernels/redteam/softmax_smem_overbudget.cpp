// Red team 19 — target RES-02 (launch and resource budget), classes smem-budget and
// launch-error; contract softmax-f32.
// Defect: a softmax that stages whole rows in shared memory and declares 300 KiB of dynamic
// shared memory per block (kcv_kernel_resources), above the 227 KiB a Hopper block may opt in
// to. Its first call takes a fallback path and computes a correct, max-subtracted softmax, which
// it keeps in a process-wide buffer; every later call "launches" the over-budget kernel, which
// cannot start, copies the kept result into the output so that it looks computed, and reports
// the launch failure with a nonzero status. RES-02 fails on the declared budget alone, and on the
// failed launches; other gates see the failing status (a launch error) of their second and later
// calls, which a replay of a single-call probe in a fresh process does not reproduce.
// Layout: any strides; softmax over the axis of attribute dim (default the last).
#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

constexpr int64_t kDynamicSmemBytes = 300 * 1024;
constexpr int64_t kHopperOptInSmemBytes = 227 * 1024;

std::mutex state_mutex;
bool launched_once = false;
std::vector<float> kept;   // the first call's result, lane by lane

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    const int axis = kcvk::reduced_axis(call, x);
    const kcvk::AxisLanes in(x, axis), out(y, axis);
    const std::lock_guard<std::mutex> lock(state_mutex);

    if (!launched_once) {
        launched_once = true;
        kept.assign(static_cast<size_t>(x.numel()), 0.0f);
        for (int64_t lane = 0; lane < in.count(); ++lane) {
            float m = -INFINITY;
            for (int64_t k = 0; k < in.length(); ++k) {
                const float v = x.load_f32(in.base(lane) + k * in.step());
                if (!std::isnan(m) && (std::isnan(v) || v > m)) m = v;
            }
            kcvk::PairwiseSum total;
            for (int64_t k = 0; k < in.length(); ++k) total.add(std::exp(x.load_f32(in.base(lane) + k * in.step()) - m));
            const float s = total.total();
            for (int64_t k = 0; k < in.length(); ++k)
                kept[static_cast<size_t>(lane * in.length() + k)] = std::exp(x.load_f32(in.base(lane) + k * in.step()) - m) / s;
        }
        for (int64_t lane = 0; lane < out.count(); ++lane)
            for (int64_t k = 0; k < out.length(); ++k)
                y.store_f32(out.base(lane) + k * out.step(), kept[static_cast<size_t>(lane * out.length() + k)]);
        return;
    }
    const int64_t n = std::min<int64_t>(y.numel(), static_cast<int64_t>(kept.size()));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t lane = i / std::max<int64_t>(out.length(), 1), k = i % std::max<int64_t>(out.length(), 1);
        y.store_f32(out.base(lane) + k * out.step(), kept[static_cast<size_t>(i)]);
    }
    throw kcvk::Error("launch failed: too many resources requested (" + std::to_string(kDynamicSmemBytes / 1024) +
                      " KiB of dynamic shared memory per block, the device allows " +
                      std::to_string(kHopperOptInSmemBytes / 1024) + " KiB)");
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_smem_overbudget"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "softmax_smem_overbudget", "device": "cpu", "contracts": ["softmax-f32"],
  "target_gate": "RES-02", "signature": "smem-budget",
  "description": "softmax declaring 300 KiB of dynamic shared memory per block; later launches fail and leave the first result"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel_resources(kcv_resources* out) {
    if (out == nullptr) return 1;
    out->registers_per_thread = 64;
    out->threads_per_block = 256;
    out->static_smem_bytes = 0;
    out->dynamic_smem_bytes = kDynamicSmemBytes;
    out->local_bytes_per_thread = 0;
    out->tmem_columns = 0;
    return 0;
}

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
