// One problem through the CUDA kernels of this folder on the host (host_emulation.hpp): their
// float32 specialisation, forward then backward, the way the tests and
// bench/gdn_ord03_emulated.cpp run them without a GPU. Include it after defining
// KCV_GDN_HOST_EMULATION.
#pragma once

#if !defined(KCV_GDN_HOST_EMULATION)
#error "host_run.hpp runs the kernels under host emulation: define KCV_GDN_HOST_EMULATION before including it"
#endif

#include <limits>
#include <vector>

#include "../problem.hpp"
#include "gdn_launch.cuh"

namespace kcv::gdn::cuda::emulation {

// Every output of a forward and a backward, in the layout of gdn/oracle/gdn_oracle.hpp, NaN until
// written.
struct RunOutputs {
    std::vector<float> o, ht, dq, dk, dv, dg, dbeta, dh0;
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

// The inputs, float32 arrays of the same layout; h0 and dht may be null (zero).
struct RunInputs {
    const float *q, *k, *v, *g, *beta, *h0, *d_o, *dht;
};

// Forward then backward with the kernels of `version` (1 or 2) into `out`, on a workspace that
// starts as NaN, the grids sized for `sms` SMs; the first nonzero status of the two launch
// sequences, else 0.
inline int run_member(const Problem& p, const RunInputs& in, int version, RunOutputs& out, int sms = 132) {
    const Shape& s = p.shape;
    kcv_gdn_params kp{};
    kp.gate = static_cast<int32_t>(p.member.gate);
    kp.delta = p.member.delta;
    kp.dtype = 0;
    kp.B = s.B; kp.T = s.T; kp.H = s.H; kp.HV = s.HV; kp.K = s.K; kp.V = s.V;
    kp.N = s.sequences();
    kp.cu_seqlens = s.cu_seqlens.empty() ? nullptr : s.cu_seqlens.data();
    kp.scale = static_cast<float>(p.scale);
    kp.q = in.q; kp.k = in.k; kp.v = in.v; kp.g = in.g; kp.beta = in.beta; kp.h0 = in.h0;
    kp.d_o = in.d_o; kp.dht = in.dht;
    kp.o = out.o.data(); kp.ht = out.ht.data(); kp.dq = out.dq.data(); kp.dk = out.dk.data();
    kp.dv = out.dv.data(); kp.dg = out.dg.data(); kp.dbeta = out.dbeta.data(); kp.dh0 = out.dh0.data();
    Workspace layout{};
    std::vector<float> ws(layout_workspace(make_dims(kp), true, kp.gate, nullptr, layout) / sizeof(float) + 64,
                          std::numeric_limits<float>::quiet_NaN());
    kp.workspace = ws.data();
    kp.workspace_bytes = ws.size() * sizeof(float);
    HostLauncher launch;
    launch.sms = sms;
    for (bool backward : {false, true}) {
        const int rc = version == 2 ? launch_member<float, 2>(launch, kp, backward)
                                    : launch_member<float, 1>(launch, kp, backward);
        if (rc != 0) return rc;
    }
    return 0;
}

}  // namespace kcv::gdn::cuda::emulation
