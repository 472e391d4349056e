// GPU check of the CUDA recurrence kernels: every member × input dtype × shape against the
// float64 oracle under the contracts' analytic error model, bitwise determinism across two runs
// into differently poisoned outputs, and (with --time) kernel times at GDN.md's shapes.
//
// Build (gdn/CMakeLists.txt builds the same target, kcv_gdn_cuda_check):
//   nvcc -std=c++20 -O2 -gencode=arch=compute_90a,code=sm_90a gdn/tests/check_gdn_cuda.cu \
//        gdn/cuda/gdn_api.cu gdn/problem.cpp gdn/oracle/gdn_oracle.cpp -o check_gdn_cuda
// Run: ./check_gdn_cuda [--time | --time-only | --time-v2 | --time-split [MEMBERS] | --profile
// [MEMBER]]; exit status 0 iff every check passed. --time-only times without checking; --time-v2
// times version 2 alone, every member at B4 T4096 H32; --time-split times the scans split along
// the sequence against unsplit at B1 T32768 (bench/gdn_split.sh); --profile runs one forward and
// backward at B4 T4096 H32 (of Gated DeltaNet, or of MEMBER) and nothing else, for a profiler.
// Kernel versions: bf16 and fp16 inputs run version 2 (tensor cores), float32 inputs version 1;
// with KCV_GDN_KERNELS=1 in the environment every dtype runs version 1. --time times both
// versions at each shape in the same process, version 1 first, and prints their ratio.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "../cuda/gdn_cuda.h"
#include "../cuda/gdn_mma.cuh"
#include "../oracle/gdn_oracle.hpp"

namespace {

using kcv::gdn::GateKind;
using kcv::gdn::Member;

#define CHECK_CUDA(x)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(2);                                                                      \
        }                                                                                      \
    } while (0)

// Host rounding to the input dtype and storage as its bytes.
double round_to(int dtype, float x) {
    if (dtype == 1) return double(__bfloat162float(__float2bfloat16_rn(x)));
    if (dtype == 2) return double(__half2float(__float2half_rn(x)));
    return double(x);
}
double unit_roundoff(int dtype) { return dtype == 1 ? 0x1p-8 : dtype == 2 ? 0x1p-11 : 0x1p-24; }
size_t elem_bytes(int dtype) { return dtype == 0 ? 4 : 2; }

std::vector<uint8_t> encode(int dtype, const std::vector<double>& x) {
    std::vector<uint8_t> out(x.size() * elem_bytes(dtype));
    for (size_t i = 0; i < x.size(); ++i) {
        if (dtype == 0) {
            const float f = float(x[i]);
            std::memcpy(&out[i * 4], &f, 4);
        } else if (dtype == 1) {
            const __nv_bfloat16 h = __float2bfloat16_rn(float(x[i]));
            std::memcpy(&out[i * 2], &h, 2);
        } else {
            const __half h = __float2half_rn(float(x[i]));
            std::memcpy(&out[i * 2], &h, 2);
        }
    }
    return out;
}

std::vector<double> decode(int dtype, const std::vector<uint8_t>& b) {
    const size_t n = b.size() / elem_bytes(dtype);
    std::vector<double> out(n);
    for (size_t i = 0; i < n; ++i) {
        if (dtype == 0) {
            float f;
            std::memcpy(&f, &b[i * 4], 4);
            out[i] = f;
        } else if (dtype == 1) {
            __nv_bfloat16 h;
            std::memcpy(&h, &b[i * 2], 2);
            out[i] = __bfloat162float(h);
        } else {
            __half h;
            std::memcpy(&h, &b[i * 2], 2);
            out[i] = __half2float(h);
        }
    }
    return out;
}

// A device buffer with its size.
struct Buffer {
    void* p = nullptr;
    size_t bytes = 0;
    explicit Buffer(size_t n = 0) : bytes(n) {
        if (n) CHECK_CUDA(cudaMalloc(&p, n));
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr; }
    ~Buffer() {
        if (p) cudaFree(p);
    }
    void upload(const void* src) { CHECK_CUDA(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice)); }
    std::vector<uint8_t> download() const {
        std::vector<uint8_t> out(bytes);
        if (bytes) CHECK_CUDA(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost));
        return out;
    }
    void poison(int byte) {
        if (bytes) CHECK_CUDA(cudaMemset(p, byte, bytes));
    }
};

