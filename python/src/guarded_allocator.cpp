// libkcv_guarded_alloc: the guarded arena as PyTorch's CUDA allocator
// (torch.cuda.memory.CUDAPluggableAllocator(path, "kcv_guarded_malloc", "kcv_guarded_free")).
// Every allocation a candidate, its reference or its controls make goes through guard bands and
// poisons (see guarded_arena.hpp); the kcv_ga_* functions let the Python executor set poisons,
// list allocations, check guards and re-poison between calls (through ctypes).
//
// It speaks the CUDA driver API, resolved from libcuda.so.1 when first needed, so that it shares
// the process's one driver with PyTorch's own CUDA runtime whatever runtime version either was
// built with, and links against nothing of CUDA's. Built only where the CUDA toolkit (for
// cuda.h) is found; machines without a GPU compile it but never load it.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "guarded_arena.hpp"

namespace {

using kcv::py::GuardedArena;

// The driver entry points, by their versioned names (cuda.h maps cuMemAlloc to cuMemAlloc_v2).
#define KCV_NAME(f) #f
#define KCV_SYMBOL(f) KCV_NAME(f)
#define KCV_ENTRY(member, f) decltype(&f) member = reinterpret_cast<decltype(&f)>(dlsym(lib, KCV_SYMBOL(f)))

struct Driver {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    KCV_ENTRY(ctx_get_current, cuCtxGetCurrent);
    KCV_ENTRY(ctx_set_current, cuCtxSetCurrent);
    KCV_ENTRY(device_get, cuDeviceGet);
    KCV_ENTRY(primary_ctx_retain, cuDevicePrimaryCtxRetain);
    KCV_ENTRY(mem_alloc, cuMemAlloc);
    KCV_ENTRY(mem_free, cuMemFree);
    KCV_ENTRY(memset_d8_async, cuMemsetD8Async);
    KCV_ENTRY(memcpy_htod_async, cuMemcpyHtoDAsync);
    KCV_ENTRY(memcpy_dtoh, cuMemcpyDtoH);
};

const Driver& driver() {
    static const Driver d;
    if (!d.lib || !d.mem_alloc || !d.mem_free || !d.memset_d8_async || !d.memcpy_htod_async || !d.memcpy_dtoh) {
        std::fprintf(stderr, "kcv_guarded_alloc: cannot load the CUDA driver (libcuda.so.1)\n");
        std::abort();
    }
    return d;
}

// Makes a context current on the calling thread: PyTorch's runtime normally has, but a thread
// that never touched the runtime has none.
void ensure_context(int device) {
    const Driver& d = driver();
    CUcontext ctx = nullptr;
    if (d.ctx_get_current(&ctx) == CUDA_SUCCESS && ctx) return;
    CUdevice dev;
    if (d.device_get(&dev, device) != CUDA_SUCCESS) return;
    if (d.primary_ctx_retain(&ctx, dev) == CUDA_SUCCESS) d.ctx_set_current(ctx);
}

class DriverMemory final : public kcv::py::DeviceMemory {
public:
    void* allocate(size_t bytes) override {
        CUdeviceptr p = 0;
        return driver().mem_alloc(&p, bytes) == CUDA_SUCCESS ? reinterpret_cast<void*>(p) : nullptr;
    }
    void release(void* p) override { driver().mem_free(reinterpret_cast<CUdeviceptr>(p)); }
    void fill(void* p, uint8_t byte, size_t bytes, void* stream) override {
        driver().memset_d8_async(reinterpret_cast<CUdeviceptr>(p), byte, bytes, static_cast<CUstream>(stream));
    }
    // From pageable host memory the copy returns once the source has been staged, so the
    // caller may reuse its buffer at once.
    void write(void* dst, const uint8_t* src, size_t bytes, void* stream) override {
        driver().memcpy_htod_async(reinterpret_cast<CUdeviceptr>(dst), src, bytes, static_cast<CUstream>(stream));
    }
    void read(uint8_t* dst, const void* src, size_t bytes) override {
        driver().memcpy_dtoh(dst, reinterpret_cast<CUdeviceptr>(src), bytes);
    }
};

size_t env_size(const char* name, size_t fallback) {
    const char* v = std::getenv(name);
    return v && *v ? static_cast<size_t>(std::strtoull(v, nullptr, 10)) : fallback;
}

GuardedArena& arena() {
    static DriverMemory mem;
    static GuardedArena a(mem, kcv::py::ArenaConfig{env_size("KCV_GUARD_BYTES", 4096),
                                                    env_size("KCV_QUARANTINE_BYTES", size_t(256) << 20)});
    return a;
}

kcv::Poison poison_of(int kind, unsigned byte, uint64_t seed) {
    return kind == 1 ? kcv::Poison::random(seed) : kcv::Poison::bytes(static_cast<uint8_t>(byte));
}

// Copies text into a caller's buffer; returns the length it needs (without the NUL).
size_t give(const std::string& text, char* out, size_t cap) {
    if (out && cap > 0) {
        const size_t n = std::min(cap - 1, text.size());
        std::memcpy(out, text.data(), n);
        out[n] = '\0';
    }
    return text.size();
}

}  // namespace

extern "C" {

void* kcv_guarded_malloc(ssize_t size, int device, void* stream) {
    ensure_context(device);
    return arena().allocate(static_cast<size_t>(size), device, stream);
}

void kcv_guarded_free(void* ptr, ssize_t, int device, void* stream) {
    ensure_context(device);
    arena().release(ptr, stream);
}

// which: "fill", "guard" or "freed"; kind 0 = byte, 1 = random(seed). Returns 0, or -1 for an
// unknown `which`.
int kcv_ga_set_poison(const char* which, int kind, unsigned byte, uint64_t seed) {
    const kcv::Poison p = poison_of(kind, byte, seed);
    const std::string w = which ? which : "";
    if (w == "fill") arena().set_fill_poison(p);
    else if (w == "guard") arena().set_guard_poison(p);
    else if (w == "freed") arena().set_freed_poison(p);
    else return -1;
    return 0;
}

size_t kcv_ga_blocks(int with_freed, char* out, size_t cap) {
    return give(kcv::py::blocks_json(arena(), with_freed != 0).dump(), out, cap);
}

size_t kcv_ga_check(char* out, size_t cap) { return give(kcv::py::check_json(arena()).dump(), out, cap); }

int kcv_ga_repoison(uintptr_t data, int kind, unsigned byte, uint64_t seed, void* stream) {
    return arena().repoison(data, poison_of(kind, byte, seed), stream) ? 0 : -1;
}

void kcv_ga_repoison_guards(void* stream) { arena().repoison_guards(stream); }

void kcv_ga_drain(void) { arena().drain(); }

uint64_t kcv_ga_allocations(void) { return arena().allocations(); }

}  // extern "C"
