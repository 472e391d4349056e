#include "backends/cuda_runtime.hpp"

#include <dlfcn.h>

#include "kcv/execution.hpp"

namespace kcv {
namespace {

template <class F>
void bind(void* h, F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(h, name));
    if (!fn) throw BackendError(std::string("the CUDA runtime lacks ") + name);
}

CudaRuntime load() {
    void* h = nullptr;
    for (const char* lib : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
        if ((h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL))) break;
    }
    if (!h) throw BackendError("a CUDA candidate needs the CUDA runtime (libcudart), which cannot be loaded here");
    CudaRuntime rt;
    bind(h, rt.malloc, "cudaMalloc");
    bind(h, rt.free, "cudaFree");
    bind(h, rt.memcpy, "cudaMemcpy");
    bind(h, rt.stream_create, "cudaStreamCreate");
    bind(h, rt.stream_synchronize, "cudaStreamSynchronize");
    bind(h, rt.stream_destroy, "cudaStreamDestroy");
    bind(h, rt.get_last_error, "cudaGetLastError");
    bind(h, rt.get_error_string, "cudaGetErrorString");
    bind(h, rt.get_device_count, "cudaGetDeviceCount");
    int n = 0;
    if (rt.get_device_count(&n) != 0 || n == 0) throw BackendError("a CUDA candidate needs a GPU, and none is visible");
    return rt;
}

}  // namespace

const CudaRuntime& CudaRuntime::get() {
    static const CudaRuntime rt = load();
    return rt;
}

std::string CudaRuntime::error(int code) const {
    const char* s = get_error_string ? get_error_string(code) : nullptr;
    return s ? s : "CUDA error " + std::to_string(code);
}

}  // namespace kcv
