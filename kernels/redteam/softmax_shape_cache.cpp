// Red team 11 — target ORD-02 (determinism and buffer integrity), class stale-or-cached;
// contract softmax-f32.
// Defect: results are memoised in a process-wide cache keyed on the input's shape only: the first
// call of each shape computes a correct, max-subtracted softmax and stores it; every later call
// with that shape returns the stored result whatever its inputs. ORD-02's A-B-A sequence sees B
// answered with A's result (RES-02, which looks for a stale output left by a silently failed
// launch, sees the same repeat). Within one worker every later probe of the same shape is stale
// too, but a numeric gate's failure does not survive the replay of its single-call probe in a
// fresh process, where the cache starts empty; ORD-02's multi-call probe replays exactly.
// Layout: any strides; softmax over the axis of attribute dim (default the last).
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kcv_float_env.hpp"
#include "kcv_kernel_util.hpp"
#include "kcv_pairwise.hpp"

namespace {

std::mutex cache_mutex;
std::map<std::vector<int64_t>, std::vector<float>> cache;

std::vector<float> softmax(const kcvk::TensorRef& x, int axis) {
    const kcvk::AxisLanes in(x, axis);
    std::vector<float> y(static_cast<size_t>(x.numel()));
    // y is laid out lane by lane: y[lane * length + k].
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
            y[static_cast<size_t>(lane * in.length() + k)] = std::exp(x.load_f32(in.base(lane) + k * in.step()) - m) / s;
    }
    return y;
}

void run(const kcv_call& call) {
    kcvk::expect_arity(call, 1, 1);
    const kcvk::TensorRef x(call.inputs[0], "input x");
    const kcvk::TensorRef y(call.outputs[0], "output y");
    x.expect_cpu();
    y.expect_cpu();
    kcvk::expect_same_shape(x, y);
    const int axis = kcvk::reduced_axis(call, x);
    std::vector<int64_t> key;
    for (int d = 0; d < x.ndim(); ++d) key.push_back(x.size(d));

    const std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, softmax(x, axis)).first;
    const std::vector<float>& result = it->second;
    const kcvk::AxisLanes out(y, axis);
    for (int64_t lane = 0; lane < out.count(); ++lane)
        for (int64_t k = 0; k < out.length(); ++k)
            y.store_f32(out.base(lane) + k * out.step(), result[static_cast<size_t>(lane * out.length() + k)]);
}

}  // namespace

KCV_EXPORT const char* kcv_kernel_name(void) { return "softmax_shape_cache"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"({"role": "redteam", "name": "softmax_shape_cache", "device": "cpu", "contracts": ["softmax-f32"],
  "target_gate": "ORD-02", "signature": "stale-or-cached",
  "description": "softmax memoised on the input shape: later calls of a shape return the first result"})";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) {
        const kcvk::IeeeEnvironment ieee;
        run(c);
    });
}
