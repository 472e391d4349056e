// Chunked backward of the gated linear recurrence on sm_90a, version 2: reverse_scan and
// chunk_grad of version 1 (gdn_backward.cuh) with their matrix products on tensor cores, and
// chunk_grad's serial reductions spread over the block.
//
// Build (through gdn_api.cu, which holds the launches):
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c gdn/cuda/gdn_api.cu
//
// Same algebra, workspace and outputs as version 1, which stays the reference beside it (and the
// path of float32 inputs). On tensor cores (gdn_mma.cuh: mma.sync m16n8k8 TF32, float32 operands
// split exactly into three TF32 parts, raw 16-bit inputs used as exact single TF32 operands): the
// products over V with
// the states and Δ (dQ̃, dK̃, dW, dP), the intra-chunk score gradients for the gates without a
// per-channel factor, dT = dΔ Ṽᵀ + dW R̃ᵀ, Tᵀ dW, Tᵀ dΔ and dA = −Tᵀ (dT Tᵀ). The gradient of
// γ_C (one thread per gate channel in version 1, a 24 000-step serial loop for a scalar gate) is
// summed per channel in parallel and then over channels in the same order as version 1; dβ reads
// Tᵀ dΔ from the workspace instead of recomputing it on one thread per token. Still scalar: the
// per-channel (KDA, GLA) score gradients, the element-wise terms; since version 2.1 the former
// take their exponents from running Kahan sums (gated_scores_backward_running, gdn_mma.cuh).
// Limits as version 1: K, V <= 128.
#pragma once

#include "gdn_backward.cuh"
#include "gdn_forward_tc.cuh"
#include "gdn_mma.cuh"

