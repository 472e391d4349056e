// validate(): the checks that look at more than one field. parse_contract has already checked
// each field alone, but contracts built in code get every check here too, so ranges are
// re-checked where a wrong value would mislead a gate.
#include <cmath>
#include <set>

#include "dim_expr.hpp"
#include "kcv/contract.hpp"
#include "kcv/error_model.hpp"
#include "kcv/oracle.hpp"
#include "vocabulary.hpp"

namespace kcv {

namespace {

using contracts::quote;

class Checker {
public:
    explicit Checker(const Contract& c) : c_(c) {}

    void run() {
        identity();
        dims();
        names();
        for (size_t i = 0; i < c_.inputs.size(); ++i) input(i);
        for (size_t i = 0; i < c_.outputs.size(); ++i) output(i);
        index_semantics();
        in_place();
        oracle_and_controls();
        measurement();
        violation();
        unused_dims();
    }

private:
    [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
        throw ContractError(contracts::contract_message(c_.source, 0, path, problem));
    }
    static std::string at(const std::string& parent, const std::string& key) {
        return contracts::child_path(parent, key);
    }
    static std::string at(const std::string& parent, size_t index) { return contracts::element_path(parent, index); }

    void identity() const {
        if (!contracts::is_contract_id(c_.id)) fail("contract.id", quote(c_.id) + " is not an id");
    }

    // Names go into sets first: a contract may be large (the reader is fuzzed), and lookups
    // must not grow with the product of two list lengths.
    void dims() {
        for (size_t i = 0; i < c_.dims.size(); ++i) {
            const Dim& d = c_.dims[i];
            std::string path = at("dims", i);
            if (!contracts::is_identifier(d.name)) fail(at(path, "name"), quote(d.name) + " is not a name");
            if (!dim_names_.insert(d.name).second) fail(at(path, "name"), "duplicate dimension " + quote(d.name));
            if (d.min < 1) fail(at(path, "min"), "must be at least 1");
            if (!(d.min <= d.nominal && d.nominal <= d.max))
                fail(path, "nominal " + std::to_string(d.nominal) + " is outside [min " + std::to_string(d.min) +
                               ", max " + std::to_string(d.max) + "]");
        }
    }

    // Inputs and outputs are the arguments of one call, so their names share one namespace.
    void names() {
        std::set<std::string> outputs;
        auto check = [&](const std::string& name, const std::string& path, std::set<std::string>& into) {
            if (!contracts::is_identifier(name)) fail(at(path, "name"), quote(name) + " is not a name");
            if (input_names_.count(name) || !into.insert(name).second)
                fail(at(path, "name"), "duplicate name " + quote(name));
        };
        for (size_t i = 0; i < c_.inputs.size(); ++i) check(c_.inputs[i].name, at("inputs", i), input_names_);
        for (size_t i = 0; i < c_.outputs.size(); ++i) check(c_.outputs[i].name, at("outputs", i), outputs);
    }

    std::string dim_list() const {
        constexpr size_t kShown = 20;
        contracts::Words names;
        for (size_t i = 0; i < c_.dims.size() && i < kShown; ++i) names.push_back(c_.dims[i].name);
        if (c_.dims.size() > kShown) names.push_back("...");
        return names.empty() ? "no dimensions are declared" : "dimensions are " + contracts::join(names);
    }

    // A shape entry is one dimension name or one positive integer.
    void shape(const std::vector<std::string>& shape, const std::string& path) {
        for (size_t i = 0; i < shape.size(); ++i) {
            std::vector<contracts::DimFactor> factors;
            try {
                factors = contracts::parse_dim_expr(shape[i]);
            } catch (const ContractError& e) {
                fail(at(path, i), e.what());
            }
            if (factors.size() != 1)
                fail(at(path, i), quote(shape[i]) + " is not a dimension name or a positive integer");
            use(factors[0], at(path, i));
        }
    }

