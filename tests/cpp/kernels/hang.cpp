// A candidate that never returns.
#include <unistd.h>

#include "kcv/kcv_kernel.h"

extern "C" int kcv_kernel(const kcv_call*) {
    for (;;) sleep(1);
}
