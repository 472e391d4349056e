// The recurrence forward on the GPU, as a candidate for contracts/gdn-forward-<member>*.toml: the
// CUDA kernels of gdn/cuda (version 2 on tensor cores for bf16/f16 inputs, version 1 for f32)
// through their C interface, one library serving all five members by the contract's attributes
// (gate, delta, scale, initial_state). How a call becomes the kernels' parameters, and what the
// kernels refuse, is in gdn_call.cuh.
// Build (from the repository root):
//   nvcc -std=c++20 -O3 -fmad=false -shared -Xcompiler -fPIC,-fvisibility=hidden
//        -gencode=arch=compute_90a,code=sm_90a -Iinclude -Ikernels/common
//        -Xlinker --version-script=kernels/gdn/cuda/exports.map
//        kernels/gdn/cuda/forward.cu gdn/cuda/gdn_api.cu -o kcv_gdn_forward.so
#include "gdn_call.cuh"

KCV_EXPORT const char* kcv_kernel_name(void) { return "gdn_forward (CUDA recurrence kernels, sm_90a)"; }

KCV_EXPORT const char* kcv_kernel_manifest(void) {
    return R"j({"role": "candidate", "name": "gdn_forward", "device": "cuda",)j"
           R"j( "description": "the recurrence forward of gdn/cuda: chunked (C = 64), tensor cores for bf16/f16 inputs",)j"
           R"j( "contracts": ["gdn-forward-linear-attention", "gdn-forward-ssd", "gdn-forward-gla", "gdn-forward-gdn", "gdn-forward-kda",)j"
           R"j( "gdn-forward-linear-attention-bf16", "gdn-forward-ssd-bf16", "gdn-forward-gla-bf16", "gdn-forward-gdn-bf16", "gdn-forward-kda-bf16",)j"
           R"j( "gdn-forward-linear-attention-f16", "gdn-forward-ssd-f16", "gdn-forward-gla-f16", "gdn-forward-gdn-f16", "gdn-forward-kda-f16",)j"
           R"j( "gdn-forward-linear-attention-bf16-operands", "gdn-forward-ssd-bf16-operands", "gdn-forward-gla-bf16-operands",)j"
           R"j( "gdn-forward-gdn-bf16-operands", "gdn-forward-kda-bf16-operands"]})j";
}

KCV_EXPORT const char* kcv_kernel_last_error(void) { return kcvk::last_error(); }

KCV_EXPORT int kcv_kernel(const kcv_call* call) {
    return kcvk::run_kernel(call, [](const kcv_call& c) { kcvk::gdn::run_recurrence(c, false); });
}
