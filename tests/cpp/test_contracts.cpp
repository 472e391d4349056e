// Kernel Contracts: the reader (TOML and JSON), validate(), the JSON writer, dimension
// expressions and the built-in contracts.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>

#include <unistd.h>

#include "kcv/contract.hpp"
#include "kcv/oracle.hpp"

namespace kcv {
namespace {

// A small, complete contract; each error test below breaks one thing in it.
const char* kBase = R"(# a comment
[contract]
id = "test-mm"
version = "2"
scope = "c = a . b"

[[dims]]
name = "M"
nominal = 8
free = true

[[dims]]
name = "N"
nominal = 4
min = 2
max = 64

[[dims]]
name = "K"
nominal = 16
free = true

[[inputs]]
name = "a"
dtype = "f32"
shape = ["M", "K"]
domain = { nonfinite = false, subnormal = true, lo = -8.0, hi = 8.0 }
distribution = { kind = "uniform", a = -1.0, b = 1.0 }

[[inputs]]
name = "b"
dtype = "bfloat16"
shape = ["K", "N"]

[attributes]
alpha = 0.5
dim = -1

[[outputs]]
name = "c"
dtype = "f32"
shape = ["M", "N"]
tolerance = { model = "reduction", k = "K", accumulator = "f64" }

[semantics]
determinism = "gpu_to_gpu"
in_place = ["a"]
strided_inputs = true
tf32_operands = true

[oracle]
name = "matmul"
controls = ["tiled_matmul", "other_control"]

[measurement]
seeds = 7
runs = 4
timeout_s = 12.5
memory_cap_bytes = 1000000
ord03_margin = 1.5

[violation]
signatures = ["PRC-01", "poison-dependent"]
)";

// The same contract as JSON, written by hand (not by to_json), in another key order.
const char* kBaseJson = R"({
  "oracle": {"controls": ["tiled_matmul", "other_control"], "name": "matmul"},
  "contract": {"scope": "c = a . b", "version": "2", "id": "test-mm"},
  "dims": [{"name": "M", "nominal": 8, "free": true},
           {"name": "N", "nominal": 4, "min": 2, "max": 64},
           {"free": true, "nominal": 16, "name": "K"}],
  "inputs": [
    {"name": "a", "dtype": "f32", "shape": ["M", "K"],
     "domain": {"nonfinite": false, "subnormal": true, "lo": -8, "hi": 8.0},
     "distribution": {"kind": "uniform", "a": -1, "b": 1}},
    {"name": "b", "dtype": "bf16", "shape": ["K", "N"]}
  ],
  "attributes": {"dim": -1, "alpha": 0.5},
  "outputs": [{"name": "c", "dtype": "float32", "shape": ["M", "N"],
               "tolerance": {"model": "reduction", "k": "K", "accumulator": "f64"}}],
  "semantics": {"determinism": "gpu_to_gpu", "in_place": ["a"], "strided_inputs": true,
                "tf32_operands": true},
  "measurement": {"seeds": 7, "runs": 4, "timeout_s": 12.5, "memory_cap_bytes": 1000000, "ord03_margin": 1.5},
  "violation": {"signatures": ["PRC-01", "poison-dependent"]}
})";

// Replaces the first occurrence of `from` (which must exist) in `text`.
std::string edit(std::string text, const std::string& from, const std::string& to) {
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << "test setup: '" << from << "' not in the text";
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
}

// The message of the ContractError that parse (and, if asked, validate) throws; "" if none.
std::string error_of(const std::string& text, bool also_validate, const std::string& source = "t.toml") {
    try {
        Contract c = parse_contract(text, source);
        if (also_validate) validate(c);
    } catch (const ContractError& e) {
        return e.what();
    }
    return "";
}

// Expects every fragment in the message, printing the whole message otherwise.
void expect_message(const std::string& message, std::initializer_list<std::string> fragments) {
    ASSERT_FALSE(message.empty()) << "no ContractError was thrown";
    for (const std::string& f : fragments)
        EXPECT_NE(message.find(f), std::string::npos) << "missing '" << f << "' in: " << message;
}

TEST(ContractReader, BaseParsesEveryField) {
    Contract c = parse_contract(kBase, "t.toml");
    EXPECT_EQ(c.id, "test-mm");
    EXPECT_EQ(c.version, "2");
    EXPECT_EQ(c.scope, "c = a . b");
    EXPECT_EQ(c.source, "t.toml");
    ASSERT_EQ(c.dims.size(), 3u);
    EXPECT_EQ(c.dims[0], (Dim{"M", 8, true, 1, std::numeric_limits<int64_t>::max()}));
    EXPECT_EQ(c.dims[1], (Dim{"N", 4, false, 2, 64}));
    ASSERT_EQ(c.inputs.size(), 2u);
    EXPECT_EQ(c.inputs[0].dtype, DType::f32);
    EXPECT_EQ(c.inputs[0].shape, (std::vector<std::string>{"M", "K"}));
    EXPECT_FALSE(c.inputs[0].domain.nonfinite);
    EXPECT_EQ(c.inputs[0].domain.lo, -8.0);
    EXPECT_EQ(c.inputs[0].domain.hi, 8.0);
    EXPECT_EQ(c.inputs[0].distribution, (Distribution{"uniform", -1.0, 1.0}));
    EXPECT_EQ(c.inputs[1].dtype, DType::bf16);   // "bfloat16" is an alias
    EXPECT_EQ(c.inputs[1].domain, Domain{});     // defaults where the file is silent
    EXPECT_EQ(c.inputs[1].distribution, Distribution{});
    EXPECT_EQ(c.attributes, (std::map<std::string, double>{{"alpha", 0.5}, {"dim", -1.0}}));
    ASSERT_EQ(c.outputs.size(), 1u);
    EXPECT_EQ(c.outputs[0].model, ErrorModelKind::reduction);
    EXPECT_EQ(c.outputs[0].k, "K");
    EXPECT_EQ(c.outputs[0].accumulator, DType::f64);
    EXPECT_EQ(c.outputs[0].operand_roundings, 2);   // a sum of products, unless declared
    EXPECT_EQ(c.semantics.determinism, Determinism::gpu_to_gpu);
    EXPECT_EQ(c.semantics.in_place, std::vector<std::string>{"a"});
    EXPECT_EQ(c.semantics.index_policy, "none");
    EXPECT_TRUE(c.semantics.strided_inputs);
    EXPECT_TRUE(c.semantics.tf32_operands);
    EXPECT_FALSE(c.semantics.bf16_operands);
    EXPECT_EQ(c.oracle, "matmul");
    EXPECT_EQ(c.controls, (std::vector<std::string>{"tiled_matmul", "other_control"}));
    EXPECT_EQ(c.measurement, (Measurement{7, 4, 12.5, 1000000, 1.5}));
    EXPECT_EQ(c.violation_signatures, (std::vector<std::string>{"PRC-01", "poison-dependent"}));
    EXPECT_NO_THROW(validate(c));
}

