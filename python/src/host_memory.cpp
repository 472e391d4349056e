// Host memory for the inputs a Python candidate receives on the CPU: each input lives in a
// kcv::GuardedBuffer between poisoned guard bands (RES-01), exposed to torch without a copy, so
// a write past either end is found after the call. Also the content hash of ORD-02.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "kcv/buffer.hpp"
#include "kcv/dtype.hpp"
#include "kcv/probe.hpp"
#include "tensor_convert.hpp"

namespace kcv::py {
namespace {

Poison poison_from(const std::string& text) {
    // A poison is written as in a probe: {"byte": 165} or {"random": seed}.
    nlohmann::json probe = {{"guard_poison", nlohmann::json::parse(text)}};
    return probe_from_json(probe).guard_poison;
}

struct GuardedHostTensor {
    DType dtype;
    std::vector<int64_t> shape;
    std::shared_ptr<GuardedBuffer> buf;
};

std::string describe(const std::string& what, const std::vector<GuardDamage>& damage) {
    std::string s;
    for (const GuardDamage& d : damage) {
        if (!s.empty()) s += "; ";
        s += what + ": " + (d.before ? "band before" : "band after") + ", first changed byte at +" +
             std::to_string(d.first_offset) + ", " + std::to_string(d.bytes_changed) + " bytes changed";
    }
    return s;
}

}  // namespace

void bind_host_memory(nb::module_& m) {
    nb::class_<GuardedHostTensor>(m, "GuardedHostTensor",
                                  "A host tensor between guard bands; .tensor() is a torch view of its data.")
        .def("__init__",
             [](GuardedHostTensor* self, const std::string& dtype, const std::vector<int64_t>& shape,
                size_t guard_bytes, const std::string& guard_poison) {
                 const DType t = parse_dtype(dtype);
                 int64_t n = 1;
                 for (int64_t d : shape) {
                     if (d < 0) throw nb::value_error("negative dimension");
                     n *= d;
                 }
                 auto buf = std::make_shared<GuardedBuffer>(static_cast<size_t>(n) * info(t).storage_bytes,
                                                            guard_bytes, poison_from(guard_poison));
                 new (self) GuardedHostTensor{t, shape, std::move(buf)};
             },
             nb::arg("dtype"), nb::arg("shape"), nb::arg("guard_bytes") = GuardedBuffer::kDefaultGuard,
             nb::arg("guard_poison") = R"({"byte": 165})")
        .def("tensor",
             [](nb::handle_t<GuardedHostTensor> self) {
                 GuardedHostTensor& g = nb::cast<GuardedHostTensor&>(self);
                 std::vector<size_t> shape(g.shape.begin(), g.shape.end());
                 const DLDataType d = to_dlpack(g.dtype);
                 nb::ndarray<nb::pytorch> arr(g.buf->data(), shape.size(), shape.data(), self, nullptr,
                                              nb::dlpack::dtype{d.code, d.bits, d.lanes}, nb::device::cpu::value);
                 return nb::cast(arr);
             })
        .def("check_guards", [](const GuardedHostTensor& g, const std::string& what) {
            return describe(what, g.buf->check_guards());
        }, nb::arg("what"), "Damage to the guard bands as one line, '' when both are intact.")
        .def("poison_guards", [](GuardedHostTensor& g, const std::string& p) { g.buf->poison_guards(poison_from(p)); },
             nb::arg("poison"))
        .def("poison", [](GuardedHostTensor& g, const std::string& p) { g.buf->poison(poison_from(p)); },
             nb::arg("poison"), "Fills the data with a poison.")
        .def_prop_ro("guard_bytes", [](const GuardedHostTensor& g) { return g.buf->guard_size(); })
        .def_prop_ro("address", [](const GuardedHostTensor& g) { return reinterpret_cast<uintptr_t>(g.buf->data()); });

    m.def("content_hash", [](const HostArray& a) { return to_tensor(a).hash(); }, nb::arg("array"),
          "XXH3-64 of the array's logical elements, as Tensor::hash computes it.");
    m.def("to_kcv_and_back", [](const HostArray& a) { return to_torch(to_tensor(a)); }, nb::arg("array"),
          "Round trip through a kcv tensor (tests of the conversion).");
}

}  // namespace kcv::py
