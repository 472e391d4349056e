#include "external_contract.hpp"

#include "kcv/oracle.hpp"

namespace kcv::py {

bool external_oracle(const Contract& c) { return is_external_oracle(c.oracle); }

Contract read_contract(const std::string& text, const std::string& source) {
    Contract c = parse_contract(text, source);
    validate(c);
    return c;
}

}  // namespace kcv::py
