// EXC-02, subnormal handling (tolerance-free). Two kinds of probe:
//
// - daz-input: one input at a time filled with subnormals of its dtype (the others keep the
//   task's distribution). Elementwise maps then give subnormal or tiny results, reductions and
//   products give results that exist only because the subnormal inputs count; a kernel that
//   treats them as zero flushes the former and fails ORD-01 on the latter.
// - ftz-output: normal inputs whose exact result is subnormal in the output dtype and is not
//   the residue of a cancellation. Built per oracle: exp and softmax arguments in the
//   underflow range of exp, a reciprocal or a quotient with a large divisor (one rounding), a
//   product of same-sign operands scaled by a power of two.
//
// Judged exactly: wherever y* rounds to a nonzero subnormal of the output dtype, y must be
// nonzero with y*'s sign. Only positions where |y*| exceeds the ORD-01 bound τ_i are judged: a
// kernel within ORD-01 there cannot return zero or the wrong sign, so a zero is a flush and not
// a rounding (an elementwise map such as 0.5·x legitimately rounds x = 2^-149 to 0). A zero
// carries the probe's class. On daz-input probes ORD-01 must also hold. An ORD-01 failure, a NaN
// or a wrong sign is classed daz-input only where flushing subnormals (inputs or intermediate
// results) to zero explains the call; otherwise it carries ORD-01's class.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "gates/gate_common.hpp"
#include "kcv/oracle.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "EXC-02";
constexpr const char* kDaz = "daz-input";
constexpr const char* kFtz = "ftz-output";

std::string num(double v) { return format_number(v, "%.6g"); }

bool has_subnormals(DType t) { return info(t).is_float && info(t).has_subnormals; }

bool daz_eligible(const InputSpec& in) { return !in.index && has_subnormals(in.dtype) && in.domain.subnormal; }

// Oracles whose results subnormal inputs move by less than one ulp (exp(x) = 1 + x,
// softmax and log-softmax of near-zero logits): a kernel treating them as zero is exact.
bool daz_informative(const std::string& oracle) {
    return oracle != "exp" && oracle != "softmax" && oracle != "log_softmax";
}

enum class Construction { none, exp_underflow, reciprocal, divisor, products };

Construction ftz_construction(const std::string& oracle) {
    if (oracle == "exp" || oracle == "softmax") return Construction::exp_underflow;
    if (oracle == "reciprocal") return Construction::reciprocal;
    if (oracle == "div") return Construction::divisor;
    if (oracle == "matmul" || oracle == "bmm") return Construction::products;
    return Construction::none;
}

// floor(log2 v) for a positive finite v, without libm.
int floor_log2(double v) {
    int e = 0;
    std::frexp(v, &e);   // v = m·2^e, m in [0.5, 1): exact
    return e - 1;
}

// The largest magnitude the task's distribution produces: four standard deviations for the
// normal kinds, the bound of the interval for the others.
double reach(const Distribution& d) {
    if (d.kind == "normal") return std::fabs(d.a) + 4 * d.b;
    if (d.kind == "logits") return 4 * std::fabs(d.b);
    return std::max(std::fabs(d.a), std::fabs(d.b));
}

std::vector<size_t> float_inputs(const Contract& c) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < c.inputs.size(); ++i)
        if (!c.inputs[i].index && info(c.inputs[i].dtype).is_float) idx.push_back(i);
    return idx;
}

Probe probe_of(const Contract& c, const Settings& s, const char* kind, const std::string& label) {
    Probe p = make_probe(c, s, kGate, label);
    p.note = {{"kind", kind}};
    p.with_controls = needs_controls(c);
    return p;
}

void set_family(Probe& p, const Contract& c, size_t input, Family f) {
    p.overrides.push_back(InputOverride{c.inputs[input].name, f, std::nullopt});
}

