// ORD-03 of the recurrence's bf16 and fp16 contracts, predicted without a GPU: the CUDA kernels'
// bf16 specialisation (dtype 1, the one the GPU runs for the bf16 contracts), fp16 specialisation
// (dtype 2) or float32 one (dtype 0, on bf16 values) under host emulation
// (gdn/cuda/host_emulation.hpp, whose mma truncates its sums as the tensor cores are measured to)
// on the contracts' inputs, 16-bit values rounded to their dtype, forward then backward, against
// the float64 oracle. For each output it prints ORD-03's ratio
// err(kernels) / max(err(control), 2u(out)), with err = max|y − y*| / max|y*| and the float32 CPU
// implementation as the control; 16-bit outputs are rounded to their dtype first, as the contracts
// declare them. A ratio over 1.2 fails ORD-03.
//
//   g++ -O2 -ffp-contract=off -std=c++20 -pthread -Iinclude bench/gdn_ord03_emulated.cpp \
//       gdn/oracle/gdn_oracle.cpp gdn/problem.cpp -o gdn_ord03_emulated
//   ./gdn_ord03_emulated [seeds] [member] [K] [dtype] [ht]   (defaults: 2, every member, 128,
//                                                             1 bf16; 2 is fp16)
//
// B1 T130 H2 HV4, K = V (128 as the contracts), one line per kernel version and seed. Version 2
// at K = 128 takes about a minute per member and seed on one core.
//
// With `ht` last, the forward alone, version 2 only, and the final state's errors beside both
// controls (the chunked one and the token-by-token recurrence in float32, the contracts' two):
// per seed, each one's err = max|ht − ht*| / max|ht*| in units of ORD-03's floor 2^-23 and its RMS
// error relative to max|ht*|; then ORD-03's ratio of the kernels against both controls and of each
// control against the other alone.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../gdn/cpu/gdn_chunked.cpp"
#include "../gdn/oracle/gdn_oracle.hpp"
#define KCV_GDN_HOST_EMULATION 1
#include "../gdn/cuda/host_run.hpp"

namespace {

using namespace kcv::gdn;

float to_bf16(float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&x, &b, 4);
    return x;
}

// The contracts' 16-bit dtype: fp16 for dtype 2, bf16 otherwise.
int io_dtype = 1;
float to_io(float x) { return io_dtype == 2 ? float(_Float16(x)) : to_bf16(x); }

using Tensors = cuda::emulation::RunOutputs;

struct Inputs {
    std::vector<float> q, k, v, g, beta, h0, d_o, dht;
};

double envelope_error(const std::vector<float>& y, const std::vector<double>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        num = std::max(num, std::abs(double(y[i]) - ref[i]));
        den = std::max(den, std::abs(ref[i]));
    }
    return num / (den + std::numeric_limits<double>::min());
}

// The contracts' 16-bit outputs, rounded.
void round_outputs(Tensors& t) {
    for (auto* x : {&t.o, &t.dq, &t.dk, &t.dv, &t.dbeta})
        for (float& e : *x) e = to_io(e);
}

Inputs draw(const Problem& p, uint32_t seed) {
    const Shape& s = p.shape;
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n01(0.0, 1.0);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    const double key_std = 1.0 / std::sqrt(double(s.K)), key_max = std::sqrt(2.0 / double(s.K));
    auto fill = [&](std::vector<float>& x, int64_t n, auto gen, bool io16) {
        x.resize(n);
        for (float& e : x) e = io16 ? to_io(float(gen())) : float(gen());
    };
    Inputs in;
    fill(in.q, s.qk_size(), [&] { return n01(rng); }, true);
    fill(in.k, s.qk_size(), [&] { return std::clamp(key_std * n01(rng), -key_max, key_max); }, true);
    fill(in.v, s.v_size(), [&] { return n01(rng); }, true);
    fill(in.g, s.g_size(p.member.gate), [&] { return -u01(rng); }, false);
    fill(in.beta, s.beta_size(), [&] { return u01(rng); }, true);
    fill(in.h0, s.state_size(), [&] { return n01(rng); }, false);
    fill(in.d_o, s.v_size(), [&] { return n01(rng); }, true);
    fill(in.dht, s.state_size(), [&] { return n01(rng); }, false);
    return in;
}

Tensors run_kernels(const Problem& p, const Inputs& in, int version, int dtype, bool backward = true) {
    Tensors out(p);
    const cuda::emulation::RunInputs ri{in.q.data(),    in.k.data(),  in.v.data(),   in.g.data(),
                                        in.beta.data(), in.h0.data(), in.d_o.data(), in.dht.data()};
    if (const int rc = cuda::emulation::run_member(
            p, ri, {.version = version, .dtype = dtype, .backward = backward}, out)) {
        std::fprintf(stderr, "the emulated launch sequence failed (%d)\n", rc);
        std::exit(1);
    }
    round_outputs(out);
    return out;
}