Buffer upload_floats(const std::vector<double>& x) {
    std::vector<float> f(x.begin(), x.end());
    Buffer b(f.size() * 4);
    b.upload(f.data());
    return b;
}

struct Case {
    std::string name;
    Member member;
    int dtype;
    kcv::gdn::Shape shape;
    double g_lo = -1.0, g_hi = 0.0;
    int segment_chunks = 0;   // kcv_gdn_params.segment_chunks
};

const char* dtype_name(int d) { return d == 0 ? "f32" : d == 1 ? "bf16" : "f16"; }

double ratio(const std::vector<double>& y, const std::vector<double>& ref, const std::vector<double>& s, double k,
             double u_out, double tiny) {
    double r = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        if (!std::isfinite(ref[i])) continue;
        const double e = std::abs(y[i] - ref[i]) / (4.0 * 0x1p-24 * std::sqrt(k) * s[i] + u_out * std::abs(ref[i]) + tiny);
        if (std::isnan(e)) return std::numeric_limits<double>::quiet_NaN();
        r = std::max(r, e);
    }
    return r;
}

bool reference_kernels() {
    const char* v = std::getenv("KCV_GDN_KERNELS");
    return v != nullptr && std::string(v) == "1";
}

// C (M×N) = A (M×Kd) · B (Kd×N) through block_mma, the tensor-core product of version 2: one
// TF32 term per operand (EXACT) or the exact split into three TF32 parts.
template <bool EXACT>
__global__ void block_mma_product(const float* A, const float* B, float* C, int M, int N, int Kd) {
    kcv::gdn::cuda::block_mma<4, EXACT, EXACT>(
        M, N, Kd, [&](int m, int k) { return A[m * Kd + k]; }, [&](int k, int n) { return B[k * N + n]; },
        [&](int m, int n, float acc) { C[m * N + n] = acc; });
}

