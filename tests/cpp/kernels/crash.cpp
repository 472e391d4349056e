// A candidate that dereferences a null pointer on every call.
#include "kcv/kcv_kernel.h"

extern "C" int kcv_kernel(const kcv_call* call) {
    volatile float* p = nullptr;
    *p = static_cast<float>(call->n_inputs);
    return 0;
}
