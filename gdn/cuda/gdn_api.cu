// Host side of the CUDA recurrence kernels: argument checks, the workspace layout, dispatch to
// the compile-time specialisations (gate kind × delta × input dtype) and the launch sequences.
//
// Build:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -fmad=false -Xcompiler -fPIC -shared \
//        gdn/cuda/gdn_api.cu -o libkcv_gdn_cuda.so
// (gdn/CMakeLists.txt builds the same library.)
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "gdn_launch.cuh"
#include "gdn_cuda.h"

namespace kcv::gdn::cuda {
namespace {

thread_local std::string last_error;

int fail(const std::string& message) {
    last_error = message;
    return 1;
}

std::string check(const kcv_gdn_params& p, bool backward) {
    if (p.gate < 0 || p.gate > 2) return "gate must be 0, 1 or 2";
    if (p.delta != 0 && p.delta != 1) return "delta must be 0 or 1";
    if (p.delta && p.gate == 0) return "the delta term needs a gate";
    if (p.dtype < 0 || p.dtype > 2) return "dtype must be 0 (float32), 1 (bfloat16) or 2 (float16)";
    if (p.B < 1 || p.T < 0 || p.H < 1 || p.HV < 1 || p.K < 1 || p.V < 1) return "sizes must be positive";
    if (p.HV % p.H != 0) return "HV must be a multiple of H";
    if (p.K > kMaxDim || p.V > kMaxDim) return "K and V must be at most 128";
    if (p.B * p.T * p.HV * (p.K > p.V ? p.K : p.V) >= (int64_t(1) << 31)) return "tensor too large for 32-bit indexing";
    if (p.cu_seqlens && (p.B != 1 || p.N < 1)) return "cu_seqlens needs B = 1 and N >= 1";
    if (p.segment_chunks < -1) return "segment_chunks must be -1, 0 or positive";
    // With no tokens the per-token tensors are empty (frameworks hand over null pointers for
    // them); only the states are read and written.
    if (p.T == 0) return "";
    if (!p.q || !p.k || !p.v || (p.gate && !p.g) || (p.delta && !p.beta)) return "missing input";
    if (!backward && !p.o) return "missing output o";
    if (backward && (!p.d_o || !p.dq || !p.dk || !p.dv || (p.gate && !p.dg) || (p.delta && !p.dbeta)))
        return "missing backward operand";
    return "";
}

// Launches on the GPU: raises the dynamic shared-memory limit where a kernel needs more than
// the default 48 KiB, and checks every launch.
struct DeviceLauncher {
    cudaStream_t stream;
    int sms;
    static constexpr bool output_on_wgmma = kOutputOnWgmma;   // gdn_wgmma.cuh
    static constexpr bool reverse_on_wgmma = kReverseOnWgmma;
    static constexpr bool grad_on_wgmma = kGradOnWgmma;

