// The built-in contracts: contracts/*.toml compiled into the library (cmake/embed_contracts.cmake
// generates builtin_contract_texts(), keyed by file stem).
#include <filesystem>

#include "kcv/contract.hpp"
#include "vocabulary.hpp"

namespace kcv {

std::vector<std::string> builtin_contract_ids() {
    std::vector<std::string> ids;
    for (const auto& [id, text] : detail::builtin_contract_texts()) ids.push_back(id);
    return ids;
}

Contract resolve_contract(const std::string& id_or_path) {
    std::error_code ec;
    // Something that looks like a path is a path: report the file problem, not an unknown id.
    bool path_like = id_or_path.find('/') != std::string::npos || id_or_path.ends_with(".toml") ||
                     id_or_path.ends_with(".json");
    if (path_like || std::filesystem::is_regular_file(id_or_path, ec)) {
        Contract c = load_contract(id_or_path);
        validate(c);
        return c;
    }
    const auto& texts = detail::builtin_contract_texts();
    auto it = texts.find(id_or_path);
    if (it == texts.end()) {
        std::vector<std::string> ids = builtin_contract_ids();
        throw ContractError(contracts::quote(id_or_path) + " is neither a contract file nor a built-in contract; built-ins are " +
                            contracts::join(ids) + contracts::did_you_mean(id_or_path, ids));
    }
    Contract c = parse_contract(it->second, "builtin:" + it->first);
    // The file stem is the id people type; a mismatch would make the contract unreachable.
    if (c.id != it->first)
        throw ContractError(c.source + ": contract.id: " + contracts::quote(c.id) + " must equal the file name " +
                            contracts::quote(it->first));
    validate(c);
    return c;
}

}  // namespace kcv