TEST(ContractReader, JsonAndTomlGiveTheSameContract) {
    Contract from_toml = parse_contract(kBase, "same");
    Contract from_json = parse_contract(kBaseJson, "same");
    EXPECT_TRUE(from_toml == from_json) << to_json(from_toml) << "\nvs\n" << to_json(from_json);
    EXPECT_EQ(to_json(from_toml), to_json(from_json));
}

TEST(ContractReader, JsonIsChosenByTheFirstNonSpaceCharacter) {
    Contract c = parse_contract(std::string(" \n\t\r") + kBaseJson, "x");
    EXPECT_EQ(c.id, "test-mm");
    // Anything else is TOML, and TOML syntax errors carry the line and column.
    expect_message(error_of(std::string("\n[contract\n") + kBase, false), {"t.toml:2:", "TOML syntax error"});
}

TEST(ContractWriter, RoundTripsTheBase) {
    Contract c = parse_contract(kBase, "t.toml");
    std::string json = to_json(c);
    Contract back = parse_contract(json, "t.toml");
    EXPECT_TRUE(back == c) << json;
    EXPECT_EQ(to_json(back), json);
    // Unbounded ends are left out, not written as null.
    EXPECT_EQ(json.find("null"), std::string::npos) << json;
    EXPECT_NE(json.find("\"dim\": -1"), std::string::npos) << "integral attributes stay integers:\n" << json;
}

TEST(ContractWriter, RoundTripsEdgeValues) {
    Contract c = parse_contract(kBase, "edge");
    c.inputs[0].domain.lo = -std::numeric_limits<double>::infinity();
    c.inputs[0].domain.hi = 0x1p-149;                      // a subnormal bound
    c.inputs[1].distribution = {"normal", -0.0, 0x1.fffffep+127};
    c.attributes["tiny"] = 4.9406564584124654e-324;        // smallest fp64 subnormal
    c.attributes["big"] = 9007199254740993.0;              // 2^53 + 1 rounds to 2^53: still exact
    c.attributes["neg_zero"] = -0.0;
    c.attributes["third"] = 1.0 / 3.0;
    c.dims[1].max = std::numeric_limits<int64_t>::max() - 1;
    c.outputs[0].shape = {"M", "04", "7"};                // "04" must stay a string to read back equal
    c.outputs[0].k = "M*K*2";
    c.scope = "quotes \" backslash \\ tab \t newline \n unicode \u00b7";
    std::string json = to_json(c);
    Contract back = parse_contract(json, "edge");
    EXPECT_TRUE(back == c) << json;
    EXPECT_TRUE(std::signbit(back.attributes["neg_zero"])) << json;
    EXPECT_EQ(back.outputs[0].shape, (std::vector<std::string>{"M", "04", "7"}));
}

// Random contracts (fixed seeds, printed on failure) round-trip through JSON exactly.
TEST(ContractWriter, RoundTripsRandomContracts) {
    for (uint32_t seed = 1; seed <= 200; ++seed) {
        std::mt19937_64 rng(seed);
        auto pick = [&](int n) { return int(rng() % uint64_t(n)); };
        auto real = [&]() {
            switch (pick(4)) {
            case 0: return double(int64_t(rng() % 2001) - 1000);
            case 1: return std::ldexp(double(rng() >> 11), -53 - pick(60));
            case 2: return -std::ldexp(double(rng() >> 11), pick(40));
            default: return 0.0;
            }
        };
        Contract c;
        c.source = "random";
        c.id = "r-" + std::to_string(seed);
        c.version = std::to_string(pick(5));
        c.scope = pick(2) ? "" : "scope " + std::to_string(rng());
        int ndims = 1 + pick(4);
        for (int d = 0; d < ndims; ++d) {
            Dim dim{"D" + std::to_string(d), 1 + pick(100), bool(pick(2)), 1, std::numeric_limits<int64_t>::max()};
            if (pick(2)) dim.max = dim.nominal + pick(1000);
            c.dims.push_back(dim);
        }
        int ninputs = 1 + pick(3);
        for (int i = 0; i < ninputs; ++i) {
            InputSpec in;
            in.name = "in" + std::to_string(i);
            in.dtype = DType(pick(int(DType::boolean) + 1));
            for (int s = pick(4); s > 0; --s) in.shape.push_back(pick(3) ? "D" + std::to_string(pick(ndims)) : std::to_string(1 + pick(9)));
            in.domain = {bool(pick(2)), bool(pick(2)), pick(2) ? real() - 2000 : -INFINITY, pick(2) ? real() + 2000 : INFINITY,
                         pick(2) ? "none" : "lower_triangular"};
            in.distribution = {pick(2) ? "normal" : "uniform", real(), real()};
            in.index = pick(4) == 0;
            c.inputs.push_back(in);
        }
        for (int k = pick(3); k > 0; --k) c.attributes["attr" + std::to_string(k)] = real();
        OutputSpec out;
        out.name = "out";
        out.dtype = DType(pick(int(DType::boolean) + 1));
        out.shape = {"D0"};
        out.accumulator = pick(2) ? DType::f32 : DType::f64;
        out.model = ErrorModelKind(pick(4));
        out.k = pick(2) ? "D0" : "D0*" + std::to_string(1 + pick(50));
        out.operand_roundings = pick(2) ? 2 : 3 + pick(62);
        c.outputs.push_back(out);
        c.semantics.determinism = Determinism(pick(3));
        c.semantics.strided_inputs = pick(2);
        c.semantics.bf16_operands = pick(2);
        c.semantics.index_policy = pick(2) ? "none" : "clamp";
        if (pick(2)) c.semantics.in_place = {"in0"};
        c.oracle = pick(2) ? "matmul" : "sum";
        c.controls = {"ctl" + std::to_string(pick(9))};
        c.measurement = {1 + pick(9), 1 + pick(9), 0.5 + pick(100), 1 + int64_t(rng() >> 2),
                         pick(2) ? 0.0 : 1.0 + 0.1 * pick(10)};
        if (pick(2)) c.violation_signatures = {"ORD-02", "aliasing"};
        std::string json = to_json(c);
        Contract back;
        try {
            back = parse_contract(json, "random");
        } catch (const ContractError& e) {
            ADD_FAILURE() << "seed " << seed << ": " << e.what() << "\n" << json;
            continue;
        }
        EXPECT_TRUE(back == c) << "seed " << seed << "\n" << json << "\nread back as\n" << to_json(back);
    }
}

