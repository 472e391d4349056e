// CMP-01, shape polymorphism: a kernel must be correct at every shape of its domain, not only
// at the nominal one. Each free dimension is swept, one at a time with the others nominal, over
// sizes around powers of two and tile multiples (where tail masks and hard-coded sizes break);
// where the interface takes arbitrary strides, non-contiguous layouts and a one-element storage
// offset are probed at the nominal shape. Pass: every call succeeds and ORD-01 holds at every
// probe (the executor shapes the outputs, so a wrong output shape cannot arise).
//
// Each size probe may be served by a candidate that has seen no other shape (a KernelBench
// executor builds a module per size). So for each free dimension the sizes just below and just
// above the nominal one are probed once more by an instance first called at the nominal shape:
// a candidate that sizes buffers, grids or caches by the first call it serves fails there. The
// priming call belongs to the probe, so the probe replays on its own.
#include <algorithm>
#include <optional>
#include <string>

#include "gates/gate_common.hpp"
#include "kcv/rng.hpp"

namespace kcv::gates {
namespace {

constexpr const char* kGate = "CMP-01";

constexpr int64_t kSizes[] = {1, 2, 3, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4097};
// Quick mode keeps the sizes just past a power of two (tail masks) and the smallest.
constexpr int64_t kQuickSizes[] = {1, 17, 65, 129};

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

// Outputs under the envelope model are judged against the positive controls on the same inputs.
std::vector<Probe> plan(const Contract& c, const Settings& s) {
    std::vector<Probe> probes;
    const DimValues nominal = nominal_dims(c);
    const std::vector<int64_t> sizes = s.quick ? std::vector<int64_t>(std::begin(kQuickSizes), std::end(kQuickSizes))
                                               : std::vector<int64_t>(std::begin(kSizes), std::end(kSizes));
    for (const Dim& d : c.dims) {
        if (!d.free) continue;
        const int64_t at = nominal.at(d.name);
        std::optional<int64_t> below, above;
        for (int64_t v : sizes) {
            if (v < d.min || v > d.max || v == at) continue;
            DimValues dims = nominal;
            dims[d.name] = v;
            if (call_bytes(c, dims) > c.measurement.memory_cap_bytes) continue;
            const std::string label = d.name + "=" + std::to_string(v);
            Probe p = make_probe(c, s, kGate, label, {{d.name, v}});
            p.note = {{"signature_class", "fails at " + label}};
            p.with_controls = needs_controls(c);
            probes.push_back(std::move(p));
            if (v < at) below = v;
            else if (!above) above = v;
        }
        for (const std::optional<int64_t>& v : {below, above}) {
            if (!v) continue;
            const std::string label = d.name + "=" + std::to_string(*v);
            const std::string after = d.name + "=" + std::to_string(at);
            Probe p = make_probe(c, s, kGate, label + "/after-" + after, {{d.name, *v}});
            p.prime_dims = nominal;
            p.prime_seed = derive_seed(p.calls.front().input_seed, "prime");
            p.note = {{"signature_class", "fails at " + label + " after a call at " + after}};
            p.with_controls = needs_controls(c);
            probes.push_back(std::move(p));
        }
    }
    if (c.semantics.strided_inputs) {
        struct Variant {
            const char* label;
            Layout layout;
        };
        const Variant variants[] = {
            {"transposed", Layout{Layout::Kind::transposed, 0}},
            {"strided", Layout{Layout::Kind::strided, 0}},
            {"offset1", Layout{Layout::Kind::contiguous, 1}},
        };
        for (const Variant& v : variants) {
            Probe p = make_probe(c, s, kGate, std::string("layout=") + v.label);
            p.layout = v.layout;
            p.with_controls = needs_controls(c);
            p.note = {{"signature_class", std::string("layout ") + v.label}};
            probes.push_back(std::move(p));
        }
    }
    return probes;
}

GateResult judge(const Contract& c, const Settings& s, const std::vector<ProbeOutcome>& outcomes) {
    if (outcomes.empty()) {
        GateResult r = make_result(cmp01());
        r.verdict = Verdict::na;
        r.reason = "no size of the sweep lies within the domain and the memory cap";
        return r;
    }
    GateResult r = ord01().judge(c, s, outcomes);
    r.id = kGate;
    return r;
}

std::string not_applicable(const Contract& c) {
    const bool any_free = std::any_of(c.dims.begin(), c.dims.end(), [](const Dim& d) { return d.free; });
    if (!any_free && !c.semantics.strided_inputs) return "no free dimension and no strided interface";
    return "";
}

}  // namespace

const GateDef& cmp01() {
    static const GateDef def{kGate, "shape polymorphism", false, plan, judge, not_applicable};
    return def;
}

}  // namespace kcv::gates
