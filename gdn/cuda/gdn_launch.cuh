// The launch sequences of the forward and the backward, written once over a Launcher so that
// the same sequence drives the GPU (gdn_api.cu) and the host emulation of the kernels
// (host_emulation.hpp, tests/cpp/test_gdn_cuda_emulated.cpp). A Launcher is called as
// launcher(kernel, grid, dynamic_smem_bytes, name, args...) and returns 0 or an error code.
#pragma once

#include "gdn_backward.cuh"

namespace kcv::gdn::cuda {

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
    return d;
}

// The chunk preparation and the state scan, shared by the forward and the backward.
template <int GATE, bool DELTA, class TI, class Launcher>
int prepare_and_scan(Launcher& launch, const kcv_gdn_params& p, Dims& d, Workspace& w, const ForwardArgs& fa) {
    if (p.cu_seqlens) {
        if (launch(chunk_offsets_kernel, dim3(1), 0, "chunk_offsets", p.cu_seqlens, d.N, w.chunk_offsets)) return 1;
        d.chunk_offsets = w.chunk_offsets;
    }
    if (launch(prepare_chunks<GATE, DELTA, TI>, dim3(d.slots, d.HV), prepare_smem_bytes(d.K, GATE), "prepare_chunks",
               d, w, fa))
        return 1;
    return launch(state_scan<GATE, DELTA, TI>, dim3(d.N, d.HV, (d.V + kScanCols - 1) / kScanCols),
                  scan_smem_bytes(d.K), "state_scan", d, w, fa);
}

template <int GATE, bool DELTA, class TI, class Launcher>
int forward_sequence(Launcher& launch, const kcv_gdn_params& p) {
    Dims d = make_dims(p);
    Workspace w{};
    layout_workspace(d, false, GATE, p.workspace, w);
    const ForwardArgs fa{p.q, p.k, p.v, p.g, p.beta, p.h0, p.o, p.ht};
    if (prepare_and_scan<GATE, DELTA, TI>(launch, p, d, w, fa)) return 1;
    return launch(chunk_output<GATE, TI>, dim3(d.slots, d.HV), output_smem_bytes(d.K), "chunk_output", d, w, fa);
}

template <int GATE, bool DELTA, class TI, class Launcher>
int backward_sequence(Launcher& launch, const kcv_gdn_params& p) {
    Dims d = make_dims(p);
    Workspace w{};
    layout_workspace(d, true, GATE, p.workspace, w);
    const ForwardArgs fa{p.q, p.k, p.v, p.g, p.beta, p.h0, nullptr, nullptr};
    if (prepare_and_scan<GATE, DELTA, TI>(launch, p, d, w, fa)) return 1;
    const BackwardArgs ba{fa, p.d_o, p.dht, p.dq, p.dk, p.dv, p.dg, p.dbeta, p.dh0};
    if (launch(reverse_scan<GATE, DELTA, TI>, dim3(d.N, d.HV, (d.V + kScanCols - 1) / kScanCols),
               reverse_scan_smem_bytes(d.K, GATE), "reverse_scan", d, w, ba))
        return 1;
    if (launch(chunk_grad<GATE, DELTA, TI>, dim3(d.slots, d.HV), grad_smem_bytes(d.K, GATE), "chunk_grad", d, w, ba))
        return 1;
    const size_t total = size_t(d.B) * d.T * d.H * d.K;
    const size_t blocks = std::min<size_t>((total + kThreads - 1) / kThreads, 65535);
    return launch(group_sum<TI>, dim3(static_cast<unsigned>(blocks)), 0, "group_sum", d, w, ba);
}

// The forward or the backward of the member p names (gate kind × delta) for input dtype TI;
// 1 for a combination that is not a member.
template <class TI, class Launcher>
int launch_member(Launcher& launch, const kcv_gdn_params& p, bool backward) {
    switch (p.gate * 2 + p.delta) {
        case 0: return backward ? backward_sequence<0, false, TI>(launch, p) : forward_sequence<0, false, TI>(launch, p);
        case 2: return backward ? backward_sequence<1, false, TI>(launch, p) : forward_sequence<1, false, TI>(launch, p);
        case 3: return backward ? backward_sequence<1, true, TI>(launch, p) : forward_sequence<1, true, TI>(launch, p);
        case 4: return backward ? backward_sequence<2, false, TI>(launch, p) : forward_sequence<2, false, TI>(launch, p);
        case 5: return backward ? backward_sequence<2, true, TI>(launch, p) : forward_sequence<2, true, TI>(launch, p);
    }
    return 1;
}

}  // namespace kcv::gdn::cuda