// An output's operand_roundings: parsed, written only when it differs from a sum of products'
// two, read back, and refused where it cannot mean anything.
TEST(ContractReader, OperandRoundingsCountsAnOutputsRoundedOperands) {
    const std::string six = edit(kBase, "accumulator = \"f64\" }", "accumulator = \"f64\", operand_roundings = 6 }");
    Contract c = parse_contract(six, "t.toml");
    EXPECT_EQ(c.outputs[0].operand_roundings, 6);
    EXPECT_NO_THROW(validate(c));
    const std::string json = to_json(c);
    EXPECT_NE(json.find("\"operand_roundings\": 6"), std::string::npos) << json;
    EXPECT_TRUE(parse_contract(json, "t.toml") == c) << json;
    EXPECT_EQ(to_json(parse_contract(kBase, "t.toml")).find("operand_roundings"), std::string::npos);

    expect_message(error_of(edit(six, "operand_roundings = 6", "operand_roundings = 1"), false),
                   {"outputs[0].tolerance.operand_roundings: must be at least 2, not 1"});
    expect_message(error_of(edit(six, "operand_roundings = 6", "operand_roundings = 65"), false),
                   {"outputs[0].tolerance.operand_roundings: must be at most 64"});
    expect_message(error_of(edit(six, "operand_roundings = 6", "operand_roundings = 6.5"), false),
                   {"operand_roundings: must be an integer, not a float"});
    expect_message(error_of(edit(six, "tf32_operands = true", "tf32_operands = false"), true),
                   {"outputs[0].tolerance.operand_roundings", "allows no operand format"});
    expect_message(error_of(edit(six, "model = \"reduction\", k = \"K\"", "model = \"elementwise\""), true),
                   {"outputs[0].tolerance.operand_roundings", "not an elementwise output"});
}

// One test per class of error: each names the source, the field and the problem.

TEST(ContractErrors, TomlSyntax) {
    std::string text = edit(kBase, "name = \"matmul\"", "name = matmul\"");
    expect_message(error_of(text, false, "bad.toml"), {"bad.toml:", "TOML syntax error"});
}

TEST(ContractErrors, JsonSyntax) {
    std::string text = edit(kBaseJson, "\"seeds\": 7,", "\"seeds\": 7,,");
    expect_message(error_of(text, false, "bad.json"), {"bad.json: ", "JSON syntax error", "line"});
}

TEST(ContractErrors, UnknownKeyWithSuggestion) {
    std::string text = edit(kBase, "dtype = \"bfloat16\"", "dtyp = \"bfloat16\"");
    expect_message(error_of(text, false),
                   {"t.toml:", "inputs[1].dtyp: unknown key 'dtyp'; expected one of name, dtype, shape",
                    "(did you mean 'dtype'?)"});
}

TEST(ContractErrors, UnknownKeyInInlineTableAndAtTopLevel) {
    expect_message(error_of(edit(kBase, "kind = \"uniform\"", "knd = \"uniform\""), false),
                   {"inputs[0].distribution.knd: unknown key 'knd'", "did you mean 'kind'"});
    expect_message(error_of(std::string("input = 3\n") + kBase, false),
                   {"t.toml:1: input: unknown key 'input'", "did you mean 'inputs'"});
    expect_message(error_of(edit(kBaseJson, "\"runs\": 4", "\"runs\": 4, \"rusn\": 1"), false),
                   {"measurement.rusn: unknown key 'rusn'"});
}

TEST(ContractErrors, BadDtypeNamesLineFieldAndChoices) {
    std::string text = edit(kBase, "dtype = \"bfloat16\"", "dtype = \"f33\"");
    std::string m = error_of(text, false);
    expect_message(m, {"t.toml:32: inputs[1].dtype: unknown dtype 'f33'; expected one of f64, f32, tf32, f16, bf16",
                       "did you mean 'f32'"});
    expect_message(error_of(edit(kBaseJson, "\"accumulator\": \"f64\"", "\"accumulator\": \"double64\""), false, "j"),
                   {"j: outputs[0].tolerance.accumulator: unknown dtype 'double64'"});
}

TEST(ContractErrors, UnknownDimensionInShape) {
    std::string text = edit(kBase, "shape = [\"K\", \"N\"]", "shape = [\"K\", \"Q\"]");
    expect_message(error_of(text, true), {"t.toml: inputs[1].shape[1]: unknown dimension 'Q'; dimensions are M, N, K"});
    expect_message(error_of(edit(kBase, "shape = [\"M\", \"N\"]", "shape = [\"M\", \"M*N\"]"), true),
                   {"outputs[0].shape[1]: 'M*N' is not a dimension name or a positive integer"});
    expect_message(error_of(edit(kBase, "shape = [\"M\", \"N\"]", "shape = [\"M\", 0]"), false),
                   {"outputs[0].shape[1]: a size must be positive, not 0"});
    expect_message(error_of(edit(kBase, "shape = [\"M\", \"N\"]", "shape = [\"M\", 2.5]"), false),
                   {"outputs[0].shape[1]: must be a dimension name or a positive integer, not a float"});
}

