// PRC-01, accumulator precision: the error of a reduction must grow like the declared
// accumulator allows (c·u(acc)·√K·s), not like a narrower one. Probes sweep the reduction length
// K over {256, 1024, 4096, 16384} where a free dimension sets it, with all-positive U(0, 1)
// operands (every partial sum grows, so a narrow accumulator swamps), plus one probe of a single
// repeated value at the largest K (a narrow accumulator stagnates). Pass: ORD-01 holds at
// every K.
//
// On a failure the gate explains it: it fits the slope of log(err/s) against log(K) over the
// positive probes (0.5: errors of random sign, the √K of a correct summation in a narrower
// format; 1 and more: error ∝ K, or an accumulator that stagnates) and names the accumulator
// whose unit roundoff is nearest 2√3·(err/s)/√K at the smallest failing K: f16 for 2^-11, bf16
// for 2^-8, f32 for 2^-24.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "contracts/dim_expr.hpp"
#include "gates/gate_common.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "PRC-01";
constexpr int64_t kSweep[] = {256, 1024, 4096, 16384};
constexpr int64_t kQuickSweep[] = {256, 1024};

std::string num(double v, const char* f = "%.4g") { return format_number(v, f); }

// Bytes of the inputs and outputs of one call at these dimensions, in their dtypes.
int64_t call_bytes(const Contract& c, const DimValues& dims) {
    int64_t total = 0;
    auto add = [&](DType t, const std::vector<std::string>& shape) {
        int64_t n = info(t).storage_bytes;
        for (int64_t d : eval_shape(shape, dims)) n *= d;
        total += n;
    };
    for (const InputSpec& in : c.inputs) add(in.dtype, in.shape);
    for (const OutputSpec& out : c.outputs) add(out.dtype, out.shape);
    return total;
}

// The first free dimension named in an output's accumulation-length expression, or "".
std::string swept_dim(const Contract& c) {
    for (const OutputSpec& o : c.outputs) {
        for (const contracts::DimFactor& f : contracts::parse_dim_expr(o.k)) {
            if (const Dim* d = f.name.empty() ? nullptr : c.dim(f.name); d && d->free) return d->name;
        }
    }
    return "";
}

// Outputs under the envelope model are judged against the positive controls on the same inputs.
std::vector<Probe> plan(const Contract& c, const Settings& s) {
    struct Point {
        std::string label;
        DimValues dims;
    };
    std::vector<Point> points;
    if (const std::string dim = swept_dim(c); !dim.empty()) {
        const Dim& d = *c.dim(dim);
        const std::vector<int64_t> sweep = s.quick ? std::vector<int64_t>(std::begin(kQuickSweep), std::end(kQuickSweep))
                                                   : std::vector<int64_t>(std::begin(kSweep), std::end(kSweep));
        for (int64_t v : sweep) {
            if (v < d.min || v > d.max) continue;
            DimValues dims = nominal_dims(c);
            dims[dim] = v;
            if (call_bytes(c, dims) > c.measurement.memory_cap_bytes) continue;
            points.push_back({dim + "=" + std::to_string(v), {{dim, v}}});
        }
    }
    if (points.empty()) points.push_back({"nominal", {}});

    std::vector<Probe> probes;
    for (const Point& pt : points) {
        Probe p = make_probe(c, s, kGate, pt.label + "/positive", pt.dims);
        p.family = Family::of(Family::Kind::positive);
        p.note = {{"fit", true}};
        p.with_controls = needs_controls(c);
        probes.push_back(std::move(p));
    }
    Probe p = make_probe(c, s, kGate, points.back().label + "/repeated", points.back().dims);
    p.family = Family::of(Family::Kind::repeated);
    p.with_controls = needs_controls(c);
    probes.push_back(std::move(p));
    return probes;
}

// max_i |y_i − y*_i| / s_i over the analytic outputs of a probe's first call, with the K of the
// output where it occurs; 0 where the probe cannot enter the fit (non-finite y, no scale).
struct GrowthPoint {
    int64_t k = 0;
    double err_over_scale = 0;
};

GrowthPoint growth_point(const Contract& c, const ProbeOutcome& o) {
    GrowthPoint g;
    if (!o.error.empty() || o.calls.empty()) return g;
    const CallOutcome& co = o.calls.front();
    if (co.facts.status != 0 || co.reference.size() != c.outputs.size() || co.scale.size() != c.outputs.size())
        return g;
    for (size_t out = 0; out < c.outputs.size(); ++out) {
        if (c.outputs[out].model == ErrorModelKind::envelope || out >= o.k.size()) continue;
        const Tensor& y = co.outputs[out];
        const Tensor& ystar = co.reference[out];
        const Tensor& scale = co.scale[out];
        for (int64_t i = 0; i < ystar.numel(); ++i) {
            const double ys = ystar.get(i), si = scale.get(i);
            if (!std::isfinite(ys) || !(si > 0)) continue;
            const double e = std::fabs(y.get(i) - ys) / si;
            if (!std::isfinite(e)) return GrowthPoint{};
            if (e > g.err_over_scale) g = {o.k[out], e};
        }
    }
    return g;
}

