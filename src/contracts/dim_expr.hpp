// Dimension expressions: a shape entry or a K value is a product of dimension names and
// positive integers, "K", "M*N", "4", "2*T". Nothing else is needed by the operator set, and a
// small grammar keeps every contract easy to read and to check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kcv::contracts {

struct DimFactor {
    std::string name;    // a dimension name, or empty for a literal
    int64_t value = 0;   // the literal's value when name is empty
};

// Splits an expression into its factors. Throws ContractError with a message that names the
// expression and the position of the problem (no source: callers add it).
std::vector<DimFactor> parse_dim_expr(const std::string& expr);

}  // namespace kcv::contracts