TEST(ContractErrors, BadKExpression) {
    expect_message(error_of(edit(kBase, "k = \"K\"", "k = \"K*\""), true),
                   {"t.toml: outputs[0].tolerance.k: bad expression 'K*' at position 2: expected a dimension name"});
    expect_message(error_of(edit(kBase, "k = \"K\"", "k = \"K+1\""), true),
                   {"outputs[0].tolerance.k: bad expression 'K+1' at position 1: expected '*' or the end"});
    expect_message(error_of(edit(kBase, "k = \"K\"", "k = \"K*Z\""), true),
                   {"outputs[0].tolerance.k: unknown dimension 'Z'"});
    expect_message(error_of(edit(kBase, "k = \"K\"", "k = \"0\""), true), {"a size must be positive"});
    // A reduction must say how long it accumulates.
    expect_message(error_of(edit(kBase, "k = \"K\", ", ""), false),
                   {"outputs[0].tolerance.k: a reduction must declare its accumulation length k"});
}

TEST(ContractErrors, MissingOracle) {
    std::string no_table = edit(kBase, "[oracle]\nname = \"matmul\"\ncontrols = [\"tiled_matmul\", \"other_control\"]\n", "");
    expect_message(error_of(no_table, false), {"t.toml: oracle: missing required key 'oracle'"});
    expect_message(error_of(edit(kBase, "name = \"matmul\"\n", ""), false),
                   {"oracle.name: missing required key 'name'"});
    expect_message(error_of(edit(kBase, "name = \"matmul\"", "name = \"matmull\""), true),
                   {"t.toml: oracle.name: unknown oracle 'matmull'; known oracles are", "did you mean 'matmul'"});
    expect_message(error_of(edit(kBase, "controls = [\"tiled_matmul\", \"other_control\"]", "controls = []"), true),
                   {"oracle.controls: at least one positive control is required"});
}

TEST(ContractErrors, DuplicateNames) {
    expect_message(error_of(edit(kBase, "name = \"b\"", "name = \"a\""), true),
                   {"t.toml: inputs[1].name: duplicate name 'a'"});
    expect_message(error_of(edit(kBase, "name = \"c\"", "name = \"a\""), true),
                   {"outputs[0].name: duplicate name 'a'"});
    expect_message(error_of(edit(kBase, "name = \"N\"", "name = \"M\""), true), {"dims[1].name: duplicate dimension 'M'"});
    expect_message(error_of(edit(kBase, "\"other_control\"", "\"tiled_matmul\""), true),
                   {"oracle.controls[1]: duplicate control 'tiled_matmul'"});
    // Duplicate keys: TOML refuses them itself; nlohmann would keep the last one silently.
    expect_message(error_of(edit(kBase, "seeds = 7", "seeds = 7\nseeds = 8"), false), {"TOML syntax error"});
    expect_message(error_of(edit(kBaseJson, "\"seeds\": 7", "\"seeds\": 7, \"seeds\": 8"), false, "j"),
                   {"j: measurement.seeds: duplicate key 'seeds'"});
    expect_message(error_of(edit(kBaseJson, "\"free\": true, \"nominal\": 16", "\"free\": true, \"free\": true, \"nominal\": 16"),
                            false, "j"),
                   {"j: dims[2].free: duplicate key 'free'"});
}

TEST(ContractErrors, WrongTypesAndRanges) {
    expect_message(error_of(edit(kBase, "nominal = 8", "nominal = 8.0"), false),
                   {"t.toml:9: dims[0].nominal: must be an integer, not a float"});
    expect_message(error_of(edit(kBase, "nominal = 8", "nominal = 0"), false), {"dims[0].nominal: must be at least 1, not 0"});
    expect_message(error_of(edit(kBase, "free = true", "free = 1"), false), {"dims[0].free: must be true or false, not an integer"});
    expect_message(error_of(edit(kBase, "version = \"2\"", "version = 2"), false), {"contract.version: must be a string"});
    expect_message(error_of(edit(kBase, "id = \"test-mm\"", "id = \"a b\""), false), {"contract.id: 'a b' is not an id"});
    expect_message(error_of(edit(kBase, "name = \"M\"", "name = \"2M\""), false), {"dims[0].name: '2M' is not a name"});
    expect_message(error_of(edit(kBase, "alpha = 0.5", "alpha = nan"), false), {"attributes.alpha: must be a number, not NaN"});
    expect_message(error_of(edit(kBase, "alpha = 0.5", "alpha = inf"), false), {"attributes.alpha: must be finite"});
    expect_message(error_of(edit(kBase, "alpha = 0.5", "alpha = \"x\""), false), {"attributes.alpha: must be a number"});
    expect_message(error_of(edit(kBase, "lo = -8.0", "lo = inf"), false), {"inputs[0].domain.lo: a lower bound cannot be +inf"});
    expect_message(error_of(edit(kBase, "seeds = 7", "seeds = 0"), false), {"measurement.seeds: must be at least 1"});
    expect_message(error_of(edit(kBase, "timeout_s = 12.5", "timeout_s = -1"), false), {"measurement.timeout_s: must be positive"});
    expect_message(error_of(edit(kBase, "ord03_margin = 1.5", "ord03_margin = 0.9"), false),
                   {"measurement.ord03_margin: must be at least 1"});
    expect_message(error_of(edit(kBase, "ord03_margin = 1.5", "ord03_margin = 0"), false),
                   {"measurement.ord03_margin: must be at least 1"});
    expect_message(error_of(edit(kBase, "determinism = \"gpu_to_gpu\"", "determinism = \"bitwise\""), false),
                   {"semantics.determinism: unknown value 'bitwise'; expected one of not_guaranteed, run_to_run, gpu_to_gpu"});
    expect_message(error_of(edit(kBase, "model = \"reduction\"", "model = \"reductoin\""), false),
                   {"did you mean 'reduction'"});
    expect_message(error_of(edit(kBase, "\"poison-dependent\"", "\"poison\""), false),
                   {"violation.signatures[1]: unknown signature 'poison'"});
    expect_message(error_of(edit(kBase, "[[inputs]]\nname = \"a\"", "[inputs]\nname = \"a\""), false), {"TOML syntax error"});
    expect_message(error_of(edit(kBaseJson, "\"inputs\": [", "\"inputs\": {\"x\": ["), false, "j"), {"JSON syntax error"});
    expect_message(error_of(R"({"contract": {"id": "x"}, "dims": 3})", false, "j"),
                   {"j: dims: must be an array of tables ([[dims]] in TOML), not an integer"});
    expect_message(error_of(edit(kBaseJson, "\"attributes\": {\"dim\": -1, \"alpha\": 0.5}", "\"attributes\": [1]"),
                            false, "j"),
                   {"j: attributes: must be a table, not an array"});
    expect_message(error_of(std::string("when = 1979-05-27\n") + kBase, false), {"when: dates and times are not contract values"});
    expect_message(error_of(edit(kBaseJson, "\"seeds\": 7", "\"seeds\": 99999999999999999999"), false, "j"),
                   {"j: measurement.seeds: must be an integer, not a float"});
    expect_message(error_of(edit(kBaseJson, "\"seeds\": 7", "\"seeds\": 9999999999999999999"), false, "j"),
                   {"j: measurement.seeds: integer 9999999999999999999 is out of range"});
}

