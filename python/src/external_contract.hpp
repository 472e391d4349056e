// Contracts whose reference oracle lives outside libkcv. An opaque task (a KernelBench Model)
// is described by a contract document like any other, produced by the Python package from the
// problem module, with `oracle.name = "external:<runner>"`: the Python executor computes y* with
// the named runner, and libkcv's gates judge what it computed.
#pragma once

#include <string>

#include "kcv/contract.hpp"

namespace kcv::py {

bool external_oracle(const Contract& c);

// Parses a contract document (JSON or TOML) and validates it; validate() accepts external oracles.
Contract read_contract(const std::string& text, const std::string& source);

}  // namespace kcv::py
