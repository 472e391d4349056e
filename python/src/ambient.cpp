// The x86 MXCSR flush-to-zero and denormals-are-zero bits of the calling thread, which CMP-02
// and EXC-02 set around a candidate's call, as the native executor does.
#include <nanobind/nanobind.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "bindings.hpp"

namespace kcv::py {

void bind_ambient(nb::module_& m) {
    m.def("mxcsr_supported", [] {
#if defined(__x86_64__)
        return true;
#else
        return false;
#endif
    });
    m.def("get_mxcsr", []() -> unsigned {
#if defined(__x86_64__)
        return _mm_getcsr();
#else
        return 0;
#endif
    });
    m.def(
        "set_mxcsr", [](unsigned csr) {
#if defined(__x86_64__)
            _mm_setcsr(csr);
#else
            (void)csr;
#endif
        },
        nb::arg("csr"));
    m.attr("MXCSR_FTZ") = 0x8000u;
    m.attr("MXCSR_DAZ") = 0x0040u;
}

}  // namespace kcv::py