TEST(ContractErrors, MissingRequiredParts) {
    expect_message(error_of("", false), {"t.toml: contract: missing required key 'contract'"});
    expect_message(error_of("{}", false), {"contract: missing required key 'contract'"});
    expect_message(error_of(edit(kBase, "dtype = \"bfloat16\"\n", ""), false), {"inputs[1].dtype: missing required key 'dtype'"});
    expect_message(error_of(edit(kBase, "tolerance = { model = \"reduction\", k = \"K\", accumulator = \"f64\" }\n", ""), false),
                   {"outputs[0].tolerance: missing required key 'tolerance'"});
    expect_message(error_of(R"({"contract": {"id": "x"}, "inputs": [{"name": "a", "dtype": "f32", "shape": []}],
                                "outputs": []})",
                            false, "j"),
                   {"j: outputs: a contract needs at least one output"});
}

TEST(ContractErrors, CrossReferences) {
    expect_message(error_of(edit(kBase, "nominal = 4", "nominal = 100"), true), {"dims[1]: nominal 100 is outside [min 2, max 64]"});
    expect_message(error_of(edit(kBase, "in_place = [\"a\"]", "in_place = [\"c\"]"), true),
                   {"semantics.in_place[0]: 'c' is not an input"});
    expect_message(error_of(edit(kBase, "lo = -8.0, hi = 8.0", "lo = 8.0, hi = -8.0"), true),
                   {"inputs[0].domain: lo must not exceed hi"});
    expect_message(error_of(edit(kBase, "a = -1.0, b = 1.0", "a = -9.0, b = 1.0"), true),
                   {"inputs[0].distribution: the range [a, b] leaves the input's domain [lo, hi]"});
    expect_message(error_of(edit(kBase, "a = -1.0, b = 1.0", "a = 1.0, b = 1.0"), true),
                   {"inputs[0].distribution: a must be below b"});
    expect_message(error_of(edit(kBase, "accumulator = \"f64\"", "accumulator = \"i32\""), true),
                   {"outputs[0].tolerance.accumulator: the accumulator must be a floating-point dtype, not i32"});
    expect_message(error_of(edit(kBase, "[[inputs]]", "[[dims]]\nname = \"Z\"\nnominal = 2\n\n[[inputs]]"), true),
                   {"dims[3].name: dimension 'Z' is used by no shape and no k"});
}

TEST(ContractErrors, ExternalOraclesNeedARunnerAndRunOnlyThroughTheirCaller) {
    Contract ok = parse_contract(edit(kBase, "name = \"matmul\"", "name = \"external:kernelbench\""), "x");
    EXPECT_EQ(ok.oracle, "external:kernelbench");
    EXPECT_NO_THROW(validate(ok));
    expect_message(error_of(edit(kBase, "name = \"matmul\"", "name = \"external:\""), true),
                   {"oracle.name: an external oracle needs a runner name after 'external:'"});
    expect_message(error_of(edit(kBase, "name = \"matmul\"", "name = \"extern:kernelbench\""), true),
                   {"oracle.name: unknown oracle 'extern:kernelbench'"});
    std::vector<Tensor> outs, scales;
    try {
        run_oracle("external:kernelbench", {}, {}, {}, outs, scales);
        FAIL() << "an external oracle ran inside libkcv";
    } catch (const OracleError& e) {
        EXPECT_NE(std::string(e.what()).find("runs outside libkcv"), std::string::npos) << e.what();
    }
}

TEST(ContractErrors, IndexInputs) {
    std::string gather = edit(kBase, "name = \"b\"\ndtype = \"bfloat16\"",
                              "name = \"b\"\nindex = true\ndistribution = { kind = \"integer\", a = 0, b = 15 }\ndtype = \"i64\"");
    gather = edit(gather, "in_place = [\"a\"]", "index_policy = \"clamp\"");
    Contract ok = parse_contract(gather, "g");
    EXPECT_TRUE(ok.inputs[1].index);
    EXPECT_NO_THROW(validate(ok));
    expect_message(error_of(edit(gather, "dtype = \"i64\"", "dtype = \"f32\""), true),
                   {"inputs[1].dtype: index input 'b' must have an integer dtype, not f32"});
    expect_message(error_of(edit(gather, "index_policy = \"clamp\"", ""), true),
                   {"semantics.index_policy: a contract with index inputs must declare raise, clamp or zero"});
    expect_message(error_of(edit(gather, "alpha = 0.5", "policy = 2"), true),
                   {"attributes.policy: policy code 2", "disagrees with index_policy 'clamp'"});
    EXPECT_NO_THROW(validate(parse_contract(edit(gather, "alpha = 0.5", "policy = 1"))));
    expect_message(error_of(edit(kBase, "in_place = [\"a\"]", "index_policy = \"zero\""), true),
                   {"index policy 'zero' declared but no input is an index"});
    expect_message(error_of(edit(gather, "b = 15", "b = 15.5"), true), {"an integer distribution needs integer bounds"});
}

