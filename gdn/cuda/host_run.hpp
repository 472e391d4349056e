// One problem through the CUDA kernels of this folder on the host (host_emulation.hpp), forward
// then backward, the way the tests and bench/gdn_ord03_emulated.cpp run them without a GPU: the
// float32 specialisation, or the bf16 / fp16 one that the GPU runs for 16-bit inputs. Include it
// after defining KCV_GDN_HOST_EMULATION.
#pragma once

#if !defined(KCV_GDN_HOST_EMULATION)
#error "host_run.hpp runs the kernels under host emulation: define KCV_GDN_HOST_EMULATION before including it"
#endif

#include <cstring>
#include <limits>
#include <vector>

#include "../problem.hpp"
#include "gdn_launch.cuh"

namespace kcv::gdn::cuda::emulation {

// Every output of a forward and a backward, in the layout of gdn/oracle/gdn_oracle.hpp, NaN until
// written.
struct RunOutputs {
    std::vector<float> o, ht, dq, dk, dv, dg, dbeta, dh0;
    bool backward_wrote_prepared = false;   // with the preparation kept apart: a byte of it changed
    explicit RunOutputs(const Problem& p) {
        const Shape& s = p.shape;
        const float nan = std::numeric_limits<float>::quiet_NaN();
        o.assign(s.v_size(), nan);
        ht.assign(s.state_size(), nan);
        dq.assign(s.qk_size(), nan);
        dk.assign(s.qk_size(), nan);
        dv.assign(s.v_size(), nan);
        dg.assign(s.g_size(p.member.gate), nan);
        dbeta.assign(s.beta_size(), nan);
        dh0.assign(s.state_size(), nan);
    }
};

// The inputs, float32 arrays of the same layout; h0 and dht may be null (zero). For a 16-bit
// dtype, q, k, v, beta and d_o are converted to it (exactly, if they hold its values).
struct RunInputs {
    const float *q, *k, *v, *g, *beta, *h0, *d_o, *dht;
};

// The Launcher of gdn_launch.cuh for the host: runs each kernel through launch() with fewer
// threads than the GPU's blocks (the kernels stride over blockDim, and the emulation runs faster
// with fewer host threads per block), except those launched through full_block, whose products run
// on wgmma's warpgroups and need the GPU's whole block; refuses a block needing more shared memory
// than Hopper has. output_on_wgmma, reverse_on_wgmma and grad_on_wgmma: whether the launch
// sequences run chunk_output_tc's, reverse_scan_tc's and chunk_grad_tc's wgmma products
// (gdn_wgmma.cuh) or their mma.sync ones; mma.sync unless a test asks (a block of 256 host
// threads meeting at every barrier is slow on a small machine), where the GPU library runs wgmma
// for the first two (and for chunk_grad_tc only when built with KCV_GDN_GRAD_WGMMA=1).
struct HostLauncher {
    unsigned threads = 32;
    bool output_on_wgmma = false;
    bool reverse_on_wgmma = false;
    bool grad_on_wgmma = false;
    int sms = 132;                                 // the SM count the grids are sized for (an H200's)
    std::vector<const void*>* launched = nullptr;  // when set, each kernel's address, in launch order

