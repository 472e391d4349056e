// Chunked forward of the gated linear recurrence on sm_90a, version 2: the chunk-parallel
// kernels of version 1 (gdn_forward.cuh) with their matrix products on tensor cores.
//
// Build (through gdn_api.cu, which holds the launches):
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c gdn/cuda/gdn_api.cu
//
// Same algebra, workspace and outputs as version 1, which stays the reference beside it (and the
// path of float32 inputs). Moved to tensor cores (gdn_mma.cuh: mma.sync m16n8k8 TF32, float32
// operands split exactly into three TF32 parts, raw 16-bit inputs used as exact single TF32
// operands):
//   prepare_chunks_tc: the score matrices Q Kᵀ and (β ⊙ K) Kᵀ (for a per-channel gate only
//     their cross-sub-chunk blocks), W = T Λ(β ⊙ K) and U = (T Diag(β)) V;
//   chunk_output_tc: O = scale·[(Q ⊙ e^γ) S₀ + tril(P) Δ] as one product over the K + C
//     concatenated columns.
//   state_scan_tc: Δ = U − W S and S ← Λ_C S + (K ⊙ e^{γ_C − γ})ᵀ Δ per chunk step.
// Still scalar: T = (I + A)⁻¹, the exponents (sums with Kahan's compensation) and the
// per-channel diagonal score blocks. Version 2.1 inverts blockwise, 16 dependent rows instead of
// 64 (unit_lower_inverse_blocked), takes the exponents from running sums, one addition each
// (scalar_gate_factors_running, anchor_subchunk_running, diagonal_scores in gdn_mma.cuh, and
// e^{γ_C − γ_t} below) where version 1 sums every range afresh, and stages chunk_output_tc's
// operands in shared memory. Tiles copied unchanged go by cp.async (copy_rows); the products'
// operands are read from shared or global memory element by element (no ldmatrix, TMA or wgmma
// yet). Limits as version 1: K, V <= 128.
#pragma once

#include "gdn_forward.cuh"
#include "gdn_mma.cuh"
#include "gdn_wgmma.cuh"