TEST(ContractErrors, HostileInputGivesErrorsNotCrashes) {
    const std::vector<std::string> inputs = {
        std::string("\0\0\0", 3), "{", "}", "[", "[[", "[[[[[[[[", "{\"contract\": {\"id\": \"x\"", "\xff\xfe\xfd",
        "a = \"\xc3\x28\"", std::string(5000, '['), std::string(5000, '{'), "a." + std::string(3000, 'a') + " = 1",
        std::string(300, '{') + std::string(300, '}'), "x = " + std::string(300, '[') + std::string(300, ']'),
        "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}", "inputs = [1, 2]", "inputs = []",
        "[contract]\nid = \"x\"\n[[inputs]]\n", "dims = 5",
    };
    for (size_t i = 0; i < inputs.size(); ++i) {
        std::string m = error_of(inputs[i], true, "h");
        EXPECT_EQ(m.rfind("h", 0), 0u) << "input " << i << ": " << m;
    }
    std::string deep;
    for (int i = 0; i < 5000; ++i) deep += i ? ".a" : "a";
    expect_message(error_of(deep + " = 1", false), {"more than 4096 '.', '[' and '{' characters"});
    std::string json_deep = "{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}";
    expect_message(error_of(json_deep, false), {"nested deeper than 32 levels"});
    expect_message(error_of(std::string((1 << 20) + 1, ' '), false), {"exceeds the 1048576-byte limit"});
}

// A contract near the 1 MiB limit with thousands of names reads and validates in well under a
// second; the bound below only catches gross regressions (a lookup nested in a lookup).
TEST(ContractErrors, LargeContractsStayLinear) {
#if defined(KCV_SANITIZED) || !defined(NDEBUG)
    GTEST_SKIP() << "a time bound means something only in an optimised, uninstrumented build";
#endif
    constexpr int kNames = 12000;
    std::string dims, shape, attributes, in_place;
    for (int i = 0; i < kNames; ++i) {
        std::string sep = i ? "," : "";
        dims += sep + "{\"name\": \"d" + std::to_string(i) + "\", \"nominal\": 1}";
        shape += sep + "\"d" + std::to_string(i) + "\"";
        attributes += sep + "\"a" + std::to_string(i) + "\": " + std::to_string(i);
        in_place += sep + "\"x\"";
    }
    std::string text = "{\"contract\": {\"id\": \"big\"}, \"dims\": [" + dims + "], \"attributes\": {" + attributes +
                       "}, \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [" + shape + "," + shape +
                       "]}], \"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"d0\"], \"tolerance\": "
                       "{\"model\": \"elementwise\"}}], \"semantics\": {\"in_place\": [" + in_place +
                       "]}, \"oracle\": {\"name\": \"relu\", \"controls\": [\"c\"]}}";
    ASSERT_LT(text.size(), size_t(1) << 20);
    auto start = std::chrono::steady_clock::now();
    Contract c = parse_contract(text, "big");
    EXPECT_NO_THROW(validate(c));
    EXPECT_EQ(c.dims.size(), size_t(kNames));
    EXPECT_EQ(c.inputs[0].shape.size(), size_t(2 * kNames));
    EXPECT_EQ(c.attributes.size(), size_t(kNames));
    EXPECT_GT(to_json(c).size(), text.size());
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 20.0);
}

// Inputs the fuzzer found to reach undefined behaviour or assertions inside toml++ 3.3; the
// reader refuses them before toml++ sees them (all but the last are invalid TOML anyway).
TEST(ContractErrors, TomlInputsThatTomlPlusPlusMishandles) {
    expect_message(error_of("[contract]\n[\x01 x]\n", false), {"t.toml:2: TOML syntax error: control character 0x01"});
    expect_message(error_of("[contract]\nid = \"a\rb\"\n", false), {"t.toml:2: TOML syntax error: control character 0x0d"});
    expect_message(error_of("[{\"nputs]]\n", false), {"t.toml:1:2: TOML syntax error"});
    expect_message(error_of("# note\nx = 1 \xc3\xa9\n", false),
                   {"t.toml:2: TOML syntax error: non-ASCII character outside a string or comment"});
    expect_message(error_of("[contract]\n\n\ns = \"\"\"\\\n   \xc2\xa7\"\"\"\n", false),
                   {"t.toml:5: TOML syntax error: a non-ASCII character right after a line-ending backslash"});
    expect_message(error_of("s = \"\"\"a\\ \xc2\xb7 b\"\"\"\n", false),
                   {"t.toml:1: TOML syntax error: a backslash followed by spaces must end the line"});
    // toml++ reads a bare value ahead through quotes, so a quote inside a token opens no string.
    expect_message(error_of("scale = 0'.5\xc2\xb2'\n", false), {"t.toml:1: TOML syntax error: non-ASCII character"});
    expect_message(error_of("when = 1979-05-27 '\xc3\xa9'\n", false), {"t.toml:1: TOML syntax error: non-ASCII character"});
    expect_message(error_of("x = 1=\"\xc3\xa9\"\n", false), {"t.toml:1: TOML syntax error: non-ASCII character"});
    expect_message(error_of("x = 1[\"\xc3\xa9\"]\n", false), {"t.toml:1: TOML syntax error: non-ASCII character"});
    expect_message(error_of("x = [1 \"\xc3\xa9\"]\n", false), {"t.toml:1: TOML syntax error: non-ASCII character"});
    // Where a value or a key starts, a quote opens a string as usual.
    expect_message(error_of("a.'\xc3\xa9' = [\"\xc3\xa9\", {b = '\xc3\xa9', c = [\n# \xc3\xa9\n'\xc3\xa9']}]\n", false),
                   {"t.toml:1: a: unknown key 'a'"});
    // Non-ASCII text inside strings, multi-line strings and comments is fine, and so is CRLF.
    std::string text = edit(kBase, "scope = \"c = a . b\"", "scope = \"c = a \xc2\xb7 b\" # \xce\xa3 comment\r");
    text = edit(text, "[semantics]", "[semantics] # \xe2\x80\x94\r");
    text = edit(text, "version = \"2\"", "version = \"\"\"\\\n  2\xc2\xb7\"\"\"\nid2 = '''\xc2\xa7'''");
    expect_message(error_of(text, false), {"contract.id2: unknown key 'id2'"});
    Contract c = parse_contract(edit(text, "\nid2 = '''\xc2\xa7'''", ""));
    EXPECT_EQ(c.scope, "c = a \xc2\xb7 b");
    EXPECT_EQ(c.version, "2\xc2\xb7");
}