// The tensor-core product on its own, so that a wrong fragment layout shows here by name rather
// than as every version 2 case failing: (1) small integers, whose products and sums are exact,
// compared bit for bit through both paths, on a shape with partial tiles in M, N and K; (2) normal
// random operands through the split, the error relative to Σ|a||b| against 2^-19 (the split drops
// at most 2^-22 a product, the accumulation a few 2^-24); (3) whether TF32 subnormal operands survive
// (reported, not judged: the emulation keeps them). Returns the number of failures.
int check_block_mma() {
    const int M = 64, N = 72, Kd = 70;
    std::mt19937 rng(11);
    std::vector<float> a(M * Kd), b(Kd * N), c(M * N);
    Buffer da(a.size() * 4), db(b.size() * 4), dc(c.size() * 4);
    auto product = [&](bool exact) {
        da.upload(a.data());
        db.upload(b.data());
        dc.poison(0xFF);
        if (exact) block_mma_product<true><<<1, 256>>>(static_cast<float*>(da.p), static_cast<float*>(db.p),
                                                       static_cast<float*>(dc.p), M, N, Kd);
        else block_mma_product<false><<<1, 256>>>(static_cast<float*>(da.p), static_cast<float*>(db.p),
                                                  static_cast<float*>(dc.p), M, N, Kd);
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaMemcpy(c.data(), dc.p, c.size() * 4, cudaMemcpyDeviceToHost));
    };
    auto reference = [&](int m, int n, bool magnitude) {
        double acc = 0.0;
        for (int k = 0; k < Kd; ++k) acc += magnitude ? std::abs(double(a[m * Kd + k]) * b[k * N + n])
                                                      : double(a[m * Kd + k]) * b[k * N + n];
        return acc;
    };
    int failed = 0;
    std::uniform_int_distribution<int> small(-8, 8);
    for (auto& x : a) x = float(small(rng));
    for (auto& x : b) x = float(small(rng));
    for (bool exact : {true, false}) {
        product(exact);
        int wrong = 0, first = -1;
        for (int e = 0; e < M * N; ++e)
            if (c[e] != float(reference(e / N, e % N, false))) {
                ++wrong;
                if (first < 0) first = e;
            }
        if (wrong) {
            std::printf("FAIL block_mma %s on small integers: %d of %d elements wrong, first (%d, %d) = %g, expected %g\n",
                        exact ? "exact" : "split", wrong, M * N, first / N, first % N, c[first],
                        reference(first / N, first % N, false));
            ++failed;
        } else {
            std::printf("ok   block_mma %s on small integers (64×72×70): bit for bit\n", exact ? "exact" : "split");
        }
    }
    std::normal_distribution<float> n01(0.0f, 1.0f);
    for (auto& x : a) x = n01(rng);
    for (auto& x : b) x = n01(rng);
    product(false);
    double worst = 0.0;
    for (int e = 0; e < M * N; ++e)
        worst = std::max(worst, std::abs(c[e] - reference(e / N, e % N, false)) / reference(e / N, e % N, true));
    const bool close = worst <= 0x1p-19;
    std::printf("%s block_mma split on normal operands: max |error| / sum|a||b| = %.3g = 2^%.1f (bound 2^-19)\n",
                close ? "ok  " : "FAIL", worst, std::log2(worst));
    failed += close ? 0 : 1;
    std::fill(a.begin(), a.end(), 0.0f);
    std::fill(b.begin(), b.end(), 0.0f);
    a[0] = 0x1p-130f;   // subnormal in float32 and in TF32
    b[0] = 0x1p+20f;
    product(true);
    std::printf("note block_mma subnormal TF32 operand: 2^-130 · 2^20 = %g (%s)\n", c[0],
                c[0] == 0x1p-110f ? "kept" : "flushed or changed");
    return failed;
}

