// The chunked recurrence in float32 (see gdn_chunked.hpp). One (sequence, value head) at a time;
// each chunk is a handful of small dense matrix products, and only the state carries from one
// chunk to the next.
#include "gdn_chunked.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../kernels/common/kcv_half.hpp"

namespace kcv::gdn::cpu {
namespace {

// e^x in float32 as the float64 exponential rounded to float32 (correctly rounded but for rare
// double roundings): the CUDA kernels use the same function (gdn/cuda/gdn_common.cuh), so that
// on a GPU they differ from this implementation by their arithmetic, not by their exponential.
float exp_rn(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }

// A small dense float32 matrix, row-major.
struct Mat {
    int rows = 0, cols = 0;
    std::vector<float> a;

    Mat() = default;
    Mat(int r, int c) : rows(r), cols(c), a(static_cast<size_t>(r) * c, 0.0f) {}
    float& operator()(int i, int j) { return a[static_cast<size_t>(i) * cols + j]; }
    float operator()(int i, int j) const { return a[static_cast<size_t>(i) * cols + j]; }
};

// With bf16 operands (gdn_chunked.hpp), m as a kernel would store it: every element rounded to
// bf16 (to nearest, ties to even); otherwise unchanged.
void store(Mat& m, bool bf16) {
    if (!bf16) return;
    for (float& x : m.a) x = kcvk::bf16_rounded(x);
}

Mat stored(Mat m, bool bf16) {
    store(m, bf16);
    return m;
}

// A·B, Aᵀ·B and A·Bᵀ, each element a sequential float32 dot product.
Mat matmul(const Mat& A, const Mat& B) {
    Mat C(A.rows, B.cols);
    for (int i = 0; i < A.rows; ++i)
        for (int j = 0; j < B.cols; ++j) {
            float acc = 0.0f;
            for (int l = 0; l < A.cols; ++l) acc += A(i, l) * B(l, j);
            C(i, j) = acc;
        }
    return C;
}

Mat matmul_tn(const Mat& A, const Mat& B) {
    Mat C(A.cols, B.cols);
    for (int i = 0; i < A.cols; ++i)
        for (int j = 0; j < B.cols; ++j) {
            float acc = 0.0f;
            for (int l = 0; l < A.rows; ++l) acc += A(l, i) * B(l, j);
            C(i, j) = acc;
        }
    return C;
}

Mat matmul_nt(const Mat& A, const Mat& B) {
    Mat C(A.rows, B.rows);
    for (int i = 0; i < A.rows; ++i)
        for (int j = 0; j < B.rows; ++j) {
            float acc = 0.0f;
            for (int l = 0; l < A.cols; ++l) acc += A(i, l) * B(j, l);
            C(i, j) = acc;
        }
    return C;
}

// Products with a lower triangular left factor that read only its support, so a value of a later
// token (NaN included) never reaches an earlier one through a structural zero:
// lower_matmul: C = A·B, C_ij = Σ_{l≤i} A_il B_lj;  lower_matmul_tn: C = Aᵀ·B, Σ_{l≥i} A_li B_lj.
Mat lower_matmul(const Mat& A, const Mat& B) {
    Mat C(A.rows, B.cols);
    for (int i = 0; i < A.rows; ++i)
        for (int j = 0; j < B.cols; ++j) {
            float acc = 0.0f;
            for (int l = 0; l <= i; ++l) acc += A(i, l) * B(l, j);
            C(i, j) = acc;
        }
    return C;
}

Mat lower_matmul_tn(const Mat& A, const Mat& B) {
    Mat C(A.cols, B.cols);
    for (int i = 0; i < A.cols; ++i)
        for (int j = 0; j < B.cols; ++j) {
            float acc = 0.0f;
            for (int l = i; l < A.rows; ++l) acc += A(l, i) * B(l, j);
            C(i, j) = acc;
        }
    return C;
}

// Offsets into the row-major tensors of the layout.
struct Layout {
    Shape s;
    int64_t group;
    std::vector<Span> seqs;