TEST(ContractFiles, LoadReadsAFileAndNamesIt) {
    std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kcv_contracts_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::string path = (dir / "mine.toml").string();
    {
        std::ofstream(path) << edit(kBase, "dtype = \"bfloat16\"", "dtype = \"f33\"");
    }
    expect_message([&] {
        try {
            load_contract(path);
        } catch (const ContractError& e) {
            return std::string(e.what());
        }
        return std::string();
    }(), {path + ":32: inputs[1].dtype: unknown dtype 'f33'"});
    {
        std::ofstream(path) << kBase;
    }
    Contract c = load_contract(path);
    EXPECT_EQ(c.source, path);
    EXPECT_EQ(c.id, "test-mm");
    // An existing file wins over a built-in id, and resolve validates it.
    Contract r = resolve_contract(path);
    EXPECT_TRUE(r == c);
    // A missing path-like argument is reported as a missing file, not as an unknown id.
    try {
        resolve_contract((dir / "absent.toml").string());
        ADD_FAILURE() << "no error for a missing file";
    } catch (const ContractError& e) {
        expect_message(e.what(), {"absent.toml: cannot read contract file: No such file or directory"});
    }
    try {
        load_contract((dir / "absent.toml").string());
        ADD_FAILURE() << "no error for a missing file";
    } catch (const ContractError& e) {
        expect_message(e.what(), {"absent.toml: cannot read contract file: No such file or directory"});
    }
    try {
        load_contract(dir.string());
        ADD_FAILURE() << "no error for a directory";
    } catch (const ContractError& e) {
        expect_message(e.what(), {"is a directory"});
    }
    std::filesystem::remove_all(dir);
}

TEST(DimExpr, EvaluatesProductsOfNamesAndIntegers) {
    DimValues v{{"M", 3}, {"N", 5}, {"K", 7}, {"B_2", 2}};
    EXPECT_EQ(eval_dim_expr("M", v), 3);
    EXPECT_EQ(eval_dim_expr("4", v), 4);
    EXPECT_EQ(eval_dim_expr("M*N", v), 15);
    EXPECT_EQ(eval_dim_expr(" M * N*K *2 ", v), 210);
    EXPECT_EQ(eval_dim_expr("B_2*B_2", v), 4);
    EXPECT_EQ(eval_dim_expr("9223372036854775807", v), std::numeric_limits<int64_t>::max());
    EXPECT_EQ(eval_shape({"M", "1", "K"}, v), (std::vector<int64_t>{3, 1, 7}));
    EXPECT_EQ(eval_shape({}, v), std::vector<int64_t>{});
    for (const char* bad : {"", " ", "*", "M*", "*M", "M**N", "M+N", "-1", "0", "M*0", "1.5", "M N", "9223372036854775808",
                            "Q", "M*Q"})
        EXPECT_THROW(eval_dim_expr(bad, v), ContractError) << "'" << bad << "'";
    EXPECT_THROW(eval_dim_expr("4294967296*4294967296", v), ContractError);
    try {
        eval_dim_expr("M*Q", v);
    } catch (const ContractError& e) {
        EXPECT_STREQ(e.what(), "unknown dimension 'Q' in 'M*Q'");
    }
}

TEST(DimExpr, NominalDimsAndLookup) {
    Contract c = parse_contract(kBase);
    EXPECT_EQ(nominal_dims(c), (DimValues{{"M", 8}, {"N", 4}, {"K", 16}}));
    ASSERT_NE(c.dim("N"), nullptr);
    EXPECT_EQ(c.dim("N")->max, 64);
    EXPECT_EQ(c.dim("Q"), nullptr);
    EXPECT_EQ(eval_shape(c.outputs[0].shape, nominal_dims(c)), (std::vector<int64_t>{8, 4}));
    EXPECT_STREQ(name(ErrorModelKind::scan), "scan");
    EXPECT_STREQ(name(Determinism::not_guaranteed), "not_guaranteed");
}

// The built-in contracts.

const std::set<std::string> kExpectedBuiltins = {
    "matmul-f32", "matmul-nt-f32", "matmul-bf16", "matmul-tf32", "bmm-f32", "sum-f32", "sum-f16", "mean-f32", "max-f32",
    "argmax-f32", "cumsum-f32", "softmax-f32", "log_softmax-f32", "layernorm-f32", "rmsnorm-f32", "relu-f32",
    "gelu-f32", "silu-f32", "exp-f32", "log-f32", "sqrt-f32", "reciprocal-f32", "div-f32", "relu-bf16",
    "gelu-f16", "gather-f32", "gather-clamp-f32", "gather-zero-f32",
};

TEST(BuiltinContracts, EveryOneParsesValidatesAndRoundTrips) {
    const auto& texts = detail::builtin_contract_texts();
    std::vector<std::string> ids = builtin_contract_ids();
    ASSERT_EQ(ids.size(), texts.size());
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    for (const std::string& want : kExpectedBuiltins) EXPECT_TRUE(texts.count(want)) << "missing built-in " << want;
    for (const auto& [id, text] : texts) {
        SCOPED_TRACE(id);
        Contract c;
        ASSERT_NO_THROW(c = resolve_contract(id));
        EXPECT_EQ(c.id, id);
        EXPECT_EQ(c.source, "builtin:" + id);
        EXPECT_EQ(c.semantics.determinism, Determinism::run_to_run);
        EXPECT_FALSE(c.controls.empty());
        EXPECT_FALSE(c.scope.empty());
        EXPECT_TRUE(parse_contract(to_json(c), c.source) == c) << to_json(c);
        // Every tensor of a built-in has at least one element at its nominal shape.
        for (const InputSpec& in : c.inputs) {
            for (int64_t n : eval_shape(in.shape, nominal_dims(c))) {
                EXPECT_GE(n, 1) << in.name;
            }
        }
    }
}

