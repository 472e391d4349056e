// The chunked algorithm of the gated linear recurrence (docs/gdn.md, GDN.md) in float32 on the
// CPU: the readable reference beside the CUDA kernels, and the positive control the verifier
// runs for the recurrence contracts. Same layout and conventions as the float64 oracle
// (gdn/oracle/gdn_oracle.hpp); every array float32, row-major, contiguous; arithmetic and
// accumulation in float32, sequential in a fixed order, so results are bitwise deterministic.
//
// Within a chunk of C = 64 tokens with start state S₀ and cumulative log decay γ:
//   A_tj = (b_t ⊙ k_t)ᵀ Λ_t Λ_j⁻¹ k_j (j < t),  T = (I + A)⁻¹,
//   U = T (w ⊙ V),  W = T Λ (b ⊙ K),  Δ = U − W S₀,
//   O = scale · [(Q ⊙ e^γ) S₀ + tril(P) Δ],  P_tj = q_tᵀ Λ_t Λ_j⁻¹ k_j,
//   S_next = Λ_C S₀ + (K ⊙ e^{γ_C − γ})ᵀ Δ.
// Factors Λ_t Λ_j⁻¹ are never formed as e^{+γ}·e^{−γ}: inside a 16-token sub-chunk they are
// e^{γ_t − γ_j} element by element, across sub-chunks they split at the row sub-chunk's first
// token a as e^{γ_t − γ_a} · e^{γ_a − γ_j}, both exponents ≤ 0 because g ≤ 0. Each exponent
// γ_t − γ_j is summed over its own range of g (not taken as a difference of prefix sums, whose
// rounding grows with the chunk's total decay). A scalar gate is a per-channel gate whose
// channels are equal, except in the scores and their adjoint, where its factor e^{γ_t − γ_j}
// multiplies the ungated sum over channels, and in dγ, which is one number per token: each row's
// channels are summed before they are added to it. The CUDA kernels of version 1 do the same
// operations in the same order, so under host emulation they give this file's bits for every
// member.
//
// bf16_operands: every matrix the chunk materialises and then multiplies is stored rounded to
// bf16, as a kernel that keeps its intermediates in bf16 would: q, k, v and do as read, the start
// state as the products read it, Q ⊙ e^γ, K ⊙ e^{γ_C − γ}, P, b ⊙ K, A, T, Λ(b ⊙ K), w ⊙ V, W, Δ
// and, in the backward, the state gradient as the products read it, dΔ, Tᵀ dΔ, dP, dQ̃, dK̃, dW,
// dT, dR̃, X, dA and d(b ⊙ K). Products accumulate in float32, the gate's exponentials and the
// carried states (S and dS) stay float32. The positive control of contracts that declare bf16
// operands (docs/gdn.md); off, the bits are those of the float32 algorithm above.
//
// chunk: the tokens a chunk holds, 64 (C above) unless set. Every chunk length is a correct
// algorithm that rounds differently: the CUDA kernels use 64, and the recurrence contracts take a
// control at 32 as well, so that ORD-03's envelope spans the chunk lengths implementations choose
// between (docs/gdn.md).
#pragma once

#include "../problem.hpp"

namespace kcv::gdn::cpu {

inline constexpr int kChunk = 64;
inline constexpr int kSubChunk = 16;

struct ForwardArgs {
    const float* q = nullptr;
    const float* k = nullptr;
    const float* v = nullptr;
    const float* g = nullptr;      // gate kind none: ignored
    const float* beta = nullptr;   // without the delta term: ignored
    const float* h0 = nullptr;     // null: zero initial state
    float* o = nullptr;            // required
    float* ht = nullptr;           // final state; may be null
    bool bf16_operands = false;    // below
    int chunk = kChunk;            // tokens a chunk (below)
};
void chunked_forward(const Problem& p, const ForwardArgs& a);

// The adjoint for the loss ⟨do, o⟩ + ⟨dht, ht⟩; dht null means zero. dg, dbeta, dh0 are
// written where non-null and meaningful for the member.
struct BackwardArgs {
    const float* q = nullptr;
    const float* k = nullptr;
    const float* v = nullptr;
    const float* g = nullptr;
    const float* beta = nullptr;
    const float* h0 = nullptr;
    const float* d_o = nullptr;    // required
    const float* dht = nullptr;
    float* dq = nullptr;           // required
    float* dk = nullptr;           // required
    float* dv = nullptr;           // required
    float* dg = nullptr;
    float* dbeta = nullptr;
    float* dh0 = nullptr;
    bool bf16_operands = false;    // below
    int chunk = kChunk;            // tokens a chunk (below)
};
void chunked_backward(const Problem& p, const BackwardArgs& a);

}  // namespace kcv::gdn::cpu