struct Fit {
    double slope = std::nan("");
    double u_log2 = std::nan("");
    DType implied = DType::f32;
    nlohmann::json points = nlohmann::json::array();
};

// The failing probes' ids, so that the accumulator is estimated where the error first shows.
bool failed(const GateResult& r, const std::string& probe) {
    return std::any_of(r.evidence.begin(), r.evidence.end(), [&](const Evidence& e) { return e.probe == probe; });
}

Fit fit_growth(const Contract& c, const std::vector<ProbeOutcome>& outcomes, const GateResult& r) {
    Fit f;
    std::vector<std::pair<double, double>> xy;   // (log2 K, log2 err/s)
    GrowthPoint estimate_at, largest;
    for (const ProbeOutcome& o : outcomes) {
        if (!(o.probe.note.is_object() && o.probe.note.value("fit", false))) continue;
        const GrowthPoint g = growth_point(c, o);
        if (!(g.err_over_scale > 0) || g.k < 1) continue;
        f.points.push_back({{"probe", o.probe.id}, {"k", g.k}, {"err_over_scale", g.err_over_scale}});
        xy.push_back({std::log2(double(g.k)), std::log2(g.err_over_scale)});
        if (g.k >= largest.k) largest = g;
        if (failed(r, o.probe.id) && (estimate_at.k == 0 || g.k < estimate_at.k)) estimate_at = g;
    }
    if (xy.empty()) return f;
    double mx = 0, my = 0;
    for (auto [x, y] : xy) mx += x, my += y;
    mx /= double(xy.size());
    my /= double(xy.size());
    double sxx = 0, sxy = 0;
    for (auto [x, y] : xy) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my);
    if (sxx > 0) f.slope = sxy / sxx;
    // The unit roundoff is estimated at the smallest K that fails: at larger K a narrow
    // accumulator stagnates (err/s tends to 1) and says nothing more about its precision. There,
    // a recursive sum of positive terms whose partial sums average s/2, each rounded with an error
    // uniform in ±u·partial, drifts by about u·s·√K/(2√3): u ≈ 2√3·(err/s)/√K.
    if (estimate_at.k == 0) estimate_at = largest;
    f.u_log2 = std::log2(2 * std::sqrt(3.0) * estimate_at.err_over_scale) - 0.5 * std::log2(double(estimate_at.k));
    double best = INFINITY;
    for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
        const double d = std::fabs(std::log2(info(t).unit_roundoff) - f.u_log2);
        if (d < best) best = d, f.implied = t;
    }
    return f;
}

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = ord01().judge(c, s, outcomes);
    r.id = kGate;
    if (r.verdict != Verdict::fail) return r;
    const Fit f = fit_growth(c, outcomes, r);
    if (f.points.empty()) return r;

    DType declared = DType::f32;
    for (const OutputSpec& o : c.outputs)
        if (o.model != ErrorModelKind::envelope) declared = o.accumulator;
    const std::string growth = std::isnan(f.slope) ? "one size only" : "err/s grows like K^" + num(f.slope, "%.2f");
    const std::string line = std::string("implied accumulator ") + name(f.implied) + " (u ~ 2^" + num(f.u_log2, "%.1f") +
                             ", " + growth + "; declared " + name(declared) + ")";
    r.reason = line + "; " + r.reason;
    std::replace(r.signature.begin(), r.signature.end(), std::string("error-bound"),
                 std::string("implied-accumulator:") + name(f.implied));
    if (!r.evidence.empty()) r.evidence.front().signature = line + ": " + r.evidence.front().signature;
    if (!std::isnan(f.slope)) r.detail["slope"] = f.slope;
    r.detail["implied_u_log2"] = f.u_log2;
    r.detail["implied_accumulator"] = name(f.implied);
    r.detail["declared_accumulator"] = name(declared);
    r.detail["points"] = f.points;
    return r;
}

std::string not_applicable(const Contract& c) {
    if (!swept_dim(c).empty()) return "";
    const DimValues dims = nominal_dims(c);
    for (const OutputSpec& o : c.outputs)
        if (eval_dim_expr(o.k, dims) > 1) return "";
    return "no reduction: K = 1";
}

}  // namespace

const GateDef& prc01() {
    static const GateDef def{kGate, "accumulator precision", false, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