    explicit Layout(const Shape& shape) : s(shape), group(shape.HV / shape.H), seqs(sequence_spans(shape)) {}
    int64_t row(const Span& q, int64_t t) const { return q.batch * s.T + q.start + t; }
    int64_t qk(const Span& q, int64_t t, int64_t hv) const { return (row(q, t) * s.H + hv / group) * s.K; }
    int64_t vo(const Span& q, int64_t t, int64_t hv) const { return (row(q, t) * s.HV + hv) * s.V; }
    int64_t head(const Span& q, int64_t t, int64_t hv) const { return row(q, t) * s.HV + hv; }
    int64_t state(int64_t n, int64_t hv) const { return (n * s.HV + hv) * s.K * s.V; }
};

// A float32 running sum with Kahan's compensation. Log decays are summed this way because an
// exponent's absolute error is the factor's relative error: a plain running sum of 64 decays of
// size |γ| leaves errors of about √64·u·|γ|, past the error model's allowance once |γ| ≈ 30.
struct KahanSum {
    float sum = 0.0f, carry = 0.0f;
    void add(float x) {
        const float y = x - carry;
        const float t = sum + y;
        carry = (t - sum) - y;
        sum = t;
    }
};

// The inputs of one chunk of one value head: g the log decay of each token and gamma its
// inclusive cumulative sum within the chunk, per channel (equal channels for a scalar gate,
// zero without a gate).
struct Chunk {
    int L = 0;
    Mat q, k, v, g, gamma;
    std::vector<float> beta;

