// The launch sequences of the forward and the backward, written once over a Launcher so that
// the same sequence drives the GPU (gdn_api.cu) and the host emulation of the kernels
// (host_emulation.hpp, tests/cpp/test_gdn_cuda_emulated.cpp). A Launcher is called as
// launcher(kernel, grid, dynamic_smem_bytes, name, args...) and returns 0 or an error code, or as
// launcher.full_block(...) for a kernel that needs the GPU's whole block of kThreads (wgmma's
// warpgroups) rather than striding over blockDim, or launcher.sized(threads, ...) for a kernel
// whose GPU block has a width of its own (chunk_grad_tc's kGradThreads, the forward scan's
// scan_threads, prepare_threads); its member sms is the SM count the grids are
// sized for, output_on_wgmma says which product chunk_output_tc runs, reverse_on_wgmma which
// products reverse_scan_tc runs and grad_on_wgmma which chunk_grad_tc runs (gdn_wgmma.cuh).
// VERSION 1 runs the reference kernels (gdn_forward.cuh, gdn_backward.cuh); VERSION 2 the
// tensor-core kernels of gdn_forward_tc.cuh and gdn_backward_tc.cuh for every step but the
// chunk offsets and the group sum. Both versions share the workspace and every launch shape.
#pragma once

#include "gdn_backward_tc.cuh"
#include "gdn_forward_tc.cuh"

