// The gated linear recurrence in float64, token by token: the reference every recurrence kernel
// is judged against, forward and its exact adjoint. Framework-free: plain row-major arrays. The
// same steps in float32 (the ...F32 argument structs) are the token-by-token positive control
// (kernels/controls/gdn_recurrent_*.cpp): the recurrent form, beside the chunked one of gdn/cpu.
//
//     S_t = (I − k_t (b_t ⊙ k_t)ᵀ) · Diag(exp(g_t)) · S_{t−1} + k_t (w_t ⊙ v_t)ᵀ
//     o_t = scale · S_tᵀ q_t
//
// with S_t ∈ R^{K×V} per (sequence, value head). The five members differ only in the gate kind
// and whether the delta term is on (docs/gdn.md has the table): b_t = w_t = β_t with the delta
// term, b_t = 0 and w_t = 1 without it.
//
// Layout (row-major, contiguous):
//   q, k   [B, T, H, K]        v, o, do   [B, T, HV, V]     HV a multiple of H; value head hv
//   g      scalar gate [B, T, HV], per-channel gate [B, T, HV, K] (log decay, natural log)
//   beta   [B, T, HV]          h0, ht, dht, dh0   [N, HV, K, V]
// Sequences: without cu_seqlens, N = B sequences of T tokens; with cu_seqlens (B = 1), N =
// len(cu_seqlens) − 1 sequences, sequence n holding tokens [cu[n], cu[n+1]) of the T axis.
// Value head hv reads query/key head hv / (HV / H), as repeat_interleave would; the gradients of
// q and k sum over the value heads of a group in increasing order.
//
// Alongside every output the oracle computes the magnitude scale s_i of the analytic error
// model (GATES.md), derived in docs/gdn.md: a magnitude state M_t ≥ 0 propagated through the
// recurrence with absolute values,
//
//     M_t = D_t M_{t−1} + |k_t| (|b_t ⊙ k_t|ᵀ |D_t S_{t−1}|) + |k_t| |w_t ⊙ v_t|ᵀ,   M_0 = |h0|,
//     s(o_t) = |scale| · |q_t|ᵀ M_t,    s(ht) = M_T,
//
// which is exactly Σ|terms| of the unrolled sum for the members without the delta term. The
// delta correction enters with the magnitude of its own terms but does not re-amplify M: the
// projection I − β k kᵀ is non-expansive (2-norm) for 0 ≤ β‖k‖² ≤ 2, so an error already in the
// state is not enlarged by it, whereas Σ|terms| over the unrolled product grows like
// Π(1 + β‖k‖₁²) and would bound nothing useful. The backward mirrors this with a gradient
// magnitude G_t (see backward()).
//
// operand_floor (OracleArgs::operand_floor: 0, or the smallest normal N_F of the operand format
// a contract allows) floors the magnitude of every operand of every product in these recursions:
// a product a·b enters as ½(⌊a⌋·|b| + |a|·⌊b⌋) with ⌊x⌋ = max(|x|, N_F) for x ≠ 0 (⌊0⌋ = 0),
// the magnitude states and gradient magnitudes included, so that a scale still bounds what
// rounding an operand to that format flushes at subnormal scale (docs/gdn.md, "The magnitude
// scale s_i"). Where no operand magnitude lies below the floor, every scale is the unfloored one
// bit for bit.
#pragma once

#include "../problem.hpp"

namespace kcv::gdn {

// Inputs: g is ignored for gate none, beta without the delta term; h0 may be null (zero state).
template <class Real>
struct ForwardArgsT {
    const Real* q = nullptr;
    const Real* k = nullptr;
    const Real* v = nullptr;
    const Real* g = nullptr;
    const Real* beta = nullptr;
    const Real* h0 = nullptr;
    Real* o = nullptr;          // required
    Real* ht = nullptr;         // final state; may be null
    Real* o_scale = nullptr;    // magnitude scales; may be null
    Real* ht_scale = nullptr;
    Real operand_floor = 0;     // above
};
using ForwardArgs = ForwardArgsT<double>;
using ForwardArgsF32 = ForwardArgsT<float>;
void forward(const Problem& p, const ForwardArgs& a);
void forward(const Problem& p, const ForwardArgsF32& a);

// The exact adjoint of forward() for the loss ⟨do, o⟩ + ⟨dht, ht⟩. dht may be null (zero).
// Outputs dg, dbeta, dh0 are written where non-null and meaningful for the member (dg needs a
// gate, dbeta the delta term). Scale pointers may be null.
template <class Real>
struct BackwardArgsT {
    const Real* q = nullptr;
    const Real* k = nullptr;
    const Real* v = nullptr;
    const Real* g = nullptr;
    const Real* beta = nullptr;
    const Real* h0 = nullptr;
    const Real* d_o = nullptr;  // required
    const Real* dht = nullptr;
    Real* dq = nullptr;         // required
    Real* dk = nullptr;         // required
    Real* dv = nullptr;         // required
    Real* dg = nullptr;
    Real* dbeta = nullptr;
    Real* dh0 = nullptr;
    Real* dq_scale = nullptr;
    Real* dk_scale = nullptr;
    Real* dv_scale = nullptr;
    Real* dg_scale = nullptr;
    Real* dbeta_scale = nullptr;
    Real* dh0_scale = nullptr;
    Real operand_floor = 0;     // as in ForwardArgsT
};
using BackwardArgs = BackwardArgsT<double>;
using BackwardArgsF32 = BackwardArgsT<float>;
void backward(const Problem& p, const BackwardArgs& a);
void backward(const Problem& p, const BackwardArgsF32& a);

}  // namespace kcv::gdn