    void use(const contracts::DimFactor& f, const std::string& path) {
        if (f.name.empty()) return;
        if (!dim_names_.count(f.name)) fail(path, "unknown dimension " + quote(f.name) + "; " + dim_list());
        used_.insert(f.name);
    }

    void input(size_t i) {
        const InputSpec& in = c_.inputs[i];
        std::string path = at("inputs", i);
        shape(in.shape, at(path, "shape"));
        const Domain& d = in.domain;
        std::string domain = at(path, "domain");
        if (std::isnan(d.lo) || std::isnan(d.hi) || !(d.lo <= d.hi))
            fail(domain, "lo must not exceed hi");
        if (!contracts::contains(contracts::structure_words(), d.structure))
            fail(at(domain, "structure"), "unknown structure " + quote(d.structure));
        distribution(in.distribution, d, at(path, "distribution"));
        if (in.index) {
            if (info(in.dtype).is_float || in.dtype == DType::boolean)
                fail(at(path, "dtype"), "index input " + quote(in.name) + " must have an integer dtype, not " +
                                            name(in.dtype));
            if (in.distribution.kind != "integer")
                fail(at(at(path, "distribution"), "kind"),
                     "index input " + quote(in.name) + " must draw from an \"integer\" distribution");
        }
    }

    void distribution(const Distribution& dist, const Domain& domain, const std::string& path) const {
        const std::string& kind = dist.kind;
        if (!contracts::contains(contracts::distribution_words(), kind))
            fail(at(path, "kind"), "unknown distribution " + quote(kind));
        if (!std::isfinite(dist.a) || !std::isfinite(dist.b)) fail(path, "a and b must be finite");
        if ((kind == "normal" || kind == "logits") && !(dist.b > 0))
            fail(at(path, "b"), "the standard deviation b must be positive");
        bool bounded = kind == "uniform" || kind == "integer" || kind == "positive";
        if (!bounded) return;
        if (kind == "integer" && (dist.a != std::trunc(dist.a) || dist.b != std::trunc(dist.b)))
            fail(path, "an integer distribution needs integer bounds a and b");
        if (kind == "integer" ? !(dist.a <= dist.b) : !(dist.a < dist.b))
            fail(path, "a must be below b");
        if (kind == "positive" && dist.a < 0) fail(at(path, "a"), "a positive distribution needs a >= 0");
        if (dist.a < domain.lo || dist.b > domain.hi) fail(path, "the range [a, b] leaves the input's domain [lo, hi]");
    }

    void output(size_t i) {
        const OutputSpec& out = c_.outputs[i];
        std::string path = at("outputs", i);
        shape(out.shape, at(path, "shape"));
        std::string tolerance = at(path, "tolerance");
        std::vector<contracts::DimFactor> factors;
        try {
            factors = contracts::parse_dim_expr(out.k);
        } catch (const ContractError& e) {
            fail(at(tolerance, "k"), e.what());
        }
        for (const contracts::DimFactor& f : factors) use(f, at(tolerance, "k"));
        if (!info(out.accumulator).is_float)
            fail(at(tolerance, "accumulator"), std::string("the accumulator must be a floating-point dtype, not ") +
                                                   name(out.accumulator));
        if (out.operand_roundings != 2) {
            const std::string where = at(tolerance, "operand_roundings");
            if (out.operand_roundings < 2 || out.operand_roundings > 64) fail(where, "must be from 2 to 64");
            if (!accumulates(out))
                fail(where, std::string("only a reduction or a scan multiplies operands, not an ") + name(out.model) +
                                " output");
            if (!c_.semantics.bf16_operands && !c_.semantics.tf32_operands)
                fail(where, "counts rounded operands, but the contract allows no operand format "
                            "(semantics.bf16_operands or tf32_operands)");
        }
    }

