// Decoding a contract tree (TOML or JSON, see document.hpp) into a Contract. Each field is
// checked alone here: its type, its range, and that enumerated words are known. How fields
// refer to each other (shape names, the oracle, unique names) is validate()'s job.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "document.hpp"
#include "kcv/contract.hpp"
#include "vocabulary.hpp"

namespace kcv {

namespace {

using contracts::Document;
using contracts::quote;
using contracts::Words;
using nlohmann::json;

std::string kind_of(const json& v) {
    switch (v.type()) {
    case json::value_t::object: return "a table";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a float";
    case json::value_t::null: return "null";
    default: return "an unsupported value";
    }
}

// One table of the tree: rejects keys it does not know, then hands out typed fields. Optional
// fields leave their output untouched when absent, so the struct's defaults stand.
class Fields {
public:
    Fields(const Document& doc, const json& table, std::string path, const Words& known)
        : Fields(doc, table, std::move(path)) {
        for (const auto& item : table_.items())
            if (!contracts::contains(known, item.key()))
                doc_.fail(at(item.key()), "unknown key " + quote(item.key()) + "; expected one of " +
                                              contracts::join(known) + contracts::did_you_mean(item.key(), known));
    }
    // A table whose keys are names the contract chooses ([attributes]).
    Fields(const Document& doc, const json& table, std::string path)
        : doc_(doc), table_(table), path_(std::move(path)) {
        if (!table_.is_object()) doc_.fail(path_, "must be a table, not " + kind_of(table_));
    }

    const Document& doc() const { return doc_; }
    const std::string& path() const { return path_; }
    std::string at(const std::string& key) const { return contracts::child_path(path_, key); }
    bool has(const char* key) const { return table_.contains(key); }
    const json& value(const char* key) const {
        if (!has(key)) doc_.fail(at(key), "missing required key " + quote(key));
        return table_.at(key);
    }
    [[noreturn]] void fail(const char* key, const std::string& problem) const { doc_.fail(at(key), problem); }

