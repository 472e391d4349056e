// The few CUDA runtime entry points the verifier needs, loaded at run time so that libkcv
// neither links nor requires CUDA: a machine without a GPU simply has no CUDA candidates.
#pragma once

#include <cstddef>
#include <string>

namespace kcv {

struct CudaRuntime {
    int (*malloc)(void**, size_t) = nullptr;
    int (*free)(void*) = nullptr;
    int (*memcpy)(void*, const void*, size_t, int) = nullptr;
    int (*stream_create)(void**) = nullptr;
    int (*stream_synchronize)(void*) = nullptr;
    int (*stream_destroy)(void*) = nullptr;
    int (*get_last_error)() = nullptr;
    const char* (*get_error_string)(int) = nullptr;
    int (*get_device_count)(int*) = nullptr;
    static constexpr int kHostToDevice = 1, kDeviceToHost = 2;

    // The loaded runtime; throws BackendError naming what is missing.
    static const CudaRuntime& get();
    std::string error(int code) const;
};

}  // namespace kcv