namespace kcv::gdn::cuda {

// T = (I + A)⁻¹ for a strictly lower triangular A (C×C, zero in the rows and columns ≥ L), blocked
// by sub-chunks so that the dependent chain is 16 rows long instead of L: the four 16×16
// diagonal blocks D_b = (I + A_bb)⁻¹ at once by forward substitution (version 1's sums, so
// version 1's bits there), then the blocks below them one block diagonal at a time,
//   T_rc = −D_r X,  X = Σ_{c ≤ m < r} A_rm T_mc   (r = c + 1, then c + 2, then c + 3),
// each a float32 sum in a fixed order. T (C×C) ends lower triangular with a unit diagonal below L
// and zero rows from L on, except that X is kept in T's strictly upper blocks (the block
// mirrored across the diagonal): read T only on its lower triangle. 2·(C/16 − 1) + 16 barriers
// where forward substitution takes L.
__device__ inline void unit_lower_inverse_blocked(const float* A, int L, float* T) {
    const int tid = threadIdx.x, nt = blockDim.x;
    constexpr int nb = kChunk / kSub, tile = kSub * kSub;
    for (int e = tid; e < kChunk * kChunk; e += nt) T[e] = 0.0f;
    __syncthreads();
    for (int r = 0; r < kSub; ++r) {
        for (int e = tid; e < nb * kSub; e += nt) {
            const int b = e / kSub, cc = e % kSub, t = b * kSub + r, col = b * kSub + cc;
            if (cc > r || t >= L) continue;
            float acc = 0.0f;
            for (int j = col; j < t; ++j) acc += A[t * kChunk + j] * T[j * kChunk + col];
            T[t * kChunk + col] = col == t ? 1.0f : -acc;
        }
        __syncthreads();
    }
    for (int dd = 1; dd < nb; ++dd) {
        const int blocks = nb - dd;
        // X of block (c + dd, c) into block (c, c + dd).
        for (int e = tid; e < blocks * tile; e += nt) {
            const int c = e / tile, rr = (e / kSub) % kSub, cc = e % kSub, r = c + dd;
            const int t = r * kSub + rr, col = c * kSub + cc;
            if (t >= L) continue;
            float acc = 0.0f;
            for (int j = col; j < r * kSub; ++j) acc += A[t * kChunk + j] * T[j * kChunk + col];
            T[(c * kSub + rr) * kChunk + r * kSub + cc] = acc;
        }
        __syncthreads();
        for (int e = tid; e < blocks * tile; e += nt) {
            const int c = e / tile, rr = (e / kSub) % kSub, cc = e % kSub, r = c + dd;
            const int t = r * kSub + rr, col = c * kSub + cc;
            if (t >= L) continue;
            float acc = 0.0f;
            for (int j = 0; j <= rr; ++j)
                acc += T[t * kChunk + r * kSub + j] * T[(c * kSub + j) * kChunk + r * kSub + cc];
            T[t * kChunk + col] = -acc;
        }
        __syncthreads();
    }
}

// Shared memory of prepare_chunks_tc. A per-channel gate needs four C×K tiles (Q, K and the
// anchored operands of its scores); the other gates two (Q, then β ⊙ K, then Λ(β ⊙ K) in place;
// K), so that two blocks share an SM (launch bounds below) where version 1's layout holds one.
inline size_t prepare_tc_smem_bytes(int K, int gate) {
    const int GK = gate == 2 ? K : 1, tiles = gate == 2 ? 4 : 2;
    return sizeof(float) * (size_t(kChunk) * K * tiles + 2 * size_t(kChunk) * GK + kChunk + 2 * kChunk * kChunk);
}

// The block: kThreads threads, two blocks an SM, for the gates without a per-channel factor; a
// per-channel gate's four tiles hold it to one block an SM, so its block has kPrepareThreads
// (gdn_common.cuh; the Launcher's sized launch) for its diagonal score blocks, its inverse and its
// products.
template <int GATE>
constexpr int prepare_threads = GATE == 2 ? kPrepareThreads : kThreads;

template <int GATE, bool DELTA, class TI, int KV = 0>
__global__ void __launch_bounds__(prepare_threads<GATE>, GATE == 2 ? 1 : 2)
    prepare_chunks_tc(Dims sizes, Workspace w, ForwardArgs a) {
    const Dims d = with_head_size<KV>(sizes);
    ChunkPos c;
    if (!locate_chunk(d, blockIdx.x, c)) return;
    const int hv = blockIdx.y, h = hv / d.group, K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int GK = GATE == 2 ? K : 1, L = c.L;
    constexpr bool EX = exact_in_tf32<TI>;
    // Operands fetched a step ahead (block_mma) except where two blocks per SM hold the delta
    // members to 128 registers, which the extra registers would spill.
    constexpr bool AHEAD = GATE == 2 || !DELTA;
    float* const smem = shared_floats();
    float* q_s = smem;                        // C×K: Q, then β ⊙ K (delta), then Λ(β ⊙ K) (no per-channel gate)
    float* k_s = q_s + kChunk * K;            // C×K
    float* g_s = k_s + kChunk * K;            // C×GK log decays
    float* gam_s = g_s + kChunk * GK;         // C×GK
    // A per-channel gate: C×K each, the anchored x, then Λ(β ⊙ K), and the anchored k. Other
    // gates: none.
    float* xa_s = gam_s + kChunk * GK;
    float* ka_s = xa_s + (GATE == 2 ? kChunk * K : 0);
    float* b_s = ka_s + (GATE == 2 ? kChunk * K : 0);   // C: β, zero past L
    float* A_s = b_s + kChunk;                           // C×C
    float* T_s = A_s + kChunk * kChunk;                  // C×C
    const size_t sh = size_t(c.slot) * d.HV + hv;

    load_tile(static_cast<const TI*>(a.q), c.row0, L, d.H, h, K, q_s);
    load_tile(static_cast<const TI*>(a.k), c.row0, L, d.H, h, K, k_s);
    load_gate<GATE>(a.g, c, d.HV, hv, K, g_s);
    if (GATE != 0) {
        for (int i = tid; i < GK; i += nt) {
            KahanSum run;
            for (int t = 0; t < kChunk; ++t) {
                if (t < L) run.add(g_s[t * GK + i]);
                gam_s[t * GK + i] = t < L ? run.sum : 0.0f;
            }
        }
        // e^{γ_C − γ_t}, the exponent summed over (t, L − 1] for t descending: one running Kahan
        // sum per channel, the order reversed from version 1's range sums, the bound the same.
        // The sums go to scratch (A_s and T_s, free until the scores) on threads dealt from the
        // block's last down, beside γ's above; their exponentials are then taken by every thread,
        // not one after another on the thread of the channel.
        float* rest_s = A_s;
        for (int i = nt - 1 - tid; i < GK; i += nt) {
            KahanSum rest;
            for (int t = kChunk - 1; t >= 0; --t) {
                if (t < L - 1) rest.add(g_s[(t + 1) * GK + i]);
                rest_s[t * GK + i] = rest.sum;
            }
        }
        __syncthreads();
        for (int e = tid; e < kChunk * GK; e += nt) {
            w.to_end[sh * kChunk * GK + e] = e / GK < L ? exp_rn(rest_s[e]) : 0.0f;
            w.gamma[sh * kChunk * GK + e] = gam_s[e];
        }
        __syncthreads();
    }
    const TI* beta = static_cast<const TI*>(a.beta);
    auto load_beta = [&] {
        for (int t = tid; t < kChunk; t += nt) b_s[t] = t < L ? to_float(beta[size_t(c.row0 + t) * d.HV + hv]) : 0.0f;
        __syncthreads();
    };
    if constexpr (GATE == 2 && DELTA) {
        // P and A together, each exponential of their per-channel factors taken once for both.
        load_beta();
        gated_score_pair_tc<AHEAD>(q_s, k_s, b_s, g_s, L, K, w.P + sh * kChunk * kChunk, A_s, xa_s, ka_s, T_s);
    } else {
        gated_scores_tc<GATE, EX, EX, AHEAD>(q_s, k_s, g_s, L, K, false, w.P + sh * kChunk * kChunk, xa_s, ka_s, T_s);
    }
    if (!DELTA) return;

    if constexpr (GATE != 2) load_beta();
    float* bk_s = q_s;
    for (int e = tid; e < kChunk * K; e += nt) bk_s[e] = e / K < L ? b_s[e / K] * k_s[e] : 0.0f;
    __syncthreads();
    if constexpr (GATE != 2) gated_scores_tc<GATE, false, EX, AHEAD>(bk_s, k_s, g_s, L, K, true, A_s, xa_s, ka_s, T_s);
    unit_lower_inverse_blocked(A_s, L, T_s);
    // T on its lower triangle, zero above (where the inverse kept its scratch).
    for (int e = tid; e < kChunk * kChunk; e += nt)
        w.Tm[sh * kChunk * kChunk + e] = e % kChunk <= e / kChunk ? T_s[e] : 0.0f;
    // A scalar gate's e^{γ_t}, once per token into g_s (read by nothing from here), where the
    // right operand below took it once per element; the same floats (γ is zero from L on).
    if constexpr (GATE == 1) {
        for (int t = tid; t < kChunk; t += nt) g_s[t] = exp_rn(gam_s[t]);
        __syncthreads();
    }
    // The right operand Λ(β ⊙ K) (zero past L, where β ⊙ K is).
    float* r_s = GATE == 2 ? xa_s : bk_s;    // in place where β ⊙ K is read by nothing else from here
    for (int e = tid; e < kChunk * K; e += nt)
        r_s[e] = exp_gamma<GATE>(g_s, gam_s, e / K, e % K, K) * bk_s[e];
    __syncthreads();
    // W = T Λ(β ⊙ K) and U = (T Diag(β)) V, T read on its lower triangle.
    auto T_at = [&](int t, int j) { return t < L && j <= t ? T_s[t * kChunk + j] : 0.0f; };
    constexpr int MT = row_tiles_for(prepare_threads<GATE>);
    block_mma<4, false, false, MT, AHEAD>(
        kChunk, K, kChunk, T_at, [&](int j, int i) { return r_s[j * K + i]; },
        [&](int t, int i, float acc) { w.W[sh * kChunk * K + t * K + i] = acc; });
    const TI* v = static_cast<const TI*>(a.v);
    block_mma<4, false, EX, MT, AHEAD>(
        kChunk, V, kChunk, [&](int t, int s) { return T_at(t, s) * b_s[s]; },
        [&](int s, int j) { return s < L ? to_float(v[(size_t(c.row0 + s) * d.HV + hv) * V + j]) : 0.0f; },
        [&](int t, int j, float acc) { w.U[sh * kChunk * V + t * V + j] = acc; });
}

// The state scan of version 1 with both products of a chunk step on tensor cores:
// Δ = U − W S (a slice of COLS value columns) and S ← Λ_C S + (K ⊙ e^{γ_C − γ})ᵀ Δ, the decay of
// the carried state applied by halves as there. A chunk step's loads (K ⊙ e^{γ_C − γ}, W) do not
// depend on the slice, so a wider slice spends them on more columns; every column's sums are the
// same whatever the width (scan_columns picks it from the grid alone). Tiles are padded (row
// strides K + 4, K + 8, COLS + 8) so that the fragment loads of each product fall into distinct
// shared-memory banks.
__host__ __device__ constexpr int scan_ld(int cols) { return cols + 8; }
// Output tiles (16·MT) × 8·NT per warp: wider for wider slices, so that one split of a fragment
// of W or K̃ serves more columns; two row tiles (MT) in the products with the chunk's rows only
// at 128 columns with 256 threads, the one width whose grid of such tiles has some to spare, and
// in the state's update wherever the block has 256 threads (scan_threads below).
template <int COLS>
constexpr int scan_nt = COLS >= 64 ? 4 : COLS / 16;
// The forward scan's block at 128 columns: kScanThreads threads (gdn_common.cuh; the Launcher's
// sized launch), 256 at every other width. At 512 threads ptxas holds it to 128 registers (spills
// of 4 to 24 bytes in some instantiations), and every product has one row tile a warp. On an H100
// the forward took 0.92–1.00 of its time at 256 threads, Gated DeltaNet's 0.98 (bench/RESULTS.md).
template <int COLS>
constexpr int scan_threads = COLS == 128 ? kScanThreads : kThreads;
template <int COLS>
constexpr int scan_chunk_mt = COLS == 128 ? row_tiles_for(scan_threads<COLS>) : 1;
template <int COLS>
constexpr int scan_update_mt = row_tiles_for(scan_threads<COLS>);

//
// The passes of a split scan (Dims::seg_chunks > 0; the launches are in gdn_launch.cuh), block x
// being segment x % segments of sequence x / segments:
// - kWhole: the sequence unsplit, from h0, writing every chunk's start state, Δ and ht;
// - kSummary: one segment's affine map S_end = M·S_start + E. Its value columns (grid.z below
//   ceil(V / COLS)) scan from a zero state and leave E; with the delta rule the columns past them
//   scan the K columns of M from the identity, U taken as zero, and leave M (without it M is
//   diagonal, and segment_combine forms it from the decays). Nothing else is written;
// - kRerun: one segment from its start state (segment_combine's), writing what kWhole writes for
//   its chunks, and ht from the sequence's last segment.
enum ScanPass : int { kWhole = 0, kSummary = 1, kRerun = 2 };

template <int GATE, bool DELTA, class TI, int COLS, int KV = 0>
__global__ void __launch_bounds__(scan_threads<COLS>, COLS <= 32 ? 2 : 1)
    state_scan_tc(Dims sizes, Workspace w, ForwardArgs a, int pass) {
    const Dims d = with_head_size<KV>(sizes);
    constexpr int ld = scan_ld(COLS), NT = scan_nt<COLS>;
    const int vslices = (d.V + COLS - 1) / COLS;
    // Columns of M (kSummary with the delta rule only; the launch gives the others none), at v0 of
    // its K.
    const bool mcols = pass == kSummary && int(blockIdx.z) >= vslices;
    const int n = blockIdx.x / d.segments, seg = blockIdx.x % d.segments, hv = blockIdx.y, h = hv / d.group;
    const int v0 = (mcols ? blockIdx.z - vslices : blockIdx.z) * COLS;
    const int K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int VS = min(COLS, (mcols ? K : V) - v0), GK = GATE == 2 ? K : 1;
    const int ldw = K + 4, ldk = K + 8;
    float* const smem = shared_floats();
    float* S_s = smem;                       // K×COLS, stride ld
    float* W_s = S_s + K * ld;               // C×K, stride K + 4
    float* kt_s = W_s + kChunk * ldw;        // C×K, stride K + 8
    float* D_s = kt_s + kChunk * ldk;        // C×COLS, stride ld
    float* dec_s = D_s + kChunk * ld;        // K: e^{γ_C / 2}
    // Raw inputs as they are: K's rows (C×K, stride K + 8) and, without the delta rule, V's slice
    // (C×COLS, stride COLS + 8); 16-byte aligned rows for 16-bit inputs.
    const int ldr = K + 8, ldv = COLS + 8;
    TI* const kr_s = aligned16<TI>(dec_s + K);
    TI* const vr_s = kr_s + kChunk * ldr;
    const SequenceExtent seq = sequence_extent(d, n);
    SegmentRange range;
    if (!segment_range(d, seq, seg, range)) return;
    const int r = n * d.segments + seg;
    const bool keep = pass != kSummary;   // the chunks' states and Δ written
    const StateSlice S{S_s, ld, K, mcols ? K : V, v0, VS, d.HV, hv, COLS};
    if (pass == kWhole) {
        S.load(a.h0, n);
    } else if (pass == kRerun) {
        S.load(w.seg_in, r);
    } else if (!mcols) {
        S.load(nullptr, 0);
    } else {
        for (int e = tid; e < K * COLS; e += nt) {
            const int i = e / COLS, col = e % COLS;
            S_s[i * ld + col] = col < VS && i == v0 + col ? 1.0f : 0.0f;
        }
        __syncthreads();
    }
    const TI* k = static_cast<const TI*>(a.k);
    const TI* v = static_cast<const TI*>(a.v);
    // The operands of chunk jc that do not depend on the state (K's raw rows, and W or V's raw
    // slice) by asynchronous copies: for chunk 0 before the loop, for the next chunk while this
    // one's second product runs (none of these tiles is read from there on), so that no chunk step
    // waits on them.
    auto stage_ahead = [&](int jc) {
        const ScanStep nx = scan_step(seq, jc, w, d.HV, hv, GK);
        copy_rows(kr_s, ldr, k + (size_t(nx.r0) * d.H + h) * K, size_t(d.H) * K, nx.L, K);
        if (DELTA)
            copy_rows(W_s, ldw, w.W + nx.sh * kChunk * K, K, kChunk, K);
        else if (!mcols)
            copy_rows(vr_s, ldv, v + (size_t(nx.r0) * d.HV + hv) * V + v0, size_t(d.HV) * V, nx.L, VS);
    };
    if (range.first < range.end) stage_ahead(range.first);
    for (int jc = range.first; jc < range.end; ++jc) {
        const ScanStep st = scan_step(seq, jc, w, d.HV, hv, GK);
        const int L = st.L;
        const size_t sh = st.sh;
        if (keep) S.store(w.states, st.slot);
        // U's slice into D_s, where Δ = U − W S replaces it (zero in M's columns); a per-channel
        // gate's e^{γ_C − γ} rows into kt_s, where K ⊙ e^{γ_C − γ} replaces them.
        if (DELTA && !mcols) copy_rows(D_s, ld, w.U + sh * kChunk * V + v0, V, L, VS);
        if (DELTA && mcols)
            for (int e = tid; e < L * VS; e += nt) D_s[(e / VS) * ld + e % VS] = 0.0f;
        if (GATE == 2) copy_rows(kt_s, ldk, st.to_end, K, L, K);
        half_chunk_decay<GATE>(st, K, dec_s);
        async_copies_wait();
        __syncthreads();
        // K ⊙ e^{γ_C − γ} from the staged rows, each element by the thread that reads its factor.
        // The first product does not read it; the barrier after that product orders it before the
        // second.
        copy_batched(
            kChunk * K,
            [&](int e) {
                const int t = e / K, i = e % K;
                if (t >= L) return 0.0f;
                const float te = GATE == 2 ? kt_s[t * ldk + i] : to_end_at<GATE>(st.to_end, t, 0, K);
                return to_float(kr_s[t * ldr + i]) * te;
            },
            [&](int e, float x) { kt_s[(e / K) * ldk + e % K] = x; });
        // Δ = U − W S (delta members) or V.
        if (DELTA) {
            block_mma<NT, false, false, scan_chunk_mt<COLS>>(
                L, VS, K, [&](int t, int i) { return W_s[t * ldw + i]; },
                [&](int i, int col) { return S_s[i * ld + col]; },
                [&](int t, int col, float acc) {
                    const float out = D_s[t * ld + col] - acc;
                    D_s[t * ld + col] = out;
                    if (keep) w.delta[(sh * kChunk + t) * V + v0 + col] = out;
                });
        } else {
            for (int e = tid; e < L * VS; e += nt) {
                const int t = e / VS, col = e % VS;
                const float out = mcols ? 0.0f : to_float(vr_s[t * ldv + col]);
                D_s[t * ld + col] = out;
                if (keep) w.delta[(sh * kChunk + t) * V + v0 + col] = out;
            }
        }
        __syncthreads();
        if (jc + 1 < range.end) stage_ahead(jc + 1);
        block_mma<NT, GATE == 0 && exact_in_tf32<TI>, !DELTA && exact_in_tf32<TI>, scan_update_mt<COLS>>(
            K, VS, L, [&](int i, int t) { return kt_s[t * ldk + i]; },
            [&](int t, int col) { return D_s[t * ld + col]; },
            [&](int i, int col, float acc) {
                S_s[i * ld + col] = decayed(S_s[i * ld + col], dec_s[i]) + acc;
            });
        __syncthreads();
    }
    if (pass == kSummary) S.store(mcols ? w.seg_map : w.seg_end, r);
    else if (a.ht && range.last) S.store(a.ht, n);
}

// The split scans' sequential step (Dims::seg_chunks > 0), one block per (sequence, value head,
// COLS value columns): carries the state across the sequence's segments through their affine maps
// and writes each segment's start for its rerun (w.seg_in). Forward (REVERSE false), from h0:
//   S_0 = h0,  S_{s+1} = M_s S_s + E_s;
// backward (REVERSE true; gdn_backward_tc.cuh), the gradient at each segment's end, from dht at
// the sequence's end down:
//   G_last = dht,  G_{s−1} = M_sᵀ G_s + E_s   (E_s the segment's dS at its start from G_s = 0).
// With the delta rule M_s is the summary pass's K×K matrix: one float32-accurate product of K×K by
// K×COLS per segment (block_mma, split operands, as the scans'), into the other of two state tiles.
// Without it M_s is diagonal, the product of the segment's chunk decays, which the summary pass
// does not scan: each chunk's decay is applied as the scans apply it, by halves, e^{γ_C / 2} per
// channel (none for linear attention, whose M is the identity), in place. The sequence's last start
// (first, in reverse) is not carried further: the rerun of its segment reaches ht (dh0) itself.
template <int GATE, bool DELTA, bool REVERSE, int COLS, int KV = 0>
__global__ void __launch_bounds__(kThreads, 1) segment_combine(Dims sizes, Workspace w, const float* start) {
    const Dims d = with_head_size<KV>(sizes);
    constexpr int ld = scan_ld(COLS), NT = scan_nt<COLS>;
    const int n = blockIdx.x, hv = blockIdx.y, v0 = blockIdx.z * COLS;
    const int K = d.K, V = d.V, VS = min(COLS, V - v0), GK = GATE == 2 ? K : 1, tid = threadIdx.x, nt = blockDim.x;
    float* const smem = shared_floats();
    float* cur = smem;                         // K×COLS, stride ld
    float* nxt = smem + K * ld;                // likewise (delta rule)
    float* dec = nxt + (DELTA ? K * ld : 0);   // K: e^{γ_C / 2} (no delta rule)
    const SequenceExtent seq = sequence_extent(d, n);
    const int count = segment_count(d, seq.chunks);
    StateSlice S{cur, ld, K, V, v0, VS, d.HV, hv, COLS};
    S.load(start, n);
    for (int step = 0;; ++step) {
        const int s = REVERSE ? count - 1 - step : step;
        const int r = n * d.segments + s;
        S.s = cur;
        S.store(w.seg_in, r);
        if (step == count - 1) break;
        const size_t rh = size_t(r) * d.HV + hv;
        const float* E = w.seg_end + rh * K * V + v0;
        if constexpr (DELTA) {
            const float* M = w.seg_map + rh * K * K;
            block_mma<NT, false, false>(
                K, VS, K, [&](int i, int j) { return REVERSE ? M[j * K + i] : M[i * K + j]; },
                [&](int j, int col) { return cur[j * ld + col]; },
                [&](int i, int col, float acc) { nxt[i * ld + col] = acc + E[size_t(i) * V + col]; });
            __syncthreads();
            float* const t = cur;
            cur = nxt;
            nxt = t;
        } else {
            SegmentRange range;
            segment_range(d, seq, s, range);
            for (int jc = range.first; GATE != 0 && jc < range.end; ++jc) {
                half_chunk_decay<GATE>(scan_step(seq, jc, w, d.HV, hv, GK), K, dec);
                __syncthreads();
                for (int e = tid; e < K * VS; e += nt) {
                    const int i = e / VS, col = e % VS;
                    cur[i * ld + col] = decayed(cur[i * ld + col], dec[i]);
                }
                __syncthreads();
            }
            for (int e = tid; e < K * VS; e += nt) {
                const int i = e / VS, col = e % VS;
                cur[i * ld + col] += E[size_t(i) * V + col];
            }
            __syncthreads();
        }
    }
}

// Shared memory of segment_combine<GATE, DELTA, ...>.
inline size_t segment_combine_smem_bytes(int K, int cols, bool delta) {
    return sizeof(float) * (delta ? 2 * size_t(K) * scan_ld(cols) : size_t(K) * scan_ld(cols) + K);
}


// elem: the size of an input value (K's rows and V's slice are staged raw).
inline size_t scan_tc_smem_bytes(int K, int cols, size_t elem) {
    const size_t ld = scan_ld(cols);
    return sizeof(float) * (size_t(K) * ld + size_t(kChunk) * (2 * K + 12) + kChunk * ld + K) + 16 +
           elem * kChunk * (K + cols + 16);
}

// Bytes of chunk_output_tc's tile of Q: Q ⊙ e^γ as floats (stride K + 4) for a per-channel gate,
// else Q's raw rows (stride K + 8) and the slack that aligns them to 16 bytes.
inline __host__ __device__ size_t output_q_bytes(int K, int gate, size_t elem) {
    return gate == 2 ? sizeof(float) * kChunk * (K + 4) : 16 + elem * kChunk * (K + 8);
}

// O = scale·[(Q ⊙ e^γ) S₀ + tril(P) Δ] for a slice of kOutCols value columns per block, as one
// product over the K + C concatenated columns. Q, the left operand's first K columns, is read by
// every slice: without a per-channel gate its raw rows go by asynchronous copies and the product
// forms q·e^{γ_t} where it reads them; each slice forms a per-channel gate's Q ⊙ e^γ into a float
// tile. P, the rest of the left operand, goes by asynchronous copies too. The right operand, S₀'s
// and Δ's slices:
// - on mma.sync (block_mma; WG false): staged in shared memory first, read once, coalesced,
//   instead of element by element from global memory inside the product; row strides K + 4, K + 8,
//   C + 4 and kOutCols + 8 put each fragment load of the product into distinct banks;
// - on wgmma (block_mma_wgmma, gdn_wgmma.cuh; WG true): read from global memory where the product
//   splits it into its tiles, each value once, a warp's reads neighbours, the shared memory the
//   staged tiles took holding the split tiles instead.
// The same bits either way. A slice of 64 columns holds a block under 113 KiB and 128 registers, so
// that two share an SM and one block's copies are in flight while the other's product runs (one
// block of all 128 columns, 152 KiB, waited on its copies alone). Every column's sums are the same
// at any slice width: the values and the order of the sums are those of one block over all columns.
constexpr int kOutCols = 64;

template <int GATE, class TI, int KV = 0, bool WG = false>
__global__ void __launch_bounds__(kThreads, 2) chunk_output_tc(Dims sizes, Workspace w, ForwardArgs a) {
    const Dims d = with_head_size<KV>(sizes);
    ChunkPos c;
    if (!locate_chunk(d, blockIdx.x, c)) return;
    const int hv = blockIdx.y, h = hv / d.group, K = d.K, V = d.V, v0 = blockIdx.z * kOutCols;
    const int VS = min(kOutCols, V - v0), GK = GATE == 2 ? K : 1, L = c.L;
    const int ldq = K + 4, ldr = K + 8, ldp = kChunk + 4, ldv = kOutCols + 8;
    float* const smem = shared_floats();
    float* P_s = smem;                                  // C×C, stride C + 4
    float* S_s = P_s + kChunk * ldp;                    // mma.sync: K×VS, S₀'s slice, stride kOutCols + 8
    float* D_s = S_s + (WG ? 0 : K * ldv);              // mma.sync: C×VS, Δ's slice (zero past L), likewise
    float* e_s = D_s + (WG ? 0 : kChunk * ldv);         // C: e^{γ_t} (scalar gate)
    float* qt_s = e_s + kChunk;                         // per-channel gate: C×K, Q ⊙ e^γ, stride K + 4
    TI* const qr_s = aligned16<TI>(qt_s);               // other gates: Q's raw rows (C×K, stride K + 8); rows from L on stale
    // wgmma: block_mma_wgmma's split tiles, past Q's.
    uint8_t* const tiles = WG ? reinterpret_cast<uint8_t*>(qt_s) + output_q_bytes(K, GATE, sizeof(TI)) : nullptr;
    const size_t sh = size_t(c.slot) * d.HV + hv;
    const float* gam = w.gamma + sh * kChunk * GK;
    const TI* q = static_cast<const TI*>(a.q);
    const size_t q_at0 = (size_t(c.row0) * d.H + h) * K;
    copy_rows(P_s, ldp, w.P + sh * kChunk * kChunk, kChunk, kChunk, kChunk);
    if constexpr (!WG) {
        copy_rows(S_s, ldv, w.states + sh * K * V + v0, V, K, VS);
        // Δ is written by the scan only for rows < L.
        copy_rows(D_s, ldv, w.delta + sh * kChunk * V + v0, V, L, VS);
        for (int e = L * VS + threadIdx.x; e < kChunk * VS; e += blockDim.x) D_s[(e / VS) * ldv + e % VS] = 0.0f;
    }
    if constexpr (GATE == 2) {
        copy_batched(
            kChunk * K,
            [&](int e) {
                const int t = e / K, i = e % K;
                if (t >= L) return 0.0f;
                return to_float(q[q_at0 + size_t(t) * d.H * K + i]) * exp_rn(gamma_at<GATE>(gam, t, i, K));
            },
            [&](int e, float x) { qt_s[(e / K) * ldq + e % K] = x; });
    } else {
        copy_rows(qr_s, ldr, q + q_at0, size_t(d.H) * K, L, K);
        // A scalar gate's factor, one exponential per row.
        if (GATE == 1)
            for (int t = threadIdx.x; t < L; t += blockDim.x) e_s[t] = exp_rn(gam[t]);
    }
    async_copies_wait();
    __syncthreads();
    // Q ⊙ e^γ as the product reads it (rows t < L): the same product of the same two floats as
    // the per-channel gate's tile holds.
    auto qt_at = [&](int t, int i) {
        if constexpr (GATE == 2) return qt_s[t * ldq + i];
        else if constexpr (GATE == 1) return to_float(qr_s[t * ldr + i]) * e_s[t];
        else return to_float(qr_s[t * ldr + i]);
    };
    TI* o = static_cast<TI*>(a.o);
    // Columns x < K of the left operand are Q ⊙ e^γ against rows of S₀; columns K + s are
    // tril(P) against the rows of Δ.
    auto left = [&](int t, int x) { return x < K ? qt_at(t, x) : P_s[t * ldp + x - K]; };
    auto store = [&](int t, int j, float acc) {
        o[(size_t(c.row0 + t) * d.HV + hv) * V + v0 + j] = from_float<TI>(d.scale * acc);
    };
    if constexpr (WG) {
        // Δ is written by the scan only for rows < L.
        const float* S0 = w.states + sh * K * V + v0;
        const float* D = w.delta + sh * kChunk * V + v0;
        auto right = [&](int x, int j) {
            return x < K ? S0[size_t(x) * V + j] : x - K < L ? D[size_t(x - K) * V + j] : 0.0f;
        };
        block_mma_wgmma<false, false>(L, VS, K + kChunk, left, right, store, tiles);
    } else {
        block_mma<4, false, false>(
            L, VS, K + kChunk, left, [&](int x, int j) { return x < K ? S_s[x * ldv + j] : D_s[(x - K) * ldv + j]; },
            store);
    }
}

// elem: the size of an input value (Q's rows are staged raw without a per-channel gate); wg: the
// product on wgmma (chunk_output_tc's WG).
inline size_t output_tc_smem_bytes(int K, int gate, size_t elem, bool wg) {
    const size_t ldv = kOutCols + 8;
    const size_t right = wg ? kWgmmaScratchBytes : sizeof(float) * size_t(K + kChunk) * ldv;
    return sizeof(float) * (size_t(kChunk) * (kChunk + 4) + kChunk) + output_q_bytes(K, gate, elem) + right;
}

}  // namespace kcv::gdn::cuda
