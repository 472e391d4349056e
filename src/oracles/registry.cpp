// The oracle registry: the built-in oracles by name, the ones other files add through
// OracleRegistrar (the recurrence family), and run_oracle, which widens the inputs exactly and
// allocates the outputs. The built-ins are listed here rather than self-registered so that no
// linker can drop them from a static library.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "registry.hpp"

namespace kcv {
namespace {

struct Entry {
    const char* name;
    OracleFn fn;
};

constexpr Entry kBuiltins[] = {
    {"matmul", oracles::matmul},           {"bmm", oracles::bmm},
    {"sum", oracles::sum},                 {"mean", oracles::mean},
    {"max", oracles::max},                 {"argmax", oracles::argmax},
    {"cumsum", oracles::cumsum},           {"softmax", oracles::softmax},
    {"log_softmax", oracles::log_softmax}, {"layernorm", oracles::layernorm},
    {"rmsnorm", oracles::rmsnorm},         {"relu", oracles::relu},
    {"gelu", oracles::gelu},               {"silu", oracles::silu},
    {"exp", oracles::exp},                 {"log", oracles::log},
    {"sqrt", oracles::sqrt},               {"reciprocal", oracles::reciprocal},
    {"div", oracles::div},                 {"gather", oracles::gather},
};

OracleFn find_builtin(const std::string& name) {
    for (const Entry& e : kBuiltins)
        if (name == e.name) return e.fn;
    return nullptr;
}

// Built on first use, so registrars in other files may run in any order during static
// initialisation.
std::map<std::string, OracleFn>& registered() {
    static std::map<std::string, OracleFn> table;
    return table;
}

}  // namespace

namespace oracles {

OracleRegistrar::OracleRegistrar(const char* name, OracleFn fn) {
    const std::string key = name ? name : "";
    if (key.empty() || fn == nullptr)
        throw std::logic_error("OracleRegistrar: an oracle needs a name and a function");
    if (find_builtin(key) != nullptr || registered().count(key) != 0)
        throw std::logic_error("OracleRegistrar: oracle '" + key + "' is registered twice");
    registered().emplace(key, fn);
}

}  // namespace oracles

OracleFn find_oracle(const std::string& name) {
    if (OracleFn fn = find_builtin(name)) return fn;
    const auto it = registered().find(name);
    return it == registered().end() ? nullptr : it->second;
}

std::vector<std::string> oracle_names() {
    std::vector<std::string> names;
    for (const Entry& e : kBuiltins) names.emplace_back(e.name);
    for (const auto& [name, fn] : registered()) names.push_back(name);
    std::sort(names.begin(), names.end());
    return names;
}

void run_oracle(const std::string& name, const std::vector<Tensor>& inputs,
                const std::map<std::string, double>& attributes,
                const std::vector<std::vector<int64_t>>& output_shapes,
                std::vector<Tensor>& outputs, std::vector<Tensor>& scales,
                const std::map<std::string, int64_t>& dims, const ExternalRunner* runner, double operand_floor) {
    const OracleFn fn = find_oracle(name);
    if (fn == nullptr && is_external_oracle(name)) {
        if (runner == nullptr)
            throw OracleError("oracle '" + name + "' runs outside libkcv: judge this contract through the caller " +
                              "that provides its runner (for external:kernelbench, kcv verify --reference)");
        outputs = (*runner)(dims, inputs);
        if (outputs.size() != output_shapes.size())
            throw OracleError("oracle '" + name + "' returned " + std::to_string(outputs.size()) + " outputs, " +
                              "expected " + std::to_string(output_shapes.size()));
        for (size_t j = 0; j < outputs.size(); ++j) {
            if (outputs[j].dtype != DType::f64 || outputs[j].shape != output_shapes[j])
                throw OracleError("oracle '" + name + "': output " + std::to_string(j) +
                                  " is not float64 of the probe's output shape");
        }
        scales.assign(outputs.size(), Tensor{});
        return;
    }
    if (fn == nullptr) {
        std::string known;
        for (const std::string& n : oracle_names()) known += (known.empty() ? "" : ", ") + n;
        throw OracleError("unknown oracle '" + name + "' (known: " + known + ")");
    }
    std::vector<Tensor> wide;
    wide.reserve(inputs.size());
    for (const Tensor& t : inputs) wide.push_back(info(t.dtype).is_float ? t.to_f64() : t);
    // Outputs start as all-ones bytes, a NaN in float64, so an element an oracle forgot to write
    // can never pass for a value.
    outputs.clear();
    scales.clear();
    for (const std::vector<int64_t>& shape : output_shapes) {
        outputs.push_back(Tensor::empty(DType::f64, shape, {}, Poison::bytes(0xFF)));
        scales.push_back(Tensor::empty(DType::f64, shape, {}, Poison::bytes(0xFF)));
    }
    fn(OracleArgs{wide, attributes, outputs, scales, operand_floor});
}

}  // namespace kcv
