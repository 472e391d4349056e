// A contract as JSON, in the same tree the reader takes, so parse_contract(to_json(c)) == c.
// Every field is written, defaults included: a record states the whole contract it was judged
// under. The only omissions are the unbounded ends (domain lo/hi, dimension max), because JSON
// has no infinity; the reader restores them.
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "kcv/contract.hpp"

namespace kcv {

namespace {

using nlohmann::ordered_json;

// Shape entries and K values that are plain decimal integers are written as numbers, which is
// how a person writes them; anything else (a name, "04") stays a string so it reads back equal.
ordered_json size_value(const std::string& s) {
    if (s.empty() || s.size() > 18 || s[0] == '0') return s;
    for (char ch : s)
        if (ch < '0' || ch > '9') return s;
    return std::stoll(s);
}

ordered_json shape_value(const std::vector<std::string>& shape) {
    ordered_json out = ordered_json::array();
    for (const std::string& s : shape) out.push_back(size_value(s));
    return out;
}

// Attributes that hold integers (dim = -1, policy = 1) are written as integers.
ordered_json attribute_value(double v) {
    constexpr double kExact = 9007199254740992.0;   // 2^53
    if (v == std::trunc(v) && std::fabs(v) < kExact && !(v == 0 && std::signbit(v))) return int64_t(v);
    return v;
}

ordered_json dim_json(const Dim& d) {
    ordered_json j;
    j["name"] = d.name;
    j["nominal"] = d.nominal;
    j["free"] = d.free;
    j["min"] = d.min;
    if (d.max != std::numeric_limits<int64_t>::max()) j["max"] = d.max;
    return j;
}

ordered_json input_json(const InputSpec& in) {
    ordered_json j;
    j["name"] = in.name;
    j["dtype"] = name(in.dtype);
    j["shape"] = shape_value(in.shape);
    j["index"] = in.index;
    ordered_json domain;
    domain["nonfinite"] = in.domain.nonfinite;
    domain["subnormal"] = in.domain.subnormal;
    if (!std::isinf(in.domain.lo)) domain["lo"] = in.domain.lo;
    if (!std::isinf(in.domain.hi)) domain["hi"] = in.domain.hi;
    domain["structure"] = in.domain.structure;
    j["domain"] = domain;
    j["distribution"] = {{"kind", in.distribution.kind}, {"a", in.distribution.a}, {"b", in.distribution.b}};
    return j;
}

ordered_json output_json(const OutputSpec& out) {
    ordered_json j;
    j["name"] = out.name;
    j["dtype"] = name(out.dtype);
    j["shape"] = shape_value(out.shape);
    j["tolerance"] = {{"model", name(out.model)}, {"k", size_value(out.k)}, {"accumulator", name(out.accumulator)}};
    if (out.operand_roundings != 2) j["tolerance"]["operand_roundings"] = out.operand_roundings;
    return j;
}

}  // namespace

std::string to_json(const Contract& c) {
    ordered_json j;
    j["contract"] = {{"id", c.id}, {"version", c.version}, {"scope", c.scope}};
    j["dims"] = ordered_json::array();
    for (const Dim& d : c.dims) j["dims"].push_back(dim_json(d));
    j["inputs"] = ordered_json::array();
    for (const InputSpec& in : c.inputs) j["inputs"].push_back(input_json(in));
    j["attributes"] = ordered_json::object();
    for (const auto& [key, value] : c.attributes) j["attributes"][key] = attribute_value(value);
    j["outputs"] = ordered_json::array();
    for (const OutputSpec& out : c.outputs) j["outputs"].push_back(output_json(out));
    const Semantics& s = c.semantics;
    j["semantics"] = {{"determinism", name(s.determinism)},   {"in_place", s.in_place},
                      {"index_policy", s.index_policy},       {"strided_inputs", s.strided_inputs},
                      {"tf32_operands", s.tf32_operands},     {"bf16_operands", s.bf16_operands}};
    j["oracle"] = {{"name", c.oracle}, {"controls", c.controls}};
    const Measurement& m = c.measurement;
    j["measurement"] = {{"seeds", m.seeds},
                        {"runs", m.runs},
                        {"timeout_s", m.timeout_s},
                        {"memory_cap_bytes", m.memory_cap_bytes}};
    if (m.ord03_margin != 0) j["measurement"]["ord03_margin"] = m.ord03_margin;
    j["violation"] = {{"signatures", c.violation_signatures}};
    // A contract built in code may hold bytes that are not UTF-8; replace them rather than throw.
    return j.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace kcv
