// A library whose constructor aborts while it is being loaded.
#include <cstdlib>

#include "kcv/kcv_kernel.h"

namespace {
struct AbortAtLoad {
    AbortAtLoad() { std::abort(); }
} abort_at_load;
}  // namespace

extern "C" int kcv_kernel(const kcv_call*) { return 0; }