    // Gather-like tasks: the verifier reads semantics.index_policy, the kernel reads the
    // "policy" attribute; both must say the same thing.
    void index_semantics() const {
        const std::string& policy = c_.semantics.index_policy;
        if (!contracts::contains(contracts::index_policy_words(), policy))
            fail("semantics.index_policy", "unknown index policy " + quote(policy));
        bool has_index = false;
        for (const InputSpec& in : c_.inputs) has_index = has_index || in.index;
        if (has_index && policy == "none")
            fail("semantics.index_policy", "a contract with index inputs must declare raise, clamp or zero");
        if (!has_index && policy != "none")
            fail("semantics.index_policy", "index policy " + quote(policy) + " declared but no input is an index");
        auto attribute = c_.attributes.find("policy");
        if (has_index && attribute != c_.attributes.end() && attribute->second != contracts::index_policy_code(policy))
            fail("attributes.policy", "policy code " + std::to_string(attribute->second) + " disagrees with index_policy " +
                                          quote(policy) + " (raise 0, clamp 1, zero 2)");
    }

    void in_place() const {
        for (size_t i = 0; i < c_.semantics.in_place.size(); ++i) {
            const std::string& n = c_.semantics.in_place[i];
            if (!input_names_.count(n)) fail(at("semantics.in_place", i), quote(n) + " is not an input");
        }
    }

    void oracle_and_controls() const {
        if (is_external_oracle(c_.oracle)) {
            const std::string runner = c_.oracle.substr(kExternalOraclePrefix.size());
            if (!contracts::is_identifier(runner)) {
                fail("oracle.name", "an external oracle needs a runner name after 'external:', got " + quote(c_.oracle));
            }
        } else if (!find_oracle(c_.oracle)) {
            contracts::Words known = oracle_names();
            fail("oracle.name", "unknown oracle " + quote(c_.oracle) + "; known oracles are " + contracts::join(known) +
                                    contracts::did_you_mean(c_.oracle, known));
        }
        if (c_.controls.empty())
            fail("oracle.controls", "at least one positive control is required (ORD-03 and fairness rule 1 use them)");
        std::set<std::string> seen;
        for (size_t i = 0; i < c_.controls.size(); ++i) {
            const std::string& n = c_.controls[i];
            if (!contracts::is_identifier(n)) fail(at("oracle.controls", i), quote(n) + " is not a control name");
            if (!seen.insert(n).second) fail(at("oracle.controls", i), "duplicate control " + quote(n));
        }
    }

    void measurement() const {
        const Measurement& m = c_.measurement;
        if (m.seeds < 1) fail("measurement.seeds", "must be at least 1");
        if (m.runs < 1) fail("measurement.runs", "must be at least 1");
        if (!(m.timeout_s > 0) || !std::isfinite(m.timeout_s)) fail("measurement.timeout_s", "must be positive and finite");
        if (m.memory_cap_bytes < 1) fail("measurement.memory_cap_bytes", "must be positive");
        if (m.ord03_margin != 0 && !(m.ord03_margin >= 1 && std::isfinite(m.ord03_margin)))
            fail("measurement.ord03_margin", "must be at least 1 and finite");
    }

    void violation() const {
        for (size_t i = 0; i < c_.violation_signatures.size(); ++i)
            if (!contracts::contains(contracts::violation_words(), c_.violation_signatures[i]))
                fail(at("violation.signatures", i), "unknown signature " + quote(c_.violation_signatures[i]));
    }

    // A dimension that no shape and no K mentions is a leftover or a typo.
    void unused_dims() const {
        for (size_t i = 0; i < c_.dims.size(); ++i)
            if (!used_.count(c_.dims[i].name))
                fail(at(at("dims", i), "name"), "dimension " + quote(c_.dims[i].name) + " is used by no shape and no k");
    }

    const Contract& c_;
    std::set<std::string> dim_names_, input_names_, used_;
};

}  // namespace

void validate(const Contract& c) { Checker(c).run(); }

}  // namespace kcv