namespace kcv::gdn::cuda {

// The split of the version 2 state scans (Dims::seg_chunks). A scan steps through a sequence's
// chunks one after another, one block per (sequence, value head, column slice); with few such pairs
// a long sequence leaves most SMs idle whatever the slices. The scans then split each sequence into
// segments of seg_chunks chunks, scanned at once: a summary pass gives each segment's affine map
// (S_end = M·S_start + E; with the delta rule M is scanned from the identity, K more columns,
// without it M is diagonal, the chunks' decays), segment_combine carries the state across the
// segments in order, and a rerun from each segment's start writes what the unsplit scan writes.
// Exact in the algebra (no state is approximated or restarted), float32-accurate in each product as
// the scans are; the bits differ from the unsplit scan's, so the split is a function of the shape
// and the member alone, never of the device: split where N·HV·ceil(V / 32) < kSplitBelow and the
// sequences have at least 8 chunks, into enough segments for kSplitPairs such pairs, each of at
// least 4 chunks. With the delta rule a segment's chunk costs three chunk steps where the unsplit
// scan's costs one (the summary's 2·128 columns, then the rerun's 128), without it two, so it pays
// only where the unsplit scan leaves most SMs idle. Measured at B1 T32768, K = V = 128
// (bench/RESULTS.md, H100, 132 SMs): with 16 and 32 pairs (4 and 8 value heads) the split took
// 0.28–0.94 of the unsplit forward+backward for every member; with 64 pairs (16 heads) it was
// slower for Gated DeltaNet, GLA and KDA (1.06–1.30) and with 128 for all five, hence 48, between
// the two. A per-channel gate (GLA, KDA) aims at kSplitPairsChannel pairs instead: fewer, longer
// segments, which took 0.86–0.91 of forward+backward beside kSplitPairs' with 4 and with 8 value
// heads (H100, 2026-12-06), where the other members ran 0.99–1.18 times as long with them. request:
// kcv_gdn_params.segment_chunks (0 this rule, −1 never, n > 0 n chunks a segment).
constexpr int kSplitBelow = 48;
constexpr int kSplitPairs = 192;
constexpr int kSplitPairsChannel = 128;

inline void split_scans(Dims& d, int request, int gate) {
    d.seg_chunks = 0;
    d.segments = 1;
    const int chunks = d.chunks_per_seq;
    int per = request > 0 ? request : 0;
    if (request == 0) {
        const long long pairs = static_cast<long long>(d.N) * d.HV * ((d.V + 31) / 32);
        if (pairs < kSplitBelow && chunks >= 8) {
            const long long target = gate == 2 ? kSplitPairsChannel : kSplitPairs;
            const long long want = (target + pairs - 1) / pairs;
            const int segments = static_cast<int>(std::min<long long>(want, chunks / 4));
            per = (chunks + segments - 1) / segments;
        }
    }
    if (per > 0 && per < chunks) {
        d.seg_chunks = per;
        d.segments = (chunks + per - 1) / per;
    }
}

// The version 2 scans' grid: one block row per segment of each sequence (d.segments is 1 when the
// scans are not split), as scan_columns and the launches see it.
inline Dims segment_grid(const Dims& d) {
    Dims g = d;
    g.N = d.N * d.segments;
    return g;
}

inline Dims make_dims(const kcv_gdn_params& p) {
    Dims d{};
    d.B = static_cast<int>(p.B);
    d.T = static_cast<int>(p.T);
    d.H = static_cast<int>(p.H);
    d.HV = static_cast<int>(p.HV);
    d.K = static_cast<int>(p.K);
    d.V = static_cast<int>(p.V);
    d.N = static_cast<int>(p.cu_seqlens ? p.N : p.B);
    d.group = d.H > 0 ? d.HV / d.H : 1;
    d.chunks_per_seq = (d.T + kChunk - 1) / kChunk;
    // With cu_seqlens: Σ ceil(len_n / C) <= ceil(T / C) + N, known without reading cu_seqlens.
    d.slots = p.cu_seqlens ? d.chunks_per_seq + d.N : d.B * d.chunks_per_seq;
    d.cu = p.cu_seqlens;
    d.chunk_offsets = nullptr;
    d.scale = p.scale;
    // float32 inputs run version 1, whose scans are never split: no rule for them (a request is
    // kept, for the host emulation's float32 runs of version 2).
    split_scans(d, p.dtype == 0 && p.segment_chunks == 0 ? -1 : p.segment_chunks, p.gate);
    return d;
}

// The value columns per block of the version 2 scans, from the grid alone. A chunk step's loads
// do not depend on the columns, so a wider slice spends them on more columns (fewer instructions
// in all), but a grid of fewer blocks may leave SMs idle: the widest of 128, 64 and 32 that V
// needs, whose shared memory fits, and whose grid still has blocks for 0.7 of the SMs; else 16.
// No column's sums depend on the width, so the results are the same bits at every width.
template <class Smem>
int scan_columns(const Dims& d, int sms, Smem smem_bytes) {
    for (int cols : {128, 64, 32}) {
        if (cols / 2 >= d.V || smem_bytes(cols) > kMaxSmemBytes) continue;
        const long long blocks = static_cast<long long>(d.N) * d.HV * ((d.V + cols - 1) / cols);
        if (10 * blocks >= 7LL * sms) return cols;
    }
    return 16;
}

// f.template operator()<COLS>() for the column width cols (16, 32, 64 or 128).
template <class F>
int with_columns(int cols, F&& f) {
    switch (cols) {
        case 128: return f.template operator()<128>();
        case 64: return f.template operator()<64>();
        case 32: return f.template operator()<32>();
    }
    return f.template operator()<16>();
}

// The workspace of p, with the chunk preparation's arrays in p.prepared where the caller keeps
// them apart (gdn_cuda.h).
template <int GATE, bool DELTA>
Workspace workspace_of(const kcv_gdn_params& p, const Dims& d, bool backward) {
    Workspace w{};
    const bool apart = p.prepared != nullptr;
    if (apart) layout_prepared(d, GATE, DELTA, p.prepared, w);
    layout_workspace(d, backward, GATE, DELTA, p.workspace, w, apart);
    return w;
}

// The chunk preparation and the state scan, shared by the forward and the backward; prepared: the
// preparation's arrays already hold this problem's (a backward given a forward's p.prepared), so
// only the scan runs. KV > 0: the version 2 kernels with K = V = KV fixed at compile time
// (with_head_size, gdn_common.cuh).
template <int GATE, bool DELTA, class TI, int VERSION, int KV, class Launcher>
int prepare_and_scan(Launcher& launch, const kcv_gdn_params& p, Dims& d, Workspace& w, const ForwardArgs& fa,
                     bool prepared = false) {
    if (p.cu_seqlens) {
        if (launch(chunk_offsets_kernel, dim3(1), 0, "chunk_offsets", p.cu_seqlens, d.N, w.chunk_offsets)) return 1;
        d.chunk_offsets = w.chunk_offsets;
    }
    const dim3 chunks(d.slots, d.HV);
    if (!prepared) {
        if constexpr (VERSION == 2) {
            if (launch.sized(prepare_threads<GATE>, prepare_chunks_tc<GATE, DELTA, TI, KV>, chunks,
                             prepare_tc_smem_bytes(d.K, GATE), "prepare_chunks_tc", d, w, fa))
                return 1;
        } else {
            if (launch(prepare_chunks<GATE, DELTA, TI>, chunks, prepare_smem_bytes(d.K, GATE), "prepare_chunks", d, w,
                       fa))
                return 1;
        }
    }
    if constexpr (VERSION == 2) {
        // Whole, or split (split_scans above): the summary pass over every segment, the
        // sequential combine, then the rerun of every segment. Whole, d.segments is 1.
        const Dims grid = segment_grid(d);
        const int cols = scan_columns(grid, launch.sms, [&](int c) { return scan_tc_smem_bytes(d.K, c, sizeof(TI)); });
        return with_columns(cols, [&]<int COLS>() {
            // M's columns: the delta rule's K×K map; without it M is diagonal (segment_combine).
            const unsigned vs = (d.V + COLS - 1) / COLS, ms = DELTA ? (d.K + COLS - 1) / COLS : 0;
            const unsigned blocks = static_cast<unsigned>(grid.N);
            const size_t smem = scan_tc_smem_bytes(d.K, COLS, sizeof(TI));
            auto pass = [&](unsigned slices, int which, const char* name) {
                return launch.sized(scan_threads<COLS>, state_scan_tc<GATE, DELTA, TI, COLS, KV>,
                                    dim3(blocks, d.HV, slices), smem, name, d, w, fa, which);
            };
            if (d.seg_chunks == 0) return pass(vs, kWhole, "state_scan_tc");
            if (pass(vs + ms, kSummary, "state_scan_tc_summary")) return 1;
            if (launch(segment_combine<GATE, DELTA, false, COLS, KV>, dim3(d.N, d.HV, vs),
                       segment_combine_smem_bytes(d.K, COLS, DELTA), "segment_combine", d, w, fa.h0))
                return 1;
            return pass(vs, kRerun, "state_scan_tc_rerun");
        });
    } else {
        const dim3 slices(d.N, d.HV, (d.V + kScanCols - 1) / kScanCols);
        return launch(state_scan<GATE, DELTA, TI>, slices, scan_smem_bytes(d.K), "state_scan", d, w, fa);
    }
}

template <int GATE, bool DELTA, class TI, int VERSION, int KV, class Launcher>
int forward_sequence(Launcher& launch, const kcv_gdn_params& p) {
    Dims d = make_dims(p);
    Workspace w = workspace_of<GATE, DELTA>(p, d, false);
    const ForwardArgs fa{p.q, p.k, p.v, p.g, p.beta, p.h0, p.o, p.ht};
    if (prepare_and_scan<GATE, DELTA, TI, VERSION, KV>(launch, p, d, w, fa)) return 1;
    if constexpr (VERSION == 2) {
        const dim3 slices(d.slots, d.HV, (d.V + kOutCols - 1) / kOutCols);
        if (launch.output_on_wgmma)
            return launch.full_block(chunk_output_tc<GATE, TI, KV, true>, slices,
                                     output_tc_smem_bytes(d.K, GATE, sizeof(TI), true), "chunk_output_tc_wgmma", d, w,
                                     fa);
        return launch(chunk_output_tc<GATE, TI, KV, false>, slices, output_tc_smem_bytes(d.K, GATE, sizeof(TI), false),
                      "chunk_output_tc", d, w, fa);
    } else {
        return launch(chunk_output<GATE, TI>, dim3(d.slots, d.HV), output_smem_bytes(d.K), "chunk_output", d, w, fa);
    }
}

template <int GATE, bool DELTA, class TI, int VERSION, int KV, class Launcher>
int backward_sequence(Launcher& launch, const kcv_gdn_params& p) {
    Dims d = make_dims(p);
    Workspace w = workspace_of<GATE, DELTA>(p, d, true);
    const ForwardArgs fa{p.q, p.k, p.v, p.g, p.beta, p.h0, nullptr, nullptr};
    if (prepare_and_scan<GATE, DELTA, TI, VERSION, KV>(launch, p, d, w, fa, p.prepared != nullptr)) return 1;
    const BackwardArgs ba{fa, p.d_o, p.dht, p.dq, p.dk, p.dv, p.dg, p.dbeta, p.dh0};
    if constexpr (VERSION == 2) {
        // A per-channel gate's update is no product: its scan stays on mma.sync.
        // Split as the forward's scan (split_scans), whose summary pass left each segment's M:
        // the summary pass, the combine in reverse, the rerun.
        const bool wg = GATE != 2 && launch.reverse_on_wgmma;
        const Dims grid = segment_grid(d);
        const int cols = scan_columns(
            grid, launch.sms, [&](int c) { return reverse_scan_tc_smem_bytes(d.K, GATE, c, sizeof(TI), wg); });
        const int rc = with_columns(cols, [&]<int COLS>() {
            const dim3 slices(grid.N, d.HV, (d.V + COLS - 1) / COLS);
            const size_t smem = reverse_scan_tc_smem_bytes(d.K, GATE, COLS, sizeof(TI), wg);
            auto pass = [&](int which, const char* name) {
                if constexpr (GATE != 2) {
                    if (wg)
                        return launch.full_block(reverse_scan_tc<GATE, DELTA, TI, COLS, KV, true>, slices, smem, name,
                                                 d, w, ba, which);
                }
                return launch(reverse_scan_tc<GATE, DELTA, TI, COLS, KV>, slices, smem, name, d, w, ba, which);
            };
            if (d.seg_chunks == 0) return pass(kWhole, wg ? "reverse_scan_tc_wgmma" : "reverse_scan_tc");
            if (pass(kSummary, "reverse_scan_tc_summary")) return 1;
            if (launch(segment_combine<GATE, DELTA, true, COLS, KV>, dim3(d.N, d.HV, (d.V + COLS - 1) / COLS),
                       segment_combine_smem_bytes(d.K, COLS, DELTA), "segment_combine_reverse", d, w, ba.dht))
                return 1;
            return pass(kRerun, "reverse_scan_tc_rerun");
        });
        if (rc) return 1;
    } else {
        const dim3 slices(d.N, d.HV, (d.V + kScanCols - 1) / kScanCols);
        if (launch(reverse_scan<GATE, DELTA, TI>, slices, reverse_scan_smem_bytes(d.K, GATE), "reverse_scan", d, w, ba))
            return 1;
    }
    const dim3 chunks(d.slots, d.HV);
    auto grad = [&]() {
        if constexpr (VERSION == 2) {
            // A per-channel gate's tiles leave no room for wgmma's (grad_tc_smem_bytes).
            if constexpr (GATE != 2) {
                if (launch.grad_on_wgmma)
                    return launch.full_block(chunk_grad_tc<GATE, DELTA, TI, KV, true>, chunks,
                                             grad_tc_smem_bytes(d.K, d.V, GATE, sizeof(TI), true),
                                             "chunk_grad_tc_wgmma", d, w, ba);
            }
            return launch.sized(kGradThreads, chunk_grad_tc<GATE, DELTA, TI, KV>, chunks,
                                grad_tc_smem_bytes(d.K, d.V, GATE, sizeof(TI)), "chunk_grad_tc", d, w, ba);
        } else {
            return launch(chunk_grad<GATE, DELTA, TI>, chunks, grad_smem_bytes(d.K, GATE), "chunk_grad", d, w, ba);
        }
    };
    if (grad()) return 1;
    if (d.group == 1) return 0;   // chunk_grad wrote dq and dk
    const size_t total = size_t(d.B) * d.T * d.H * d.K;
    const size_t blocks = std::min<size_t>((total + kThreads - 1) / kThreads, 65535);
    return launch(group_sum<TI>, dim3(static_cast<unsigned>(blocks)), 0, "group_sum", d, w, ba);
}

// The forward or the backward of the member p names (gate kind × delta) for input dtype TI, with
// the kernels of VERSION; 1 for a combination that is not a member. FIXED > 0: version 2 takes
// the kernels compiled for K = V = FIXED when p has those sizes (the same bits, less integer work).
template <class TI, int VERSION = 1, int FIXED = 0, class Launcher>
int launch_member(Launcher& launch, const kcv_gdn_params& p, bool backward) {
    const bool fixed = VERSION == 2 && FIXED > 0 && p.K == FIXED && p.V == FIXED;
    auto run = [&]<int GATE, bool DELTA>() {
        if constexpr (VERSION == 2 && FIXED > 0) {
            if (fixed)
                return backward ? backward_sequence<GATE, DELTA, TI, VERSION, FIXED>(launch, p)
                                : forward_sequence<GATE, DELTA, TI, VERSION, FIXED>(launch, p);
        }
        return backward ? backward_sequence<GATE, DELTA, TI, VERSION, 0>(launch, p)
                        : forward_sequence<GATE, DELTA, TI, VERSION, 0>(launch, p);
    };
    switch (p.gate * 2 + p.delta) {
        case 0: return run.template operator()<0, false>();
        case 2: return run.template operator()<1, false>();
        case 3: return run.template operator()<1, true>();
        case 4: return run.template operator()<2, false>();
        case 5: return run.template operator()<2, true>();
    }
    return 1;
}

}  // namespace kcv::gdn::cuda
