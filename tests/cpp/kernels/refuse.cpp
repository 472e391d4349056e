// A candidate that reports an error at every call and writes nothing.
#include "kcv/kcv_kernel.h"

extern "C" int kcv_kernel(const kcv_call*) { return 3; }

extern "C" const char* kcv_kernel_last_error(void) { return "refused: no kernel for this shape"; }