// The ftz-output probe for the contract's oracle, if one applies.
std::optional<Probe> ftz_probe(const Contract& c, const Settings& s) {
    if (c.outputs.empty() || !has_subnormals(c.outputs[0].dtype)) return std::nullopt;
    const DTypeInfo& out = info(c.outputs[0].dtype);
    const std::vector<size_t> fin = float_inputs(c);
    if (fin.empty()) return std::nullopt;
    const int emin = floor_log2(out.min_normal);
    switch (ftz_construction(c.oracle)) {
        case Construction::none: return std::nullopt;
        case Construction::exp_underflow: {
            // N(0, 1)·|ln(min normal)| puts a few percent of the arguments (of exp, or of
            // x - max(x) in softmax) where exp lands among the subnormals, e.g. (-103.9, -87.3)
            // for fp32. ln 2 times the exponent keeps libm out of the probe's values.
            Probe p = probe_of(c, s, kFtz, "ftz-output/exp-underflow");
            p.family = Family::of(Family::Kind::band, -emin * 0.6931471805599453);
            return p;
        }
        case Construction::reciprocal:
        case Construction::divisor: {
            // The argument (or divisor) times S, the largest power of two that keeps the task's
            // reach finite: 1/(x·S) is then subnormal wherever |x| > 1/(S·min_normal), which is
            // within a factor max·min_normal (about 4 in every IEEE format) of the reach. One
            // rounding, no cancellation.
            const bool div = ftz_construction(c.oracle) == Construction::divisor;
            const size_t at = div && fin.size() > 1 ? fin[1] : fin[0];
            const double r = reach(c.inputs[at].distribution);
            if (!(r > 0) || !std::isfinite(r)) return std::nullopt;
            const double scale = std::ldexp(1.0, floor_log2(info(c.inputs[at].dtype).max_finite / r));
            Probe p = probe_of(c, s, kFtz, div ? "ftz-output/large-divisor" : "ftz-output/large-argument");
            set_family(p, c, at, Family::of(Family::Kind::band, scale));
            return p;
        }
        case Construction::products: {
            // Operands U(0, σ) with σ² ≤ min_normal/(2K), σ a power of two: every product and
            // every partial sum has the same sign, so the exact result (at most K·σ², below
            // min normal) cannot be a cancellation residue; a flushed product is lost whole.
            if (fin.size() < 2) return std::nullopt;
            const int64_t k = eval_dim_expr(c.outputs[0].k, nominal_dims(c));
            if (k <= 0) return std::nullopt;
            const int e = floor_log2(out.min_normal / (2.0 * double(k)));
            const double sigma = std::ldexp(1.0, e >= 0 ? e / 2 : -((1 - e) / 2));
            Probe p = probe_of(c, s, kFtz, "ftz-output/products");
            p.note["sigma"] = sigma;
            for (size_t i : fin) set_family(p, c, i, Family::of(Family::Kind::positive, sigma));
            return p;
        }
    }
    return std::nullopt;
}

std::vector<Probe> plan(const Contract& c, const Settings& s) {
    std::vector<Probe> probes;
    if (daz_informative(c.oracle)) {
        std::vector<size_t> eligible;
        for (size_t i = 0; i < c.inputs.size(); ++i)
            if (daz_eligible(c.inputs[i])) eligible.push_back(i);
        if (s.quick && eligible.size() > 1) eligible.resize(1);
        for (size_t i : eligible) {
            Probe p = probe_of(c, s, kDaz, eligible.size() == 1 ? kDaz : std::string(kDaz) + "/" + c.inputs[i].name);
            set_family(p, c, i, Family::of(Family::Kind::subnormal));
            probes.push_back(std::move(p));
        }
    }
    if (auto p = ftz_probe(c, s)) probes.push_back(std::move(*p));
    return probes;
}

// Judged subnormal results that were lost, per class.
struct Losses {
    int64_t first = -1, count = 0;
};

// The class of a lost subnormal result. A zero is a flush: the probe's class. A NaN or a
// nonzero of the wrong sign is a flush's doing only on a daz-input probe whose call flushing
// explains (a sum of products of which some underflowed can change sign); otherwise it carries
// ORD-01's class, which no profile accepts.
std::string loss_class(const std::string& kind, double v, bool flush_explains) {
    if (v == 0 || (kind == kDaz && flush_explains)) return kind;
    return std::isnan(v) ? "nonfinite-output" : "error-bound";
}