    template <class Kernel, class... Args>
    int operator()(Kernel kernel, dim3 grid, size_t smem, const char* name, Args... args) {
        return run(kThreads, kernel, grid, smem, name, args...);
    }
    // Every launch here has the whole block.
    template <class Kernel, class... Args>
    int full_block(Kernel kernel, dim3 grid, size_t smem, const char* name, Args... args) {
        return run(kThreads, kernel, grid, smem, name, args...);
    }
    // A kernel whose block on the GPU is `threads` wide (chunk_grad_tc's kGradThreads, the
    // forward scan's scan_threads, prepare_threads).
    template <class Kernel, class... Args>
    int sized(unsigned threads, Kernel kernel, dim3 grid, size_t smem, const char* name, Args... args) {
        return run(threads, kernel, grid, smem, name, args...);
    }

private:
    template <class Kernel, class... Args>
    int run(unsigned threads, Kernel kernel, dim3 grid, size_t smem, const char* name, Args... args) {
        if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;
        if (smem > 48 * 1024) {
            const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
            if (e != cudaSuccess) return fail(std::string(name) + ": " + cudaGetErrorString(e));
        }
        kernel<<<grid, threads, smem, stream>>>(args...);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return fail(std::string(name) + " launch: " + cudaGetErrorString(e));
        return 0;
    }
};

// Version 2 (tensor cores) for the 16-bit inputs, version 1 for float32 and whenever the
// environment sets KCV_GDN_KERNELS=1, so that one process can time both.
bool reference_kernels() {
    const char* v = std::getenv("KCV_GDN_KERNELS");
    return v != nullptr && std::string(v) == "1";
}

// p, with segment_chunks from KCV_GDN_SEGMENT_CHUNKS where p leaves it 0 (the shape's rule), so
// that a benchmark can time a split or unsplit scan through callers that do not set it.
kcv_gdn_params with_environment(const kcv_gdn_params& p) {
    kcv_gdn_params q = p;
    const char* v = std::getenv("KCV_GDN_SEGMENT_CHUNKS");
    if (q.segment_chunks == 0 && v != nullptr && *v != '\0') q.segment_chunks = std::atoi(v);
    return q;
}

// The current device's SM count.
int device_sms() {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        return 0;
    return sms;
}

template <class TI>
int dispatch(const kcv_gdn_params& p, cudaStream_t s, bool backward) {
    const int sms = device_sms();
    if (sms == 0) return fail("no CUDA device");
    DeviceLauncher launch{s, sms};
    int status;
    if constexpr (sizeof(TI) == 2)
        status = reference_kernels() ? launch_member<TI, 1>(launch, p, backward)
                                      : launch_member<TI, 2, kMaxDim>(launch, p, backward);
    else
        status = launch_member<TI, 1>(launch, p, backward);
    if (status != 0 && last_error.empty()) return fail("no such member");
    return status;
}

int run(const kcv_gdn_params* given, void* stream, bool backward) {
    if (given == nullptr) return fail("null parameters");
    last_error.clear();
    const kcv_gdn_params params = with_environment(*given);
    const kcv_gdn_params* p = &params;
    const std::string why = check(*p, backward);
    if (!why.empty()) return fail(why);
    if (p->workspace_bytes < kcv_gdn_workspace_bytes(p, backward ? 1 : 0))
        return fail("workspace too small: " + std::to_string(p->workspace_bytes) + " bytes, needs " +
                    std::to_string(kcv_gdn_workspace_bytes(p, backward ? 1 : 0)));
    if (p->prepared && p->prepared_bytes < kcv_gdn_prepared_bytes(p))
        return fail("prepared buffer too small: " + std::to_string(p->prepared_bytes) + " bytes, needs " +
                    std::to_string(kcv_gdn_prepared_bytes(p)));
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    switch (p->dtype) {
        case 0: return dispatch<float>(*p, s, backward);
        case 1: return dispatch<__nv_bfloat16>(*p, s, backward);
        case 2: return dispatch<__half>(*p, s, backward);
    }
    return fail("bad dtype");
}

}  // namespace
}  // namespace kcv::gdn::cuda

extern "C" {

size_t kcv_gdn_workspace_bytes(const kcv_gdn_params* p, int backward) {
    using namespace kcv::gdn::cuda;
    Workspace w{};
    return layout_workspace(make_dims(with_environment(*p)), backward != 0, p->gate, p->delta != 0, nullptr, w,
                            p->prepared != nullptr);
}

int kcv_gdn_segment_chunks(const kcv_gdn_params* p) {
    using namespace kcv::gdn::cuda;
    if (p->dtype == 0 || reference_kernels()) return 0;   // version 1: no split
    return make_dims(with_environment(*p)).seg_chunks;
}

size_t kcv_gdn_prepared_bytes(const kcv_gdn_params* p) {
    using namespace kcv::gdn::cuda;
    Workspace w{};
    return layout_prepared(make_dims(*p), p->gate, p->delta != 0, nullptr, w);
}

int kcv_gdn_forward(const kcv_gdn_params* p, void* stream) { return kcv::gdn::cuda::run(p, stream, false); }

int kcv_gdn_backward(const kcv_gdn_params* p, void* stream) { return kcv::gdn::cuda::run(p, stream, true); }

const char* kcv_gdn_last_error(void) { return kcv::gdn::cuda::last_error.c_str(); }

}  // extern "C"
