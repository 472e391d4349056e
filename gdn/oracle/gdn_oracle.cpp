// Token-by-token float64 evaluation of the gated linear recurrence and its adjoint. The header
// states the recurrence, the layout and the magnitude model; docs/gdn.md derives both.
#include "gdn_oracle.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

namespace kcv::gdn {
namespace {

// Segment length of the backward pass: the forward states are kept at segment starts and
// recomputed inside a segment, so memory is O(T/64 + 64) states rather than O(T).
constexpr int64_t kSegment = 64;

using Sequence = Span;

// Offsets into the row-major tensors of the layout.
struct Layout {
    Shape s;
    int64_t group;   // value heads per query/key head
    std::vector<Sequence> seqs;

    explicit Layout(const Shape& shape)
        : s(shape), group(shape.HV / shape.H), seqs(sequence_spans(shape)) {}
    int64_t row(const Sequence& q, int64_t t) const { return q.batch * s.T + q.start + t; }
    int64_t qk(const Sequence& q, int64_t t, int64_t hv) const {
        return (row(q, t) * s.H + hv / group) * s.K;
    }
    int64_t vo(const Sequence& q, int64_t t, int64_t hv) const { return (row(q, t) * s.HV + hv) * s.V; }
    int64_t head(const Sequence& q, int64_t t, int64_t hv) const { return row(q, t) * s.HV + hv; }
    int64_t state(int64_t n, int64_t hv) const { return (n * s.HV + hv) * s.K * s.V; }
};

// The per-token coefficients of one value head: D_t = Diag(decay), b_t = b·1, w_t = w·1.
// In float32 a decay e^g below the smallest normal (g < −87.3) keeps only the bits of a subnormal,
// so there, and only there, it is applied by halves, (x·e^{g/2})·e^{g/2}, as the chunked control
// and the kernels apply theirs; elsewhere, and always in float64, x·e^g.
template <class Real>
struct Token {
    const Real* q;
    const Real* k;
    const Real* v;
    std::vector<Real> decay, half;   // e^g; e^{g/2} (float32 only, else empty)
    Real b, w;
    static constexpr bool kHalves = std::is_same_v<Real, float>;

