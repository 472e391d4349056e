// The guarded arena over host memory, for testing its logic where there is no GPU. peek and
// poke stand in for a kernel touching memory it was or was not given.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <memory>

#include "bindings.hpp"
#include "guarded_arena.hpp"

namespace kcv::py {
namespace {

struct HostArena {
    HostMemory mem;
    std::unique_ptr<GuardedArena> arena;
};

}  // namespace

void bind_arena(nb::module_& m) {
    nb::class_<HostArena>(m, "HostGuardedArena", "The guarded allocator's logic over host memory.")
        .def("__init__",
             [](HostArena* self, size_t guard_bytes, size_t quarantine_bytes) {
                 new (self) HostArena();
                 self->arena = std::make_unique<GuardedArena>(self->mem, ArenaConfig{guard_bytes, quarantine_bytes});
             },
             nb::arg("guard_bytes") = 4096, nb::arg("quarantine_bytes") = size_t(256) << 20)
        .def("allocate", [](HostArena& a, size_t bytes) {
            return reinterpret_cast<uintptr_t>(a.arena->allocate(bytes, 0, nullptr));
        }, nb::arg("bytes"))
        .def("release", [](HostArena& a, uintptr_t p) { a.arena->release(reinterpret_cast<void*>(p), nullptr); },
             nb::arg("data"))
        .def("set_poison",
             [](HostArena& a, const std::string& which, const std::string& poison) {
                 const Poison p = poison_from_json(nlohmann::json::parse(poison));
                 if (which == "fill") a.arena->set_fill_poison(p);
                 else if (which == "guard") a.arena->set_guard_poison(p);
                 else if (which == "freed") a.arena->set_freed_poison(p);
                 else throw nb::value_error("which: fill, guard or freed");
             },
             nb::arg("which"), nb::arg("poison"))
        .def("blocks", [](const HostArena& a, bool with_freed) { return blocks_json(*a.arena, with_freed).dump(); },
             nb::arg("with_freed") = false)
        .def("check", [](const HostArena& a) { return check_json(*a.arena).dump(); })
        .def("repoison",
             [](HostArena& a, uintptr_t p, const std::string& poison) {
                 return a.arena->repoison(p, poison_from_json(nlohmann::json::parse(poison)), nullptr);
             },
             nb::arg("data"), nb::arg("poison"))
        .def("repoison_guards", [](HostArena& a) { a.arena->repoison_guards(nullptr); })
        .def("drain", [](HostArena& a) { a.arena->drain(); })
        .def("allocations", [](const HostArena& a) { return a.arena->allocations(); })
        .def("peek", [](const HostArena&, uintptr_t p, size_t n) {
            return nb::bytes(reinterpret_cast<const char*>(p), n);
        }, nb::arg("address"), nb::arg("n"))
        .def("poke", [](HostArena&, uintptr_t p, nb::bytes data) {
            std::memcpy(reinterpret_cast<void*>(p), data.c_str(), data.size());
        }, nb::arg("address"), nb::arg("data"));
}

}  // namespace kcv::py
