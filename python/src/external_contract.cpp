#include "external_contract.hpp"

#include "kcv/oracle.hpp"

namespace kcv::py {

bool external_oracle(const Contract& c) { return c.oracle.rfind(kExternalPrefix, 0) == 0; }

Contract read_contract(const std::string& text, const std::string& source) {
    Contract c = parse_contract(text, source);
    if (!external_oracle(c)) {
        validate(c);
        return c;
    }
    if (c.oracle.size() == std::string(kExternalPrefix).size())
        throw ContractError(source + ": oracle.name: an external oracle needs a runner name after 'external:'");
    // validate() knows only libkcv's oracles; the rest of its checks apply unchanged, so they
    // run on a copy that names a built-in oracle in place of the external one.
    Contract probe = c;
    probe.oracle = oracle_names().front();
    validate(probe);
    return c;
}

}  // namespace kcv::py
