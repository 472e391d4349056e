// The floating-point environment a kernel computes under. A caller may have left flush-to-zero,
// denormals-are-zero or a directed rounding mode set in the thread's MXCSR (fast-math code does);
// a kernel whose result must not depend on that (CMP-02) computes under IEEE defaults and hands
// the caller's state back on the way out.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace kcvk __attribute__((visibility("hidden"))) {

// MXCSR bits the kernels look at.
constexpr uint32_t kMxcsrFlushToZero = 0x8000;       // FTZ: subnormal results become ±0
constexpr uint32_t kMxcsrDenormalsAreZero = 0x0040;  // DAZ: subnormal operands read as ±0
constexpr uint32_t kMxcsrDefault = 0x1F80;           // every exception masked, round to nearest

inline uint32_t read_mxcsr() {
#if defined(__x86_64__)
    return _mm_getcsr();
#else
    return kMxcsrDefault;
#endif
}

inline void write_mxcsr(uint32_t csr) {
#if defined(__x86_64__)
    _mm_setcsr(csr);
#else
    (void)csr;
#endif
}

// Scoped IEEE defaults: round to nearest even, no flush-to-zero, no denormals-are-zero.
class IeeeEnvironment {
public:
    IeeeEnvironment() : saved_(read_mxcsr()) { write_mxcsr(kMxcsrDefault); }
    ~IeeeEnvironment() { write_mxcsr(saved_); }
    IeeeEnvironment(const IeeeEnvironment&) = delete;
    IeeeEnvironment& operator=(const IeeeEnvironment&) = delete;

private:
    uint32_t saved_;
};

}  // namespace kcvk
