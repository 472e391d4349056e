// The sandbox of kcv.verify(): libkcv's PythonWorker judges one request in `python -m kcv.worker`
// processes (restarting them after a crash or a hang), with the GIL released while it waits;
// its events reach a Python callback as dicts.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "engine/python_worker.hpp"

namespace kcv::py {

namespace {

std::string judge_python(const std::string& request, const WorkerConfig& cfg, double exit_grace_s,
                         const nb::object& on_event) {
    const nlohmann::json req = nlohmann::json::parse(request);
    const nb::object loads = nb::module_::import_("json").attr("loads");
    auto relay = [&](const nlohmann::json& event) {
        nb::gil_scoped_acquire acquire;
        // The GIL is free while the worker runs, so a pending Ctrl-C is noticed here, between events.
        if (PyErr_CheckSignals() != 0) throw nb::python_error();
        if (!on_event.is_none()) on_event(loads(event.dump()));
    };
    nlohmann::json record;
    {
        nb::gil_scoped_release release;
        // An exception (from the callback) unwinds through the worker, whose destructor kills it.
        PythonWorker worker(cfg);
        record = worker.judge(req, relay);
        worker.finish(exit_grace_s);
    }
    return record.dump();
}

}  // namespace

void bind_python_worker(nb::module_& m) {
    m.def(
        "judge_python_json",
        [](const std::string& request, const std::string& python, const std::map<std::string, std::string>& env,
           double stage_timeout_s, double load_timeout_s, double exit_grace_s, const nb::object& on_event) {
            WorkerConfig cfg;
            cfg.python = python;
            cfg.env = env;
            cfg.stage_timeout_s = stage_timeout_s;
            cfg.load_timeout_s = load_timeout_s;
            return judge_python(request, cfg, exit_grace_s, on_event);
        },
        nb::arg("request"), nb::kw_only(), nb::arg("python") = "python3",
        nb::arg("env") = std::map<std::string, std::string>{}, nb::arg("stage_timeout_s") = WorkerConfig{}.stage_timeout_s,
        nb::arg("load_timeout_s") = WorkerConfig{}.load_timeout_s, nb::arg("exit_grace_s") = 30.0,
        nb::arg("on_event") = nb::none(),
        "Judges one request (a JSON line of docs/kernelbench.md) in kcv.worker processes and returns the "
        "record as JSON. A crash or a hang fails the gate in progress and a fresh worker carries on; "
        "on_event(dict) receives every event.");
}

}  // namespace kcv::py