TEST(BuiltinContracts, DeclareWhatTheirFamilyNeeds) {
    for (const std::string& id : kExpectedBuiltins) {
        SCOPED_TRACE(id);
        Contract c = resolve_contract(id);
        const OutputSpec& out = c.outputs.at(0);
        std::string op = id.substr(0, id.rfind('-'));
        bool matmul = op == "matmul" || op == "matmul-nt" || op == "bmm";
        bool reduction = op == "sum" || op == "mean" || op == "max" || op == "argmax" || op == "cumsum";
        bool elementwise = op == "relu" || op == "gelu" || op == "silu" || op == "exp" || op == "log" || op == "sqrt" ||
                           op == "reciprocal" || op == "div";
        bool gather = op.rfind("gather", 0) == 0;
        EXPECT_EQ(c.semantics.strided_inputs, reduction || elementwise);
        if (matmul) {
            EXPECT_EQ(c.controls, std::vector<std::string>{"tiled_matmul"});
            EXPECT_EQ(out.model, ErrorModelKind::reduction);
            EXPECT_EQ(out.k, "K");
            ASSERT_NE(c.dim("K"), nullptr);
            EXPECT_TRUE(c.dim("K")->free);
            EXPECT_EQ(c.dim("K")->nominal, 64);
        }
        if (elementwise) {
            EXPECT_EQ(out.model, ErrorModelKind::elementwise);
            EXPECT_EQ(out.k, "1");
            EXPECT_EQ(c.controls, std::vector<std::string>{op == "gelu" ? "gelu_erf" : "elementwise"});
            int64_t n = 1;
            for (int64_t d : eval_shape(c.inputs[0].shape, nominal_dims(c))) n *= d;
            EXPECT_EQ(n, 4096);
        }
        if (op == "sum" || op == "mean" || op == "softmax" || op == "log_softmax" || op == "layernorm" || op == "rmsnorm") {
            EXPECT_EQ(out.model, ErrorModelKind::reduction);
            EXPECT_EQ(out.k, "N");
            EXPECT_TRUE(c.dim("N")->free);
            EXPECT_EQ(eval_shape(c.inputs[0].shape, nominal_dims(c)), (std::vector<int64_t>{8, 1024}));
        }
        if (reduction || op == "softmax" || op == "log_softmax" || op == "layernorm" || op == "rmsnorm") {
            EXPECT_EQ(c.attributes.at("dim"), -1.0);
        }
        if (gather) {
            EXPECT_EQ(c.controls, std::vector<std::string>{"gather"});
            EXPECT_TRUE(c.inputs.at(1).index);
            EXPECT_EQ(c.inputs[1].dtype, DType::i64);
            EXPECT_EQ(c.inputs[1].distribution.a, 0.0);
            EXPECT_EQ(c.inputs[1].distribution.b, double(c.dim("N")->nominal - 1));
            EXPECT_FALSE(c.dim("N")->free) << "the index range is stated for the nominal N";
        }
    }
    EXPECT_EQ(resolve_contract("gather-f32").semantics.index_policy, "raise");
    EXPECT_EQ(resolve_contract("gather-f32").attributes.at("policy"), 0.0);
    EXPECT_EQ(resolve_contract("gather-clamp-f32").attributes.at("policy"), 1.0);
    EXPECT_EQ(resolve_contract("gather-zero-f32").semantics.index_policy, "zero");
    EXPECT_EQ(resolve_contract("gather-zero-f32").attributes.at("policy"), 2.0);
    EXPECT_EQ(resolve_contract("matmul-nt-f32").attributes.at("trans_b"), 1.0);
    EXPECT_EQ(resolve_contract("matmul-nt-f32").inputs[1].shape, (std::vector<std::string>{"N", "K"}));
    Contract bf16 = resolve_contract("matmul-bf16");
    EXPECT_EQ(bf16.inputs[0].dtype, DType::bf16);
    EXPECT_EQ(bf16.outputs[0].dtype, DType::bf16);
    EXPECT_EQ(bf16.outputs[0].accumulator, DType::f32);
    Contract f16 = resolve_contract("sum-f16");
    EXPECT_EQ(f16.inputs[0].dtype, DType::f16);
    EXPECT_EQ(f16.outputs[0].dtype, DType::f16);
    EXPECT_EQ(f16.outputs[0].accumulator, DType::f32);
    EXPECT_EQ(resolve_contract("argmax-f32").outputs[0].dtype, DType::i64);
    EXPECT_EQ(resolve_contract("cumsum-f32").outputs[0].model, ErrorModelKind::scan);
    EXPECT_EQ(resolve_contract("layernorm-f32").attributes.at("eps"), 1e-5);
    EXPECT_EQ(resolve_contract("rmsnorm-f32").attributes.at("eps"), 1e-6);
    EXPECT_EQ(resolve_contract("log-f32").inputs[0].domain.lo, 0.0);
    EXPECT_EQ(resolve_contract("sqrt-f32").inputs[0].domain.lo, 0.0);
    EXPECT_EQ(resolve_contract("exp-f32").inputs[0].distribution, (Distribution{"normal", 0.0, 2.0}));
    EXPECT_EQ(resolve_contract("div-f32").inputs.size(), 2u);
    EXPECT_EQ(resolve_contract("relu-bf16").inputs[0].dtype, DType::bf16);
    EXPECT_EQ(resolve_contract("gelu-f16").outputs[0].dtype, DType::f16);
    EXPECT_EQ(resolve_contract("softmax-f32").inputs[0].distribution.kind, "logits");
}

TEST(BuiltinContracts, UnknownIdSuggestsTheNearestOne) {
    try {
        resolve_contract("matmul-f23");
        ADD_FAILURE() << "no error";
    } catch (const ContractError& e) {
        expect_message(e.what(), {"'matmul-f23' is neither a contract file nor a built-in contract",
                                  "did you mean 'matmul-f32'"});
    }
}

}  // namespace
}  // namespace kcv