    Real decayed(int64_t i, Real x) const {
        if constexpr (kHalves)
            if (decay[i] < std::numeric_limits<float>::min()) return (x * half[i]) * half[i];
        return decay[i] * x;
    }
    // Channels [i, end) decay by e^g.
    void set_decay(int64_t i, int64_t end, Real g) {
        const Real d = std::exp(g);
        std::fill(decay.begin() + i, decay.begin() + end, d);
        if constexpr (kHalves) std::fill(half.begin() + i, half.begin() + end, std::exp(Real(0.5) * g));
    }
};

template <class Real>
Token<Real> load_token(const Problem& p, const Layout& L, const Real* q, const Real* k, const Real* v,
                 const Real* g, const Real* beta, const Sequence& seq, int64_t t, int64_t hv) {
    const int64_t K = p.shape.K;
    Token<Real> tk{q + L.qk(seq, t, hv), k + L.qk(seq, t, hv), v + L.vo(seq, t, hv), std::vector<Real>(K, 1.0),
                   std::vector<Real>(Token<Real>::kHalves ? K : 0, 1.0), 0.0, 1.0};
    if (p.member.gate == GateKind::scalar) {
        tk.set_decay(0, K, g[L.head(seq, t, hv)]);
    } else if (p.member.gate == GateKind::channel) {
        const Real* gc = g + L.head(seq, t, hv) * K;
        for (int64_t i = 0; i < K; ++i) tk.set_decay(i, i + 1, gc[i]);
    }
    if (p.member.delta) tk.b = tk.w = beta[L.head(seq, t, hv)];
    return tk;
}

// The magnitude of a product of two operand magnitudes a, b ≥ 0, each floored at `floor` (the
// header's operand_floor): ½(⌊a⌋·b + a·⌊b⌋), which is a·b bit for bit when neither lies below the
// floor and when the floor is 0.
template <class Real>
struct Magnitude {
    Real floor = 0;
    Real operand(Real a) const { return a == 0 ? a : std::max(a, floor); }
    Real product(Real a, Real b) const {
        if (floor == 0) return a * b;
        return (Real(0.5) * operand(a)) * b + (Real(0.5) * a) * operand(b);
    }
};

// One step of the recurrence. In: S = S_{t−1}, M = M_{t−1}. Out: S = S_t, M = M_t, and the
// intermediates the adjoint needs: Sd = D_t S_{t−1}, Md = D_t M_{t−1},
// u = w ⊙ v − Sdᵀ (b ⊙ k) (the vector written into the state along k).
template <class Real>
struct StepScratch {
    std::vector<Real> Sd, Md, u, u_mag, pmag;
};

template <class Real>
void advance(const Token<Real>& tk, int64_t K, int64_t V, std::vector<Real>& S, std::vector<Real>& M,
             StepScratch<Real>& x, Magnitude<Real> mag) {
    x.Sd.resize(K * V);
    x.Md.resize(K * V);
    x.u.assign(V, 0.0);
    x.u_mag.assign(V, 0.0);
    x.pmag.assign(V, 0.0);
    for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j) {
            x.Sd[i * V + j] = tk.decayed(i, S[i * V + j]);
            x.Md[i * V + j] = tk.decayed(i, M[i * V + j]);
        }
    // p = Sdᵀ (b ⊙ k): the part of the state along the key that the delta rule replaces.
    for (int64_t i = 0; i < K && tk.b != 0.0; ++i) {
        const Real bk = tk.b * tk.k[i];
        for (int64_t j = 0; j < V; ++j) {
            x.u[j] -= bk * x.Sd[i * V + j];
            x.pmag[j] += mag.product(std::abs(bk), std::abs(x.Sd[i * V + j]));
            x.u_mag[j] += mag.product(std::abs(bk), x.Md[i * V + j]);
        }
    }
    // pmag becomes the magnitude of what is written along k: |b ⊙ k|ᵀ|Sd| + |w ⊙ v|.
    for (int64_t j = 0; j < V; ++j) {
        const Real wv = mag.product(std::abs(tk.w), std::abs(tk.v[j]));
        x.u[j] += tk.w * tk.v[j];
        x.u_mag[j] += wv;
        x.pmag[j] += wv;
    }
    for (int64_t i = 0; i < K; ++i)
        for (int64_t j = 0; j < V; ++j) {
            S[i * V + j] = x.Sd[i * V + j] + tk.k[i] * x.u[j];
            M[i * V + j] = x.Md[i * V + j] + mag.product(std::abs(tk.k[i]), x.pmag[j]);
        }
}

template <class Real>
void init_state(const Problem& p, const Layout& L, const Real* h0, int64_t n, int64_t hv,
                std::vector<Real>& S, std::vector<Real>& M) {
    const int64_t KV = p.shape.K * p.shape.V;
    S.assign(KV, 0.0);
    M.assign(KV, 0.0);
    if (h0 == nullptr) return;
    const Real* src = h0 + L.state(n, hv);
    for (int64_t e = 0; e < KV; ++e) {
        S[e] = src[e];
        M[e] = std::abs(src[e]);
    }
}

template <class Real>
void forward_in(const Problem& p, const ForwardArgsT<Real>& a) {
    validate(p);
    if (a.o == nullptr) throw std::invalid_argument("recurrence forward: o is required");
    const Layout L(p.shape);
    const int64_t K = p.shape.K, V = p.shape.V, KV = K * V;
    std::vector<Real> S, M;
    const Real scale = Real(p.scale);
    StepScratch<Real> x;
    const Magnitude<Real> mag{a.operand_floor};
    for (int64_t n = 0; n < p.shape.sequences(); ++n) {
        const Sequence& seq = L.seqs[n];
        for (int64_t hv = 0; hv < p.shape.HV; ++hv) {
            init_state(p, L, a.h0, n, hv, S, M);
            for (int64_t t = 0; t < seq.length; ++t) {
                const Token<Real> tk = load_token(p, L, a.q, a.k, a.v, a.g, a.beta, seq, t, hv);
                advance(tk, K, V, S, M, x, mag);
                Real* o = a.o + L.vo(seq, t, hv);
                Real* os = a.o_scale ? a.o_scale + L.vo(seq, t, hv) : nullptr;
                for (int64_t j = 0; j < V; ++j) {
                    Real acc = 0.0, sum = 0.0;
                    for (int64_t i = 0; i < K; ++i) {
                        acc += tk.q[i] * S[i * V + j];
                        sum += mag.product(std::abs(tk.q[i]), M[i * V + j]);
                    }
                    o[j] = scale * acc;
                    if (os) os[j] = std::abs(p.scale) * sum;
                }
            }
            for (int64_t e = 0; e < KV; ++e) {
                if (a.ht) a.ht[L.state(n, hv) + e] = S[e];
                if (a.ht_scale) a.ht_scale[L.state(n, hv) + e] = M[e];
            }
        }
    }
}

// Reverse-mode through advance(), token by token from the last. With dS the gradient of S_t
// (the loss ⟨do, o⟩ + ⟨dht, ht⟩) and G its magnitude:
//   dS += scale·q doᵀ;  dq = scale·S_t do;  du = dSᵀ k;  dk = dS u + b ⊙ (Sd dp), dp = −du;
//   dv = w ⊙ du;  dβ = ⟨v, du⟩ + ⟨k, Sd dp⟩;  dSd = dS + (b ⊙ k) dpᵀ;  dg = Σ_v dSd ⊙ Sd;
//   dS_{t−1} = D_t dSd.
// G follows the same steps with absolute values, the delta correction again entering with the
// magnitude of its own terms (|b ⊙ k| (|k|ᵀ|dS|)) without re-amplifying G.
// The scale of dg adds R_t = Σ_{s≥t} (|q_s| ⊙ s(dq_s) + |k_s| ⊙ s(dk_s) + |b_s ⊙ k_s| ⊙ s(dbk_s))
// + Σ_v |dht| ⊙ M_T: g enters only through the cumulative decay, and
// dg_t = Σ_{s≥t} (q_s ⊙ dq_s − k_s ⊙ dk_s + …) is the form every chunked implementation sums
// (a reverse cumulative sum of dγ), whose terms cancel to the token form's much smaller value.
template <class Real>
void backward_in(const Problem& p, const BackwardArgsT<Real>& a) {
    validate(p);
    if (!a.d_o || !a.dq || !a.dk || !a.dv)
        throw std::invalid_argument("recurrence backward: d_o, dq, dk and dv are required");
    const Layout L(p.shape);
    const Shape& s = p.shape;
    const int64_t K = s.K, V = s.V, KV = K * V;
    const bool gated = p.member.gate != GateKind::none;
    const Real scale = Real(p.scale), scale_mag = std::abs(scale);

    // dq and dk sum over value heads; everything else is written once per element.
    for (int64_t e = 0; e < s.qk_size(); ++e) {
        a.dq[e] = a.dk[e] = 0.0;
        if (a.dq_scale) a.dq_scale[e] = 0.0;
        if (a.dk_scale) a.dk_scale[e] = 0.0;
    }

    std::vector<Real> S, M, dS, G, dSd, Gd, du, du_mag, dbk, dbk_mag, S_t, M_t, R;
    std::vector<std::vector<Real>> S_prev, M_prev;   // inside the current segment
    std::vector<std::vector<Real>> S_ckpt, M_ckpt;   // at segment starts
    StepScratch<Real> x;
    const Magnitude<Real> mag{a.operand_floor};
    for (int64_t n = 0; n < s.sequences(); ++n) {
        const Sequence& seq = L.seqs[n];
        const int64_t segments = (seq.length + kSegment - 1) / kSegment;
        for (int64_t hv = 0; hv < s.HV; ++hv) {
            auto token = [&](int64_t t) { return load_token(p, L, a.q, a.k, a.v, a.g, a.beta, seq, t, hv); };
            init_state(p, L, a.h0, n, hv, S, M);
            S_ckpt.assign(segments, {});
            M_ckpt.assign(segments, {});
            for (int64_t t = 0; t < seq.length; ++t) {
                if (t % kSegment == 0) {
                    S_ckpt[t / kSegment] = S;
                    M_ckpt[t / kSegment] = M;
                }
                advance(token(t), K, V, S, M, x, mag);
            }
            dS.assign(KV, 0.0);
            G.assign(KV, 0.0);
            R.assign(K, 0.0);
            if (a.dht)
                for (int64_t e = 0; e < KV; ++e) {
                    dS[e] = a.dht[L.state(n, hv) + e];
                    G[e] = std::abs(dS[e]);
                    R[e / V] += mag.product(G[e], M[e]);   // M holds M_T here
                }
            for (int64_t sg = segments - 1; sg >= 0; --sg) {
                const int64_t t0 = sg * kSegment, t1 = std::min(seq.length, t0 + kSegment);
                S = S_ckpt[sg];
                M = M_ckpt[sg];
                S_prev.assign(t1 - t0, {});
                M_prev.assign(t1 - t0, {});
                for (int64_t t = t0; t < t1; ++t) {
                    S_prev[t - t0] = S;
                    M_prev[t - t0] = M;
                    if (t + 1 < t1) advance(token(t), K, V, S, M, x, mag);
                }
                for (int64_t t = t1 - 1; t >= t0; --t) {
                    const Token<Real> tk = token(t);
                    S_t = S_prev[t - t0];
                    M_t = M_prev[t - t0];
                    advance(tk, K, V, S_t, M_t, x, mag);   // S_t, M_t; x holds Sd, Md, u
                    const Real* dout = a.d_o + L.vo(seq, t, hv);
                    for (int64_t i = 0; i < K; ++i)
                        for (int64_t j = 0; j < V; ++j) {
                            dS[i * V + j] += scale * tk.q[i] * dout[j];
                            G[i * V + j] += mag.product(scale_mag * std::abs(tk.q[i]), std::abs(dout[j]));
                        }
                    const int64_t qk = L.qk(seq, t, hv), vo = L.vo(seq, t, hv);
                    du.assign(V, 0.0);
                    du_mag.assign(V, 0.0);
                    for (int64_t i = 0; i < K; ++i) {
                        Real dq = 0.0, dq_mag = 0.0, dk = 0.0, dk_mag = 0.0;
                        for (int64_t j = 0; j < V; ++j) {
                            dq += S_t[i * V + j] * dout[j];
                            dq_mag += mag.product(M_t[i * V + j], std::abs(dout[j]));
                            dk += dS[i * V + j] * x.u[j];
                            dk_mag += mag.product(G[i * V + j], x.u_mag[j]);
                            du[j] += dS[i * V + j] * tk.k[i];
                            du_mag[j] += mag.product(G[i * V + j], std::abs(tk.k[i]));
                        }
                        a.dq[qk + i] += scale * dq;
                        a.dk[qk + i] += dk;
                        R[i] += mag.product(std::abs(tk.q[i]) * scale_mag, dq_mag) +
                                mag.product(std::abs(tk.k[i]), dk_mag);
                        if (a.dq_scale) a.dq_scale[qk + i] += scale_mag * dq_mag;
                        if (a.dk_scale) a.dk_scale[qk + i] += dk_mag;
                    }
                    for (int64_t j = 0; j < V; ++j) {
                        a.dv[vo + j] = tk.w * du[j];
                        if (a.dv_scale) a.dv_scale[vo + j] = mag.product(std::abs(tk.w), du_mag[j]);
                    }
                    dSd = dS;
                    Gd = G;
                    if (p.member.delta) {
                        // dbk = Sd dp with dp = −du: the gradient of b ⊙ k.
                        dbk.assign(K, 0.0);
                        dbk_mag.assign(K, 0.0);
                        Real dw = 0.0, dw_mag = 0.0, db = 0.0, db_mag = 0.0;
                        for (int64_t j = 0; j < V; ++j) {
                            dw += tk.v[j] * du[j];
                            dw_mag += mag.product(std::abs(tk.v[j]), du_mag[j]);
                        }
                        std::vector<Real> kdS(V, 0.0);
                        for (int64_t i = 0; i < K; ++i)
                            for (int64_t j = 0; j < V; ++j) {
                                dbk[i] -= x.Sd[i * V + j] * du[j];
                                dbk_mag[i] += mag.product(x.Md[i * V + j], du_mag[j]);
                                kdS[j] += mag.product(std::abs(tk.k[i]), std::abs(dS[i * V + j]));
                            }
                        for (int64_t i = 0; i < K; ++i) {
                            a.dk[qk + i] += tk.b * dbk[i];
                            if (a.dk_scale) a.dk_scale[qk + i] += mag.product(std::abs(tk.b), dbk_mag[i]);
                            db += tk.k[i] * dbk[i];
                            db_mag += mag.product(std::abs(tk.k[i]), dbk_mag[i]);
                            R[i] += Real(2) * mag.product(std::abs(tk.b * tk.k[i]), dbk_mag[i]);
                            for (int64_t j = 0; j < V; ++j) {
                                dSd[i * V + j] -= tk.b * tk.k[i] * du[j];
                                Gd[i * V + j] += mag.product(std::abs(tk.b * tk.k[i]), kdS[j]);
                            }
                        }
                        const int64_t hb = L.head(seq, t, hv);
                        if (a.dbeta) a.dbeta[hb] = dw + db;
                        if (a.dbeta_scale) a.dbeta_scale[hb] = dw_mag + db_mag;
                    }
                    if (gated) {
                        Real total = 0.0, total_mag = 0.0;
                        for (int64_t i = 0; i < K; ++i) {
                            Real dg = 0.0, dg_mag = 0.0;
                            for (int64_t j = 0; j < V; ++j) {
                                dg += dSd[i * V + j] * x.Sd[i * V + j];
                                dg_mag += mag.product(Gd[i * V + j], x.Md[i * V + j]);
                            }
                            dg_mag += R[i];
                            if (p.member.gate == GateKind::channel) {
                                const int64_t e = L.head(seq, t, hv) * K + i;
                                if (a.dg) a.dg[e] = dg;
                                if (a.dg_scale) a.dg_scale[e] = dg_mag;
                            }
                            total += dg;
                            total_mag += dg_mag;
                        }
                        if (p.member.gate == GateKind::scalar) {
                            const int64_t e = L.head(seq, t, hv);
                            if (a.dg) a.dg[e] = total;
                            if (a.dg_scale) a.dg_scale[e] = total_mag;
                        }
                    }
                    for (int64_t i = 0; i < K; ++i)
                        for (int64_t j = 0; j < V; ++j) {
                            dS[i * V + j] = tk.decayed(i, dSd[i * V + j]);
                            G[i * V + j] = tk.decayed(i, Gd[i * V + j]);
                        }
                }
            }
            for (int64_t e = 0; e < KV; ++e) {
                if (a.dh0) a.dh0[L.state(n, hv) + e] = dS[e];
                if (a.dh0_scale) a.dh0_scale[L.state(n, hv) + e] = G[e];
            }
        }
    }
}

}  // namespace

void forward(const Problem& p, const ForwardArgs& a) { forward_in(p, a); }
void forward(const Problem& p, const ForwardArgsF32& a) { forward_in(p, a); }
void backward(const Problem& p, const BackwardArgs& a) { backward_in(p, a); }
void backward(const Problem& p, const BackwardArgsF32& a) { backward_in(p, a); }

}  // namespace kcv::gdn
