// A correct relu for relu-f32, honouring strides, used to check end to end that an honest
// candidate passes every gate: NaN propagates, every output element is written.
#include <cmath>

#include "kcv/kcv_kernel.h"

namespace {
// Storage offset (in elements) of row-major logical index i.
int64_t offset_of(const DLTensor& t, int64_t i) {
    if (!t.strides) return i;
    int64_t off = 0;
    for (int d = t.ndim - 1; d >= 0; --d) {
        off += (i % t.shape[d]) * t.strides[d];
        i /= t.shape[d];
    }
    return off;
}
}  // namespace

extern "C" int kcv_kernel(const kcv_call* call) {
    const DLTensor& x = call->inputs[0];
    DLTensor& y = call->outputs[0];
    int64_t n = 1;
    for (int d = 0; d < x.ndim; ++d) n *= x.shape[d];
    const float* xp = reinterpret_cast<const float*>(static_cast<const char*>(x.data) + x.byte_offset);
    float* yp = reinterpret_cast<float*>(static_cast<char*>(y.data) + y.byte_offset);
    for (int64_t i = 0; i < n; ++i) {
        const float v = xp[offset_of(x, i)];
        yp[offset_of(y, i)] = (std::isnan(v) || v > 0.0f) ? v : 0.0f;
    }
    return 0;
}
