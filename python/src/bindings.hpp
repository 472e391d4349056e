// The parts of kcv._core, one function per source file; module.cpp calls them in turn.
#pragma once

#include <nanobind/nanobind.h>

namespace kcv::py {

namespace nb = nanobind;

void bind_gates(nb::module_& m);         // gate_bridge.cpp: contracts, plan, judge
void bind_values(nb::module_& m);        // values.cpp: value families, special values
void bind_host_memory(nb::module_& m);   // host_memory.cpp: guarded host tensors, hashes
void bind_ambient(nb::module_& m);       // ambient.cpp: MXCSR
void bind_arena(nb::module_& m);         // arena_binding.cpp: the guarded arena over host memory
void bind_records(nb::module_& m);       // records.cpp: seeds and records
void bind_python_worker(nb::module_& m); // python_worker_binding.cpp: the sandbox of kcv.verify()
void bind_probe_override(nb::module_& m); // probe_override.cpp: a probe re-run with smaller inputs

}  // namespace kcv::py
