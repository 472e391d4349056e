// The CUDA recurrence kernels' own source, run on the host (gdn/cuda/host_emulation.hpp: a
// block's threads are std::threads meeting at a barrier), against the float64 oracle under the
// contracts' error model. It exercises the kernels' indexing, masking, chunk layout (varlen,
// partial chunks, grouped heads) and barriers on a machine without a GPU; the GPU itself runs
// the same launch sequence (gdn/cuda/gdn_launch.cuh) through gdn/tests/check_gdn_cuda.cu.
//
// Error model (GATES.md, docs/gdn.md): |y − y*| ≤ c·u·√K_i·s_i + u·|y*| + ulp(min normal), c = 4,
// u = 2^-24, s_i the oracle's magnitude scale and K_i the products summed into the element: an
// output of sequence n sums over that sequence's L_n tokens and over a head dimension, so
// K_i = L_n·K (o, ht, dv, dg, dbeta, dh0) or L_n·V (dq, dk). With B sequences of T tokens L_n = T,
// as the contracts declare; with cu_seqlens each sequence has its own, smaller L_n.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#define KCV_GDN_HOST_EMULATION 1
#include "../../gdn/cuda/host_run.hpp"
#include "../../gdn/oracle/gdn_oracle.hpp"

namespace {

using kcv::gdn::GateKind;
using kcv::gdn::Member;
using kcv::gdn::Problem;
using kcv::gdn::Shape;
namespace cu = kcv::gdn::cuda;

using HostLauncher = cu::emulation::HostLauncher;

struct Case {
    std::string name;
    Member member;
    Shape shape;
    bool h0 = true, dht = true;
    double g_lo = -1.0, g_hi = 0.0;   // log decay drawn from U(g_lo, g_hi)
    double q_scale = 1.0;             // q drawn from N(0, q_scale²)
};

struct Inputs {
    std::vector<float> q, k, v, g, beta, h0, d_o, dht;
};

Inputs draw(const Case& c, uint32_t seed) {
    const Shape& s = c.shape;
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n01(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    auto fill = [&](std::vector<float>& x, int64_t n, auto gen) {
        x.resize(n);
        for (auto& e : x) e = float(gen());
    };
    const double ks = 1.0 / std::sqrt(double(s.K));
    Inputs in;
    fill(in.q, s.qk_size(), [&] { return c.q_scale * n01(rng); });
    fill(in.k, s.qk_size(), [&] { return ks * n01(rng); });
    fill(in.v, s.v_size(), [&] { return n01(rng); });
    fill(in.g, s.g_size(c.member.gate), [&] { return c.g_lo + (c.g_hi - c.g_lo) * u01(rng); });
    fill(in.beta, s.beta_size(), [&] { return u01(rng); });
    fill(in.h0, s.state_size(), [&] { return n01(rng); });
    fill(in.d_o, s.v_size(), [&] { return n01(rng); });
    fill(in.dht, s.state_size(), [&] { return n01(rng); });
    return in;
}

using Outputs = cu::emulation::RunOutputs;

// Forward, then backward, through the emulated kernels, on the float32 specialisation, with the
// kernels of `version` (1 the reference kernels, 2 the tensor-core ones, their mma.sync emulated
// from the PTX fragment layout). Outputs and workspace start as NaN, so an element the kernels
// never write cannot pass a comparison. Version 2 takes the kernels compiled for K = V = 16 where a
// case has those sizes (the GPU library's are compiled for 128, too slow to emulate; the bits are
// the same, FixedHeadSizeKernelsGiveTheSameBits). FIXED and opt as run_member's.
template <int FIXED = 16>
Outputs run_kernels(const Case& c, const Inputs& in, const cu::emulation::RunOptions& opt = {}) {
    const Problem p{c.member, c.shape, 1.0 / std::sqrt(double(c.shape.K))};
    Outputs out(p);
    const cu::emulation::RunInputs ri{in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                      c.h0 ? in.h0.data() : nullptr, in.d_o.data(), c.dht ? in.dht.data() : nullptr};
    EXPECT_EQ(cu::emulation::run_member<FIXED>(p, ri, opt, out), 0)
        << c.name << ": a launch sequence failed";
    return out;
}

// Tokens of the sequence each token row belongs to, and of each sequence.
struct SequenceLengths {
    std::vector<double> of_row, of_seq;
    explicit SequenceLengths(const Shape& s) {
        of_row.assign(size_t(s.B * s.T), 0.0);
        for (const kcv::gdn::Span& sp : kcv::gdn::sequence_spans(s)) {
            of_seq.push_back(double(sp.length));
            for (int64_t t = 0; t < sp.length; ++t) of_row[size_t(sp.batch * s.T + sp.start + t)] = double(sp.length);
        }
    }
};

// The largest |y − y*| / τ over an output whose element i sums K(i) products; NaN if any element
// is NaN (unwritten). u_out: the unit roundoff of the output's type (float32's unless given).
template <class AccumulationLength>
double ratio(const std::vector<float>& y, const std::vector<double>& ref, const std::vector<double>& s,
             AccumulationLength K, double u_out = 0x1p-24) {
    const double u = 0x1p-24, c = 4.0, tiny = std::numeric_limits<float>::min() * 0x1p-23;
    double r = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        const double e =
            std::abs(double(y[i]) - ref[i]) / (c * u * std::sqrt(K(i)) * s[i] + u_out * std::abs(ref[i]) + tiny);
        if (!(e == e)) return std::numeric_limits<double>::quiet_NaN();
        r = std::max(r, e);
    }
    return r;
}

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

struct Ratios {
    std::vector<std::pair<std::string, double>> r;
    std::string str() const {
        std::string line;
        for (auto& [n, x] : r) line += n + "=" + std::to_string(x) + " ";
        return line;
    }
};

// u16: the unit roundoff of the outputs the input dtype sets (o, dq, dk, dv, dbeta); float32's
// unless given. ht, dh0 and dg are float32 whatever the inputs.
Ratios against_oracle(const Case& c, const Inputs& in, const Outputs& out, double u16 = 0x1p-24) {
    const Shape& s = c.shape;
    const Problem p{c.member, s, 1.0 / std::sqrt(double(s.K))};
    const auto q = widen(in.q), k = widen(in.k), v = widen(in.v), g = widen(in.g), beta = widen(in.beta),
               h0 = widen(in.h0), d_o = widen(in.d_o), dht = widen(in.dht);
    std::vector<double> ro(s.v_size()), ros(s.v_size()), rht(s.state_size()), rhts(s.state_size());
    kcv::gdn::forward(p, {q.data(), k.data(), v.data(), g.data(), beta.data(), c.h0 ? h0.data() : nullptr, ro.data(),
                          rht.data(), ros.data(), rhts.data()});
    std::vector<double> rdq(s.qk_size()), rdk(s.qk_size()), rdv(s.v_size()), rdg(s.g_size(c.member.gate)),
        rdb(s.beta_size()), rdh0(s.state_size());
    auto sdq = rdq, sdk = rdk, sdv = rdv, sdg = rdg, sdb = rdb, sdh0 = rdh0;
    kcv::gdn::BackwardArgs ba;
    ba.q = q.data(); ba.k = k.data(); ba.v = v.data(); ba.g = g.data(); ba.beta = beta.data();
    ba.h0 = c.h0 ? h0.data() : nullptr; ba.d_o = d_o.data(); ba.dht = c.dht ? dht.data() : nullptr;
    ba.dq = rdq.data(); ba.dk = rdk.data(); ba.dv = rdv.data(); ba.dg = rdg.data(); ba.dbeta = rdb.data();
    ba.dh0 = rdh0.data(); ba.dq_scale = sdq.data(); ba.dk_scale = sdk.data(); ba.dv_scale = sdv.data();
    ba.dg_scale = sdg.data(); ba.dbeta_scale = sdb.data(); ba.dh0_scale = sdh0.data();
    kcv::gdn::backward(p, ba);

    const SequenceLengths len(s);
    const double Kd = double(s.K), Vd = double(s.V);
    const size_t GK = c.member.gate == GateKind::channel ? size_t(s.K) : 1;
    auto per_row = [&](size_t row_width, double dim) {
        return [&, row_width, dim](size_t i) { return len.of_row[i / row_width] * dim; };
    };
    auto per_state = [&](size_t i) { return len.of_seq[i / size_t(s.HV * s.K * s.V)] * Kd; };
    Ratios r;
    r.r.push_back({"o", ratio(out.o, ro, ros, per_row(size_t(s.HV * s.V), Kd), u16)});
    r.r.push_back({"ht", ratio(out.ht, rht, rhts, per_state)});
    r.r.push_back({"dq", ratio(out.dq, rdq, sdq, per_row(size_t(s.H * s.K), Vd), u16)});
    r.r.push_back({"dk", ratio(out.dk, rdk, sdk, per_row(size_t(s.H * s.K), Vd), u16)});
    r.r.push_back({"dv", ratio(out.dv, rdv, sdv, per_row(size_t(s.HV * s.V), Kd), u16)});
    r.r.push_back({"dh0", ratio(out.dh0, rdh0, sdh0, per_state)});
    if (c.member.gate != GateKind::none) r.r.push_back({"dg", ratio(out.dg, rdg, sdg, per_row(size_t(s.HV) * GK, Kd))});
    if (c.member.delta) r.r.push_back({"dbeta", ratio(out.dbeta, rdb, sdb, per_row(size_t(s.HV), Kd), u16)});
    return r;
}

void run_case(const Case& c, uint32_t seed, int version = 1, double bound = 1.0) {
    const Inputs in = draw(c, seed);
    const Outputs out = run_kernels(c, in, {.version = version});
    const Ratios r = against_oracle(c, in, out);
    std::printf("  %-34s %s\n", c.name.c_str(), r.str().c_str());
    for (auto& [n, x] : r.r) EXPECT_LE(x, bound) << c.name << " seed " << seed << " " << n << ": " << r.str();
}

Shape varlen_shape(const std::vector<int64_t>& lengths, int64_t H, int64_t HV, int64_t K, int64_t V) {
    Shape s{1, 0, H, HV, K, V, {0}};
    for (int64_t n : lengths) s.cu_seqlens.push_back(s.cu_seqlens.back() + n);
    s.T = s.cu_seqlens.back();
    return s;
}

// Lengths 1, exactly a chunk (twice), not a multiple of it, 1 again: every boundary case of the
// chunk layout, sequences ending inside, at and just past a chunk.
Shape boundary_lengths() { return varlen_shape({1, 64, 64, 100, 1}, 1, 2, 16, 16); }
// Many short sequences, two of them empty, then a full chunk and a single token; V = 12 is not a
// multiple of the 16-column scan slices; two query/key heads of two value heads each.
Shape many_short() {
    return varlen_shape({2, 0, 1, 5, 3, 8, 1, 1, 7, 4, 6, 2, 9, 1, 3, 0, 5, 2, 1, 4, 64, 1}, 2, 4, 8, 12);
}
// Two chunks and a partial third, then a one-token sequence, then a partial first chunk.
Shape long_and_partial() { return varlen_shape({130, 1, 63}, 1, 1, 32, 16); }

TEST(GdnCudaEmulated, KernelsAgreeWithOracle) {
    uint32_t seed = 500;
    for (Member m : kcv::gdn::all_members()) {
        const std::string n = kcv::gdn::member_name(m);
        // Varlen with a one-token sequence, a partial chunk, grouped heads (H = 1, HV = 2).
        run_case({n + "/varlen", m, Shape{1, 70, 1, 2, 16, 16, {0, 1, 70}}}, ++seed);
        // Batched, K != V, V not a multiple of the 16-column scan slice.
        run_case({n + "/batched", m, Shape{2, 20, 2, 2, 8, 20, {}}}, ++seed);
    }
}

TEST(GdnCudaEmulated, VarlenAgreesWithOracle) {
    uint32_t seed = 600;
    for (Member m : kcv::gdn::all_members()) {
        const std::string n = kcv::gdn::member_name(m);
        run_case({n + "/varlen-boundaries", m, boundary_lengths()}, ++seed);
        run_case({n + "/varlen-many-short", m, many_short()}, ++seed);
        run_case({n + "/varlen-long-and-partial", m, long_and_partial()}, ++seed);
        // Without h0 and dht: the empty sequences' ht and dh0 are exactly zero.
        run_case({n + "/varlen-no-states", m, many_short(), false, false}, ++seed);
    }
}

// Strong decay, as the CPU implementation's tests use: chunk totals of γ reach −500, factors
// e^{γ_t − γ_j} span the whole float32 range and go subnormal. The kernels of version 1 took
// exponents as differences of prefix sums and multiplied by e^γ directly; this is the case where
// summing each exponent over its own range and decaying by halves matters.
TEST(GdnCudaEmulated, StrongDecayAgreesWithOracle) {
    uint32_t seed = 700;
    for (Member m : kcv::gdn::all_members()) {
        if (m.gate == GateKind::none) continue;
        const std::string n = kcv::gdn::member_name(m);
        run_case({n + "/strong-decay", m, Shape{1, 150, 1, 1, 16, 16, {}}, true, true, -8.0, -2.0}, ++seed);
        run_case({n + "/strong-decay-varlen", m, boundary_lengths(), true, true, -8.0, -2.0}, ++seed);
        run_case({n + "/zero-gate", m, long_and_partial(), true, true, 0.0, 0.0}, ++seed);
    }
}

// Version 2 (tensor cores) on float32 inputs, every operand split into TF32 parts, the mma's sums
// truncated as the emulation models the hardware: the same error bound as the float32 FMA of
// version 1, on the shapes that exercise partial tiles (K = 8, V = 20), partial
// chunks, varlen, strong decay and head sizes that are not multiples of four.
TEST(GdnCudaEmulated, TensorCoreKernelsAgreeWithOracle) {
    uint32_t seed = 1000;
    for (Member m : kcv::gdn::all_members()) {
        const std::string n = std::string(kcv::gdn::member_name(m)) + "/v2";
        run_case({n + "/varlen", m, Shape{1, 70, 1, 2, 16, 16, {0, 1, 70}}}, ++seed, 2);
        run_case({n + "/batched", m, Shape{2, 20, 2, 2, 8, 20, {}}}, ++seed, 2);
        run_case({n + "/varlen-long-and-partial", m, long_and_partial()}, ++seed, 2);
        if (m.gate != GateKind::none)
            run_case({n + "/strong-decay", m, Shape{1, 150, 1, 1, 16, 16, {}}, true, true, -8.0, -2.0}, ++seed, 2);
        // K and V not multiples of four: rows that 16-byte loads and copies cannot take whole.
        run_case({n + "/odd-head-sizes", m, Shape{1, 70, 1, 2, 6, 10, {}}}, ++seed, 2);
        // A per-channel gate's diagonal blocks with their table in the anchored operands' scratch
        // (wide_diag_channels: 33 channels a group at K = 96), and a partial sub-chunk; seeds of
        // their own, so the cases above keep theirs.
        if (m.gate == GateKind::channel)
            run_case({n + "/wide-diagonal-groups", m, Shape{1, 40, 1, 1, 96, 16, {}}}, 1090u + m.delta, 2);
    }
}

// Subnormal queries, as EXC-02 draws them, without h0 and dht: every output but ht and dq then
// exists only at the scale of q (around 2^-130), where float32 keeps a fixed step of 2^-149. TF32
// keeps 10 fraction bits with float32's exponent range, so its own step there is 2^-136: a TF32
// split of such a value rounds all of its parts to that step, and values under 2^-137 vanish.
// The low parts are therefore split at 2^13 times their size and summed apart (gdn_mma.cuh).
// At this scale every product rounds to the fixed step, which the error model's one step of
// absolute slack does not cover for chains of products: version 1 (float32 FMA) reaches 2.9 of
// the bound here, the tensor-core kernels 2.5, and before the scaled split 1,200 to 9,400.
TEST(GdnCudaEmulated, TensorCoreKernelsKeepSubnormalScaleOperands) {
    constexpr double kSubnormalSteps = 8.0;
    uint32_t seed = 1100;
    for (Member m : kcv::gdn::all_members()) {
        const std::string n = std::string(kcv::gdn::member_name(m));
        for (int version : {1, 2}) {
            const Case c{n + "/v" + std::to_string(version) + "/subnormal-q", m, Shape{1, 70, 1, 2, 16, 16, {0, 1, 70}},
                         false, false, -1.0, 0.0, 0x1p-130};
            run_case(c, ++seed, version, kSubnormalSteps);
        }
    }
}

bool all_finite(const std::vector<float>& x) {
    for (float e : x)
        if (!std::isfinite(e)) return false;
    return true;
}

// Every output of `got` is the same bits as `want`'s; `what` names the comparison in a failure.
void expect_same_bits(const Outputs& want, const Outputs& got, const std::string& what) {
    const std::vector<std::tuple<const char*, const std::vector<float>*, const std::vector<float>*>> outputs = {
        {"o", &want.o, &got.o},     {"ht", &want.ht, &got.ht},       {"dq", &want.dq, &got.dq},
        {"dk", &want.dk, &got.dk},  {"dv", &want.dv, &got.dv},       {"dg", &want.dg, &got.dg},
        {"dbeta", &want.dbeta, &got.dbeta}, {"dh0", &want.dh0, &got.dh0}};
    for (const auto& [name, w, g] : outputs) {
        ASSERT_EQ(w->size(), g->size()) << what << ": " << name;
        if (w->empty()) continue;   // dg, dbeta of the members without them: no data to compare
        EXPECT_EQ(std::memcmp(w->data(), g->data(), w->size() * sizeof(float)), 0) << what << ": " << name << " differs";
    }
}

// The tensor-core scans take a slice of 16 to 128 value columns per block, chosen from the grid
// and the SM count (scan_columns). No column's sums depend on the width, so every output must be
// the same bits at every width: run each member at the widths that two or three SM counts pick
// and compare bit for bit.
struct ScanLayout {
    Shape shape;
    std::vector<std::pair<int, int>> sms_cols;   // SM count, the width it must pick
};

const ScanLayout kScanLayouts[] = {
    {Shape{1, 70, 1, 2, 8, 40, {}}, {{1 << 20, 16}, {4, 32}, {1, 64}}},
    {varlen_shape({66, 1, 20}, 1, 1, 8, 72), {{1 << 20, 16}, {1, 128}}},
};

// The SM counts of each layout pick the widths it names, so that the runs below cannot pass by
// always taking one width (checked once, not in every member's run).
TEST(GdnCudaEmulated, ScanColumnWidthsFollowTheSmCount) {
    for (const ScanLayout& lay : kScanLayouts) {
        kcv_gdn_params kp{};
        kp.B = lay.shape.B; kp.T = lay.shape.T; kp.H = lay.shape.H; kp.HV = lay.shape.HV;
        kp.K = lay.shape.K; kp.V = lay.shape.V; kp.N = lay.shape.sequences();
        kp.cu_seqlens = lay.shape.cu_seqlens.empty() ? nullptr : lay.shape.cu_seqlens.data();
        const cu::Dims d = cu::make_dims(kp);
        for (auto [sms, cols] : lay.sms_cols) {
            EXPECT_EQ(cu::scan_columns(d, sms, [&](int c) { return cu::scan_tc_smem_bytes(d.K, c, 2); }), cols) << sms;
            EXPECT_EQ(cu::scan_columns(d, sms, [&](int c) { return cu::reverse_scan_tc_smem_bytes(d.K, 2, c, 2); }),
                      cols)
                << sms;
        }
    }
}

// One test per layout and member (under the sanitizers' Debug build all of them in one test took
// 595 s of CTest's 600 s in one full run and timed out in the next).
class ScanColumnWidths : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ScanColumnWidths, GiveTheSameBits) {
    const auto [layout, member] = GetParam();
    const ScanLayout& lay = kScanLayouts[layout];
    const std::vector<Member> members = kcv::gdn::all_members();
    ASSERT_EQ(members.size(), 5u);   // the instantiation's range
    const Member m = members[member];
    const Case c{std::string(kcv::gdn::member_name(m)) + "/V" + std::to_string(lay.shape.V), m, lay.shape};
    const Inputs in = draw(c, 1301 + 5 * layout + member);
    const Outputs first = run_kernels(c, in, {.version = 2, .sms = lay.sms_cols.front().first});
    for (size_t w = 1; w < lay.sms_cols.size(); ++w)
        expect_same_bits(first, run_kernels(c, in, {.version = 2, .sms = lay.sms_cols[w].first}),
                         c.name + ": " + std::to_string(lay.sms_cols.front().second) + " and " +
                             std::to_string(lay.sms_cols[w].second) + " columns");
    // And the first width's run agrees with the oracle.
    const Ratios r = against_oracle(c, in, first);
    for (auto& [n, x] : r.r) EXPECT_LE(x, 1.0) << c.name << " " << n << ": " << r.str();
}