// Whether flushing explains a daz-input call that fails ORD-01. Two hypotheses, either suffices:
// - denormals-are-zero: the reference recomputed from the call's inputs with every subnormal of
//   the probe's input replaced by a zero of its sign is within the analytic bound of the output
//   (this is how log of a subnormal becomes -Inf);
// - flush-to-zero of intermediate results: each of the K_i terms of an element (and its partial
//   sum) that underflows loses less than the accumulator's smallest normal, and the rounding to
//   the output dtype less than the output's, so |y - y*| ≤ τ_i + 2·K_i·min_normal(acc) +
//   min_normal(out); where K_i = 1, a flush only moves the result towards zero, so also
//   |y| ≤ |y*| + τ_i. A kernel that keeps subnormals but loses accuracy by more fails both.
bool explained_by_flush(const Contract& c, const Settings& s, const ProbeOutcome& o, const CallOutcome& co) {
    bool ftz = true;
    for (size_t j = 0; j < c.outputs.size() && j < co.outputs.size() && ftz; ++j) {
        const Tensor& y = co.outputs[j];
        const Tensor& ref = co.reference[j];
        const bool has_scale = j < co.scale.size() && co.scale[j].buf != nullptr;
        const ErrorModelParams p = params_for(c, j, s.c);
        const int64_t k = j < o.k.size() ? o.k[j] : eval_dim_expr(c.outputs[j].k, o.probe.dims);
        const double acc_min = info(c.outputs[j].accumulator).is_float ? info(c.outputs[j].accumulator).min_normal : 0;
        const double out_min = info(y.dtype).is_float ? info(y.dtype).min_normal : 0;
        const double flush = 2 * double(k) * acc_min + out_min;
        for (int64_t i = 0; i < y.numel() && ftz; ++i) {
            const double ys = ref.get(i);
            if (!std::isfinite(ys)) continue;
            const double v = y.get(i);
            const double tau = analytic_tau(p, k, has_scale ? co.scale[j].get(i) : std::fabs(ys), std::fabs(ys));
            ftz = std::fabs(v - ys) <= tau + flush && (k > 1 || std::fabs(v) <= std::fabs(ys) + tau);
        }
    }
    if (ftz) return true;

    if (o.probe.overrides.empty()) return false;
    const std::string& flushed = o.probe.overrides.front().input;
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < co.inputs.size(); ++i) {
        inputs.push_back(co.inputs[i].clone());
        if (i >= c.inputs.size() || c.inputs[i].name != flushed) continue;
        Tensor& t = inputs.back();
        for (int64_t e = 0; e < t.numel(); ++e) {
            const FpClass fc = classify(t.dtype, t.bits(e));
            if (fc == FpClass::pos_subnormal) t.set(e, 0.0);
            if (fc == FpClass::neg_subnormal) t.set(e, -0.0);
        }
    }
    std::vector<Tensor> ref, scale;
    run_oracle(c.oracle, inputs, c.attributes, o.output_shapes, ref, scale, o.probe.dims, s.external_runner,
               operand_floor(c));
    for (size_t j = 0; j < c.outputs.size() && j < co.outputs.size(); ++j) {
        const int64_t k = j < o.k.size() ? o.k[j] : eval_dim_expr(c.outputs[j].k, o.probe.dims);
        if (!analytic_ratio(co.outputs[j], ref.at(j), scale.at(j), k, params_for(c, j, s.c)).pass())
            return false;
    }
    return true;
}

