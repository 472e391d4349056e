// EXC-01, non-finite propagation (tolerance-free). NaN, +Inf and -Inf are injected into the
// inputs whose domain admits them, scattered (0.5% and 1% of the positions) and in the
// structured patterns that real code gets wrong: a whole row of -Inf for a (masked) softmax,
// one NaN inside a long reduction, and, for elementwise maps, ±0 and ±max-finite.
//
// Judged per output element against y* rounded to the output dtype (so a finite y* beyond the
// dtype's range expects ±Inf, or NaN for e4m3fn): isnan(y) = isnan(ŷ*), isinf(y) = isinf(ŷ*),
// and equal signs where ŷ* = ±Inf. Integer outputs (argmax) must equal the reference's index
// exactly wherever the reduced row holds a NaN.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "gates/gate_common.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "EXC-01";

std::string num(double v) { return format_number(v, "%.6g"); }

bool admits_nonfinite(const InputSpec& in) { return !in.index && info(in.dtype).is_float && in.domain.nonfinite; }

bool all_elementwise(const Contract& c) {
    return !c.outputs.empty() && std::all_of(c.outputs.begin(), c.outputs.end(), [](const OutputSpec& o) {
               return o.model == ErrorModelKind::elementwise;
           });
}

// An output that accumulates (reduction or scan model), or that has fewer elements than a
// floating-point input at the nominal shape (argmax, max: it reduces that input).
bool any_reduction(const Contract& c) {
    const DimValues dims = nominal_dims(c);
    auto numel = [&dims](const std::vector<std::string>& shape) {
        int64_t n = 1;
        for (int64_t d : eval_shape(shape, dims)) n *= d;
        return n;
    };
    int64_t largest_input = 0;
    for (const auto& in : c.inputs)
        if (admits_nonfinite(in)) largest_input = std::max(largest_input, numel(in.shape));
    return std::any_of(c.outputs.begin(), c.outputs.end(), [&](const OutputSpec& o) {
        return o.model == ErrorModelKind::reduction || o.model == ErrorModelKind::scan ||
               numel(o.shape) < largest_input;
    });
}

Probe with_specials(const Contract& c, const Settings& s, const std::string& label, Specials sp) {
    Probe p = make_probe(c, s, kGate, label);
    // An empty input name reaches every floating-point input; the filler skips those whose
    // domain excludes non-finite values, and index inputs.
    p.overrides.push_back(InputOverride{"", p.family, sp});
    return p;
}

std::vector<Probe> plan(const Contract& c, const Settings& s) {
    std::vector<Probe> probes;
    const std::vector<std::string> nan_inf = {"nan", "+inf", "-inf"};
    probes.push_back(with_specials(c, s, "scattered-0.005", {Specials::Pattern::scattered, 0.005, nan_inf}));
    probes.push_back(with_specials(c, s, "scattered-0.01", {Specials::Pattern::scattered, 0.01, nan_inf}));
    // ±max-finite only for elementwise maps: in a reduction, max-finite terms can overflow a
    // correct fp32 accumulation, and whether that yields Inf or NaN depends on the order.
    if (all_elementwise(c))
        probes.push_back(
            with_specials(c, s, "signed-zero-max", {Specials::Pattern::scattered, 0.01, {"+0", "-0", "+max", "-max"}}));
    if (c.oracle == "softmax" || c.oracle == "log_softmax")
        probes.push_back(with_specials(c, s, "row-neg-inf", {Specials::Pattern::row_neg_inf, 0, {"-inf"}}));
    if (any_reduction(c)) probes.push_back(with_specials(c, s, "single-nan", {Specials::Pattern::single_nan, 0, {"nan"}}));
    return probes;
}

struct Mismatch {
    int64_t first = -1;
    int64_t count = 0;
};

// The class of a float element, or "" when it matches: NaN before Inf, since a NaN where an
// Inf belongs is a NaN that should not be there.
const char* float_class(double expected, double actual) {
    const bool en = std::isnan(expected), an = std::isnan(actual);
    if (en && !an) return "nan-swallowed";
    if (!en && an) return "nan-invented";
    if (en) return "";
    const bool ei = std::isinf(expected), ai = std::isinf(actual);
    if (ei && !ai) return "inf-lost";
    if (!ei && ai) return "inf-invented";
    if (ei && std::signbit(expected) != std::signbit(actual)) return "inf-sign";
    return "";
}

// The reduced axis of an index output over input 0, as the oracles read it: attribute "dim",
// the last axis by default.
struct Rows {
    int64_t outer = 1, n = 1, inner = 1;
    int64_t at(int64_t lane, int64_t k) const { return (lane / inner) * n * inner + k * inner + lane % inner; }
};

std::optional<Rows> rows_of(const Contract& c, const Tensor& x, int64_t lanes) {
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    if (rank == 0) return std::nullopt;
    int64_t dim = -1;
    if (auto it = c.attributes.find("dim"); it != c.attributes.end()) dim = static_cast<int64_t>(it->second);
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank) return std::nullopt;
    Rows r;
    for (int64_t i = 0; i < rank; ++i) {
        if (i < dim) r.outer *= x.shape[size_t(i)];
        else if (i == dim) r.n = x.shape[size_t(i)];
        else r.inner *= x.shape[size_t(i)];
    }
    if (r.outer * r.inner != lanes) return std::nullopt;
    return r;
}

struct Counts {
    int64_t checked = 0, expected_nan = 0, expected_inf = 0, nan_rows = 0;
};

