/* kcv_kernel.h — the native ABI a candidate kernel implements.
 *
 * A candidate is a shared library (CPU or CUDA) exporting `kcv_kernel`. The verifier owns
 * every buffer: it allocates the inputs and the outputs (between guard bands, pre-filled with
 * poison), passes them as DLPack tensors, and the kernel writes its results into the outputs
 * it was given (destination passing). A kernel must not keep pointers across calls, allocate
 * its own outputs, or write anywhere but the output tensors (and inputs the contract declares
 * in-place).
 *
 * Plain C so that any compiler, and any language with a C FFI, can implement it.
 * docs/kernel-abi.md explains each field with an example.
 */
#ifndef KCV_KERNEL_H
#define KCV_KERNEL_H

#include <stdint.h>
#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KCV_ABI_VERSION 1

/* DLPack type codes for the 8-bit float formats, as numbered by DLPack 1.1 (the installed
 * dlpack.h may predate them). bits = 8, lanes = 1. */
#define KCV_DL_FLOAT8_E4M3FN 10
#define KCV_DL_FLOAT8_E5M2 12

/* One scalar attribute of the operation (eps, the reduced axis, ...), named as the contract
 * names it. */
typedef struct kcv_attribute {
    const char* name;
    double value;
} kcv_attribute;

typedef struct kcv_call {
    int32_t abi_version;         /* KCV_ABI_VERSION */
    const char* contract_id;     /* the contract being verified, e.g. "relu-f32": one library
                                    may serve several contracts */
    int32_t n_inputs;
    const DLTensor* inputs;      /* in the contract's order; read-only unless declared in-place */
    int32_t n_outputs;
    DLTensor* outputs;           /* in the contract's order; shapes and strides already set */
    int32_t n_attributes;
    const kcv_attribute* attributes;
    void* stream;                /* cudaStream_t for a CUDA kernel, NULL for a CPU kernel */
} kcv_call;

/* Static resource use of the kernel's launches, for RES-02. -1 where unknown. */
typedef struct kcv_resources {
    int32_t registers_per_thread;
    int32_t threads_per_block;
    int64_t static_smem_bytes;
    int64_t dynamic_smem_bytes;
    int64_t local_bytes_per_thread; /* spills and stack */
    int32_t tmem_columns;           /* tcgen05.alloc columns per CTA (Blackwell), 0 if none */
} kcv_resources;

/* Required. Runs the kernel; returns 0 on success, a nonzero code if any launch failed. */
typedef int (*kcv_kernel_fn)(const kcv_call* call);

/* Optional exports:
 *   const char* kcv_kernel_device(void);        "cpu" (the default) or "cuda": a CUDA kernel
 *                                               receives device pointers (kDLCUDA) and a stream
 *   const char* kcv_kernel_name(void);          human-readable name
 *   const char* kcv_kernel_last_error(void);    message for the last nonzero return
 *   int kcv_kernel_resources(kcv_resources*);   fills the struct, returns 0 */
typedef const char* (*kcv_kernel_device_fn)(void);
typedef const char* (*kcv_kernel_name_fn)(void);
typedef const char* (*kcv_kernel_last_error_fn)(void);
typedef int (*kcv_kernel_resources_fn)(kcv_resources* out);

#ifdef __cplusplus
}
#endif

#endif /* KCV_KERNEL_H */
