// kcv._core: libkcv for Python. Thin: it converts arguments and returns records as JSON text,
// which the Python layer parses; the judging stays in C++.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "../../gdn/python/gdn_bindings.hpp"
#include "bindings.hpp"
#include "kcv/contract.hpp"
#include "kcv/redteam.hpp"
#include "kcv/verify.hpp"

namespace nb = nanobind;

namespace {

kcv::VerifyOptions options(uint64_t seed, bool quick, const std::string& kernel_dir) {
    kcv::VerifyOptions o;
    o.settings.seed = seed;
    o.settings.quick = quick;
    o.kernel_dir = kernel_dir;
    return o;
}

}  // namespace

NB_MODULE(_core, m) {
    m.doc() = "libkcv: contracts, gates and records";
    m.attr("__version__") = KCV_VERSION;
    m.def("builtin_contract_ids", &kcv::builtin_contract_ids);
    m.def("contract_json", [](const std::string& id) { return kcv::to_json(kcv::resolve_contract(id)); },
          nb::arg("id_or_path"));
    m.def("gate_ids", [] {
        std::vector<std::string> ids;
        for (const auto& g : kcv::all_gates()) ids.push_back(g.id);
        return ids;
    });
    m.def(
        "verify_native_json",
        [](const std::string& contract, const std::string& candidate, uint64_t seed, bool quick,
           const std::string& kernel_dir) {
            kcv::Contract c = kcv::resolve_contract(contract);
            kcv::validate(c);
            nb::gil_scoped_release release;
            return kcv::to_json(kcv::verify(c, candidate, options(seed, quick, kernel_dir))).dump();
        },
        nb::arg("contract"), nb::arg("candidate"), nb::arg("seed") = 0, nb::arg("quick") = false,
        nb::arg("kernel_dir") = "");
    m.def(
        "redteam_json",
        [](uint64_t seed, bool quick, const std::string& kernel_dir) {
            nb::gil_scoped_release release;
            return kcv::to_json(kcv::run_redteam(options(seed, quick, kernel_dir))).dump();
        },
        nb::arg("seed") = 0, nb::arg("quick") = false, nb::arg("kernel_dir") = "");

    kcv::py::bind_gates(m);
    kcv::py::bind_values(m);
    kcv::py::bind_host_memory(m);
    kcv::py::bind_ambient(m);
    kcv::py::bind_arena(m);
    kcv::py::bind_records(m);
    kcv::py::bind_python_worker(m);
    kcv::py::bind_probe_override(m);
    kcv::gdn::bind_oracle(m);
}