namespace kcv::gdn::cuda {

// The reverse state scan of version 1 with its products on tensor cores, per chunk step (dS the
// gradient of the state after the chunk, a slice of COLS value columns as in state_scan_tc):
//   dΔ = (K ⊙ e^{γ_C−γ}) dS + (scale·tril(P))ᵀ dO     one product over K + C concatenated columns,
//   Tᵀ dΔ                                              (delta members),
//   dS ← Λ_C dS + Σ_t (scale·q_t e^{γ_t/2})(dO_t e^{γ_t/2})ᵀ − Σ_t (b_t e^{γ_t/2})((Tᵀ dΔ)_t e^{γ_t/2})ᵀ
// the last for the gates whose decay depends on the token only (GATE 0, 1): each operand carries
// one half of e^{γ_t}, so a strongly decayed term keeps its significant bits as in version 1. A
// per-channel gate's factor e^{γ_ti} depends on the channel too and cannot be split between the
// operands; that update stays version 1's scalar loop. Tiles are padded so that each fragment
// load falls into distinct banks (K's tile, read by rows in dΔ and by columns in the update, is
// padded for the rows).
//
// K, Q and dO's slice are staged raw, as the inputs hold them, in two sets of tiles: the next
// chunk's asynchronous copies are in flight while this chunk's products run, so a chunk step waits
// only on its P and T. β ⊙ K and, for the gates without a per-channel factor, K ⊙ e^{γ_C−γ} are
// formed where the products read them, the same products of the same two floats as tiles of
// their own would hold; the 64-column slice then fits in shared memory beside the rest
// (reverse_scan_tc_smem_bytes), and half as many blocks load each chunk.
//
// WG (gates without a per-channel factor): the three products on wgmma (block_mma_tiled,
// gdn_wgmma.cuh), the same bits. Its split tiles take the place of P's and T's staged tiles; the
// products read P and T from global memory where they split them, so that the 64-column slice
// still fits.
//
// pass (ScanPass, gdn_forward_tc.cuh), block x being segment x % segments of sequence x / segments:
// kWhole scans the sequence from dht; kSummary one segment from a zero gradient at its end,
// leaving its dS at its start in w.seg_end (E of segment_combine, REVERSE) and writing nothing else;
// kRerun one segment from the gradient segment_combine left at its end, writing what kWhole writes
// for its chunks, and dh0 from the sequence's first segment. The map of dS across a segment is
// the transpose of the forward's M (dS ← Λ_C dS − Wᵀ (K ⊙ e^{γ_C−γ}) dS + terms free of dS), so
// the forward's kSummary pass supplies it.
//
// The block has kThreads threads: at K = V = 128 its shared memory holds it to 64 columns (32 for a
// per-channel gate), where a block of 512 would have no tiles for its extra warps.
template <int GATE, bool DELTA, class TI, int COLS, int KV = 0, bool WG = false>
__global__ void __launch_bounds__(kThreads, 1) reverse_scan_tc(Dims sizes, Workspace w, BackwardArgs a, int pass) {
    static_assert(!WG || GATE != 2, "a per-channel gate's update is not a product");
    constexpr int kChunkMT = COLS == 128 ? row_tiles_for(kThreads) : 1;   // the products over the chunk's rows
    const Dims d = with_head_size<KV>(sizes);
    constexpr int ld = scan_ld(COLS), NT = scan_nt<COLS>;
    const int n = blockIdx.x / d.segments, seg = blockIdx.x % d.segments, hv = blockIdx.y, v0 = blockIdx.z * COLS;
    const int h = hv / d.group;
    const int K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int VS = min(COLS, V - v0), GK = GATE == 2 ? K : 1;
    const int ldk = K + 4, ldr = K + 8, ldo = COLS + 8, ldp = kChunk + 8;
    const float scale = d.scale;
    float* const smem = shared_floats();
    float* dS_s = smem;                                 // K×COLS, stride ld
    float* kt_s = dS_s + K * ld;                        // per-channel gate: C×K  K ⊙ e^{γ_C − γ}, stride K + 4
    float* half_s = kt_s + (GATE == 2 ? kChunk * ldk : 0);   // C×GK e^{γ_t / 2}
    float* te_s = half_s + kChunk * GK;                 // C   e^{γ_C − γ_t} (GATE 0, 1), zero past L
    float* b_s = te_s + kChunk;                         // C   β (delta), zero past L
    float* P_s = b_s + kChunk;                          // mma.sync: C×C, stride C + 8
    float* T_s = P_s + (WG ? 0 : kChunk * ldp);         // mma.sync: C×C  (delta), stride C + 8
    float* dD_s = T_s + (WG ? 0 : kChunk * ldp);        // C×COLS
    float* TdD_s = dD_s + kChunk * ld;                  // C×COLS Tᵀ dΔ (delta)
    float* dec_s = TdD_s + kChunk * ld;                 // K    e^{γ_C / 2}
    // Two sets of raw tiles, each K and Q (C×K, stride K + 8) and dO's slice (C×COLS, stride
    // COLS + 8): 16-byte aligned rows for 16-bit inputs. Rows from L on are stale; every read
    // of them is guarded.
    const int raw_elems = kChunk * (2 * ldr + ldo);
    TI* const raw_s = aligned16<TI>(dec_s + K);
    // wgmma: block_mma_tiled's split tiles, past the raw tiles.
    uint8_t* const tiles = WG ? reinterpret_cast<uint8_t*>(raw_s + 2 * raw_elems) : nullptr;
    const SequenceExtent seq = sequence_extent(d, n);
    SegmentRange range;
    if (!segment_range(d, seq, seg, range)) return;
    const int r = n * d.segments + seg;
    const bool keep = pass != kSummary;   // the chunks' dS and dΔ written
    const StateSlice dS{dS_s, ld, K, V, v0, VS, d.HV, hv, COLS};
    dS.load(pass == kWhole ? a.dht : pass == kRerun ? w.seg_in : nullptr, pass == kWhole ? n : r);
    const TI* q = static_cast<const TI*>(a.fwd.q);
    const TI* k = static_cast<const TI*>(a.fwd.k);
    const TI* beta = static_cast<const TI*>(a.fwd.beta);
    const TI* dO = static_cast<const TI*>(a.d_o);
    auto stage = [&](int jc, int set) {
        const ScanStep nx = scan_step(seq, jc, w, d.HV, hv, GK);
        TI* const kr = raw_s + set * raw_elems;
        const size_t at = (size_t(nx.r0) * d.H + h) * K, row = size_t(d.H) * K;
        copy_rows(kr, ldr, k + at, row, nx.L, K);
        copy_rows(kr + kChunk * ldr, ldr, q + at, row, nx.L, K);
        copy_rows(kr + 2 * kChunk * ldr, ldo, dO + (size_t(nx.r0) * d.HV + hv) * V + v0, size_t(d.HV) * V, nx.L, VS);
    };
    if (range.first < range.end) stage(range.end - 1, 0);
    for (int jc = range.end - 1, set = 0; jc >= range.first; --jc, set ^= 1) {
        const ScanStep st = scan_step(seq, jc, w, d.HV, hv, GK);
        const int L = st.L;
        const size_t sh = st.sh;
        const float* gam = st.gam;
        const TI* const kr = raw_s + set * raw_elems;
        const TI* const qr = kr + kChunk * ldr;
        const TI* const dOr = qr + kChunk * ldr;
        auto k_at = [&](int t, int i) { return to_float(kr[t * ldr + i]); };
        auto q_at = [&](int t, int i) { return to_float(qr[t * ldr + i]); };
        auto dO_at = [&](int t, int col) { return t < L ? to_float(dOr[t * ldo + col]) : 0.0f; };
        // K ⊙ e^{γ_C − γ} and β ⊙ K, as the products read them (rows t < L).
        auto kt_at = [&](int t, int i) {
            if constexpr (GATE == 2) return kt_s[t * ldk + i];
            else return k_at(t, i) * te_s[t];
        };
        auto bk_at = [&](int t, int i) { return b_s[t] * k_at(t, i); };
        if (keep) dS.store(w.dstates, st.slot);
        // P and T on mma.sync (and a per-channel gate's e^{γ_C − γ} rows, into kt_s) by
        // asynchronous copies, in flight while β, e^{γ_C − γ_t} and e^{γ_t / 2} load.
        const float* const P = w.P + sh * kChunk * kChunk;
        const float* const Tm = w.Tm + sh * kChunk * kChunk;
        if (!WG) copy_rows(P_s, ldp, P, kChunk, kChunk, kChunk);
        if (DELTA && !WG) copy_rows(T_s, ldp, Tm, kChunk, kChunk, kChunk);
        if (GATE == 2) copy_rows(kt_s, ldk, st.to_end, K, L, K);
        for (int t = tid; t < kChunk; t += nt) {
            te_s[t] = GATE != 2 && t < L ? to_end_at<GATE>(st.to_end, t, 0, K) : 0.0f;
            b_s[t] = DELTA && t < L ? to_float(beta[size_t(st.r0 + t) * d.HV + hv]) : 0.0f;
        }
        for (int e = tid; e < kChunk * GK; e += nt)
            half_s[e] = GATE != 0 && e / GK < L ? exp_rn(0.5f * gam[e]) : 1.0f;
        half_chunk_decay<GATE>(st, K, dec_s);
        async_copies_wait();
        __syncthreads();
        // The next chunk's raw tiles, in flight while this step runs: their set was last read
        // before the barrier above.
        if (jc > range.first) stage(jc - 1, set ^ 1);
        if constexpr (GATE == 2) {
            for (int e = tid; e < kChunk * K; e += nt) {
                const int t = e / K, i = e % K;
                kt_s[t * ldk + i] = t < L ? k_at(t, i) * kt_s[t * ldk + i] : 0.0f;
            }
            __syncthreads();
        }
        // dΔ: columns x < K are K ⊙ e^{γ_C−γ} against dS, columns K + s are scale·P_st (s ≥ t)
        // against dO.
        auto P_at = [&](int s, int t) { return WG ? P[s * kChunk + t] : P_s[s * ldp + t]; };
        auto T_at = [&](int s, int t) { return WG ? Tm[s * kChunk + t] : T_s[s * ldp + t]; };
        // Each product on mma.sync (block_mma, its tile shape as given) or on wgmma.
        auto product = [&]<int MT>(int M, int N, int Kd, auto A, auto B, auto out) {
            block_product<WG, NT, false, false, MT>(M, N, Kd, A, B, out, tiles);
        };
        product.template operator()<kChunkMT>(
            L, VS, K + kChunk,
            [&](int t, int x) {
                if (x < K) return kt_at(t, x);
                const int s = x - K;
                return s >= t && s < L ? scale * P_at(s, t) : 0.0f;
            },
            [&](int x, int col) { return x < K ? dS_s[x * ld + col] : dO_at(x - K, col); },
            [&](int t, int col, float acc) {
                dD_s[t * ld + col] = acc;
                if (keep) w.ddelta[(sh * kChunk + t) * V + v0 + col] = acc;
            });
        __syncthreads();
        if (DELTA) {
            product.template operator()<kChunkMT>(
                L, VS, L, [&](int t, int s) { return s >= t ? T_at(s, t) : 0.0f; },
                [&](int s, int col) { return dD_s[s * ld + col]; },
                [&](int t, int col, float acc) { TdD_s[t * ld + col] = acc; });
            __syncthreads();
        }
        if constexpr (GATE != 2) {
            // Columns x < L: scale·q ⊙ e^{γ/2} against dO ⊙ e^{γ/2}; columns L + t: −β k e^{γ/2}
            // against Tᵀ dΔ e^{γ/2}.
            product.template operator()<row_tiles_for(kThreads)>(
                K, VS, DELTA ? 2 * L : L,
                [&](int i, int x) {
                    return x < L ? scale * q_at(x, i) * half_s[x] : -bk_at(x - L, i) * half_s[x - L];
                },
                [&](int x, int col) {
                    return x < L ? dO_at(x, col) * half_s[x] : TdD_s[(x - L) * ld + col] * half_s[x - L];
                },
                [&](int i, int col, float acc) {
                    dS_s[i * ld + col] = decayed(dS_s[i * ld + col], dec_s[i]) + acc;
                });
        } else {
            // Version 1's loop, each element's two sums over t in its order, but each thread on an
            // R×R tile of (channel, column): a token's q, β ⊙ k and e^{γ/2} for R channels and its
            // dO and Tᵀ dΔ for R columns are read once for R products each, where one element per
            // thread read all five for each product. Indices past K or VS are clamped (read, not
            // written).
            constexpr int R = 4;
            const int ctiles = (VS + R - 1) / R, tiles = ((K + R - 1) / R) * ctiles;
            for (int tile = tid; tile < tiles; tile += nt) {
                const int i0 = (tile / ctiles) * R, c0 = (tile % ctiles) * R;
                float from_o[R][R], from_w[R][R];
                KCV_GDN_UNROLL
                for (int u = 0; u < R; ++u)
                    KCV_GDN_UNROLL
                    for (int x = 0; x < R; ++x) from_o[u][x] = from_w[u][x] = 0.0f;
                for (int t = 0; t < L; ++t) {
                    float qv[R], bkv[R], hf[R], dov[R], tdv[R];
                    KCV_GDN_UNROLL
                    for (int u = 0; u < R; ++u) {
                        const int i = min(i0 + u, K - 1), col = min(c0 + u, VS - 1);
                        qv[u] = q_at(t, i);
                        hf[u] = half_s[t * GK + i];
                        dov[u] = dO_at(t, col);
                        if (DELTA) {
                            bkv[u] = bk_at(t, i);
                            tdv[u] = TdD_s[t * ld + col];
                        }
                    }
                    KCV_GDN_UNROLL
                    for (int u = 0; u < R; ++u)
                        KCV_GDN_UNROLL
                        for (int x = 0; x < R; ++x) {
                            from_o[u][x] += decayed(qv[u] * dov[x], hf[u]);
                            if (DELTA) from_w[u][x] += decayed(bkv[u] * tdv[x], hf[u]);
                        }
                }
                KCV_GDN_UNROLL
                for (int u = 0; u < R; ++u)
                    KCV_GDN_UNROLL
                    for (int x = 0; x < R; ++x) {
                        const int i = i0 + u, col = c0 + x;
                        if (i >= K || col >= VS) continue;
                        float s = decayed(dS_s[i * ld + col], dec_s[i]) + scale * from_o[u][x];
                        if (DELTA) s -= from_w[u][x];
                        dS_s[i * ld + col] = s;
                    }
            }
        }
        __syncthreads();
    }
    if (pass == kSummary) dS.store(w.seg_end, r);
    else if (a.dh0 && range.first == 0) dS.store(a.dh0, n);
}

// chunk_grad_tc's block on mma.sync: kGradThreads threads (gdn_common.cuh; the Launcher's sized
// launch), no spill at K = V = 128. At 512 its products give each warp half the tiles: one row
// tile (kGradMT) in the C×K products and two column tiles (kGradNT) in the C×C ones, so that all
// 16 warps have one. On an H100 512 threads took 0.92–0.98 of forward+backward (bench/RESULTS.md).
constexpr int kGradMT = row_tiles_for(kGradThreads);
constexpr int kGradNT = kGradThreads > kThreads ? 2 : 4;

// gated_scores_backward (gdn_common.cuh) for the gates without a per-channel factor (GATE 0, 1),
// the two products over the chunk's tokens on tensor cores:
//   gx = (dM ⊙ F) k,  gk = (dM ⊙ F)ᵀ x  on the support of M,
// then dgam as there, but each row's sum over channels in float64. XEXACT / KEXACT: x / k hold raw
// 16-bit inputs. WG: the products on wgmma (block_product), tiles their scratch.
template <int GATE, bool XEXACT, bool KEXACT, bool WG>
__device__ void gated_scores_backward_tc(const float* dM, const float* x, const float* k, const float* F, int L,
                                         int K, bool strict, float* gx, float* gk, float* dgam, uint8_t* tiles) {
    static_assert(GATE != 2, "a per-channel gate uses gated_scores_backward");
    auto weight = [&](int t, int j) {
        if (t >= L || j >= L || (strict ? j >= t : j > t)) return 0.0f;
        return GATE == 1 ? dM[t * kChunk + j] * F[t * kChunk + j] : dM[t * kChunk + j];
    };
    block_product<WG, 4, false, KEXACT, kGradMT>(
        kChunk, K, kChunk, weight, [&](int j, int i) { return k[j * K + i]; },
        [&](int t, int i, float acc) { gx[t * K + i] = acc; }, tiles);
    block_product<WG, 4, false, XEXACT, kGradMT>(
        kChunk, K, kChunk, [&](int j, int s) { return weight(s, j); }, [&](int s, int i) { return x[s * K + i]; },
        [&](int j, int i, float acc) { gk[j * K + i] = acc; }, tiles);
    __syncthreads();
    if (GATE == 1) {
        // In float64, where each product and difference is exact: the row's terms nearly cancel
        // the column's over the chunk (dg_t sums them from t on), so a float32 sum's rounding
        // would be what is left.
        // One thread per row, walked by walk_rows (16-byte loads where the rows allow them), the same
        // terms in the same order.
        for (int t = threadIdx.x; t < L; t += blockDim.x) {
            double acc = 0.0;
            walk_rows(
                K, [&](int, float xi, float gxi, float ki, float gki) { acc += double(xi) * gxi - double(ki) * gki; },
                x + t * K, gx + t * K, k + t * K, gk + t * K);
            dgam[t] += float(acc);
        }
    }
    __syncthreads();
}

// The score gradient of version 2: on tensor cores for the gates without a per-channel factor,
// gated_scores_backward_running for a per-channel gate, with F as its scratch (F holds the scalar
// gate's factors for GATE 1; g, xa, ea unused otherwise; WG and tiles as gated_scores_backward_tc).
template <int GATE, bool XEXACT, bool KEXACT, bool WG>
__device__ __forceinline__ void score_gradients(const float* dM, const float* x, const float* k, const float* g,
                                                float* F, int L, int K, bool strict, float* gx, float* gk,
                                                float* dgam, float* xa, float* ea, uint8_t* tiles) {
    if constexpr (GATE == 2)
        gated_scores_backward_running(dM, x, k, g, L, K, strict, gx, gk, dgam, xa, ea, F);
    else
        gated_scores_backward_tc<GATE, XEXACT, KEXACT, WG>(dM, x, k, F, L, K, strict, gx, gk, dgam, tiles);
}

// elem: the size of an input value (two sets of K, Q and dO's slice are staged raw); wg: the
// products on wgmma (reverse_scan_tc's WG): the split tiles in place of P's and T's.
inline size_t reverse_scan_tc_smem_bytes(int K, int gate, int cols, size_t elem, bool wg = false) {
    const int GK = gate == 2 ? K : 1;
    const size_t ld = scan_ld(cols);
    const size_t kt = gate == 2 ? size_t(kChunk) * (K + 4) : 0;   // K ⊙ e^{γ_C − γ} for a per-channel gate
    const size_t pt = wg ? 0 : 2 * kChunk * (kChunk + 8);
    return sizeof(float) * (size_t(K) * ld + kt + size_t(kChunk) * GK + 2 * kChunk + pt + 2 * kChunk * ld + K) +
           16 + 2 * elem * kChunk * (2 * (K + 8) + cols + 8) + (wg ? kWgmmaScratchBytes : 0);
}

// chunk_grad_tc's: grad_smem_bytes, a scalar gate's C factors e^{γ_t}, and for the gates without
// a per-channel factor either dO and V as raw values of `elem` bytes (C rows of stride V + 8 each,
// from the next 16-byte boundary) or, with its products on wgmma (wg), their split tiles: 215 KB
// for Gated DeltaNet at K = V = 128, beside 200 KB staged. A per-channel gate's tiles take 224.8
// KiB of the 227 and leave room for neither.
inline size_t grad_tc_smem_bytes(int K, int V, int gate, size_t elem, bool wg = false) {
    return grad_smem_bytes(K, gate) + (gate == 1 ? sizeof(float) * kChunk : 0) +
           (gate == 2 ? 0 : wg ? kWgmmaScratchBytes : 16 + 2 * elem * kChunk * (size_t(V) + 8));
}

// A chunk's gradients: version 1's chunk_grad with its products on tensor cores. WG (the gates
// without a per-channel factor): every product on wgmma (block_product), the same bits; the GPU
// library launches it only when built with KCV_GDN_GRAD_WGMMA=1 (kGradOnWgmma, gdn_wgmma.cuh, says
// why).
template <int GATE, bool DELTA, class TI, int KV = 0, bool WG = false>
__global__ void __launch_bounds__(WG ? kThreads : kGradThreads, 1)
    chunk_grad_tc(Dims sizes, Workspace w, BackwardArgs a) {
    static_assert(!WG || GATE != 2, "a per-channel gate's tiles leave no room for wgmma's");
    const Dims d = with_head_size<KV>(sizes);
    ChunkPos c;
    if (!locate_chunk(d, blockIdx.x, c)) return;
    const int hv = blockIdx.y, K = d.K, V = d.V, tid = threadIdx.x, nt = blockDim.x;
    const int L = c.L, GK = GATE == 2 ? K : 1;
    constexpr bool EX = exact_in_tf32<TI>;
    const float scale = d.scale;
    const size_t sh = size_t(c.slot) * d.HV + hv;
    const GradTiles G = grad_tiles<GATE>(w, sh, K, V);
    // Tᵀ dΔ for dβ, in U's slot unless the preparation is kept apart: the backward never reads U
    // (only the forward's scan does).
    float* s_dvt = DELTA ? w.dvt + sh * kChunk * V : nullptr;
    const TI* dO = static_cast<const TI*>(a.d_o);
    const TI* v = static_cast<const TI*>(a.fwd.v);
    // On mma.sync, dO and V as raw 16-bit values in shared memory past G's tiles, rows from L on
    // zero, where those tiles leave room (grad_tc_smem_bytes: not for a per-channel gate): copied
    // once (copy_rows) instead of read element by element from global memory inside the products.
    // Row stride V + 8 halves puts each fragment load into distinct banks. On wgmma (WG) the
    // products' split tiles take that place, and each product reads dO and V once per output
    // tile, from global memory, where it splits them.
    constexpr bool kStaged = GATE != 2 && !WG;
    const int ldo = V + 8;
    // A scalar gate's e^{γ_t}, one per token (zero from L on), taken once where the element-wise
    // passes below took it once per element (C·K times each); the same floats.
    float* const eg_s = G.past;
    float* const free_s = G.past + (GATE == 1 ? kChunk : 0);   // past the e^{γ_t}: staged dO and V, or wgmma's tiles
    TI* const dO_s = aligned16<TI>(free_s);
    TI* const v_s = dO_s + kChunk * ldo;
    uint8_t* const tiles = WG ? reinterpret_cast<uint8_t*>(free_s) : nullptr;
    auto beta_at = [&](int t) { return DELTA ? G.b_s[t] : 0.0f; };
    auto dO_at = [&](int t, int j) {
        if constexpr (kStaged) return to_float(dO_s[t * ldo + j]);
        else return t < L ? to_float(dO[(size_t(c.row0 + t) * d.HV + hv) * V + j]) : 0.0f;
    };
    auto v_at = [&](int t, int j) {
        if constexpr (kStaged) return to_float(v_s[t * ldo + j]);
        else return to_float(v[(size_t(c.row0 + t) * d.HV + hv) * V + j]);
    };
    // Δ and dΔ exist (are written by the scans) only for rows < L.
    auto D_at = [&](int t, int j) { return t < L ? G.D[t * V + j] : 0.0f; };
    auto dD_at = [&](int t, int j) { return t < L ? G.dD[t * V + j] : 0.0f; };
    auto gm = [&](int t, int i) { return gamma_at<GATE>(G.gam, t, i, K); };
    auto eg = [&](int t, int i) { return exp_gamma<GATE>(eg_s, G.gam, t, i, K); };
    auto kdecay = [&](int t, int i) { return to_end_at<GATE>(G.to_end, t, i, K); };

    if constexpr (kStaged) {
        // Asynchronous copies, in flight while load_grad_inputs loads; its barrier is theirs.
        const size_t at = (size_t(c.row0) * d.HV + hv) * V, row = size_t(d.HV) * V;
        copy_rows(dO_s, ldo, dO + at, row, L, V);
        copy_rows(v_s, ldo, v + at, row, L, V);
        const TI zero = from_float<TI>(0.0f);
        for (int e = L * V + tid; e < kChunk * V; e += nt) {
            dO_s[(e / V) * ldo + e % V] = zero;
            v_s[(e / V) * ldo + e % V] = zero;
        }
    }
    load_grad_inputs<GATE, DELTA, TI>(d, w, a, c, G);
    // Read after the barrier that follows the products below.
    if constexpr (GATE == 1)
        for (int t = tid; t < kChunk; t += nt) eg_s[t] = t < L ? exp_rn(G.gam[t]) : 0.0f;

    // Products over V with the states and Δ: dQ̃ = scale·dO S₀ᵀ, dK̃ = Δ dSᵀ, dW = −dΔ S₀ᵀ, and
    // dP = scale·tril(dO Δᵀ).
    block_product<WG, 4, EX, false, kGradMT>(
        kChunk, K, V, dO_at, [&](int j, int i) { return G.S0[i * V + j]; },
        [&](int t, int i, float acc) { G.s_dqt[t * K + i] = scale * acc; }, tiles);
    block_product<WG, 4, false, false, kGradMT>(
        kChunk, K, V, D_at, [&](int j, int i) { return G.dS[i * V + j]; },
        [&](int t, int i, float acc) { G.s_dkt[t * K + i] = acc; }, tiles);
    if (DELTA)
        block_product<WG, 4, false, false, kGradMT>(
            kChunk, K, V, dD_at, [&](int j, int i) { return G.S0[i * V + j]; },
            [&](int t, int i, float acc) { G.s_dW[t * K + i] = -acc; }, tiles);
    block_product<WG, kGradNT, EX, false>(
        kChunk, kChunk, V, dO_at, [&](int j, int s) { return D_at(s, j); },
        [&](int t, int s, float acc) { G.dM_s[t * kChunk + s] = t < L && s <= t ? scale * acc : 0.0f; }, tiles);
    __syncthreads();
    // Through tril(P) and through Q ⊙ e^γ, K ⊙ e^{γ_C − γ}, Λ_C S₀.
    if (GATE == 1) scalar_gate_factors_running(G.g_s, L, G.F_s);
    score_gradients<GATE, EX, EX, WG>(G.dM_s, G.q_s, G.k_s, G.g_s, G.F_s, L, K, false, G.s_dq, G.s_dk, G.dgam_s,
                                      G.s_xa, G.s_ea, tiles);
    // In batches (kElementBatch, gdn_backward.cuh): these tiles are in global memory.
    for (int e0 = tid; e0 < L * K; e0 += kElementBatch * nt) {
        float dq[kElementBatch], dk[kElementBatch];
        for (int u = 0; u < kElementBatch; ++u) {
            const int e = min(e0 + u * nt, L * K - 1), t = e / K, i = e % K;
            dq[u] = G.s_dq[e] + eg(t, i) * G.s_dqt[e];
            dk[u] = G.s_dk[e] + kdecay(t, i) * G.s_dkt[e];
        }
        for (int u = 0; u < kElementBatch; ++u) {
            const int e = e0 + u * nt;
            if (e >= L * K) break;
            G.s_dq[e] = dq[u];
            G.s_dk[e] = dk[u];
        }
    }
    if (GATE != 0) {
        // dγ_t += q̃_t ⊙ dq̃_t − k̃_t ⊙ dk̃_t, dγ_C += Σ_t k̃_t ⊙ dk̃_t + e^{γ_C} Σ_v dS ⊙ S₀. dg_t sums
        // dγ from t to the chunk's end, where the k̃ ⊙ dk̃ terms cancel those of dγ_C and
        // Σ_v dS ⊙ S₀ is a few units left of terms whose magnitudes add up to a thousand: summed in
        // float32 (version 1, the CPU), the rounding of these sums is most of dg's error. So every
        // sum over channels, tokens or values here is in float64 (each product of two floats is
        // exact there); a per-channel gate's dγ_t has one term per channel.
        for (int e = tid; e < L * GK; e += nt) {
            const int t = e / GK, i0 = e % GK;
            if (GATE == 2) {
                G.dgam_s[e] += G.q_s[e] * eg(t, i0) * G.s_dqt[e];
                G.dgam_s[e] -= G.k_s[e] * kdecay(t, i0) * G.s_dkt[e];
            } else {
                const float et = eg(t, 0), kd = kdecay(t, 0);
                const float *qs = G.q_s + t * K, *ks = G.k_s + t * K;
                const float *dqt = G.s_dqt + t * K, *dkt = G.s_dkt + t * K;
                auto term = [&](float q, float k, float dq, float dk) {
                    const float qt = q * et, kt = k * kd;
                    return double(qt) * dq - double(kt) * dk;
                };
                double acc = 0.0;
                walk_rows(K, [&](int, float q, float k, float dq, float dk) { acc += term(q, k, dq, dk); }, qs, ks,
                          dqt, dkt);
                G.dgam_s[e] += float(acc);
            }
        }
        // The term of channel i, one thread each, into float64 scratch in G.dT_s (free until dT); a
        // scalar gate then sums them over i in increasing order. Channels are dealt from the
        // block's last thread down, so that a scalar gate's rows above (from its first thread
        // up) and these run on different threads at once.
        double* dend = aligned_doubles(G.dT_s);
        for (int i = nt - 1 - tid; i < K; i += nt) {
            double kk = 0.0, ss = 0.0;
            for (int t = 0; t < L; ++t) kk += double(G.k_s[t * K + i] * kdecay(t, i)) * G.s_dkt[t * K + i];
            walk_rows(V, [&](int, float a, float b) { ss += double(a) * b; }, G.dS + size_t(i) * V,
                      G.S0 + size_t(i) * V);   // row i is this thread's alone
            dend[i] = kk + double(exp_rn(gm(L - 1, i))) * ss;
        }
        __syncthreads();
        if (GATE == 2) {
            for (int i = tid; i < K; i += nt) G.dend_s[i] += float(dend[i]);
        } else if (tid == 0) {
            double acc = 0.0;
            for (int i = 0; i < K; ++i) acc += dend[i];
            G.dend_s[0] += float(acc);
        }
    }
    __syncthreads();

    TI* dv = static_cast<TI*>(a.dv);
    if (DELTA) {
        // R̃ = e^γ ⊙ β ⊙ K into G.s_xa (free between the two score gradients).
        for (int e = tid; e < kChunk * K; e += nt) G.s_xa[e] = e / K < L ? eg(e / K, e % K) * G.bk_s[e] : 0.0f;
        __syncthreads();
        // dT = dΔ Ṽᵀ + dW R̃ᵀ with Ṽ = β ⊙ V: the first product over raw V, β applied after it.
        block_product<WG, kGradNT, false, EX>(
            kChunk, kChunk, V, dD_at, [&](int j, int s) { return s < L ? v_at(s, j) : 0.0f; },
            [&](int t, int s, float acc) { G.dT_s[t * kChunk + s] = t < L && s < L ? beta_at(s) * acc : 0.0f; }, tiles);
        __syncthreads();
        block_product<WG, kGradNT, false, false>(
            kChunk, kChunk, K, [&](int t, int i) { return t < L ? G.s_dW[t * K + i] : 0.0f; },
            [&](int i, int s) { return G.s_xa[s * K + i]; },
            [&](int t, int s, float acc) {
                if (t < L && s < L) G.dT_s[t * kChunk + s] += acc;
            }, tiles);
        // dR̃ = Tᵀ dW and Tᵀ dΔ (dv = β ⊙ Tᵀ dΔ), both on T's lower triangle.
        auto Tt_at = [&](int t, int s) { return t < L && s >= t && s < L ? G.T_s[s * kChunk + t] : 0.0f; };
        block_product<WG, 4, false, false, kGradMT>(
            kChunk, K, kChunk, Tt_at, [&](int s, int i) { return G.s_dW[s * K + i]; },
            [&](int t, int i, float acc) { G.s_drt[t * K + i] = acc; }, tiles);
        block_product<WG, 4, false, false, kGradMT>(
            L, V, kChunk, Tt_at, dD_at, [&](int t, int j, float acc) {
                s_dvt[t * V + j] = acc;
                dv[(size_t(c.row0 + t) * d.HV + hv) * V + j] = from_float<TI>(beta_at(t) * acc);
            }, tiles);
        __syncthreads();
        // dA = −Tᵀ dT Tᵀ on the strictly lower triangle: X = dT Tᵀ, then −Tᵀ X.
        block_product<WG, kGradNT, false, false>(
            kChunk, kChunk, kChunk, [&](int r, int b) { return G.dT_s[r * kChunk + b]; },
            [&](int b, int j) { return b <= j ? G.T_s[j * kChunk + b] : 0.0f; },
            [&](int r, int j, float acc) { G.dM_s[r * kChunk + j] = acc; }, tiles);
        __syncthreads();
        block_product<WG, kGradNT, false, false>(
            kChunk, kChunk, kChunk, Tt_at, [&](int r, int j) { return G.dM_s[r * kChunk + j]; },
            [&](int t, int j, float acc) { G.dT_s[t * kChunk + j] = j < t && t < L ? -acc : 0.0f; }, tiles);
        __syncthreads();
        // Through A (rows b ⊙ k): dbk_A into G.s_dqt, dk_A into G.s_dkt.
        score_gradients<GATE, false, EX, WG>(G.dT_s, G.bk_s, G.k_s, G.g_s, G.F_s, L, K, true, G.s_dqt, G.s_dkt,
                                             G.dgam_s, G.s_xa, G.s_ea, tiles);
        combine_through_a<GATE, double>(d, c, G, GATE == 1 ? eg_s : nullptr);
        // dβ = ⟨v, Tᵀ dΔ⟩ + ⟨k, dbk⟩.
        TI* dbeta = static_cast<TI*>(a.dbeta);
        for (int t = tid; t < L; t += nt) {
            float acc = 0.0f;
            walk_rows(V, [&](int j, float x) { acc += v_at(t, j) * x; }, s_dvt + size_t(t) * V);
            walk_rows(K, [&](int, float k, float b) { acc += k * b; }, G.k_s + t * K, G.s_dqt + t * K);
            dbeta[size_t(c.row0 + t) * d.HV + hv] = from_float<TI>(acc);
        }
    } else {
        copy_dv<TI>(d, a, c, G);
    }
    __syncthreads();
    write_chunk_grads<GATE, TI, double>(d, w, a, c, G);
}

}  // namespace kcv::gdn::cuda