INSTANTIATE_TEST_SUITE_P(GdnCudaEmulated, ScanColumnWidths,
                         ::testing::Combine(::testing::Range(0, 2), ::testing::Range(0, 5)));

// The version 2 kernels compiled for one head size (with_head_size, gdn_common.cuh; the GPU
// library's K = V = 128) fold K and V into constants; only integer work may change, so every
// output must be the same bits as the kernels that read the sizes at run time. At K = V = 16 here
// (128 is the GPU's, too slow to emulate), varlen with a partial chunk, float32 inputs; for Gated
// DeltaNet also bf16 inputs and a shape with K != V, which must not take the fixed kernels. (The
// other tests run their K = V = 16 cases through the fixed kernels against the oracle.)
TEST(GdnCudaEmulated, FixedHeadSizeKernelsGiveTheSameBits) {
    uint32_t seed = 1400;
    for (Member m : kcv::gdn::all_members()) {
        const bool gdn = m.gate == GateKind::scalar && m.delta;
        std::vector<Shape> shapes = {Shape{1, 70, 1, 2, 16, 16, {0, 1, 70}}};
        if (gdn) shapes.push_back(Shape{1, 40, 1, 1, 16, 8, {}});
        for (const Shape& shape : shapes) {
            const Case c{std::string(kcv::gdn::member_name(m)) + "/K" + std::to_string(shape.K) + "V" +
                             std::to_string(shape.V) + "/T" + std::to_string(shape.T),
                         m, shape};
            const Inputs in = draw(c, ++seed);
            for (int dtype : {0, 1}) {
                if (dtype == 1 && !gdn) continue;
                std::vector<const void*> launched;
                const Outputs runtime = run_kernels<0>(c, in, {.version = 2, .dtype = dtype});
                const Outputs fixed = run_kernels<16>(c, in, {.version = 2, .dtype = dtype, .launched = &launched});
                expect_same_bits(runtime, fixed, c.name + " dtype " + std::to_string(dtype));
                // Gated DeltaNet in float32: the fixed kernels ran where the sizes allow, not elsewhere.
                if (gdn && dtype == 0) {
                    const void* grad16 = reinterpret_cast<const void*>(&cu::chunk_grad_tc<1, true, float, 16>);
                    const void* grad0 = reinterpret_cast<const void*>(&cu::chunk_grad_tc<1, true, float, 0>);
                    const bool square = shape.K == 16 && shape.V == 16;
                    EXPECT_EQ(std::count(launched.begin(), launched.end(), square ? grad16 : grad0), 1) << c.name;
                    EXPECT_EQ(std::count(launched.begin(), launched.end(), square ? grad0 : grad16), 0) << c.name;
                }
                EXPECT_TRUE(all_finite(fixed.o)) << c.name << ": an output left unwritten";
            }
        }
    }
}