    template <class Kernel, class... Args>
    int operator()(Kernel kernel, dim3 grid, size_t smem, const char* name, Args... args) {
        return run(threads, kernel, grid, smem, name, args...);
    }
    template <class Kernel, class... Args>
    int full_block(Kernel kernel, dim3 grid, size_t smem, const char* name, Args... args) {
        return run(kThreads, kernel, grid, smem, name, args...);
    }
    // A kernel the GPU runs with a block of its own width (Launcher::sized); its loops stride
    // over the block like the others', so it runs here with `threads`.
    template <class Kernel, class... Args>
    int sized(unsigned, Kernel kernel, dim3 grid, size_t smem, const char* name, Args... args) {
        return run(threads, kernel, grid, smem, name, args...);
    }

private:
    template <class Kernel, class... Args>
    int run(unsigned block, Kernel kernel, dim3 grid, size_t smem, const char*, Args... args) {
        if (launched) launched->push_back(reinterpret_cast<const void*>(kernel));
        if (smem > sizeof(shared_memory)) return 1;
        if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;
        launch(kernel, grid, block, args...);
        return 0;
    }
};

// How run_member runs the kernels.
struct RunOptions {
    int version = 1;   // 1 the reference kernels, 2 the tensor-core ones
    int dtype = 0;     // of the inputs: 0 float32, 1 bfloat16, 2 float16, as kcv_gdn_params
    int sms = 132;     // the SM count the grids are sized for (an H200's)
    // When set, receives the address of every kernel launched, in launch order.
    std::vector<const void*>* launched = nullptr;
    // The forward writes the chunk preparation into a buffer of its own (kcv_gdn_params.prepared)
    // and the backward reads it there, on a workspace set to NaN again in between, as a framework
    // would run them (nothing else of the forward's workspace survives).
    bool apart = false;
    // chunk_output_tc's product on wgmma (gdn_wgmma.cuh), as the GPU library runs it unless built
    // with KCV_GDN_WGMMA=0, instead of on mma.sync; likewise reverse_scan_tc's products, and
    // chunk_grad_tc's, which the GPU library runs on wgmma only when built with KCV_GDN_GRAD_WGMMA=1.
    bool output_on_wgmma = false;
    bool reverse_on_wgmma = false;
    bool grad_on_wgmma = false;
    // kcv_gdn_params.segment_chunks: the split of version 2's scans (0 the shape's rule, −1 none).
    int segment_chunks = 0;
    // False: the forward's launch sequence alone (the backward's outputs stay NaN).
    bool backward = true;
};

// Forward then backward as `opt` says into `out`, on a workspace that starts as NaN; the first
// nonzero status of the two launch sequences, else 0. The 16-bit outputs (o, dq, dk, dv, dbeta)
// come back widened to float32. FIXED: version 2 takes the kernels compiled for K = V = FIXED when
// the problem has those sizes, as the GPU library does for kMaxDim (gdn_api.cu); 0 reads the sizes
// at run time everywhere. With opt.apart, out.backward_wrote_prepared says whether the backward
// changed the preparation's buffer.
template <int FIXED = kMaxDim>
int run_member(const Problem& p, const RunInputs& in, const RunOptions& opt, RunOutputs& out) {
    auto run = [&]<class TI>() {
        const Shape& s = p.shape;
        // The tensors of dtype TI: converted copies of the 16-bit inputs, buffers for the outputs.
        auto narrow = [](const float* x, int64_t n) {
            std::vector<TI> y(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) y[i] = from_float<TI>(x[i]);
            return y;
        };
        const bool beta = in.beta != nullptr;
        const std::vector<TI> q = narrow(in.q, s.qk_size()), k = narrow(in.k, s.qk_size()),
                              v = narrow(in.v, s.v_size()), d_o = narrow(in.d_o, s.v_size()),
                              b = beta ? narrow(in.beta, s.beta_size()) : std::vector<TI>{};
        std::vector<TI> o(out.o.size()), dq(out.dq.size()), dk(out.dk.size()), dv(out.dv.size()),
            dbeta(out.dbeta.size());
        kcv_gdn_params kp{};
        kp.gate = static_cast<int32_t>(p.member.gate);
        kp.delta = p.member.delta;
        kp.dtype = opt.dtype;
        kp.B = s.B; kp.T = s.T; kp.H = s.H; kp.HV = s.HV; kp.K = s.K; kp.V = s.V;
        kp.N = s.sequences();
        kp.cu_seqlens = s.cu_seqlens.empty() ? nullptr : s.cu_seqlens.data();
        kp.scale = static_cast<float>(p.scale);
        kp.segment_chunks = opt.segment_chunks;
        kp.q = q.data(); kp.k = k.data(); kp.v = v.data(); kp.g = in.g; kp.beta = beta ? b.data() : nullptr;
        kp.h0 = in.h0; kp.d_o = d_o.data(); kp.dht = in.dht;
        kp.o = o.data(); kp.ht = out.ht.data(); kp.dq = dq.data(); kp.dk = dk.data();
        kp.dv = dv.data(); kp.dg = out.dg.data(); kp.dbeta = dbeta.data(); kp.dh0 = out.dh0.data();
        const float fnan = std::numeric_limits<float>::quiet_NaN();
        Workspace layout{};
        std::vector<float> prepared;
        if (opt.apart) {
            prepared.assign(layout_prepared(make_dims(kp), kp.gate, kp.delta, nullptr, layout) / sizeof(float) + 64, fnan);
            kp.prepared = prepared.data();
            kp.prepared_bytes = prepared.size() * sizeof(float);
        }
        const size_t ws_bytes = layout_workspace(make_dims(kp), true, kp.gate, kp.delta, nullptr, layout, opt.apart);
        std::vector<float> ws(ws_bytes / sizeof(float) + 64, fnan);
        kp.workspace = ws.data();
        kp.workspace_bytes = ws.size() * sizeof(float);
        HostLauncher launch;
        launch.sms = opt.sms;
        launch.launched = opt.launched;
        launch.output_on_wgmma = opt.output_on_wgmma;
        launch.reverse_on_wgmma = opt.reverse_on_wgmma;
        launch.grad_on_wgmma = opt.grad_on_wgmma;
        // Outputs never written stay NaN, as out's own do.
        const TI nan = from_float<TI>(std::numeric_limits<float>::quiet_NaN());
        for (auto* x : {&o, &dq, &dk, &dv, &dbeta}) std::fill(x->begin(), x->end(), nan);
        std::vector<float> after_forward;
        for (bool backward : {false, true}) {
            if (backward && !opt.backward) break;
            if (backward && opt.apart) {
                std::fill(ws.begin(), ws.end(), fnan);
                after_forward = prepared;
            }
            const int rc = opt.version == 2 ? launch_member<TI, 2, FIXED>(launch, kp, backward)
                                        : launch_member<TI, 1>(launch, kp, backward);
            if (rc != 0) return rc;
        }
        // Bytes, not values: NaN never equals itself.
        out.backward_wrote_prepared =
            opt.apart && std::memcmp(after_forward.data(), prepared.data(), prepared.size() * sizeof(float)) != 0;
        auto widen = [](const std::vector<TI>& x, std::vector<float>& y) {
            for (size_t i = 0; i < x.size(); ++i) y[i] = to_float(x[i]);
        };
        widen(o, out.o); widen(dq, out.dq); widen(dk, out.dk); widen(dv, out.dv); widen(dbeta, out.dbeta);
        return 0;
    };
    switch (opt.dtype) {
        case 0: return run.template operator()<float>();
        case 1: return run.template operator()<__nv_bfloat16>();
        case 2: return run.template operator()<__half>();
    }
    return 1;
}

}  // namespace kcv::gdn::cuda::emulation