GateResult judge(const Contract& c, const Settings&, const std::vector<ProbeOutcome>& outcomes) {
    GateResult r = make_result(exc01());
    r.probes = static_cast<int>(outcomes.size());
    Counts total;
    nlohmann::json per_probe = nlohmann::json::object();
    for (const ProbeOutcome& o : outcomes) {
        if (probe_failed(o, r)) return r;
        Counts counts;
        for (size_t k = 0; k < o.calls.size(); ++k) {
            const CallOutcome& co = o.calls[k];
            if (co.facts.status != 0) {
                Evidence e;
                e.probe = o.probe.id;
                e.signature = "launch-error: call " + std::to_string(k) + " returned status " +
                              std::to_string(co.facts.status) + (co.facts.error.empty() ? "" : ": " + co.facts.error);
                e.detail["status"] = co.facts.status;
                r.evidence.push_back(std::move(e));
                add_signature(r, "launch-error");
                break;
            }
            if (co.reference.size() != c.outputs.size() || co.outputs.size() != c.outputs.size())
                throw std::runtime_error("EXC-01: probe " + o.probe.id + " has no reference or outputs to compare" +
                                         (co.reference_error.empty() ? "" : ": " + co.reference_error));
            for (size_t j = 0; j < c.outputs.size(); ++j) {
                const Tensor& y = co.outputs[j];
                const Tensor& ref = co.reference[j];
                const std::string& out = c.outputs[j].name;
                if (info(y.dtype).is_float) {
                    std::map<std::string, Mismatch> found;
                    for (int64_t i = 0; i < y.numel(); ++i) {
                        const double expected = round_to(y.dtype, ref.get(i));
                        const double actual = y.get(i);
                        ++counts.checked;
                        counts.expected_nan += std::isnan(expected);
                        counts.expected_inf += std::isinf(expected);
                        const std::string cls = float_class(expected, actual);
                        if (cls.empty()) continue;
                        Mismatch& m = found[cls];
                        if (m.first < 0) m.first = i;
                        ++m.count;
                    }
                    for (const auto& [cls, m] : found) {
                        const double expected = round_to(y.dtype, ref.get(m.first));
                        const std::string sig = cls + ": " + element_name(out, y, m.first) + " = " + num(y.get(m.first)) +
                                                " (" + bits_hex(y.dtype, y.bits(m.first)) + ") where y* = " +
                                                num(ref.get(m.first)) + " rounds to " + num(expected) + "; " +
                                                std::to_string(m.count) + " such element" +
                                                (m.count == 1 ? "" : "s");
                        Evidence e = evidence_at(o, k, j, m.first, m.first, sig, c);
                        e.detail["count"] = m.count;
                        e.detail["call"] = k;
                        r.evidence.push_back(std::move(e));
                        add_signature(r, cls);
                    }
                    continue;
                }
                // An index output: exact wherever the reduced row of input 0 holds a NaN (the
                // oracle returns the first NaN's index, as PyTorch does).
                if (co.inputs.empty() || !info(co.inputs[0].dtype).is_float) continue;
                const Tensor& x = co.inputs[0];
                const auto rows = rows_of(c, x, y.numel());
                if (!rows) {
                    r.detail["index_outputs"] = "not judged: the reduced axis of " + out + " over input " +
                                                c.inputs[0].name + " could not be determined";
                    continue;
                }
                Mismatch m;
                for (int64_t lane = 0; lane < y.numel(); ++lane) {
                    bool has_nan = false;
                    for (int64_t q = 0; q < rows->n && !has_nan; ++q) has_nan = std::isnan(x.get(rows->at(lane, q)));
                    if (!has_nan) continue;
                    ++counts.nan_rows;
                    ++counts.checked;
                    if (y.get(lane) == ref.get(lane)) continue;
                    if (m.first < 0) m.first = lane;
                    ++m.count;
                }
                if (m.count == 0) continue;
                const double got = y.get(m.first);
                const bool in_row = got >= 0 && got < double(rows->n) && std::floor(got) == got;
                const std::string points_at =
                    in_row ? (std::isnan(x.get(rows->at(m.first, int64_t(got)))) ? "another NaN, not the first"
                                                                                  : "a value that is not NaN")
                           : "outside the row";
                Evidence e = evidence_at(o, k, j, m.first, m.first,
                                         "nan-swallowed: " + element_name(out, y, m.first) + " = " + num(got) + " (" +
                                             points_at + ") where the row holds a NaN and the reference's index is " +
                                             num(ref.get(m.first)) + "; " + std::to_string(m.count) + " such row" +
                                             (m.count == 1 ? "" : "s"),
                                         c);
                e.detail["count"] = m.count;
                e.detail["call"] = k;
                r.evidence.push_back(std::move(e));
                add_signature(r, "nan-swallowed");
            }
        }
        per_probe[o.probe.id] = {{"injected", o.injected.size()},
                                 {"checked", counts.checked},
                                 {"expected_nan", counts.expected_nan},
                                 {"expected_inf", counts.expected_inf},
                                 {"nan_rows", counts.nan_rows}};
        total.checked += counts.checked;
        total.expected_nan += counts.expected_nan;
        total.expected_inf += counts.expected_inf;
    }
    r.detail["probes"] = per_probe;
    if (!r.evidence.empty()) {
        r.verdict = Verdict::fail;
        r.reason = r.evidence.front().signature;
    } else {
        r.verdict = Verdict::pass;
        r.reason = "NaN and Inf positions and Inf signs equal the reference's at " + std::to_string(total.checked) +
                   " elements (" + std::to_string(total.expected_nan) + " NaN, " + std::to_string(total.expected_inf) +
                   " Inf expected)";
    }
    return r;
}

std::string not_applicable(const Contract& c) {
    if (std::any_of(c.inputs.begin(), c.inputs.end(), admits_nonfinite)) return "";
    return "no input's domain admits NaN or Inf (fairness rule 4)";
}

}  // namespace

const GateDef& exc01() {
    static const GateDef def{kGate, "non-finite propagation", true, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
