// Pieces every gate shares: default probes, evidence at an element, uniform results.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "gates/gate_common.hpp"
#include "kcv/rng.hpp"

namespace kcv::gates {

Probe make_probe(const Contract& c, const Settings& s, const std::string& gate, const std::string& label,
                 const DimValues& dims) {
    Probe p;
    p.gate = gate;
    p.id = gate + "/" + label;
    p.dims = nominal_dims(c);
    for (const auto& [k, v] : dims) p.dims[k] = v;
    CallSpec call;
    call.input_seed = derive_seed(s.seed, p.id.c_str());
    call.output_poison = Poison::bytes(0xFF);
    p.calls.push_back(call);
    return p;
}

std::string format_number(double v, const char* format) {
    char buf[48];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

std::string element_name(const std::string& name, const Tensor& t, int64_t i) {
    std::string s = name + "[";
    const auto coords = t.coords(i);
    for (size_t d = 0; d < coords.size(); ++d) s += (d ? "," : "") + std::to_string(coords[d]);
    return s + "]";
}

bool needs_controls(const Contract& c) {
    return std::any_of(c.outputs.begin(), c.outputs.end(),
                       [](const OutputSpec& o) { return o.model == ErrorModelKind::envelope; });
}

Evidence evidence_at(const ProbeOutcome& o, size_t call, size_t output, int64_t worst, int64_t first,
                     const std::string& signature, const Contract& c) {
    Evidence e;
    e.probe = o.probe.id;
    e.signature = signature;
    e.output = output < c.outputs.size() ? c.outputs[output].name : "";
    e.worst_index = worst;
    e.first_index = first;
    if (call >= o.calls.size()) return e;
    const CallOutcome& co = o.calls[call];
    if (output < co.outputs.size()) {
        const Tensor& y = co.outputs[output];
        if (worst >= 0 && worst < y.numel()) {
            e.worst_coords = y.coords(worst);
            e.actual = y.get(worst);
            e.actual_bits = bits_hex(y.dtype, y.bits(worst));
            if (output < co.reference.size()) {
                const DType t = y.dtype;
                const double ystar = co.reference[output].get(worst);
                e.expected = info(t).is_float ? round_to(t, ystar) : ystar;
                e.expected_bits = bits_hex(t, encode(t, e.expected));
                e.detail["expected_f64"] = ystar;
                e.detail["expected_f64_bits"] = bits_hex(DType::f64, encode(DType::f64, ystar));
            }
        }
        if (first >= 0 && first < y.numel()) e.first_coords = y.coords(first);
    }
    return e;
}

std::optional<BitDifference> first_bit_difference(const CallOutcome& a, const CallOutcome& b, const char* gate) {
    for (size_t j = 0; j < a.outputs.size() && j < b.outputs.size(); ++j) {
        const Tensor &x = a.outputs[j], &y = b.outputs[j];
        if (x.numel() != y.numel() || x.dtype != y.dtype) {
            throw std::logic_error(std::string(gate) + ": output " + std::to_string(j) +
                                   " changed shape or dtype between calls");
        }
        BitDifference d;
        d.output = j;
        for (int64_t i = 0; i < x.numel(); ++i) {
            if (x.bits(i) == y.bits(i)) continue;
            if (d.index < 0) d.index = i;
            ++d.count;
        }
        if (d.count > 0) return d;
    }
    return std::nullopt;
}

GateResult make_result(const GateDef& g) {
    GateResult r;
    r.id = g.id;
    r.verdict = Verdict::pass;
    return r;
}

bool probe_failed(const ProbeOutcome& o, GateResult& r) {
    if (o.error.empty()) return false;
    r.verdict = Verdict::error;
    r.code = "probe-failed";
    r.reason = o.probe.id + ": " + o.error;
    return true;
}

void add_signature(GateResult& r, const std::string& cls) {
    if (std::find(r.signature.begin(), r.signature.end(), cls) == r.signature.end()) r.signature.push_back(cls);
}

bool launch_error(GateResult& r, const ProbeOutcome& o, const CallOutcome& co) {
    if (co.facts.status == 0) return false;
    Evidence e;
    e.probe = o.probe.id;
    e.signature = "call returned status " + std::to_string(co.facts.status) +
                  (co.facts.error.empty() ? "" : ": " + co.facts.error);
    e.detail["status"] = co.facts.status;
    r.evidence.push_back(std::move(e));
    add_signature(r, "launch-error");
    return true;
}

}  // namespace kcv::gates