std::vector<double> widen(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

// The final state's errors of the kernels (version 2, forward only) and of both controls.
void final_state_line(const Problem& p, const Inputs& in, int seed, int dtype) {
    const Shape& s = p.shape;
    const auto q = widen(in.q), k = widen(in.k), v = widen(in.v), g = widen(in.g), beta = widen(in.beta),
               h0 = widen(in.h0);
    std::vector<double> o(s.v_size()), ht(s.state_size());
    forward(p, {q.data(), k.data(), v.data(), g.data(), beta.data(), h0.data(), o.data(), ht.data()});
    Tensors chunked(p), recurrent(p);
    cpu::chunked_forward(p, {in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), in.h0.data(),
                             chunked.o.data(), chunked.ht.data()});
    ForwardArgsF32 fa;
    fa.q = in.q.data(); fa.k = in.k.data(); fa.v = in.v.data(); fa.g = in.g.data(); fa.beta = in.beta.data();
    fa.h0 = in.h0.data(); fa.o = recurrent.o.data(); fa.ht = recurrent.ht.data();
    forward(p, fa);
    const Tensors kernels = run_kernels(p, in, 2, dtype, false);
    constexpr double floor = 0x1p-23;
    auto rms = [&](const std::vector<float>& y) {
        double ss = 0.0, den = 0.0;
        for (size_t i = 0; i < y.size(); ++i) {
            ss += (double(y[i]) - ht[i]) * (double(y[i]) - ht[i]);
            den = std::max(den, std::abs(ht[i]));
        }
        return std::sqrt(ss / double(y.size())) / den;
    };
    const double ek = envelope_error(kernels.ht, ht), ec = envelope_error(chunked.ht, ht),
                 er = envelope_error(recurrent.ht, ht);
    std::printf("%s seed %d ht err/2^-23: kernels %.3f chunked %.3f recurrent %.3f | RMS/1e-9: %.2f %.2f %.2f | "
                "ORD-03 ratio: kernels %.3f, chunked vs recurrent %.3f, recurrent vs chunked %.3f\n",
                member_name(p.member), seed, ek / floor, ec / floor, er / floor, rms(kernels.ht) * 1e9,
                rms(chunked.ht) * 1e9, rms(recurrent.ht) * 1e9, ek / std::max({ec, er, floor}),
                ec / std::max(er, floor), er / std::max(ec, floor));
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    const int seeds = argc > 1 ? std::atoi(argv[1]) : 2;
    const std::string only = argc > 2 ? argv[2] : "";
    const int64_t K = argc > 3 ? std::atoll(argv[3]) : 128;
    const int dtype = argc > 4 ? std::atoi(argv[4]) : 1;
    io_dtype = dtype;
    const bool ht_only = argc > 5 && std::string(argv[5]) == "ht";
    const double io_floor = dtype == 2 ? 0x1p-10 : 0x1p-7;   // 2u(fp16), 2u(bf16)
    const Shape s{1, 130, 2, 4, K, K, {}};
    for (Member m : all_members()) {
        if (!only.empty() && only != member_name(m)) continue;
        const Problem p{m, s, 1.0 / std::sqrt(double(K))};
        for (int seed = 0; seed < seeds; ++seed) {
            const Inputs in = draw(p, 1234u + uint32_t(seed));
            if (ht_only) {
                final_state_line(p, in, seed, dtype);
                continue;
            }
            const auto q = widen(in.q), k = widen(in.k), v = widen(in.v), g = widen(in.g), beta = widen(in.beta),
                       h0 = widen(in.h0), d_o = widen(in.d_o), dht = widen(in.dht);
            std::vector<double> o(s.v_size()), ht(s.state_size());
            forward(p, {q.data(), k.data(), v.data(), g.data(), beta.data(), h0.data(), o.data(), ht.data()});
            std::vector<double> dq(s.qk_size()), dk(s.qk_size()), dv(s.v_size()), dg(s.g_size(m.gate)),
                dbeta(s.beta_size()), dh0(s.state_size());
            BackwardArgs ba;
            ba.q = q.data(); ba.k = k.data(); ba.v = v.data(); ba.g = g.data(); ba.beta = beta.data();
            ba.h0 = h0.data(); ba.d_o = d_o.data(); ba.dht = dht.data(); ba.dq = dq.data(); ba.dk = dk.data();
            ba.dv = dv.data(); ba.dg = dg.data(); ba.dbeta = dbeta.data(); ba.dh0 = dh0.data();
            backward(p, ba);

            Tensors control(p);
            cpu::chunked_forward(p, {in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), in.h0.data(),
                                     control.o.data(), control.ht.data()});
            cpu::chunked_backward(p, {in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                      in.h0.data(), in.d_o.data(), in.dht.data(), control.dq.data(),
                                      control.dk.data(), control.dv.data(), control.dg.data(),
                                      control.dbeta.data(), control.dh0.data()});
            round_outputs(control);

            struct Output {
                const char* name;
                std::vector<float> Tensors::*field;
                const std::vector<double>* ref;
                double floor;   // 2u of the output's dtype
            };
            std::vector<Output> outputs = {{"o", &Tensors::o, &o, io_floor},     {"ht", &Tensors::ht, &ht, 0x1p-23},
                                           {"dq", &Tensors::dq, &dq, io_floor},  {"dk", &Tensors::dk, &dk, io_floor},
                                           {"dv", &Tensors::dv, &dv, io_floor},  {"dh0", &Tensors::dh0, &dh0, 0x1p-23}};
            if (m.gate != GateKind::none) outputs.push_back({"dg", &Tensors::dg, &dg, 0x1p-23});
            if (m.delta) outputs.push_back({"dbeta", &Tensors::dbeta, &dbeta, io_floor});
            std::printf("%s seed %d, control err:", member_name(m), seed);
            for (const Output& x : outputs) std::printf(" %s %.2e", x.name, envelope_error(control.*(x.field), *x.ref));
            std::printf("\n");
            for (int version : {1, 2}) {
                const Tensors kernels = run_kernels(p, in, version, dtype);
                std::printf("  version %d ORD-03 ratio:", version);
                for (const Output& x : outputs) {
                    const double envelope = std::max(envelope_error(control.*(x.field), *x.ref), x.floor);
                    std::printf(" %s %.2f", x.name, envelope_error(kernels.*(x.field), *x.ref) / envelope);
                }
                std::printf("\n");
                std::fflush(stdout);
            }
        }
    }
    return 0;
}