// Runs one case; returns false on any failure.
bool run_case(const Case& c, uint32_t seed) {
    const kcv::gdn::Shape& s = c.shape;
    const kcv::gdn::Problem prob{c.member, s, 1.0 / std::sqrt(double(s.K))};
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n01(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    const int dt = c.dtype;
    auto draw = [&](int64_t n, auto gen, bool to_dtype) {
        std::vector<double> x(n);
        for (auto& e : x) e = to_dtype ? round_to(dt, float(gen())) : double(float(gen()));
        return x;
    };
    const double ks = 1.0 / std::sqrt(double(s.K));
    const auto q = draw(s.qk_size(), [&] { return n01(rng); }, true);
    const auto k = draw(s.qk_size(), [&] { return ks * n01(rng); }, true);
    const auto v = draw(s.v_size(), [&] { return n01(rng); }, true);
    const auto g = draw(s.g_size(c.member.gate), [&] { return c.g_lo + (c.g_hi - c.g_lo) * u01(rng); }, false);
    const auto beta = draw(s.beta_size(), [&] { return u01(rng); }, true);
    const auto h0 = draw(s.state_size(), [&] { return n01(rng); }, false);
    const auto d_o = draw(s.v_size(), [&] { return n01(rng); }, true);
    const auto dht = draw(s.state_size(), [&] { return n01(rng); }, false);

    Buffer bq(q.size() * elem_bytes(dt)), bk(k.size() * elem_bytes(dt)), bv(v.size() * elem_bytes(dt)),
        bbeta(std::max<size_t>(1, beta.size()) * elem_bytes(dt)), bdo(d_o.size() * elem_bytes(dt));
    bq.upload(encode(dt, q).data());
    bk.upload(encode(dt, k).data());
    bv.upload(encode(dt, v).data());
    bbeta.upload(encode(dt, beta).data());
    bdo.upload(encode(dt, d_o).data());
    Buffer bg = upload_floats(g.empty() ? std::vector<double>{0.0} : g), bh0 = upload_floats(h0), bdht = upload_floats(dht);
    Buffer bcu(s.cu_seqlens.size() * 8);
    if (!s.cu_seqlens.empty()) bcu.upload(s.cu_seqlens.data());
    Buffer bo(v.size() * elem_bytes(dt)), bht(h0.size() * 4), bdq(q.size() * elem_bytes(dt)),
        bdk(k.size() * elem_bytes(dt)), bdv(v.size() * elem_bytes(dt)),
        bdg(std::max<size_t>(1, s.g_size(c.member.gate)) * 4), bdb(std::max<size_t>(1, beta.size()) * elem_bytes(dt)),
        bdh0(h0.size() * 4);

    kcv_gdn_params p{};
    p.gate = int32_t(c.member.gate);
    p.delta = c.member.delta;
    p.dtype = dt;
    p.B = s.B; p.T = s.T; p.H = s.H; p.HV = s.HV; p.K = s.K; p.V = s.V;
    p.N = s.sequences();
    p.cu_seqlens = s.cu_seqlens.empty() ? nullptr : static_cast<const int64_t*>(bcu.p);
    p.scale = float(prob.scale);
    p.q = bq.p; p.k = bk.p; p.v = bv.p; p.g = static_cast<const float*>(bg.p); p.beta = bbeta.p;
    p.h0 = static_cast<const float*>(bh0.p);
    p.o = bo.p; p.ht = static_cast<float*>(bht.p);
    p.d_o = bdo.p; p.dht = static_cast<const float*>(bdht.p);
    p.dq = bdq.p; p.dk = bdk.p; p.dv = bdv.p; p.dg = static_cast<float*>(bdg.p); p.dbeta = bdb.p;
    p.dh0 = static_cast<float*>(bdh0.p);
    p.segment_chunks = c.segment_chunks;
    Buffer ws(kcv_gdn_workspace_bytes(&p, 1));
    p.workspace = ws.p;
    p.workspace_bytes = ws.bytes;

    // Outputs in a fixed order; dg and dbeta are compared only where the member writes them.
    std::vector<Buffer*> outs = {&bo, &bht, &bdq, &bdk, &bdv, &bdg, &bdb, &bdh0};
    const std::vector<bool> written = {true, true, true, true, true, c.member.gate != GateKind::none, c.member.delta,
                                       true};
    std::vector<std::vector<uint8_t>> first;
    for (int run = 0; run < 2; ++run) {
        for (Buffer* b : outs) b->poison(run == 0 ? 0xFF : 0x00);
        ws.poison(run == 0 ? 0x7F : 0xA5);
        if (kcv_gdn_forward(&p, nullptr) || kcv_gdn_backward(&p, nullptr)) {
            std::printf("FAIL %-28s %s: %s\n", c.name.c_str(), dtype_name(dt), kcv_gdn_last_error());
            return false;
        }
        CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<std::vector<uint8_t>> got;
        for (size_t i = 0; i < outs.size(); ++i) got.push_back(written[i] ? outs[i]->download() : std::vector<uint8_t>{});
        if (run == 0) first = got;
        else if (got != first) {
            std::printf("FAIL %-28s %s: outputs differ between two runs (determinism)\n", c.name.c_str(), dtype_name(dt));
            return false;
        }
    }
    // A third run as training runs the kernels: the forward keeps the chunk preparation apart and
    // the backward reads it there, on a workspace poisoned again in between. The same bits, and the
    // backward leaves the preparation as the forward wrote it.
    {
        kcv_gdn_params pk = p;
        Buffer prepared(kcv_gdn_prepared_bytes(&pk));
        pk.prepared = prepared.p;
        pk.prepared_bytes = prepared.bytes;
        Buffer kws(kcv_gdn_workspace_bytes(&pk, 1));
        pk.workspace = kws.p;
        pk.workspace_bytes = kws.bytes;
        for (Buffer* b : outs) b->poison(0x5A);
        prepared.poison(0x7F);
        kws.poison(0x7F);
        if (kcv_gdn_forward(&pk, nullptr)) {
            std::printf("FAIL %-28s %s: %s\n", c.name.c_str(), dtype_name(dt), kcv_gdn_last_error());
            return false;
        }
        CHECK_CUDA(cudaDeviceSynchronize());
        const std::vector<uint8_t> kept = prepared.download();
        kws.poison(0xA5);
        if (kcv_gdn_backward(&pk, nullptr)) {
            std::printf("FAIL %-28s %s: %s\n", c.name.c_str(), dtype_name(dt), kcv_gdn_last_error());
            return false;
        }
        CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<std::vector<uint8_t>> got;
        for (size_t i = 0; i < outs.size(); ++i) got.push_back(written[i] ? outs[i]->download() : std::vector<uint8_t>{});
        if (got != first) {
            std::printf("FAIL %-28s %s: a backward on the kept preparation differs\n", c.name.c_str(), dtype_name(dt));
            return false;
        }
        if (prepared.download() != kept) {
            std::printf("FAIL %-28s %s: the backward wrote the kept preparation\n", c.name.c_str(), dtype_name(dt));
            return false;
        }
    }

    // Reference.
    std::vector<double> ro(s.v_size()), ros(s.v_size()), rht(s.state_size()), rhts(s.state_size());
    kcv::gdn::forward(prob, {q.data(), k.data(), v.data(), g.data(), beta.data(), h0.data(), ro.data(), rht.data(),
                             ros.data(), rhts.data()});
    std::vector<double> rdq(s.qk_size()), rdk(s.qk_size()), rdv(s.v_size()), rdg(s.g_size(c.member.gate)),
        rdb(s.beta_size()), rdh0(s.state_size());
    auto sdq = rdq, sdk = rdk, sdv = rdv, sdg = rdg, sdb = rdb, sdh0 = rdh0;
    kcv::gdn::BackwardArgs ba;
    ba.q = q.data(); ba.k = k.data(); ba.v = v.data(); ba.g = g.data(); ba.beta = beta.data(); ba.h0 = h0.data();
    ba.d_o = d_o.data(); ba.dht = dht.data();
    ba.dq = rdq.data(); ba.dk = rdk.data(); ba.dv = rdv.data(); ba.dg = rdg.data(); ba.dbeta = rdb.data();
    ba.dh0 = rdh0.data(); ba.dq_scale = sdq.data(); ba.dk_scale = sdk.data(); ba.dv_scale = sdv.data();
    ba.dg_scale = sdg.data(); ba.dbeta_scale = sdb.data(); ba.dh0_scale = sdh0.data();
    kcv::gdn::backward(prob, ba);

    const double u_in = unit_roundoff(dt), u32 = 0x1p-24;
    const double tiny_in = dt == 1 ? 0x1p-126 * 0x1p-7 : dt == 2 ? 0x1p-14 * 0x1p-10 : 0x1p-126 * 0x1p-23;
    const double tiny32 = 0x1p-126 * 0x1p-23, TK = double(s.T * s.K), TV = double(s.T * s.V);
    std::vector<std::pair<std::string, double>> r = {
        {"o", ratio(decode(dt, first[0]), ro, ros, TK, u_in, tiny_in)},
        {"ht", ratio(decode(0, first[1]), rht, rhts, TK, u32, tiny32)},
        {"dq", ratio(decode(dt, first[2]), rdq, sdq, TV, u_in, tiny_in)},
        {"dk", ratio(decode(dt, first[3]), rdk, sdk, TV, u_in, tiny_in)},
        {"dv", ratio(decode(dt, first[4]), rdv, sdv, TK, u_in, tiny_in)},
        {"dh0", ratio(decode(0, first[7]), rdh0, sdh0, TK, u32, tiny32)}};
    if (c.member.gate != GateKind::none) {
        auto y = decode(0, first[5]);
        y.resize(rdg.size());
        r.push_back({"dg", ratio(y, rdg, sdg, TK, u32, tiny32)});
    }
    if (c.member.delta) r.push_back({"dbeta", ratio(decode(dt, first[6]), rdb, sdb, TK, u_in, tiny_in)});
    bool ok = true;
    std::string line;
    char buf[64];
    for (auto& [n, x] : r) {
        std::snprintf(buf, sizeof buf, "%s=%.3g ", n.c_str(), x);
        line += buf;
        ok &= x <= 1.0;
    }
    // A digest of every output's bytes: two builds of the library that should give the same bits
    // (bench/audit_device_run.sh, step gdn-check with GDN_LIB) print the same digests.
    size_t digest = 0;
    for (const auto& b : first)
        digest = digest * 1000003u ^ std::hash<std::string_view>{}({reinterpret_cast<const char*>(b.data()), b.size()});
    const char* version = dt == 0 || reference_kernels() ? "v1" : "v2";
    std::printf("%s %-30s %-4s %s seg=%d det=bitwise kept=bitwise %s digest=%016zx\n", ok ? "ok  " : "FAIL",
                c.name.c_str(), dtype_name(dt), version, kcv_gdn_segment_chunks(&p), line.c_str(), digest);
    return ok;
}

// Median time in ms of fn over `reps` runs, after a warm-up.
template <class F>
float time_ms(F fn, int reps = 5) {
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    fn();
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
        CHECK_CUDA(cudaEventRecord(a));
        fn();
        CHECK_CUDA(cudaEventRecord(b));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

struct Times {
    float fwd, fwd_bwd;
};

// seg: kcv_gdn_params.segment_chunks; the rows of a split scan say how many chunks a segment.
Times time_shape(Member m, int B, int T, int H, int HV, int reps = 5, int seg = 0) {
    const int K = 128, V = 128, dt = 1;
    kcv_gdn_params p{};
    p.gate = int32_t(m.gate);
    p.delta = m.delta;
    p.dtype = dt;
    p.B = B; p.T = T; p.H = H; p.HV = HV; p.K = K; p.V = V; p.N = B;
    p.scale = 1.0f / std::sqrt(float(K));
    p.segment_chunks = seg;
    const size_t qk = size_t(B) * T * H * K, vv = size_t(B) * T * HV * V, hb = size_t(B) * T * HV;
    const size_t gs = m.gate == GateKind::channel ? hb * K : hb;
    Buffer q(qk * 2), k(qk * 2), v(vv * 2), g(gs * 4), beta(hb * 2), o(vv * 2), d_o(vv * 2), dq(qk * 2), dk(qk * 2),
        dv(vv * 2), dg(gs * 4), db(hb * 2);
    // Small finite values: 0x3C00 is 1.0 in fp16 and ~1 in bf16 patterns; timing needs no meaning.
    for (Buffer* b : {&q, &k, &v, &beta, &d_o}) CHECK_CUDA(cudaMemset(b->p, 0x3C, b->bytes));
    CHECK_CUDA(cudaMemset(g.p, 0xBC, g.bytes));   // a small negative float32 pattern
    p.q = q.p; p.k = k.p; p.v = v.p; p.g = static_cast<float*>(g.p); p.beta = beta.p; p.o = o.p;
    p.d_o = d_o.p; p.dq = dq.p; p.dk = dk.p; p.dv = dv.p; p.dg = static_cast<float*>(dg.p); p.dbeta = db.p;
    Buffer ws(kcv_gdn_workspace_bytes(&p, 1));
    p.workspace = ws.p;
    p.workspace_bytes = ws.bytes;
    const char* version = reference_kernels() ? "v1" : "v2";
    // Forward, then forward+backward, of x; one line named `name`.
    auto timed = [&](const kcv_gdn_params& x, const std::string& name) {
        const float tf = time_ms([&] { kcv_gdn_forward(&x, nullptr); }, reps);
        const float tfb = time_ms([&] {
            kcv_gdn_forward(&x, nullptr);
            kcv_gdn_backward(&x, nullptr);
        }, reps);
        std::printf("time %-17s B%d T%d H%d HV%d K=V=128 bf16 %s: fwd %.3f ms, fwd+bwd %.3f ms (%s)\n", name.c_str(), B, T,
                    H, HV, version, tf, tfb, cudaGetErrorString(cudaGetLastError()));
        return Times{tf, tfb};
    };
    const int split = kcv_gdn_segment_chunks(&p);
    const std::string name = std::string(kcv::gdn::member_name(m)) + (split ? "/seg" + std::to_string(split) : "");
    const Times t = timed(p, name);
    // As training runs them: the forward keeps the chunk preparation apart and the backward reads
    // it (the row's name gains "+kept").
    kcv_gdn_params pk = p;
    Buffer prepared(kcv_gdn_prepared_bytes(&pk));
    pk.prepared = prepared.p;
    pk.prepared_bytes = prepared.bytes;
    timed(pk, name + "+kept");
    std::fflush(stdout);
    return t;
}

// Version 1 and version 2 at one shape, in this process, and the ratio v2 / v1.
void time_versions(Member m, int B, int T, int H, int HV) {
    setenv("KCV_GDN_KERNELS", "1", 1);
    const Times v1 = time_shape(m, B, T, H, HV, 3);
    unsetenv("KCV_GDN_KERNELS");
    const Times v2 = time_shape(m, B, T, H, HV);
    std::printf("time %-17s B%d T%d H%d HV%d v2/v1: fwd %.3f, fwd+bwd %.3f\n", kcv::gdn::member_name(m), B, T, H, HV,
                v2.fwd / v1.fwd, v2.fwd_bwd / v1.fwd_bwd);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "--profile") {
        // One forward and one backward at the first benchmark shape, for a profiler to time per kernel:
        // Gated DeltaNet, or the member named after --profile.
        const std::string name = argc > 2 ? argv[2] : kcv::gdn::member_name(kcv::gdn::kGatedDeltaNet);
        for (Member m : kcv::gdn::all_members()) {
            if (name != kcv::gdn::member_name(m)) continue;
            time_shape(m, 4, 4096, 32, 32, 1);
            return 0;
        }
        std::fprintf(stderr, "--profile: no member named '%s'\n", name.c_str());
        return 2;
    }
    if (mode == "--time-split") {
        // The split scans (gdn_launch.cuh, split_scans) at B1 T32768: with 4 and 8 value heads,
        // where the shape's rule splits, and with 16 and 32 (GDN.md's H16/HV32), where it does not;
        // each unsplit (segment_chunks −1), and split: at 4 and 8 heads by the rule (0), at 4 also
        // into 8 segments, at 8 into 4 (for a per-channel gate the rule's own, timed twice), at 16
        // into 3 and 2, at 32 into 4 and 8, as asked. Medians of 10 runs, no checks; every member,
        // or those named after it.
        const std::string only = argc > 2 ? argv[2] : "";
        for (Member m : kcv::gdn::all_members()) {
            if (!only.empty() && only.find(kcv::gdn::member_name(m)) == std::string::npos) continue;
            for (int seg : {-1, 0, 64}) time_shape(m, 1, 32768, 2, 4, 10, seg);
            for (int seg : {-1, 0, 128}) time_shape(m, 1, 32768, 4, 8, 10, seg);
            for (int seg : {-1, 171, 256}) time_shape(m, 1, 32768, 8, 16, 10, seg);
            for (int seg : {-1, 128, 64}) time_shape(m, 1, 32768, 16, 32, 10, seg);
        }
        return 0;
    }
    if (mode == "--time-v2") {
        // Version 2 alone at the first benchmark shape, every member: medians of 20 runs, no checks,
        // for comparing builds of the library run one after the other (bench/gdn_ab.sh).
        for (Member m : kcv::gdn::all_members()) time_shape(m, 4, 4096, 32, 32, 20);
        return 0;
    }
    const bool timing = mode == "--time" || mode == "--time-only";
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    std::printf("kernels: %s\n", reference_kernels() ? "version 1 for every dtype (KCV_GDN_KERNELS=1)"
                                                      : "version 2 (tensor cores) for bf16/f16, version 1 for f32");
    std::vector<Case> cases;
    for (Member m : kcv::gdn::all_members()) {
        const std::string n = kcv::gdn::member_name(m);
        for (int dt : {0, 1, 2}) {
            cases.push_back({n + "/B2T130H2HV4K128", m, dt, kcv::gdn::Shape{2, 130, 2, 4, 128, 128, {}}});
        }
        cases.push_back({n + "/varlen-K128", m, 1, kcv::gdn::Shape{1, 400, 1, 2, 128, 128, {0, 1, 63, 64, 65, 129, 400}}});
        // Enough heads that the scans take wide column slices on an H200 (gdn_launch.cuh).
        cases.push_back({n + "/B4T130H8HV32", m, 1, kcv::gdn::Shape{4, 130, 8, 32, 128, 128, {}}});
        // Many short sequences, two empty, in float32 so the ratios show the kernels' own error.
        cases.push_back({n + "/varlen-many-short", m, 0,
                         kcv::gdn::Shape{1, 130, 2, 4, 64, 64, {0, 2, 2, 3, 8, 11, 19, 20, 21, 28, 32, 38, 40, 49, 50,
                                                               53, 53, 58, 60, 61, 65, 129, 130}}});
        cases.push_back({n + "/K64V32-T200", m, 0, kcv::gdn::Shape{1, 200, 2, 2, 64, 32, {}}});
        // Version 2 (bf16) on head sizes below the 128 of the tiles and on many short sequences.
        cases.push_back({n + "/K64V32-T200", m, 1, kcv::gdn::Shape{1, 200, 2, 2, 64, 32, {}}});
        cases.push_back({n + "/varlen-many-short", m, 1,
                         kcv::gdn::Shape{1, 130, 2, 4, 64, 64, {0, 2, 2, 3, 8, 11, 19, 20, 21, 28, 32, 38, 40, 49, 50,
                                                               53, 53, 58, 60, 61, 65, 129, 130}}});
        if (m.gate != GateKind::none) {
            cases.push_back({n + "/strong-decay", m, 0, kcv::gdn::Shape{1, 150, 1, 1, 128, 128, {}}, -8.0, -2.0});
            // The same in bf16, so that version 2 meets decays whose factors go subnormal.
            cases.push_back({n + "/strong-decay", m, 1, kcv::gdn::Shape{1, 150, 1, 1, 128, 128, {}}, -8.0, -2.0});
            cases.push_back({n + "/zero-gate", m, 1, kcv::gdn::Shape{1, 100, 1, 1, 128, 128, {}}, 0.0, 0.0});
        }
        // The split scans (gdn_launch.cuh): segments of three chunks asked for, over sequences of
        // 8 and 10 chunks, an empty one and one token; and the shape's own rule, which splits one
        // sequence of 32 chunks and one value head into 8 segments.
        cases.push_back({n + "/split-varlen", m, 1,
                         kcv::gdn::Shape{1, 1100, 1, 2, 128, 128, {0, 500, 500, 501, 1100}}, -1.0, 0.0, 3});
        cases.push_back({n + "/split-by-rule", m, 1, kcv::gdn::Shape{1, 2048, 1, 1, 128, 128, {}}});
    }
    if (mode == "--time-only") cases.clear();
    const int mma_failed = check_block_mma();
    int failed = 0;
    uint32_t seed = 7000;
    const auto t0 = std::chrono::steady_clock::now();
    for (const Case& c : cases) failed += run_case(c, ++seed) ? 0 : 1;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%d passed, %d failed (%.1f s); block_mma checks: %d failed\n", int(cases.size()) - failed, failed,
                secs, mma_failed);
    failed += mma_failed;
    if (timing) {
        time_versions(kcv::gdn::kGatedDeltaNet, 4, 4096, 32, 32);
        time_versions(kcv::gdn::kGatedDeltaNet, 1, 8192, 96, 96);
        time_versions(kcv::gdn::kGatedDeltaNet, 2, 16384, 16, 16);
        time_versions(kcv::gdn::kGatedDeltaNet, 1, 32768, 16, 32);
        time_versions(kcv::gdn::kKda, 4, 4096, 32, 32);
    }
    return failed == 0 ? 0 : 1;
}