    // γ_t − γ_j = Σ_{j<s≤t} g_s, summed over the range itself rather than as a difference of two
    // prefix sums: the prefix sums grow with every earlier token of the chunk, and their difference
    // would carry that size's rounding into a factor that may be close to 1.
    float gap(int j, int t, int i) const {
        KahanSum acc;
        for (int s = j + 1; s <= t; ++s) acc.add(g(s, i));
        return acc.sum;
    }
};

struct Inputs {
    const float *q, *k, *v, *g, *beta;
};

Chunk load_chunk(const Problem& p, const Layout& lay, const Inputs& in, const Span& seq, int64_t t0, int L,
                 int64_t hv, bool bf16) {
    const int K = static_cast<int>(p.shape.K), V = static_cast<int>(p.shape.V);
    Chunk c;
    c.L = L;
    c.q = Mat(L, K);
    c.k = Mat(L, K);
    c.v = Mat(L, V);
    c.g = Mat(L, K);
    c.gamma = Mat(L, K);
    c.beta.assign(L, 0.0f);
    std::vector<KahanSum> running(K);
    for (int t = 0; t < L; ++t) {
        const float* q = in.q + lay.qk(seq, t0 + t, hv);
        const float* k = in.k + lay.qk(seq, t0 + t, hv);
        const float* v = in.v + lay.vo(seq, t0 + t, hv);
        for (int i = 0; i < K; ++i) {
            c.q(t, i) = q[i];
            c.k(t, i) = k[i];
        }
        for (int j = 0; j < V; ++j) c.v(t, j) = v[j];
        if (p.member.gate == GateKind::scalar) {
            const float g = in.g[lay.head(seq, t0 + t, hv)];
            for (int i = 0; i < K; ++i) c.g(t, i) = g;
        } else if (p.member.gate == GateKind::channel) {
            const float* g = in.g + lay.head(seq, t0 + t, hv) * K;
            for (int i = 0; i < K; ++i) c.g(t, i) = g[i];
        }
        for (int i = 0; i < K; ++i) {
            running[i].add(c.g(t, i));
            c.gamma(t, i) = running[i].sum;
        }
        if (p.member.delta) c.beta[t] = in.beta[lay.head(seq, t0 + t, hv)];
    }
    for (Mat* m : {&c.q, &c.k, &c.v}) store(*m, bf16);
    return c;
}

// e^{γ_t − γ_j} of a scalar gate for j ≤ t (zero above): the factor of every channel.
Mat scalar_factors(const Chunk& c) {
    Mat F(c.L, c.L);
    for (int t = 0; t < c.L; ++t)
        for (int j = 0; j <= t; ++j) F(t, j) = exp_rn(c.gap(j, t, 0));
    return F;
}

// Gated scores M_tj = Σ_i x_ti k_ji e^{γ_ti − γ_ji} for j ≤ t (j < t when strict), zero above.
// A scalar gate factors out of the sum over channels, e^{γ_t − γ_j}·Σ_i x_ti k_ji, one rounding
// fewer per term. A per-channel gate's factor splits across sub-chunks at the row sub-chunk's
// first token a.
Mat gated_scores(const Mat& x, const Mat& k, const Chunk& c, bool strict, bool scalar) {
    const int L = x.rows, K = x.cols;
    Mat M(L, L);
    if (scalar) {
        for (int t = 0; t < L; ++t)
            for (int j = 0; j < (strict ? t : t + 1); ++j) {
                float acc = 0.0f;
                for (int i = 0; i < K; ++i) acc += x(t, i) * k(j, i);
                M(t, j) = acc * exp_rn(c.gap(j, t, 0));
            }
        return M;
    }
    for (int a = 0; a < L; a += kSubChunk) {
        const int end = std::min(L, a + kSubChunk);
        for (int t = a; t < end; ++t) {
            std::vector<float> xa(K);
            for (int i = 0; i < K; ++i) xa[i] = x(t, i) * exp_rn(c.gap(a, t, i));
            for (int j = 0; j < a; ++j) {
                float acc = 0.0f;
                for (int i = 0; i < K; ++i) acc += xa[i] * (k(j, i) * exp_rn(c.gap(j, a, i)));
                M(t, j) = acc;
            }
            for (int j = a; j < (strict ? t : t + 1); ++j) {
                float acc = 0.0f;
                for (int i = 0; i < K; ++i) acc += x(t, i) * k(j, i) * exp_rn(c.gap(j, t, i));
                M(t, j) = acc;
            }
        }
    }
    return M;
}

// The adjoint of gated_scores: given dM on the same mask, adds the gradients of x and k to dx and
// dk, and that of gamma (x ⊙ dx − k ⊙ dk, the anchor's contributions cancelling) to dgamma. For a
// scalar gate dgamma has one column, and row t gets Σ_i (x ⊙ dx − k ⊙ dk)_ti summed apart first;
// F holds its factors (scalar_factors).
void gated_scores_backward(const Mat& dM, const Mat& x, const Mat& k, const Chunk& c, bool strict, const Mat* F,
                           Mat& dx, Mat& dk, Mat& dgamma) {
    const int L = x.rows, K = x.cols;
    Mat gx(L, K), gk(L, K);
    if (F) {
        for (int t = 0; t < L; ++t)
            for (int i = 0; i < K; ++i) {
                float accx = 0.0f, acck = 0.0f;
                for (int j = 0; j < (strict ? t : t + 1); ++j) accx += dM(t, j) * k(j, i) * (*F)(t, j);
                for (int s = strict ? t + 1 : t; s < L; ++s) acck += dM(s, t) * x(s, i) * (*F)(s, t);
                gx(t, i) = accx;
                gk(t, i) = acck;
            }
        for (int t = 0; t < L; ++t) {
            float acc = 0.0f;
            for (int i = 0; i < K; ++i) {
                acc += x(t, i) * gx(t, i) - k(t, i) * gk(t, i);
                dx(t, i) += gx(t, i);
                dk(t, i) += gk(t, i);
            }
            dgamma(t, 0) += acc;
        }
        return;
    }
    for (int a = 0; a < L; a += kSubChunk) {
        const int end = std::min(L, a + kSubChunk);
        for (int t = a; t < end; ++t) {
            std::vector<float> xa(K), dxa(K, 0.0f);
            for (int i = 0; i < K; ++i) xa[i] = x(t, i) * exp_rn(c.gap(a, t, i));
            for (int j = 0; j < a; ++j) {
                const float d = dM(t, j);
                for (int i = 0; i < K; ++i) {
                    const float e = exp_rn(c.gap(j, a, i));
                    dxa[i] += d * (k(j, i) * e);
                    gk(j, i) += d * xa[i] * e;
                }
            }
            for (int i = 0; i < K; ++i) gx(t, i) += dxa[i] * exp_rn(c.gap(a, t, i));
            for (int j = a; j < (strict ? t : t + 1); ++j) {
                const float d = dM(t, j);
                for (int i = 0; i < K; ++i) {
                    const float e = exp_rn(c.gap(j, t, i));
                    gx(t, i) += d * k(j, i) * e;
                    gk(j, i) += d * x(t, i) * e;
                }
            }
        }
    }
    for (int t = 0; t < L; ++t)
        for (int i = 0; i < K; ++i) {
            dgamma(t, i) += x(t, i) * gx(t, i) - k(t, i) * gk(t, i);
            dx(t, i) += gx(t, i);
            dk(t, i) += gk(t, i);
        }
}

// (I + A)⁻¹ for strictly lower triangular A, by forward substitution: row t of T is
// e_t − Σ_{j<t} A_tj T_j.
Mat unit_lower_inverse(const Mat& A) {
    const int L = A.rows;
    Mat T(L, L);
    for (int t = 0; t < L; ++t) {
        for (int c = 0; c < t; ++c) {
            float acc = 0.0f;
            for (int j = c; j < t; ++j) acc += A(t, j) * T(j, c);
            T(t, c) = -acc;
        }
        T(t, t) = 1.0f;
    }
    return T;
}

// x·e^γ as (x·e^{γ/2})·e^{γ/2}: the state carried across a chunk keeps its significant bits
// even where e^γ alone would be subnormal or zero (strong decay), with one more rounding of the
// half factor where e^γ is normal.
float decayed(float x, float gamma) {
    const float half = exp_rn(0.5f * gamma);
    return (x * half) * half;
}

// Everything the chunk's forward computes from its inputs and start state.
struct ChunkForward {
    Mat qt, kt;                     // Q ⊙ e^γ, K ⊙ e^{γ_C − γ}
    std::vector<float> decay_end;   // e^{γ_C}
    std::vector<float> gamma_end;   // γ_C
    Mat P;                          // tril(P)
    Mat bk, A, T, rt, vt, W;        // the delta term: b ⊙ K, A, T, Λ(b ⊙ K), w ⊙ V, W
    Mat delta;                      // Δ
    Mat S0;                         // the start state as the products read it
};

ChunkForward chunk_forward(const Problem& p, const Chunk& c, const Mat& S0, bool bf16) {
    const int L = c.L, K = c.q.cols, V = c.v.cols;
    ChunkForward f;
    f.S0 = stored(S0, bf16);
    f.qt = Mat(L, K);
    f.kt = Mat(L, K);
    f.decay_end.assign(K, 1.0f);
    f.gamma_end.assign(K, 0.0f);
    for (int i = 0; i < K; ++i) {
        f.gamma_end[i] = c.gamma(L - 1, i);
        f.decay_end[i] = exp_rn(f.gamma_end[i]);
    }
    for (int t = 0; t < L; ++t)
        for (int i = 0; i < K; ++i) {
            f.qt(t, i) = c.q(t, i) * exp_rn(c.gamma(t, i));
            f.kt(t, i) = c.k(t, i) * exp_rn(c.gap(t, L - 1, i));
        }
    store(f.qt, bf16);
    store(f.kt, bf16);
    const bool scalar = p.member.gate == GateKind::scalar;
    f.P = stored(gated_scores(c.q, c.k, c, false, scalar), bf16);
    if (!p.member.delta) {
        f.delta = c.v;
        return f;
    }
    f.bk = Mat(L, K);
    f.rt = Mat(L, K);
    f.vt = Mat(L, V);
    for (int t = 0; t < L; ++t) {
        for (int i = 0; i < K; ++i) {
            f.bk(t, i) = c.beta[t] * c.k(t, i);
            f.rt(t, i) = exp_rn(c.gamma(t, i)) * f.bk(t, i);
        }
        for (int j = 0; j < V; ++j) f.vt(t, j) = c.beta[t] * c.v(t, j);
    }
    for (Mat* m : {&f.bk, &f.rt, &f.vt}) store(*m, bf16);
    f.A = stored(gated_scores(f.bk, c.k, c, true, scalar), bf16);
    f.T = stored(unit_lower_inverse(f.A), bf16);
    const Mat U = lower_matmul(f.T, f.vt);
    f.W = stored(lower_matmul(f.T, f.rt), bf16);
    const Mat WS = matmul(f.W, f.S0);
    f.delta = Mat(L, V);
    for (size_t e = 0; e < U.a.size(); ++e) f.delta.a[e] = U.a[e] - WS.a[e];
    store(f.delta, bf16);
    return f;
}

// O = scale·[(Q ⊙ e^γ) S₀ + tril(P) Δ] and S_next = Λ_C S₀ + (K ⊙ e^{γ_C − γ})ᵀ Δ.
void chunk_outputs(float scale, const ChunkForward& f, const Mat& S0, Mat& O, Mat& S_next) {
    const Mat inter = matmul(f.qt, f.S0);
    const Mat intra = lower_matmul(f.P, f.delta);
    O = Mat(inter.rows, inter.cols);
    for (size_t e = 0; e < O.a.size(); ++e) O.a[e] = scale * (inter.a[e] + intra.a[e]);
    const Mat update = matmul_tn(f.kt, f.delta);
    S_next = Mat(S0.rows, S0.cols);
    for (int i = 0; i < S0.rows; ++i)
        for (int j = 0; j < S0.cols; ++j) S_next(i, j) = decayed(S0(i, j), f.gamma_end[i]) + update(i, j);
}

Mat load_state(const float* src, int K, int V) {
    Mat S(K, V);
    if (src) std::copy(src, src + static_cast<size_t>(K) * V, S.a.begin());
    return S;
}

int chunk_length(int64_t length, int64_t t0, int chunk) { return static_cast<int>(std::min<int64_t>(chunk, length - t0)); }

void expect_chunk(int chunk) {
    if (chunk < 1) throw std::invalid_argument("gdn chunked: a chunk must hold at least one token, got " + std::to_string(chunk));
}

// The forward's walk over sequences, value heads and chunks. Each chunk's next state passes
// through `carry` before it starts the following chunk (and before it is written as ht):
// chunked_forward hands it on unchanged; a test kernel rounds it, to show what a state carried in
// bf16 costs (tests/cpp/kernels/gdn_forward_bf16_state.cpp).
template <class Carry>
void forward_carrying(const Problem& p, const ForwardArgs& a, Carry&& carry) {
    validate(p);
    expect_chunk(a.chunk);
    const Layout lay(p.shape);
    const int K = static_cast<int>(p.shape.K), V = static_cast<int>(p.shape.V);
    const Inputs in{a.q, a.k, a.v, a.g, a.beta};
    const float scale = static_cast<float>(p.scale);
    for (int64_t n = 0; n < p.shape.sequences(); ++n) {
        const Span& seq = lay.seqs[n];
        for (int64_t hv = 0; hv < p.shape.HV; ++hv) {
            Mat S = load_state(a.h0 ? a.h0 + lay.state(n, hv) : nullptr, K, V);
            for (int64_t t0 = 0; t0 < seq.length; t0 += a.chunk) {
                const Chunk c = load_chunk(p, lay, in, seq, t0, chunk_length(seq.length, t0, a.chunk), hv, a.bf16_operands);
                const ChunkForward f = chunk_forward(p, c, S, a.bf16_operands);
                Mat O, S_next;
                chunk_outputs(scale, f, S, O, S_next);
                for (int t = 0; t < c.L; ++t)
                    std::copy(&O.a[static_cast<size_t>(t) * V], &O.a[static_cast<size_t>(t + 1) * V],
                              a.o + lay.vo(seq, t0 + t, hv));
                S = carry(std::move(S_next));
            }
            if (a.ht) std::copy(S.a.begin(), S.a.end(), a.ht + lay.state(n, hv));
        }
    }
}

}  // namespace

void chunked_forward(const Problem& p, const ForwardArgs& a) {
    forward_carrying(p, a, [](Mat&& S) { return std::move(S); });
}

void chunked_backward(const Problem& p, const BackwardArgs& a) {
    validate(p);
    expect_chunk(a.chunk);
    const Layout lay(p.shape);
    const Shape& s = p.shape;
    const int K = static_cast<int>(s.K), V = static_cast<int>(s.V);
    const Inputs in{a.q, a.k, a.v, a.g, a.beta};
    const float scale = static_cast<float>(p.scale);
    std::fill(a.dq, a.dq + s.qk_size(), 0.0f);
    std::fill(a.dk, a.dk + s.qk_size(), 0.0f);

    for (int64_t n = 0; n < s.sequences(); ++n) {
        const Span& seq = lay.seqs[n];
        for (int64_t hv = 0; hv < s.HV; ++hv) {
            // Chunk-start states, from the forward recurrence.
            std::vector<Mat> starts;
            Mat S = load_state(a.h0 ? a.h0 + lay.state(n, hv) : nullptr, K, V);
            for (int64_t t0 = 0; t0 < seq.length; t0 += a.chunk) {
                starts.push_back(S);
                const Chunk c = load_chunk(p, lay, in, seq, t0, chunk_length(seq.length, t0, a.chunk), hv, a.bf16_operands);
                Mat O, S_next;
                chunk_outputs(scale, chunk_forward(p, c, S, a.bf16_operands), S, O, S_next);
                S = std::move(S_next);
            }
            // The reverse state scan: dS is the gradient of the state after the chunk.
            Mat dS = load_state(a.dht ? a.dht + lay.state(n, hv) : nullptr, K, V);
            for (int64_t ci = static_cast<int64_t>(starts.size()) - 1; ci >= 0; --ci) {
                const int64_t t0 = ci * a.chunk;
                const Chunk c = load_chunk(p, lay, in, seq, t0, chunk_length(seq.length, t0, a.chunk), hv, a.bf16_operands);
                const bool bf16 = a.bf16_operands;
                const ChunkForward f = chunk_forward(p, c, starts[ci], bf16);
                const Mat& S0 = f.S0;
                const int L = c.L;
                Mat dO(L, V);
                for (int t = 0; t < L; ++t)
                    std::copy(a.d_o + lay.vo(seq, t0 + t, hv), a.d_o + lay.vo(seq, t0 + t, hv) + V,
                              &dO.a[static_cast<size_t>(t) * V]);
                store(dO, bf16);
                const Mat dSr = stored(dS, bf16);   // dS as the products read it

                // dΔ = (K ⊙ e^{γ_C−γ}) dS + scale·tril(P)ᵀ dO
                Mat dDelta = matmul(f.kt, dSr);
                const Mat PtdO = lower_matmul_tn(f.P, dO);
                for (size_t e = 0; e < dDelta.a.size(); ++e) dDelta.a[e] += scale * PtdO.a[e];
                store(dDelta, bf16);
                // dS₀ = Λ_C dS + scale·(Q ⊙ e^γ)ᵀ dO − Wᵀ dΔ
                Mat dS0(K, V);
                // (Q ⊙ e^γ)ᵀ dO with each term's decay applied last, by halves (decayed()), so
                // that a strongly decayed query keeps its significant bits.
                Mat QtdO(K, V);
                for (int i = 0; i < K; ++i)
                    for (int j = 0; j < V; ++j) {
                        float acc = 0.0f;
                        for (int t = 0; t < L; ++t) acc += decayed(c.q(t, i) * dO(t, j), c.gamma(t, i));
                        QtdO(i, j) = acc;
                    }
                for (int i = 0; i < K; ++i)
                    for (int j = 0; j < V; ++j) dS0(i, j) = decayed(dS(i, j), f.gamma_end[i]) + scale * QtdO(i, j);
                // − Wᵀ dΔ = − Σ_j e^{γ_j} (b ⊙ k)_j (Tᵀ dΔ)_jᵀ, the decay again applied last.
                Mat TtdD;
                if (p.member.delta) {
                    TtdD = stored(lower_matmul_tn(f.T, dDelta), bf16);
                    for (int i = 0; i < K; ++i)
                        for (int j = 0; j < V; ++j) {
                            float acc = 0.0f;
                            for (int t = 0; t < L; ++t) acc += decayed(f.bk(t, i) * TtdD(t, j), c.gamma(t, i));
                            dS0(i, j) -= acc;
                        }
                }

                // dγ per channel; for a scalar gate one column, each row's channels summed apart
                // before they are added to it, term by term (gated_scores_backward).
                const bool scalar = p.member.gate == GateKind::scalar;
                const Mat F = scalar ? scalar_factors(c) : Mat();
                Mat dq(L, K), dk(L, K), dgamma(L, scalar ? 1 : K), dv(L, V);
                std::vector<float> dgamma_end(K, 0.0f), dbeta(L, 0.0f);
                // Through O's intra-chunk term: dP = scale·tril(dO Δᵀ).
                Mat dP = matmul_nt(dO, f.delta);
                for (int t = 0; t < L; ++t)
                    for (int j = 0; j < L; ++j) dP(t, j) = j <= t ? scale * dP(t, j) : 0.0f;
                store(dP, bf16);
                gated_scores_backward(dP, c.q, c.k, c, false, scalar ? &F : nullptr, dq, dk, dgamma);
                // Through Q ⊙ e^γ: dQ̃ = scale·dO S₀ᵀ; through K ⊙ e^{γ_C − γ}: dK̃ = Δ dSᵀ.
                const Mat dqt = stored(matmul_nt(dO, S0), bf16);
                const Mat dkt = stored(matmul_nt(f.delta, dSr), bf16);
                for (int t = 0; t < L; ++t) {
                    float row = 0.0f;   // scalar gate: Σ_i q̃ dq̃ − k̃ dk̃
                    for (int i = 0; i < K; ++i) {
                        const float d = scale * dqt(t, i);
                        dq(t, i) += exp_rn(c.gamma(t, i)) * d;
                        if (scalar) row += f.qt(t, i) * d - f.kt(t, i) * dkt(t, i);
                        else dgamma(t, i) += f.qt(t, i) * d;
                    }
                    if (scalar) dgamma(t, 0) += row;
                }
                // And through Λ_C S₀.
                for (int t = 0; t < L; ++t)
                    for (int i = 0; i < K; ++i) {
                        dk(t, i) += exp_rn(c.gap(t, L - 1, i)) * dkt(t, i);
                        dgamma_end[i] += f.kt(t, i) * dkt(t, i);
                        if (!scalar) dgamma(t, i) -= f.kt(t, i) * dkt(t, i);
                    }
                for (int i = 0; i < K; ++i) {
                    float acc = 0.0f;
                    for (int j = 0; j < V; ++j) acc += dSr(i, j) * S0(i, j);
                    dgamma_end[i] += f.decay_end[i] * acc;
                }

                if (p.member.delta) {
                    // Δ = U − W S₀ with U = T Ṽ, W = T R̃.
                    const Mat& dU = dDelta;
                    Mat dW = matmul_nt(dDelta, S0);
                    for (float& x : dW.a) x = -x;
                    store(dW, bf16);
                    Mat dT = matmul_nt(dU, f.vt);
                    const Mat dT_w = matmul_nt(dW, f.rt);
                    for (size_t e = 0; e < dT.a.size(); ++e) dT.a[e] += dT_w.a[e];
                    store(dT, bf16);
                    const Mat& dvt = TtdD;   // Tᵀ dU, dU = dΔ
                    const Mat drt = stored(lower_matmul_tn(f.T, dW), bf16);
                    // T = (I + A)⁻¹: dA = −Tᵀ dT Tᵀ on A's strictly lower support, with
                    // X = dT Tᵀ read only where T is nonzero.
                    Mat X(L, L), dA(L, L);
                    for (int r = 0; r < L; ++r)
                        for (int j = 0; j < L; ++j) {
                            float acc = 0.0f;
                            for (int b = 0; b <= j; ++b) acc += dT(r, b) * f.T(j, b);
                            X(r, j) = acc;
                        }
                    store(X, bf16);
                    for (int t = 0; t < L; ++t)
                        for (int j = 0; j < t; ++j) {
                            float acc = 0.0f;
                            for (int r = t; r < L; ++r) acc += f.T(r, t) * X(r, j);
                            dA(t, j) = -acc;
                        }
                    store(dA, bf16);
                    Mat dbk(L, K);
                    gated_scores_backward(dA, f.bk, c.k, c, true, scalar ? &F : nullptr, dbk, dk, dgamma);
                    for (int t = 0; t < L; ++t) {
                        float row = 0.0f;
                        for (int i = 0; i < K; ++i) {
                            dbk(t, i) += exp_rn(c.gamma(t, i)) * drt(t, i);
                            if (scalar) row += f.rt(t, i) * drt(t, i);
                            else dgamma(t, i) += f.rt(t, i) * drt(t, i);
                        }
                        if (scalar) dgamma(t, 0) += row;
                    }
                    store(dbk, bf16);
                    for (int t = 0; t < L; ++t) {
                        float db = 0.0f;
                        for (int j = 0; j < V; ++j) {
                            dv(t, j) = c.beta[t] * dvt(t, j);
                            db += c.v(t, j) * dvt(t, j);
                        }
                        for (int i = 0; i < K; ++i) {
                            dk(t, i) += c.beta[t] * dbk(t, i);
                            db += c.k(t, i) * dbk(t, i);
                        }
                        dbeta[t] = db;
                    }
                } else {
                    dv = dDelta;
                }
                if (!scalar)
                    for (int i = 0; i < K; ++i) dgamma(L - 1, i) += dgamma_end[i];

                // Scatter. g enters only through γ, so dg is the reverse cumulative sum of dγ.
                for (int t = 0; t < L; ++t) {
                    float* dqo = a.dq + lay.qk(seq, t0 + t, hv);
                    float* dko = a.dk + lay.qk(seq, t0 + t, hv);
                    for (int i = 0; i < K; ++i) {
                        dqo[i] += dq(t, i);
                        dko[i] += dk(t, i);
                    }
                    std::copy(&dv.a[static_cast<size_t>(t) * V], &dv.a[static_cast<size_t>(t + 1) * V],
                              a.dv + lay.vo(seq, t0 + t, hv));
                    if (p.member.delta && a.dbeta) a.dbeta[lay.head(seq, t0 + t, hv)] = dbeta[t];
                }
                if (p.member.gate == GateKind::channel && a.dg) {
                    std::vector<float> running(K, 0.0f);
                    for (int t = L - 1; t >= 0; --t) {
                        float* dg = a.dg + lay.head(seq, t0 + t, hv) * K;
                        for (int i = 0; i < K; ++i) {
                            running[i] += dgamma(t, i);
                            dg[i] = running[i];
                        }
                    }
                } else if (scalar && a.dg) {
                    // From dγ_C = Σ_i (dγ_C)_i.
                    float running = 0.0f;
                    for (int i = 0; i < K; ++i) running += dgamma_end[i];
                    for (int t = L - 1; t >= 0; --t) {
                        running += dgamma(t, 0);
                        a.dg[lay.head(seq, t0 + t, hv)] = running;
                    }
                }
                dS = std::move(dS0);
            }
            if (a.dh0) std::copy(dS.a.begin(), dS.a.end(), a.dh0 + lay.state(n, hv));
        }
    }
}

}  // namespace kcv::gdn::cpu