// chunk_output_tc's two products give the same bits: on mma.sync (block_mma, S₀ and Δ staged in
// shared memory) and on wgmma (block_mma_wgmma, gdn_wgmma.cuh, S₀ and Δ split from global memory
// into swizzled tiles). Each member (one test each, so that each stays well inside the test timeout
// under the sanitizers), varlen with a partial chunk, V = 72 (a full 64-column slice and one of 8
// columns); float32 inputs, and bf16 for Gated DeltaNet. The launch sequence must have run the
// kernel asked for.
class OutputOnWgmma : public ::testing::TestWithParam<int> {};

TEST_P(OutputOnWgmma, GivesTheSameBits) {
    const Member m = kcv::gdn::all_members().at(size_t(GetParam()));
    const bool gdn = m.gate == GateKind::scalar && m.delta;
    const Case c{std::string(kcv::gdn::member_name(m)) + "/V72", m, Shape{1, 70, 1, 1, 16, 72, {0, 1, 70}}};
    const Inputs in = draw(c, 1700 + uint32_t(GetParam()));
    for (int dtype : {0, 1}) {
        if (dtype == 1 && !gdn) continue;
        std::vector<const void*> on_mma, on_wgmma;
        const Outputs mma = run_kernels<0>(c, in, {.version = 2, .dtype = dtype, .launched = &on_mma});
        const Outputs wgmma =
            run_kernels<0>(c, in, {.version = 2, .dtype = dtype, .launched = &on_wgmma, .output_on_wgmma = true});
        expect_same_bits(mma, wgmma, c.name + " dtype " + std::to_string(dtype));
        EXPECT_TRUE(all_finite(wgmma.o)) << c.name << ": an output left unwritten";
        if (gdn && dtype == 0) {
            const void* staged = reinterpret_cast<const void*>(&cu::chunk_output_tc<1, float, 0, false>);
            const void* split = reinterpret_cast<const void*>(&cu::chunk_output_tc<1, float, 0, true>);
            EXPECT_EQ(std::count(on_mma.begin(), on_mma.end(), staged), 1) << c.name;
            EXPECT_EQ(std::count(on_mma.begin(), on_mma.end(), split), 0) << c.name;
            EXPECT_EQ(std::count(on_wgmma.begin(), on_wgmma.end(), split), 1) << c.name;
            EXPECT_EQ(std::count(on_wgmma.begin(), on_wgmma.end(), staged), 0) << c.name;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(GdnCudaEmulated, OutputOnWgmma, ::testing::Range(0, 5));

// The backward's products, reverse_scan_tc's and chunk_grad_tc's, give the same bits on mma.sync
// (block_mma) and on wgmma (block_mma_tiled, gdn_wgmma.cuh; the scan reads P and T from global
// memory where it splits them, chunk_grad_tc reads dO and V so), for the members without a
// per-channel gate (the others keep both on mma.sync). K = 72 makes the state update's rows, and
// chunk_grad_tc's outputs over K, a full 64-row or 64-column output tile and one of 8; V = 72 on
// one SM (the widest slice that fits) does the same for the slice's columns and the products over
// V. Varlen with a partial chunk; float32 inputs, and bf16 for Gated DeltaNet. The launch sequence
// must have run the kernels asked for.
class BackwardOnWgmma : public ::testing::TestWithParam<int> {};

// How many of the launches are one of the kernels.
template <class... Kernel>
long count_launches(const std::vector<const void*>& launched, Kernel... kernel) {
    const void* any[] = {reinterpret_cast<const void*>(kernel)...};
    return std::count_if(launched.begin(), launched.end(),
                         [&](const void* k) { return std::find(std::begin(any), std::end(any), k) != std::end(any); });
}

// Gated DeltaNet's reverse scans on float32 inputs among the launches, at any slice width.
template <bool WG>
long gdn_reverse_scans(const std::vector<const void*>& launched) {
    using cu::reverse_scan_tc;
    return count_launches(launched, &reverse_scan_tc<1, true, float, 16, 0, WG>,
                          &reverse_scan_tc<1, true, float, 32, 0, WG>, &reverse_scan_tc<1, true, float, 64, 0, WG>,
                          &reverse_scan_tc<1, true, float, 128, 0, WG>);
}

TEST_P(BackwardOnWgmma, GivesTheSameBits) {
    const std::vector<Member> members = kcv::gdn::all_members();
    const Member m = members.at(size_t(GetParam()));
    ASSERT_NE(m.gate, GateKind::channel);   // the instantiation's list
    const bool gdn = m.gate == GateKind::scalar && m.delta;
    for (const Shape& shape : {Shape{1, 70, 1, 1, 72, 16, {0, 1, 70}}, Shape{1, 70, 1, 1, 16, 72, {0, 1, 70}}}) {
        const Case c{std::string(kcv::gdn::member_name(m)) + "/K" + std::to_string(shape.K) + "V" +
                         std::to_string(shape.V),
                     m, shape};
        const Inputs in = draw(c, 1750 + uint32_t(GetParam()));
        for (int dtype : {0, 1}) {
            if (dtype == 1 && !gdn) continue;
            const std::string what = c.name + " dtype " + std::to_string(dtype);
            std::vector<const void*> on_mma, on_wgmma;
            const Outputs mma = run_kernels<0>(c, in, {.version = 2, .dtype = dtype, .sms = 1, .launched = &on_mma});
            const Outputs wgmma = run_kernels<0>(c, in,
                                                 {.version = 2,
                                                  .dtype = dtype,
                                                  .sms = 1,
                                                  .launched = &on_wgmma,
                                                  .reverse_on_wgmma = true,
                                                  .grad_on_wgmma = true});
            expect_same_bits(mma, wgmma, what);
            EXPECT_TRUE(all_finite(wgmma.dh0)) << what << ": an initial state's gradient left unwritten";
            if (gdn && dtype == 0) {
                EXPECT_EQ(gdn_reverse_scans<false>(on_mma), 1) << what;
                EXPECT_EQ(gdn_reverse_scans<true>(on_mma), 0) << what;
                EXPECT_EQ(gdn_reverse_scans<true>(on_wgmma), 1) << what;
                EXPECT_EQ(gdn_reverse_scans<false>(on_wgmma), 0) << what;
                auto* const grad = &cu::chunk_grad_tc<1, true, float, 0, false>;
                auto* const grad_wg = &cu::chunk_grad_tc<1, true, float, 0, true>;
                EXPECT_EQ(count_launches(on_mma, grad), 1) << what;
                EXPECT_EQ(count_launches(on_mma, grad_wg), 0) << what;
                EXPECT_EQ(count_launches(on_wgmma, grad_wg), 1) << what;
                EXPECT_EQ(count_launches(on_wgmma, grad), 0) << what;
            }
        }
    }
}

// Linear attention, SSD and Gated DeltaNet: all_members()'s order.
INSTANTIATE_TEST_SUITE_P(GdnCudaEmulated, BackwardOnWgmma, ::testing::Values(0, 1, 3));

// The split scans' rule (split_scans, gdn_launch.cuh) reads the shape and the gate alone:
// GDN.md's B1 T32768 with 32 value heads already has 128 unsplit blocks of 32 columns and stays
// whole, and so does 16 heads' 64; with 8 value heads it splits into 6 segments of 86 chunks, with
// 4 into 12 of 43 (a per-channel gate into 4 and 8); short sequences, float32 inputs (version 1)
// and a request of −1 never split, and a request n > 0 takes n chunks a segment.
TEST(GdnCudaEmulated, SplitScansFollowTheShape) {
    auto dims = [](int64_t T, int64_t HV, int dtype, int request, int gate = 0) {
        kcv_gdn_params kp{};
        kp.B = 1; kp.T = T; kp.H = HV / 2; kp.HV = HV; kp.K = 128; kp.V = 128; kp.N = 1;
        kp.dtype = dtype;
        kp.gate = gate;
        kp.segment_chunks = request;
        return cu::make_dims(kp);
    };
    EXPECT_EQ(dims(32768, 32, 1, 0).seg_chunks, 0);
    EXPECT_EQ(dims(32768, 16, 1, 0).seg_chunks, 0);
    const cu::Dims eight_heads = dims(32768, 8, 1, 0);
    EXPECT_EQ(eight_heads.seg_chunks, 86);
    EXPECT_EQ(eight_heads.segments, 6);
    const cu::Dims few = dims(32768, 4, 1, 0);
    EXPECT_EQ(few.seg_chunks, 43);
    EXPECT_EQ(few.segments, 12);
    EXPECT_EQ(dims(32768, 4, 2, 0).seg_chunks, 43);
    // A per-channel gate aims at 128 pairs: 8 segments of 64 chunks with 4 heads, 4 of 128 with 8,
    // and 16 heads still whole; the scalar gate as linear attention.
    EXPECT_EQ(dims(32768, 4, 1, 0, 2).seg_chunks, 64);
    EXPECT_EQ(dims(32768, 4, 1, 0, 2).segments, 8);
    EXPECT_EQ(dims(32768, 8, 1, 0, 2).seg_chunks, 128);
    EXPECT_EQ(dims(32768, 8, 1, 0, 2).segments, 4);
    EXPECT_EQ(dims(32768, 16, 1, 0, 2).seg_chunks, 0);
    EXPECT_EQ(dims(32768, 8, 1, 0, 1).seg_chunks, 86);
    EXPECT_EQ(dims(32768, 4, 0, 0).seg_chunks, 0);
    EXPECT_EQ(dims(32768, 4, 1, -1).seg_chunks, 0);
    EXPECT_EQ(dims(448, 2, 1, 0).seg_chunks, 0);    // 7 chunks
    const cu::Dims eight = dims(512, 2, 1, 0);      // 8 chunks, 2 segments of 4 at most
    EXPECT_EQ(eight.seg_chunks, 4);
    EXPECT_EQ(eight.segments, 2);
    const cu::Dims asked = dims(4096, 32, 1, 5);
    EXPECT_EQ(asked.seg_chunks, 5);
    EXPECT_EQ(asked.segments, 13);
    EXPECT_EQ(dims(4096, 32, 0, 5).seg_chunks, 5);   // asked for, version 2 on float32 (emulation)
    // The split's arrays are in the workspace only when it splits.
    cu::Workspace w{};
    const size_t whole = cu::layout_workspace(dims(32768, 4, 1, -1), true, 1, true, nullptr, w);
    const size_t split = cu::layout_workspace(few, true, 1, true, nullptr, w);
    EXPECT_EQ(split - whole, size_t(12) * 4 * 128 * (128 + 2 * 128) * sizeof(float));
    // Without the delta rule M is diagonal and not kept.
    EXPECT_EQ(cu::layout_workspace(few, true, 1, false, nullptr, w) -
                  cu::layout_workspace(dims(32768, 4, 1, -1), true, 1, false, nullptr, w),
              size_t(12) * 4 * 128 * (2 * 128) * sizeof(float));
}

// The split scans against the oracle, and their passes launched: each sequence split into
// segments of two chunks (varlen: four chunks, the last of 8 tokens, in two segments, an empty
// sequence, one token, two chunks; and two sequences of three chunks, whose last segment has one);
// K = 24 so that the delta members' M takes a full and
// a partial column slice beside V's 16 (the others' M is diagonal, formed by the combine). Float32 inputs; on the varlen batch also bf16 for the delta
// members, their inputs drawn as bf16 values, so that the oracle sees what the kernels see, and
// their bf16 outputs held to bf16's unit roundoff (2^-8) on top of the float32 model. The same
// bits when the two sequences run again.
class SplitScans : public ::testing::TestWithParam<int> {};

// The address of member m's segment_combine at 16 columns, forward or reverse.
template <bool REVERSE>
const void* combine(Member m) {
    auto at = [](auto kernel) { return reinterpret_cast<const void*>(kernel); };
    switch (int(m.gate) * 2 + int(m.delta)) {
        case 0: return at(&cu::segment_combine<0, false, REVERSE, 16, 0>);
        case 2: return at(&cu::segment_combine<1, false, REVERSE, 16, 0>);
        case 3: return at(&cu::segment_combine<1, true, REVERSE, 16, 0>);
        case 4: return at(&cu::segment_combine<2, false, REVERSE, 16, 0>);
        case 5: return at(&cu::segment_combine<2, true, REVERSE, 16, 0>);
    }
    return nullptr;
}

TEST_P(SplitScans, AgreeWithOracle) {
    const std::vector<Member> members = kcv::gdn::all_members();
    ASSERT_EQ(members.size(), 5u);   // the instantiation's range
    const Member m = members[GetParam()];
    uint32_t seed = 1900 + 3 * GetParam();
    for (const Shape& shape : {varlen_shape({200, 0, 1, 70}, 1, 2, 24, 16), Shape{2, 130, 1, 1, 24, 16, {}}}) {
        const bool varlen = !shape.cu_seqlens.empty();
        const Case c{std::string(kcv::gdn::member_name(m)) + "/N" + std::to_string(shape.sequences()), m, shape};
        const Inputs drawn = draw(c, ++seed);
        for (int dtype : {0, 1}) {
            if (dtype == 1 && !(m.delta && varlen)) continue;
            const std::string what = c.name + " dtype " + std::to_string(dtype);
            Inputs in = drawn;
            if (dtype == 1)
                for (auto* x : {&in.q, &in.k, &in.v, &in.beta, &in.d_o})
                    for (float& e : *x) e = __bfloat162float(__float2bfloat16_rn(e));
            std::vector<const void*> launched;
            const Outputs split =
                run_kernels(c, in, {.version = 2, .dtype = dtype, .launched = &launched, .segment_chunks = 2});
            const Ratios r = against_oracle(c, in, split, dtype == 1 ? 0x1p-8 : 0x1p-24);
            std::printf("  %-34s %s\n", what.c_str(), r.str().c_str());
            for (auto& [n, x] : r.r) EXPECT_LE(x, 1.0) << what << " " << n << ": " << r.str();
            // The forward's combine in the forward and again in the backward, which reruns its scan.
            EXPECT_EQ(count_launches(launched, combine<false>(m)), 2) << what;
            EXPECT_EQ(count_launches(launched, combine<true>(m)), 1) << what;
            if (!varlen)
                expect_same_bits(split, run_kernels(c, in, {.version = 2, .dtype = dtype, .segment_chunks = 2}),
                                 what + ", run again");
        }
    }
}

INSTANTIATE_TEST_SUITE_P(GdnCudaEmulated, SplitScans, ::testing::Range(0, 5));

// A backward that reads the chunk preparation a forward kept apart (kcv_gdn_params.prepared)
// instead of preparing the chunks again: the same bits as one that prepares them, on a workspace
// that holds nothing of the forward's, and the preparation untouched, so that one forward serves
// any number of backwards. Both versions, float32 and bf16 inputs, varlen with partial chunks; one
// test per member, so that each stays well inside the test timeout under the sanitizers.
class KeptPreparation : public ::testing::TestWithParam<int> {};

TEST_P(KeptPreparation, GivesTheSameBits) {
    const std::vector<Member> members = kcv::gdn::all_members();
    ASSERT_EQ(members.size(), 5u);   // the instantiation's range
    const Member m = members[GetParam()];
    uint32_t seed = 1500 + 2 * GetParam();
    for (const Shape& shape : {Shape{1, 70, 1, 2, 16, 16, {0, 1, 70}}, Shape{2, 20, 2, 2, 8, 20, {}}}) {
        const Case c{std::string(kcv::gdn::member_name(m)) + "/T" + std::to_string(shape.T), m, shape};
        const Inputs in = draw(c, ++seed);
        for (auto [version, dtype] : {std::pair{1, 0}, std::pair{2, 0}, std::pair{2, 1}}) {
            const std::string what = c.name + " v" + std::to_string(version) + " dtype " + std::to_string(dtype);
            const Outputs together = run_kernels(c, in, {.version = version, .dtype = dtype});
            const Outputs apart = run_kernels(c, in, {.version = version, .dtype = dtype, .apart = true});
            expect_same_bits(together, apart, what);
            EXPECT_FALSE(apart.backward_wrote_prepared) << what << ": the backward wrote the kept preparation";
            // dg and dbeta only where the member has a gate and a β; the rest stay NaN.
            std::vector<const std::vector<float>*> written = {&apart.o,  &apart.ht, &apart.dq,
                                                              &apart.dk, &apart.dv, &apart.dh0};
            if (m.gate != GateKind::none) written.push_back(&apart.dg);
            if (m.delta) written.push_back(&apart.dbeta);
            for (const auto* x : written) EXPECT_TRUE(all_finite(*x)) << what << ": an output left unwritten";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(GdnCudaEmulated, KeptPreparation, ::testing::Range(0, 5));

bool any_nonzero(const std::vector<float>& x) {
    for (float e : x)
        if (e != 0.0f) return true;
    return false;
}

// Rows [begin, end) of a row-major tensor with `width` elements per row.
std::vector<float> rows(const std::vector<float>& x, int64_t width, int64_t begin, int64_t end) {
    return {x.begin() + begin * width, x.begin() + end * width};
}

// A sequence's results cannot depend on its neighbours: each sequence of a varlen batch, run
// alone as a batch of one (the kernels' other chunk layout, other workspace slots), gives the
// same bits for every output, its states included.
TEST(GdnCudaEmulated, VarlenEqualsEachSequenceAloneBitForBit) {
    uint32_t seed = 800;
    for (Member m : kcv::gdn::all_members()) {
        for (const Shape& s : {boundary_lengths(), many_short()}) {
            const Case all{std::string(kcv::gdn::member_name(m)) + "/varlen", m, s};
            const Inputs in = draw(all, ++seed);
            const Outputs out = run_kernels(all, in);
            const int64_t state = s.HV * s.K * s.V, GK = m.gate == GateKind::channel ? s.K : 1;
            const int64_t wq = s.H * s.K, wv = s.HV * s.V, wg = m.gate == GateKind::none ? 0 : s.HV * GK;
            const int64_t wb = m.delta ? s.HV : 0;
            for (int64_t n = 0; n + 1 < int64_t(s.cu_seqlens.size()); ++n) {
                const int64_t b = s.cu_seqlens[n], e = s.cu_seqlens[n + 1];
                const Case one{all.name + " sequence " + std::to_string(n), m, Shape{1, e - b, s.H, s.HV, s.K, s.V, {}}};
                Inputs alone;
                alone.q = rows(in.q, wq, b, e);
                alone.k = rows(in.k, wq, b, e);
                alone.v = rows(in.v, wv, b, e);
                alone.g = rows(in.g, wg, b, e);
                alone.beta = rows(in.beta, wb, b, e);
                alone.d_o = rows(in.d_o, wv, b, e);
                alone.h0 = rows(in.h0, state, n, n + 1);
                alone.dht = rows(in.dht, state, n, n + 1);
                const Outputs got = run_kernels(one, alone);
                struct Compared {
                    const char* name;
                    std::vector<float> alone, in_batch;
                };
                std::vector<Compared> outputs = {{"o", got.o, rows(out.o, wv, b, e)},
                                                 {"ht", got.ht, rows(out.ht, state, n, n + 1)},
                                                 {"dq", got.dq, rows(out.dq, wq, b, e)},
                                                 {"dk", got.dk, rows(out.dk, wq, b, e)},
                                                 {"dv", got.dv, rows(out.dv, wv, b, e)},
                                                 {"dh0", got.dh0, rows(out.dh0, state, n, n + 1)}};
                if (m.gate != GateKind::none) outputs.push_back({"dg", got.dg, rows(out.dg, wg, b, e)});
                if (m.delta) outputs.push_back({"dbeta", got.dbeta, rows(out.dbeta, wb, b, e)});
                for (const Compared& x : outputs) {
                    ASSERT_EQ(x.alone.size(), x.in_batch.size()) << one.name << " " << x.name;
                    ASSERT_TRUE(all_finite(x.in_batch)) << one.name << " seed " << seed << ": " << x.name << " not written";
                    for (size_t j = 0; j < x.alone.size(); ++j) {
                        uint32_t a, r;
                        std::memcpy(&a, &x.alone[j], 4);
                        std::memcpy(&r, &x.in_batch[j], 4);
                        ASSERT_EQ(a, r) << one.name << " seed " << seed << ": " << x.name << "[" << j << "] alone "
                                        << x.alone[j] << ", in the batch " << x.in_batch[j];
                    }
                }
                // Nonzero where the sequence has tokens (or, for the states, always: h0 and dht
                // are drawn nonzero), so that equal bits are not equal zeros.
                EXPECT_TRUE(any_nonzero(got.ht) && any_nonzero(got.dh0)) << one.name;
                if (e > b) {
                    EXPECT_TRUE(any_nonzero(got.o) && any_nonzero(got.dq) && any_nonzero(got.dv)) << one.name;
                }
            }
        }
    }
}

// The device-side chunk layout of a varlen batch: each sequence's first chunk slot is the sum of
// ceil(L / 64) over the sequences before it, and the total fits the grid the host sized from
// shapes alone (ceil(T / 64) + N), whatever the lengths.
TEST(GdnCudaEmulated, ChunkOffsetsFitTheGridSizedWithoutReadingOffsets) {
    std::mt19937 rng(900);
    std::vector<std::vector<int64_t>> layouts = {{1}, {0}, {64}, {65}, {0, 0, 0}, {63, 1, 64, 0, 129}};
    for (int r = 0; r < 20; ++r) {
        std::vector<int64_t> lengths(1 + rng() % 40);
        for (auto& x : lengths) x = rng() % 3 == 0 ? int64_t(rng() % 200) : int64_t(rng() % 5);
        layouts.push_back(lengths);
    }
    for (const auto& lengths : layouts) {
        const Shape s = varlen_shape(lengths, 1, 1, 4, 4);
        kcv_gdn_params kp{};
        kp.B = 1; kp.T = s.T; kp.H = kp.HV = 1; kp.K = kp.V = 4;
        kp.N = s.sequences();
        kp.cu_seqlens = s.cu_seqlens.data();
        const cu::Dims d = cu::make_dims(kp);
        std::vector<int> offsets(size_t(d.N) + 1, -1);
        HostLauncher launch;
        ASSERT_EQ(launch(cu::chunk_offsets_kernel, dim3(1), 0, "chunk_offsets", kp.cu_seqlens, d.N, offsets.data()), 0);
        int64_t expect = 0;
        std::string where = "lengths";
        for (int64_t x : lengths) where += " " + std::to_string(x);
        for (size_t n = 0; n < lengths.size(); ++n) {
            ASSERT_EQ(offsets[n], expect) << where << ", sequence " << n;
            expect += (lengths[n] + 63) / 64;
        }
        ASSERT_EQ(offsets[lengths.size()], expect) << where;
        EXPECT_LE(expect, d.slots) << where;
    }
}

// The emulated tensor core against what an H200 returned for the cases of
// bench/mma_subnormals.cu (bench/RESULTS.md): C plus eight products, aligned to the largest term
// with two more bits than float32 keeps there, each cut toward zero, the sum cut toward zero.
TEST(TensorCoreEmulation, GivesTheH200sSumsOfTheRoundingCases) {
    const double u = std::ldexp(1.0, -23);
    auto p2 = [](int e) { return std::ldexp(1.0, e); };
    struct Sum {
        const char* name;
        std::vector<double> terms;   // C first, then the products
        double h200;
    };
    const std::vector<Sum> sums = {
        {"1 + 0.75 ulp", {1.0, 0.75 * u}, 1.0},
        {"-1 - 0.75 ulp", {-1.0, -0.75 * u}, -1.0},
        {"1 + 0.25 ulp", {1.0, 0.25 * u}, 1.0},
        {"1 + 8 products of 2^-26", {1.0, p2(-26), p2(-26), p2(-26), p2(-26), p2(-26), p2(-26), p2(-26), p2(-26)}, 1.0},
        {"1 - 2^-25", {1.0, -p2(-25)}, 1.0 - p2(-24)},
        {"products only, 1 + 3 * 2^-25", {0.0, 1.0, 0.75 * u}, 1.0},
        {"1 + 4 products of 2^-25", {1.0, p2(-25), p2(-25), p2(-25), p2(-25)}, 1.0 + u},
        {"1 + 2^-24 + 2^-24", {1.0, p2(-24), 0.0, 0.0, 0.0, p2(-24)}, 1.0 + u},
        {"1 + 2^-26 + 2^-26 + 2^-25 + 2^-24", {1.0, p2(-26), p2(-26), p2(-25), p2(-24)}, 1.0},
        {"1 - 2^-26", {1.0, -p2(-26)}, 1.0},
    };
    for (const Sum& s : sums)
        EXPECT_EQ(cu::emulation::tensor_core_sum(s.terms.data(), int(s.terms.size())), float(s.h200)) << s.name;
}

// C (M×N) = A (M×Kd) · B (Kd×N) through block_mma<NT, AEXACT, BEXACT>, one warp.
template <bool AEXACT = false, bool BEXACT = false, int NT = 1>
void tile_product(const float* A, const float* B, float* C, int M, int N, int Kd) {
    cu::block_mma<NT, AEXACT, BEXACT>(
        M, N, Kd, [&](int m, int k) { return A[m * Kd + k]; }, [&](int k, int n) { return B[k * N + n]; },
        [&](int m, int n, float acc) { C[m * N + n] = acc; });
}

// The tile sums of the high parts are exact, so the tensor core's truncation leaves no bias. A row
// [1, 3·2^-25] times ones is 1 + 2^-23 in float32; split at each value's own exponent, the tensor
// core's sum of the high parts 1 + 3·2^-25 is cut to 1 (the kernels before the shared grid). On
// random positive operands over eight binades, where every cut is of one sign, the error stays
// within one rounding per tile step and shows no bias.
TEST(GdnCudaEmulated, TensorCoreTileSumsOfHighPartsAreExact) {
    {
        const int M = 16, N = 8, Kd = 8;
        std::vector<float> A(M * Kd, 0.0f), B(Kd * N, 1.0f), C(M * N, -1.0f);
        A[0] = 1.0f;
        A[1] = 3.0f * std::ldexp(1.0f, -25);
        cu::emulation::launch(tile_product<>, dim3(1), 32, A.data(), B.data(), C.data(), M, N, Kd);
        for (int n = 0; n < N; ++n) EXPECT_EQ(C[n], 1.0f + std::ldexp(1.0f, -23)) << "column " << n;
    }
    const int M = 32, N = 16, Kd = 64;
    std::mt19937_64 rng(4242);
    std::uniform_real_distribution<double> mant(1.0, 2.0);
    std::uniform_int_distribution<int> expo(-8, 0);
    std::vector<float> A(M * Kd), B(Kd * N), C(M * N);
    for (auto& x : A) x = float(std::ldexp(mant(rng), expo(rng)));
    for (auto& x : B) x = float(std::ldexp(mant(rng), expo(rng)));
    cu::emulation::launch(tile_product<>, dim3(1), 32, A.data(), B.data(), C.data(), M, N, Kd);
    double worst = 0.0, bias = 0.0;
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double exact = 0.0, scale = 0.0;
            for (int k = 0; k < Kd; ++k) {
                exact += double(A[m * Kd + k]) * double(B[k * N + n]);
                scale += std::abs(double(A[m * Kd + k]) * double(B[k * N + n]));
            }
            const double rel = (double(C[m * N + n]) - exact) / scale;
            worst = std::max(worst, std::abs(rel));
            bias += rel / (M * N);
        }
    const double u = std::ldexp(1.0, -24);
    EXPECT_LE(worst, (Kd / 8 + 1) * u) << "largest error over sum |a||b|";
    EXPECT_LE(std::abs(bias), u / 4) << "mean signed error over sum |a||b|";
    std::printf("  block_mma, positive operands over eight binades: worst %.3g u, mean %.3g u\n", worst / u, bias / u);
}

// C (M×N) = A (M×Kd) · B (Kd×N) through block_mma_wgmma, a block of two warpgroups; its tiles 40
// bytes into shared memory, so that it has to align them itself. RUNNING: its control schedule.
template <bool AEXACT, bool BEXACT, bool RUNNING = false>
void wgmma_tile_product(const float* A, const float* B, float* C, int M, int N, int Kd) {
    cu::block_mma_wgmma<AEXACT, BEXACT, RUNNING>(
        M, N, Kd, [&](int m, int k) { return A[m * Kd + k]; }, [&](int k, int n) { return B[k * N + n]; },
        [&](int m, int n, float acc) { C[m * N + n] = acc; }, reinterpret_cast<uint8_t*>(cu::shared_floats()) + 40);
}

// Values over 2^-140 … 2^20 with both signs, zeros and subnormals among them; EXACT: cut to 16-bit
// inputs' 8 significant bits (exact in TF32), as the kernels' raw bf16 operands are.
std::vector<float> spread_values(std::mt19937_64& rng, size_t n, bool exact) {
    std::uniform_real_distribution<double> mant(1.0, 2.0);
    std::uniform_int_distribution<int> expo(-140, 20), kind(0, 9);
    std::vector<float> x(n);
    for (auto& v : x) {
        const int k = kind(rng);
        v = k == 0 ? 0.0f : float((k % 2 ? -1.0 : 1.0) * std::ldexp(mant(rng), k < 4 ? expo(rng) : expo(rng) / 8));
        if (exact) {
            uint32_t b;
            std::memcpy(&b, &v, 4);
            b &= 0xFFFF0000u;
            std::memcpy(&v, &b, 4);
        }
    }
    return x;
}

// How many of got's elements differ from want's in their bits, and the first that does (-1: none).
struct Differing {
    int count = 0, first = -1;
};
Differing differing(const std::vector<float>& want, const std::vector<float>& got) {
    Differing d;
    for (size_t e = 0; e < want.size(); ++e)
        if (std::memcmp(&want[e], &got[e], 4) != 0 && d.count++ == 0) d.first = int(e);
    return d;
}

// block_mma_wgmma (gdn_wgmma.cuh) gives block_mma's bits: every element of every shape (full tiles,
// rows, columns and k past the tiles' edges, a single row or column, k shorter than a step) and
// every combination of exact operands, on values that span float32's range. The emulated wgmma
// reads its tiles through the descriptors and the 128-byte swizzle, so the staging, the
// descriptors, the k steps' offsets and the accumulators' layout are all on the path. And the
// case that made the high products' sum exact (TensorCoreTileSumsOfHighPartsAreExact) holds:
// a running sum in wgmma's accumulator would cut it to 1.
template <bool AEXACT, bool BEXACT>
void expect_wgmma_port_bits(std::mt19937_64& rng) {
    struct Size {
        int M, N, Kd;
    };
    for (const Size z : {Size{64, 64, 192}, Size{37, 50, 70}, Size{1, 64, 8}, Size{64, 1, 3}, Size{16, 33, 129}}) {
        const std::vector<float> A = spread_values(rng, size_t(z.M) * z.Kd, AEXACT);
        const std::vector<float> B = spread_values(rng, size_t(z.Kd) * z.N, BEXACT);
        std::vector<float> want(size_t(z.M) * z.N, std::nanf("1")), got(want);
        cu::emulation::launch(tile_product<AEXACT, BEXACT, 2>, dim3(1), 32, A.data(), B.data(), want.data(), z.M,
                              z.N, z.Kd);
        cu::emulation::launch(wgmma_tile_product<AEXACT, BEXACT>, dim3(1), 256, A.data(), B.data(), got.data(), z.M,
                              z.N, z.Kd);
        const auto [differ, first] = differing(want, got);
        EXPECT_EQ(differ, 0) << "M " << z.M << " N " << z.N << " Kd " << z.Kd << " exact " << AEXACT << BEXACT
                             << ": first at (" << first / std::max(z.N, 1) << ", " << first % std::max(z.N, 1)
                             << ") " << (first >= 0 ? want[first] : 0.0f) << " vs " << (first >= 0 ? got[first] : 0.0f);
    }
}

TEST(GdnCudaEmulated, WgmmaPortGivesBlockMmasBits) {
    std::mt19937_64 rng(9090);
    expect_wgmma_port_bits<false, false>(rng);
    expect_wgmma_port_bits<true, false>(rng);
    expect_wgmma_port_bits<false, true>(rng);
    expect_wgmma_port_bits<true, true>(rng);
    const int M = 64, N = 64, Kd = 64;
    std::vector<float> A(M * Kd, 0.0f), B(Kd * N, 1.0f), C(M * N, -1.0f);
    A[0] = 1.0f;
    A[1] = 3.0f * std::ldexp(1.0f, -25);
    cu::emulation::launch(wgmma_tile_product<false, false>, dim3(1), 256, A.data(), B.data(), C.data(), M, N, Kd);
    for (int n = 0; n < N; ++n) EXPECT_EQ(C[n], 1.0f + std::ldexp(1.0f, -23)) << "column " << n;
    for (int n = 0; n < N; ++n) EXPECT_EQ(C[N + n], 0.0f) << "row 1, column " << n;
    // The control schedule, the high products accumulated in wgmma across k (the tensor core's
    // truncating sum where block_mma rounds), must differ somewhere on the same kind of values, or
    // the comparisons above could not tell the two schedules apart.
    const int Kc = 192;
    const std::vector<float> a = spread_values(rng, size_t(M) * Kc, false);
    const std::vector<float> b = spread_values(rng, size_t(Kc) * N, false);
    std::vector<float> want(size_t(M) * N), running(want);
    cu::emulation::launch(tile_product<false, false, 2>, dim3(1), 32, a.data(), b.data(), want.data(), M, N, Kc);
    cu::emulation::launch(wgmma_tile_product<false, false, true>, dim3(1), 256, a.data(), b.data(), running.data(), M,
                          N, Kc);
    const int differ = differing(want, running).count;
    EXPECT_GT(differ, 0) << "the running-sum control gives block_mma's bits at 64×64×192";
    std::printf("  control, high products accumulated in wgmma: %d of %zu outputs differ\n", differ, want.size());
}

}  // namespace
