// Value families and special values for the inputs of a Python candidate, applied by libkcv:
// the executor hands over the values get_inputs() drew and gets back the probe's values.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "kcv/probe.hpp"
#include "task_values.hpp"
#include "tensor_convert.hpp"

namespace kcv::py {
namespace {

using nlohmann::json;

const InputSpec& input_of(const Contract& c, const std::string& name) {
    for (const InputSpec& in : c.inputs)
        if (in.name == name) return in;
    throw nb::key_error(("contract " + c.id + " has no input '" + name + "'").c_str());
}

// Families and specials travel in the JSON of a probe's override ({"family": ..., "specials": ...});
// reading them through probe_from_json keeps one decoder for both.
InputOverride override_from(const std::string& family_json, const std::string& specials_json) {
    json probe = {{"overrides", json::array({{{"input", ""}, {"family", json::parse(family_json)}}})}};
    if (!specials_json.empty()) probe["overrides"][0]["specials"] = json::parse(specials_json);
    return probe_from_json(probe).overrides.front();
}

}  // namespace

void bind_values(nb::module_& m) {
    m.def(
        "apply_family",
        [](const Contract& c, const std::string& input, const HostArray& task, const std::string& family, uint64_t seed) {
            Tensor t = to_tensor(task);
            apply_family(t, input_of(c, input), override_from(family, "").family, seed);
            return to_torch(t);
        },
        nb::arg("contract"), nb::arg("input"), nb::arg("values"), nb::arg("family"), nb::arg("seed"),
        "The probe's values for one input, from the task's values (a new CPU tensor).");
    m.def(
        "inject_specials",
        [](const Contract& c, const std::string& input, const HostArray& values, const HostArray& task,
           const std::string& specials, uint64_t seed) {
            Tensor t = to_tensor(values);
            const Tensor base = to_tensor(task);
            auto hit = inject_specials(t, base, input_of(c, input), *override_from("{}", specials).specials, seed);
            return std::make_pair(to_torch(t), hit);
        },
        nb::arg("contract"), nb::arg("input"), nb::arg("values"), nb::arg("task"), nb::arg("specials"), nb::arg("seed"),
        "Injects NaN/Inf/±0/±max (EXC-01); returns (values, logical indices changed).");
}

}  // namespace kcv::py
