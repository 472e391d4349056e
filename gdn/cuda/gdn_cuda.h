/* gdn_cuda.h — host interface of the CUDA recurrence kernels (sm_90a).
 *
 * Plain C so that Python (ctypes), C++ and any FFI can call it. The caller owns every buffer,
 * the workspace included (kcv_gdn_workspace_bytes says how much), so a call allocates nothing
 * and never synchronises the host with the device: with cu_seqlens the chunk layout is computed
 * on the device. Every launch goes to `stream`. Results are bitwise deterministic: no atomics,
 * every sum in a fixed order.
 *
 * Layout (contiguous, row-major), as the float64 oracle (gdn/oracle/gdn_oracle.hpp):
 *   q, k, dq, dk [B,T,H,K]; v, o, do, dv [B,T,HV,V] (HV a multiple of H);
 *   g, dg: gate 1 [B,T,HV], gate 2 [B,T,HV,K], float32 log decay (<= 0);
 *   beta, dbeta [B,T,HV]; h0, ht, dht, dh0 [N,HV,K,V] float32.
 * dtype (0 float32, 1 bfloat16, 2 float16) applies to q, k, v, beta, do, o, dq, dk, dv, dbeta.
 * With cu_seqlens (B = 1) sequence n is tokens [cu[n], cu[n+1]), possibly empty, and h0, ht, dht,
 * dh0 hold one state per sequence.
 * Limits: K, V <= 128 (shared-memory tiles), any T, B; with cu_seqlens B = 1.
 * Kernels: bf16 and fp16 inputs run version 2 (tensor cores, float32 operands split 3xTF32),
 * float32 inputs version 1 (scalar float32); KCV_GDN_KERNELS=1 in the environment selects
 * version 1 for every dtype.
 */
#ifndef KCV_GDN_CUDA_H
#define KCV_GDN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcv_gdn_params {
    int32_t gate;    /* 0 none, 1 scalar per head, 2 per channel */
    int32_t delta;   /* 1: the delta term with beta */
    int32_t dtype;   /* 0 float32, 1 bfloat16, 2 float16 */
    int64_t B, T, H, HV, K, V;
    int64_t N;                     /* sequences: B, or len(cu_seqlens) - 1 */
    const int64_t* cu_seqlens;     /* device pointer, N + 1 offsets non-decreasing from 0 to T
                                      (never read by the host, so not checked), or NULL */
    float scale;
    /* forward */
    const void* q;
    const void* k;
    const void* v;
    const float* g;
    const void* beta;
    const float* h0;               /* NULL: zero initial state */
    void* o;
    float* ht;                     /* NULL: final state not written */
    /* backward (the forward inputs too) */
    const void* d_o;
    const float* dht;              /* NULL: zero */
    void* dq;
    void* dk;
    void* dv;
    float* dg;
    void* dbeta;
    float* dh0;                    /* NULL: not written */
    /* scratch, device memory of at least kcv_gdn_workspace_bytes */
    void* workspace;
    size_t workspace_bytes;
    /* NULL, or device memory of at least kcv_gdn_prepared_bytes for the chunk preparation (the
       decays, the intra-chunk scores and, for the delta rule, T, W and U), kept apart from the
       workspace. A forward writes it; a backward reads it and does not prepare the chunks again,
       so it must be what a forward of the same inputs left there. The backward never writes it:
       one forward's preparation serves any number of backwards. */
    void* prepared;
    size_t prepared_bytes;
    /* The state scans' split of a long sequence into segments scanned in parallel, their states
       carried exactly through each segment's affine map S_end = M·S_start + E: 0 chooses from the
       shape alone (split only where too few (sequence, value head) pairs would fill the GPU;
       kcv_gdn_segment_chunks says what it chose), -1 never splits, n > 0 splits into segments of n
       chunks of 64 tokens. The results are deterministic for any value, but the bits depend on
       the split. A split workspace holds (K·K + 2·K·V) floats per segment slot and value head,
       N·ceil(ceil(T/64)/n) slots (with cu_seqlens every sequence is given as many as the longest
       could need), so a small n over many sequences asks for much memory. The bf16 and fp16
       kernels split; the float32 ones (version 1) never do. KCV_GDN_SEGMENT_CHUNKS in the
       environment stands in for a 0 here. */
    int32_t segment_chunks;
} kcv_gdn_params;

/* Bytes of the workspace of a forward or a backward (less where p->prepared is set), and of the
   preparation kept apart. */
size_t kcv_gdn_workspace_bytes(const kcv_gdn_params* p, int backward);
size_t kcv_gdn_prepared_bytes(const kcv_gdn_params* p);
/* Chunks per segment of the split state scans for p (0: each sequence scanned whole). */
int kcv_gdn_segment_chunks(const kcv_gdn_params* p);
/* 0 on success; otherwise kcv_gdn_last_error() says why (bad arguments or a failed launch). */
int kcv_gdn_forward(const kcv_gdn_params* p, void* stream);
int kcv_gdn_backward(const kcv_gdn_params* p, void* stream);
const char* kcv_gdn_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KCV_GDN_CUDA_H */
