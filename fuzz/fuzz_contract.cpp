// libFuzzer target for the contract reader. For any bytes, parse_contract must return a
// Contract or throw ContractError: no crash, no hang, no other exception. Whatever it accepts
// must pass through validate() and to_json() the same way and read back equal, so the fuzzer
// also checks the round trip that records rely on.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kcv/contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    kcv::Contract c;
    try {
        c = kcv::parse_contract(text, "fuzz");
    } catch (const kcv::ContractError&) {
        return 0;
    }
    bool valid = true;
    try {
        kcv::validate(c);
    } catch (const kcv::ContractError&) {
        valid = false;
    }
    if (valid) {
        // A valid contract's shapes and K values evaluate at the nominal sizes; the only
        // admissible error is a 64-bit overflow of a product.
        try {
            kcv::DimValues dims = kcv::nominal_dims(c);
            for (const kcv::InputSpec& in : c.inputs) kcv::eval_shape(in.shape, dims);
            for (const kcv::OutputSpec& out : c.outputs) {
                kcv::eval_shape(out.shape, dims);
                kcv::eval_dim_expr(out.k, dims);
            }
        } catch (const kcv::ContractError&) {
        }
    }
    const std::string json = kcv::to_json(c);
    // Not caught: a contract that to_json writes but parse_contract refuses is a bug.
    const kcv::Contract back = kcv::parse_contract(json, "fuzz");
    if (!(back == c)) {
        std::fprintf(stderr, "round trip changed the contract:\n%s\nread back as\n%s\n", json.c_str(),
                     kcv::to_json(back).c_str());
        std::abort();
    }
    return 0;
}