struct Counts {
    int64_t subnormal = 0;   // positions where y* rounds to a nonzero subnormal
    int64_t judged = 0;      // of those, where |y*| exceeds the ORD-01 bound
};

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = make_result(exc02());
    r.probes = static_cast<int>(outcomes.size());
    auto add = [&r](const std::string& cls, Evidence e) {
        if (std::find(r.signature.begin(), r.signature.end(), cls) == r.signature.end()) r.signature.push_back(cls);
        r.evidence.push_back(std::move(e));
    };
    Counts total;
    int daz_calls = 0;
    nlohmann::json per_probe = nlohmann::json::object();
    for (const ProbeOutcome& o : outcomes) {
        if (probe_failed(o, r)) return r;
        const std::string kind = o.probe.note.is_object() ? o.probe.note.value("kind", "") : "";
        if (kind != kDaz && kind != kFtz) throw std::logic_error("EXC-02: probe " + o.probe.id + " has no kind");
        Counts counts;
        for (size_t call = 0; call < o.calls.size(); ++call) {
            const CallOutcome& co = o.calls[call];
            if (co.facts.status != 0) {
                Evidence e;
                e.probe = o.probe.id;
                e.signature = "launch-error: call " + std::to_string(call) + " returned status " +
                              std::to_string(co.facts.status) + (co.facts.error.empty() ? "" : ": " + co.facts.error);
                e.detail["status"] = co.facts.status;
                add("launch-error", std::move(e));
                break;
            }
            if (co.reference.size() != c.outputs.size() || co.outputs.size() != c.outputs.size())
                throw std::runtime_error("EXC-02: probe " + o.probe.id + " has no reference or outputs to compare" +
                                         (co.reference_error.empty() ? "" : ": " + co.reference_error));
            std::optional<bool> flush_explains;   // computed on the first loss that needs it
            for (size_t j = 0; j < c.outputs.size(); ++j) {
                const Tensor& y = co.outputs[j];
                if (!has_subnormals(y.dtype)) continue;
                const Tensor& ref = co.reference[j];
                const bool has_scale = j < co.scale.size() && co.scale[j].buf != nullptr;
                const ErrorModelParams p = params_for(c, j, s.c);
                const int64_t k = j < o.k.size() ? o.k[j] : eval_dim_expr(c.outputs[j].k, o.probe.dims);
                std::map<std::string, Losses> lost;
                for (int64_t i = 0; i < y.numel(); ++i) {
                    const double ys = ref.get(i);
                    if (!std::isfinite(ys)) continue;
                    const FpClass rc = classify(y.dtype, encode(y.dtype, ys));
                    if (rc != FpClass::pos_subnormal && rc != FpClass::neg_subnormal) continue;
                    ++counts.subnormal;
                    // τ_i of GATES.md's analytic model.
                    const double tau =
                        analytic_tau(p, k, has_scale ? co.scale[j].get(i) : std::fabs(ys), std::fabs(ys));
                    if (!(std::fabs(ys) > tau)) continue;
                    ++counts.judged;
                    const double v = y.get(i);
                    if (!std::isnan(v) && v != 0 && std::signbit(v) == std::signbit(ys)) continue;
                    if (v != 0 && kind == kDaz && !flush_explains)
                        flush_explains = explained_by_flush(c, s, o, co);
                    Losses& l = lost[loss_class(kind, v, flush_explains.value_or(false))];
                    if (l.first < 0) l.first = i;
                    ++l.count;
                }
                for (const auto& [cls, l] : lost) {
                    const int64_t i = l.first;
                    const double ys = ref.get(i);
                    const double v = y.get(i);
                    const std::string seen = std::isnan(v) ? "NaN" : v == 0 ? (std::signbit(v) ? "-0" : "+0")
                                                                            : num(v) + " (wrong sign)";
                    const std::string sig = cls + ": " + element_name(c.outputs[j].name, y, i) + " = " + seen + " (" +
                                            bits_hex(y.dtype, y.bits(i)) + ") where y* = " + num(ys) +
                                            " rounds to the subnormal " + bits_hex(y.dtype, encode(y.dtype, ys)) + "; " +
                                            std::to_string(l.count) + " judged subnormal result" +
                                            (l.count == 1 ? "" : "s") + " lost this way";
                    Evidence e = evidence_at(o, call, j, i, i, sig, c);
                    e.detail["call"] = call;
                    e.detail["count"] = l.count;
                    add(cls, std::move(e));
                }
            }
            if (kind == kDaz) {
                ++daz_calls;
                NumericCheck nc = check_outputs(c, s, o, call);
                if (!nc.pass) {
                    if (!flush_explains) flush_explains = explained_by_flush(c, s, o, co);
                    const bool daz = *flush_explains;
                    const std::string cls =
                        daz ? std::string(kDaz) : std::isfinite(nc.evidence.actual) ? "error-bound" : "nonfinite-output";
                    nc.evidence.signature = cls + ": with subnormal inputs, ORD-01 fails" +
                                            (daz ? " and flushing subnormals to zero explains the output: "
                                                 : ", and flushing subnormals to zero does not explain the output: ") +
                                            nc.evidence.signature;
                    nc.evidence.detail["call"] = call;
                    nc.evidence.detail["explained_by_flush"] = daz;
                    add(cls, std::move(nc.evidence));
                }
            }
        }
        per_probe[o.probe.id] = {{"kind", kind}, {"subnormal_results", counts.subnormal}, {"judged", counts.judged}};
        total.subnormal += counts.subnormal;
        total.judged += counts.judged;
    }
    r.detail["probes"] = per_probe;
    if (!r.evidence.empty()) {
        r.verdict = Verdict::fail;
        r.reason = r.evidence.front().signature;
    } else if (total.judged == 0 && daz_calls == 0) {
        r.verdict = Verdict::na;
        r.reason = "no probe produced a subnormal result that a correct kernel must keep (" +
                   std::to_string(total.subnormal) + " subnormal results, none beyond the ORD-01 bound)";
    } else {
        r.verdict = Verdict::pass;
        r.reason = std::to_string(total.judged) + " subnormal results kept with their sign" +
                   (daz_calls ? "; ORD-01 holds on subnormal inputs" : "");
    }
    return r;
}

std::string not_applicable(const Contract& c) {
    const bool out_sub = std::any_of(c.outputs.begin(), c.outputs.end(),
                                     [](const OutputSpec& o) { return has_subnormals(o.dtype); });
    const bool in_sub = std::any_of(c.inputs.begin(), c.inputs.end(), daz_eligible);
    if (!out_sub && !in_sub)
        return "no output dtype has subnormals and no input admits them (fairness rule 5)";
    const bool daz = in_sub && daz_informative(c.oracle);
    const bool ftz = out_sub && ftz_construction(c.oracle) != Construction::none;
    if (!daz && !ftz)
        return "oracle " + c.oracle +
               ": subnormal inputs move its results by less than one ulp, and no normal input gives a "
               "subnormal result that is not a cancellation residue";
    return "";
}

}  // namespace

const GateDef& exc02() {
    static const GateDef def{kGate, "subnormal handling", true, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