    std::string text(const char* key) const {
        const json& v = value(key);
        if (!v.is_string()) fail(key, "must be a string, not " + kind_of(v));
        return v.get<std::string>();
    }
    void text(const char* key, std::string& out) const {
        if (has(key)) out = text(key);
    }
    std::string identifier(const char* key) const {
        std::string s = text(key);
        if (!contracts::is_identifier(s))
            fail(key, quote(s) + " is not a name: use letters, digits and '_', not starting with a digit");
        return s;
    }
    // An enumerated word; `out` keeps its value when the key is absent.
    void word(const char* key, const Words& words, std::string& out) const {
        if (!has(key)) return;
        std::string s = text(key);
        if (!contracts::contains(words, s))
            fail(key, "unknown value " + quote(s) + "; expected one of " + contracts::join(words) +
                          contracts::did_you_mean(s, words));
        out = s;
    }
    void boolean(const char* key, bool& out) const {
        if (!has(key)) return;
        const json& v = value(key);
        if (!v.is_boolean()) fail(key, "must be true or false, not " + kind_of(v));
        out = v.get<bool>();
    }
    int64_t integer(const char* key, int64_t min) const {
        const json& v = value(key);
        if (!v.is_number_integer()) fail(key, "must be an integer, not " + kind_of(v));
        if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
            fail(key, "integer " + v.dump() + " is out of range");
        int64_t n = v.get<int64_t>();
        if (n < min) fail(key, "must be at least " + std::to_string(min) + ", not " + std::to_string(n));
        return n;
    }
    void integer(const char* key, int64_t min, int64_t& out) const {
        if (has(key)) out = integer(key, min);
    }
    double number(const char* key) const {
        const json& v = value(key);
        if (!v.is_number()) fail(key, "must be a number, not " + kind_of(v));
        if (v.is_number_unsigned()) return double(v.get<uint64_t>());
        if (v.is_number_integer()) return double(v.get<int64_t>());
        double d = v.get<double>();
        if (std::isnan(d)) fail(key, "must be a number, not NaN");
        return d;
    }
    void finite(const char* key, double& out) const {
        if (!has(key)) return;
        double d = number(key);
        if (!std::isfinite(d)) fail(key, "must be finite");
        out = d;
    }
    std::vector<std::string> strings(const char* key) const {
        const json& v = value(key);
        if (!v.is_array()) fail(key, "must be an array of strings, not " + kind_of(v));
        std::vector<std::string> out;
        for (size_t i = 0; i < v.size(); ++i) {
            if (!v[i].is_string())
                doc_.fail(contracts::element_path(at(key), i), "must be a string, not " + kind_of(v[i]));
            out.push_back(v[i].get<std::string>());
        }
        return out;
    }
    void strings(const char* key, std::vector<std::string>& out) const {
        if (has(key)) out = strings(key);
    }
    // A dimension name or a positive integer, as text: shapes and K expressions take either.
    std::string size_expr(const json& v, const std::string& path) const {
        if (v.is_string()) return v.get<std::string>();
        if (v.is_number_integer()) {
            if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
                doc_.fail(path, "integer " + v.dump() + " is out of range");
            int64_t n = v.get<int64_t>();
            if (n < 1) doc_.fail(path, "a size must be positive, not " + std::to_string(n));
            return std::to_string(n);
        }
        doc_.fail(path, "must be a dimension name or a positive integer, not " + kind_of(v));
    }
    std::vector<std::string> shape(const char* key) const {
        const json& v = value(key);
        if (!v.is_array()) fail(key, "must be an array of dimension names and sizes, not " + kind_of(v));
        std::vector<std::string> out;
        for (size_t i = 0; i < v.size(); ++i) out.push_back(size_expr(v[i], contracts::element_path(at(key), i)));
        return out;
    }
    DType dtype(const char* key) const {
        std::string s = text(key);
        try {
            return parse_dtype(s);
        } catch (const std::invalid_argument&) {
            fail(key, "unknown dtype " + quote(s) + "; expected one of " + contracts::join(contracts::dtype_words()) +
                          contracts::did_you_mean(s, contracts::dtype_words()));
        }
    }
    void dtype(const char* key, DType& out) const {
        if (has(key)) out = dtype(key);
    }
    // The elements of an array of tables ([[inputs]] in TOML), each with its path.
    std::vector<std::pair<const json*, std::string>> tables(const char* key) const {
        std::vector<std::pair<const json*, std::string>> out;
        if (!has(key)) return out;
        const json& v = value(key);
        if (!v.is_array()) fail(key, std::string("must be an array of tables ([[") + key + "]] in TOML), not " + kind_of(v));
        for (size_t i = 0; i < v.size(); ++i) out.emplace_back(&v[i], contracts::element_path(at(key), i));
        return out;
    }
    Fields table(const char* key, const Words& known) const {
        static const json empty = json::object();
        return Fields(doc_, has(key) ? value(key) : empty, at(key), known);
    }

private:
    const Document& doc_;
    const json& table_;
    std::string path_;
};

void decode_identity(const Fields& top, Contract& c) {
    Fields f = top.table("contract", {"id", "version", "scope"});
    c.id = f.text("id");
    if (!contracts::is_contract_id(c.id))
        f.fail("id", quote(c.id) + " is not an id: use letters, digits, '.', '_' and '-'");
    f.text("version", c.version);
    f.text("scope", c.scope);
}

Dim decode_dim(const Fields& top, const json& node, const std::string& path) {
    Fields f(top.doc(), node, path, {"name", "nominal", "free", "min", "max"});
    Dim d;
    d.name = f.identifier("name");
    d.nominal = f.integer("nominal", 1);
    f.boolean("free", d.free);
    f.integer("min", 1, d.min);
    f.integer("max", 1, d.max);
    return d;
}

Domain decode_domain(const Fields& input) {
    Fields f = input.table("domain", {"nonfinite", "subnormal", "lo", "hi", "structure"});
    Domain d;
    f.boolean("nonfinite", d.nonfinite);
    f.boolean("subnormal", d.subnormal);
    // Unbounded ends are written by leaving the key out (JSON has no infinity); a TOML file
    // may still spell them -inf and inf.
    if (f.has("lo")) {
        d.lo = f.number("lo");
        if (d.lo == std::numeric_limits<double>::infinity()) f.fail("lo", "a lower bound cannot be +inf");
    }
    if (f.has("hi")) {
        d.hi = f.number("hi");
        if (d.hi == -std::numeric_limits<double>::infinity()) f.fail("hi", "an upper bound cannot be -inf");
    }
    f.word("structure", contracts::structure_words(), d.structure);
    return d;
}

Distribution decode_distribution(const Fields& input) {
    Fields f = input.table("distribution", {"kind", "a", "b"});
    Distribution d;
    f.word("kind", contracts::distribution_words(), d.kind);
    f.finite("a", d.a);
    f.finite("b", d.b);
    return d;
}

InputSpec decode_input(const Fields& top, const json& node, const std::string& path) {
    Fields f(top.doc(), node, path, {"name", "dtype", "shape", "index", "domain", "distribution"});
    InputSpec in;
    in.name = f.identifier("name");
    in.dtype = f.dtype("dtype");
    in.shape = f.shape("shape");
    f.boolean("index", in.index);
    in.domain = decode_domain(f);
    in.distribution = decode_distribution(f);
    return in;
}

OutputSpec decode_output(const Fields& top, const json& node, const std::string& path) {
    Fields f(top.doc(), node, path, {"name", "dtype", "shape", "tolerance"});
    OutputSpec out;
    out.name = f.identifier("name");
    out.dtype = f.dtype("dtype");
    out.shape = f.shape("shape");
    f.value("tolerance");
    Fields t = f.table("tolerance", {"model", "k", "accumulator", "operand_roundings"});
    t.value("model");
    std::string model;
    t.word("model", contracts::error_model_words(), model);
    out.model = *contracts::error_model_from(model);
    if (t.has("k"))
        out.k = t.size_expr(t.value("k"), t.at("k"));
    else if (out.model == ErrorModelKind::reduction || out.model == ErrorModelKind::scan)
        t.fail("k", std::string("a ") + name(out.model) + " must declare its accumulation length k");
    t.dtype("accumulator", out.accumulator);
    if (t.has("operand_roundings")) {
        const int64_t n = t.integer("operand_roundings", 2);
        if (n > 64) t.fail("operand_roundings", "must be at most 64, not " + std::to_string(n));
        out.operand_roundings = static_cast<int>(n);
    }
    return out;
}

void decode_attributes(const Fields& top, Contract& c) {
    if (!top.has("attributes")) return;
    const json& table = top.value("attributes");
    Fields f(top.doc(), table, top.at("attributes"));
    for (const auto& item : table.items()) {
        const std::string& key = item.key();
        if (!contracts::is_identifier(key))
            f.fail(key.c_str(), quote(key) + " is not a name: use letters, digits and '_', not starting with a digit");
        double v = 0;
        f.finite(key.c_str(), v);
        c.attributes[key] = v;
    }
}

void decode_semantics(const Fields& top, Semantics& s) {
    Fields f = top.table("semantics", {"determinism", "in_place", "index_policy", "strided_inputs", "tf32_operands",
                                       "bf16_operands"});
    std::string determinism = name(s.determinism);
    f.word("determinism", contracts::determinism_words(), determinism);
    s.determinism = *contracts::determinism_from(determinism);
    f.strings("in_place", s.in_place);
    f.word("index_policy", contracts::index_policy_words(), s.index_policy);
    f.boolean("strided_inputs", s.strided_inputs);
    f.boolean("tf32_operands", s.tf32_operands);
    f.boolean("bf16_operands", s.bf16_operands);
}

void decode_oracle(const Fields& top, Contract& c) {
    top.value("oracle");
    Fields f = top.table("oracle", {"name", "controls"});
    c.oracle = f.text("name");
    f.strings("controls", c.controls);
}

void decode_measurement(const Fields& top, Measurement& m) {
    Fields f = top.table("measurement", {"seeds", "runs", "timeout_s", "memory_cap_bytes", "ord03_margin"});
    constexpr int64_t kMaxCount = 1000000;
    int64_t seeds = m.seeds, runs = m.runs;
    f.integer("seeds", 1, seeds);
    f.integer("runs", 1, runs);
    if (seeds > kMaxCount) f.fail("seeds", "more than " + std::to_string(kMaxCount) + " seeds");
    if (runs > kMaxCount) f.fail("runs", "more than " + std::to_string(kMaxCount) + " runs");
    m.seeds = int(seeds);
    m.runs = int(runs);
    f.finite("timeout_s", m.timeout_s);
    if (!(m.timeout_s > 0)) f.fail("timeout_s", "must be positive");
    f.integer("memory_cap_bytes", 1, m.memory_cap_bytes);
    if (f.has("ord03_margin")) {
        f.finite("ord03_margin", m.ord03_margin);
        if (!(m.ord03_margin >= 1))
            f.fail("ord03_margin", "must be at least 1: a margin below 1 fails the controls themselves");
    }
}

void decode_violation(const Fields& top, Contract& c) {
    Fields f = top.table("violation", {"signatures"});
    f.strings("signatures", c.violation_signatures);
    const Words& known = contracts::violation_words();
    for (size_t i = 0; i < c.violation_signatures.size(); ++i) {
        const std::string& s = c.violation_signatures[i];
        if (!contracts::contains(known, s))
            f.doc().fail(contracts::element_path(f.at("signatures"), i),
                         "unknown signature " + quote(s) + "; expected a gate id or a signature class: " +
                             contracts::join(known) + contracts::did_you_mean(s, known));
    }
}

Contract decode(const Document& doc) {
    Fields top(doc, doc.root(), "",
               {"contract", "dims", "inputs", "attributes", "outputs", "semantics", "oracle", "measurement", "violation"});
    Contract c;
    c.source = doc.source();
    top.value("contract");
    decode_identity(top, c);
    for (const auto& [node, path] : top.tables("dims")) c.dims.push_back(decode_dim(top, *node, path));
    top.value("inputs");
    for (const auto& [node, path] : top.tables("inputs")) c.inputs.push_back(decode_input(top, *node, path));
    if (c.inputs.empty()) top.fail("inputs", "a contract needs at least one input");
    decode_attributes(top, c);
    top.value("outputs");
    for (const auto& [node, path] : top.tables("outputs")) c.outputs.push_back(decode_output(top, *node, path));
    if (c.outputs.empty()) top.fail("outputs", "a contract needs at least one output");
    decode_semantics(top, c.semantics);
    decode_oracle(top, c);
    decode_measurement(top, c.measurement);
    decode_violation(top, c);
    return c;
}

}  // namespace

Contract parse_contract(const std::string& text, const std::string& source) {
    return decode(Document(text, source));
}

Contract load_contract(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw ContractError(path + ": cannot read contract file: is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ContractError(path + ": cannot read contract file: " + std::strerror(errno));
    // One byte past the limit is enough for the reader to report an oversized file.
    std::string text(Document::kMaxBytes + 1, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    if (in.bad()) throw ContractError(path + ": cannot read contract file: read error");
    text.resize(size_t(in.gcount()));
    return parse_contract(text, path);
}

}  // namespace kcv
