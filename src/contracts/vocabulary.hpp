// The words a contract may use for its enumerated fields, shared by the reader, the writer and
// validate(), plus the helpers that turn a wrong word into a message listing the right ones.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcv/contract.hpp"

namespace kcv::contracts {

using Words = std::vector<std::string>;

const Words& error_model_words();      // elementwise, reduction, scan, envelope
const Words& determinism_words();      // not_guaranteed, run_to_run, gpu_to_gpu
const Words& distribution_words();     // normal, uniform, integer, positive, logits
const Words& structure_words();        // none, lower_triangular, upper_triangular
const Words& index_policy_words();     // none, raise, clamp, zero
const Words& dtype_words();            // canonical dtype names, in DType order
// Gate ids and the signature classes GATES.md defines; [violation] entries are drawn from these.
const Words& violation_words();

std::optional<ErrorModelKind> error_model_from(std::string_view word);
std::optional<Determinism> determinism_from(std::string_view word);

// The numeric code a kernel receives in the "policy" attribute for an index policy:
// raise 0, clamp 1, zero 2; -1 for "none".
int index_policy_code(std::string_view policy);

bool contains(const Words& words, std::string_view word);
// "a, b, c"
std::string join(const Words& words);
// " (did you mean 'dtype'?)" when one word is within a small edit distance, else "".
std::string did_you_mean(std::string_view word, const Words& words);

// Names of dimensions, inputs, outputs, attributes and controls: [A-Za-z_][A-Za-z0-9_]*,
// so that K expressions parse and names can become keyword arguments.
bool is_identifier(std::string_view s);
// Contract ids double as file stems: [A-Za-z0-9._-]+, not starting with '.'.
bool is_contract_id(std::string_view s);

// 'text' for a message: control bytes escaped, long text cut, so that any input (the reader is
// fuzzed) gives a short, printable message.
std::string quote(std::string_view text);

// Paths as messages show them: "inputs[1].dtype".
std::string child_path(const std::string& parent, const std::string& key);
std::string element_path(const std::string& parent, size_t index);

// The message format every ContractError uses: "<source>[:<line>]: [<path>: ]<problem>".
std::string contract_message(const std::string& source, int line, const std::string& path,
                             const std::string& problem);

}  // namespace kcv::contracts
