// Seeds and records for the Python worker: probe seeds derive as libkcv derives them, and a
// record assembled in Python is normalised by libkcv's own record code (profiles, floors).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "kcv/record.hpp"
#include "kcv/rng.hpp"
#include "kcv/verify.hpp"

namespace kcv::py {

void bind_records(nb::module_& m) {
    m.def("derive_seed", [](uint64_t seed, const std::string& label, uint64_t n) {
        return derive_seed(seed, label.c_str(), n);
    }, nb::arg("seed"), nb::arg("label"), nb::arg("n") = 0);
    m.def("normalise_record", [](const std::string& record) {
        return to_json(record_from_json(nlohmann::json::parse(record))).dump();
    }, nb::arg("record"), "The record as libkcv writes it: failed gates, floors per profile, any_violation.");
    m.def("normalise_gate", [](const std::string& gate) {
        return to_json(gate_result_from_json(nlohmann::json::parse(gate))).dump();
    }, nb::arg("gate"), "The gate result as libkcv writes it (name, tolerance_free, ...).");
    m.def("file_hash", &file_hash, nb::arg("path"), "XXH3-128 of a file, hex; '' if unreadable.");
    m.def("profile_names", &profile_names);
}

}  // namespace kcv::py
