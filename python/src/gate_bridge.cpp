// The gates, for candidates that Python runs: plan() hands out a gate's probes as JSON, the
// Python executor runs them, and judge() rebuilds kcv::ProbeOutcome from what it measured (the
// arrays are copied into kcv tensors as they arrive) and calls the gate's own judge(). Nothing
// here decides a verdict.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "external_contract.hpp"
#include "kcv/gate.hpp"
#include "kcv/oracle.hpp"
#include "tensor_convert.hpp"
#include "torch_environment.hpp"

namespace kcv::py {
namespace {

using nlohmann::json;

Settings settings_from(const std::string& text) {
    const json j = text.empty() ? json::object() : json::parse(text);
    Settings s;
    s.seed = j.value("seed", s.seed);
    s.c = j.value("c", s.c);
    s.envelope_factor = j.value("envelope_factor", s.envelope_factor);
    s.ord03_margin = j.value("ord03_margin", s.ord03_margin);
    s.quick = j.value("quick", s.quick);
    return s;
}

const GateDef& gate(const std::string& id) {
    const GateDef* g = find_gate(id);
    if (!g) throw nb::value_error(("unknown gate '" + id + "'").c_str());
    return *g;
}

// Probe outcomes under construction, in probe order.
struct Outcomes {
    std::vector<ProbeOutcome> probes;
};

std::vector<Tensor> tensors(const std::vector<HostArray>& arrays) {
    std::vector<Tensor> out;
    out.reserve(arrays.size());
    for (const auto& a : arrays) out.push_back(to_tensor(a));
    return out;
}

CallFacts facts_from(const json& j) {
    CallFacts f;
    f.status = j.value("status", 0);
    f.error = j.value("error", "");
    f.input_hash_before = j.value("input_hash_before", std::vector<uint64_t>{});
    f.input_hash_after = j.value("input_hash_after", std::vector<uint64_t>{});
    f.guard_damage = j.value("guard_damage", std::vector<std::string>{});
    for (const auto& r : j.value("input_ranges", json::array()))
        f.input_ranges.emplace_back(r.at(0).get<uintptr_t>(), r.at(1).get<uintptr_t>());
    for (const auto& r : j.value("output_ranges", json::array()))
        f.output_ranges.emplace_back(r.at(0).get<uintptr_t>(), r.at(1).get<uintptr_t>());
    f.seconds = j.value("seconds", 0.0);
    return f;
}

size_t add_probe(Outcomes& o, const Contract& c, const std::string& probe_json,
                 const std::vector<std::vector<int64_t>>& output_shapes, const std::string& error,
                 const std::vector<int64_t>& injected) {
    ProbeOutcome po;
    po.probe = probe_from_json(json::parse(probe_json));
    po.output_shapes = output_shapes;
    DimValues dims = nominal_dims(c);
    for (const auto& [k, v] : po.probe.dims) dims[k] = v;
    for (const OutputSpec& out : c.outputs) po.k.push_back(eval_dim_expr(out.k, dims));
    po.error = error;
    po.injected = injected;
    o.probes.push_back(std::move(po));
    return o.probes.size() - 1;
}

void add_call(Outcomes& o, size_t probe, size_t call, const std::vector<HostArray>& inputs,
              const std::vector<HostArray>& reference, const std::string& reference_error,
              const std::vector<HostArray>& outputs, const std::vector<std::vector<HostArray>>& controls,
              const std::vector<int>& control_status, const std::string& facts) {
    if (probe >= o.probes.size()) throw nb::index_error("no such probe");
    ProbeOutcome& po = o.probes[probe];
    if (call >= po.probe.calls.size()) throw nb::index_error("the probe plans fewer calls");
    CallOutcome co;
    co.spec = po.probe.calls[call];
    co.inputs = tensors(inputs);
    co.reference = tensors(reference);
    co.reference_error = reference_error;
    co.outputs = tensors(outputs);
    for (const auto& ctl : controls) co.controls.push_back(tensors(ctl));
    co.control_status = control_status;
    co.facts = facts_from(facts.empty() ? json::object() : json::parse(facts));
    po.calls.push_back(std::move(co));
}

std::string plan(const std::string& id, const Contract& c, const std::string& settings, const std::string& device) {
    const GateDef& g = gate(id);
    const Settings s = settings_from(settings);
    std::vector<Probe> probes = g.plan(c, s);
    if (id == "CMP-02" && external_oracle(c)) {
        const bool gpu = device.rfind("cuda", 0) == 0;
        for (Probe& p : torch_environment_probes(c, s, gpu)) probes.push_back(std::move(p));
    }
    json out = json::array();
    for (const Probe& p : probes) out.push_back(to_json(p));
    return out.dump();
}

// The caller's runner of an external oracle, a Python callable (dims: dict, inputs: list of
// tensors) -> list of float64 tensors; the arrays are copied both ways.
ExternalRunner python_runner(nb::object fn) {
    return [fn](const std::map<std::string, int64_t>& dims, const std::vector<Tensor>& inputs) {
        nb::dict d;
        for (const auto& [k, v] : dims) d[nb::str(k.c_str())] = v;
        nb::list xs;
        for (const Tensor& t : inputs) xs.append(to_torch(t));
        std::vector<Tensor> out;
        for (nb::handle y : fn(d, xs)) out.push_back(to_tensor(nb::cast<HostArray>(y)));
        return out;
    };
}

// A judge that throws met a verifier problem (a missing reference, a control that failed):
// the gate ends in verdict error with the message, never in a crash of the worker.
std::string judge(const std::string& id, const Contract& c, const std::string& settings, const Outcomes& o,
                  nb::object oracle) {
    const GateDef& g = gate(id);
    Settings s = settings_from(settings);
    const ExternalRunner runner = oracle.is_none() ? ExternalRunner{} : python_runner(oracle);
    if (runner) s.external_runner = &runner;
    GateResult r;
    try {
        r = g.judge(c, s, o.probes);
    } catch (const std::exception& e) {
        r = GateResult{};
        r.verdict = Verdict::error;
        r.code = "judge-error";
        r.reason = e.what();
    }
    r.id = g.id;
    r.probes = static_cast<int>(o.probes.size());
    return to_json(r).dump();
}

// kcv::ends_gate's result as JSON, or None where the gate goes on.
nb::object ends_gate(const std::string& id, const Contract& c, const std::string& settings, const Outcomes& o,
                     size_t remaining, nb::object oracle) {
    Settings s = settings_from(settings);
    const ExternalRunner runner = oracle.is_none() ? ExternalRunner{} : python_runner(oracle);
    if (runner) s.external_runner = &runner;
    const std::optional<GateResult> r = kcv::ends_gate(gate(id), c, s, o.probes, remaining);
    return r ? nb::object(nb::str(to_json(*r).dump().c_str())) : nb::none();
}

}  // namespace

void bind_gates(nb::module_& m) {
    nb::class_<Contract>(m, "Contract", "A validated contract; external oracles are accepted.")
        .def("__init__",
             [](Contract* self, const std::string& text, const std::string& source) {
                 new (self) Contract(read_contract(text, source));
             },
             nb::arg("text"), nb::arg("source") = "<python>")
        .def_prop_ro("id", [](const Contract& c) { return c.id; })
        .def_prop_ro("oracle", [](const Contract& c) { return c.oracle; })
        .def_prop_ro("external", [](const Contract& c) { return external_oracle(c); })
        .def("json", [](const Contract& c) { return to_json(c); });

    m.def("not_applicable", [](const std::string& id, const Contract& c) { return gate(id).not_applicable(c); },
          nb::arg("gate"), nb::arg("contract"));
    m.def("tolerance_free", [](const std::string& id) { return gate(id).tolerance_free; }, nb::arg("gate"));
    m.def("gate_name", [](const std::string& id) { return std::string(gate(id).name); }, nb::arg("gate"));
    m.def("plan", &plan, nb::arg("gate"), nb::arg("contract"), nb::arg("settings") = "", nb::arg("device") = "cpu");
    m.def(
        "plan",
        [](const std::string& id, const std::string& contract_json, const std::string& settings,
           const std::string& device) { return plan(id, read_contract(contract_json, "<json>"), settings, device); },
        nb::arg("gate"), nb::arg("contract_json"), nb::arg("settings") = "", nb::arg("device") = "cpu",
        "The gate's probes as JSON, for a contract document given as text.");

    nb::class_<Outcomes>(m, "Outcomes", "Probe outcomes measured by the Python executor, held as kcv tensors.")
        .def(nb::init<>())
        .def("__len__", [](const Outcomes& o) { return o.probes.size(); })
        .def("add_probe",
             [](Outcomes& o, const Contract& c, const std::string& probe, const std::vector<std::vector<int64_t>>& shapes,
                const std::string& error, const std::vector<int64_t>& injected) {
                 return add_probe(o, c, probe, shapes, error, injected);
             },
             nb::arg("contract"), nb::arg("probe"), nb::arg("output_shapes"), nb::arg("error") = "",
             nb::arg("injected") = std::vector<int64_t>{})
        .def("add_call", &add_call, nb::arg("probe"), nb::arg("call"), nb::arg("inputs"), nb::arg("reference"),
             nb::arg("reference_error"), nb::arg("outputs"), nb::arg("controls"), nb::arg("control_status"),
             nb::arg("facts"))
        .def("calls", [](const Outcomes& o, size_t probe) { return o.probes.at(probe).calls.size(); });

    m.def("judge", &judge, nb::arg("gate"), nb::arg("contract"), nb::arg("settings"), nb::arg("outcomes"),
          nb::arg("oracle") = nb::none(),
          "The gate's verdict on the outcomes; `oracle` runs an external oracle on inputs a gate makes.");
    m.def("ends_gate", &ends_gate, nb::arg("gate"), nb::arg("contract"), nb::arg("settings"), nb::arg("outcomes"),
          nb::arg("remaining"), nb::arg("oracle") = nb::none(),
          "The gate's result as JSON where the candidate's error has already failed it on the outcomes so far "
          "(`remaining` planned probes are then not run), else None.");
    m.def(
        "judge",
        [](const std::string& id, const std::string& contract_json, const std::string& settings, const Outcomes& o,
           nb::object oracle) { return judge(id, read_contract(contract_json, "<json>"), settings, o, oracle); },
        nb::arg("gate"), nb::arg("contract_json"), nb::arg("settings"), nb::arg("outcomes"),
        nb::arg("oracle") = nb::none());
}

}  // namespace kcv::py
