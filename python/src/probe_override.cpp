// A probe re-run with parts of its input overridden, for the worker's settings.probe_override
// (kcv disputes shrinks Python candidates with it; kcv verify --probe --dim replays them). The
// override is applied here by libkcv's apply(), as for native probes, so that Python never
// decides what a smaller or simpler input is.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "kcv/disputes.hpp"

namespace kcv::py {
namespace {

using nlohmann::json;

json problem(const std::string& code, const std::string& reason) {
    return {{"error", {{"code", code}, {"reason", reason}}}};
}

// {"probe": the probe with the override applied} or {"error": {"code", "reason"}}.
std::string apply_probe_override(const Contract& c, const std::string& probe_json, const std::string& override_json) {
    ProbeOverride o;
    Probe p;
    try {
        o = probe_override_from_json(json::parse(override_json));
        p = probe_from_json(json::parse(probe_json));
    } catch (const std::exception& e) {
        return problem("bad-override", e.what()).dump();
    }
    if (auto bad = override_problem(p.gate, c, o)) return problem(bad->code, bad->reason).dump();
    apply(p, o);
    return json{{"probe", to_json(p)}}.dump();
}

}  // namespace

void bind_probe_override(nb::module_& m) {
    m.def("apply_probe_override", &apply_probe_override, nb::arg("contract"), nb::arg("probe"), nb::arg("override"),
          "The probe (JSON) with a probe override (JSON: dims, family_scale, single_special) applied: "
          "'{\"probe\": ...}', or '{\"error\": {\"code\", \"reason\"}}' for a dimension the contract does not "
          "have or one outside its range.");
}

}  // namespace kcv::py
