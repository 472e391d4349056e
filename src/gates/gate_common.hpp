// Internal to the gates: the definitions each gate file provides, and the pieces they share.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kcv/error_model.hpp"
#include "kcv/gate.hpp"

namespace kcv::gates {

// One per file in src/gates/, registered in registry.cpp.
const GateDef& prc01();
const GateDef& prc02();
const GateDef& prc03();
const GateDef& ord01();
const GateDef& ord02();
const GateDef& ord03();
const GateDef& cmp01();
const GateDef& cmp02();
const GateDef& exc01();
const GateDef& exc02();
const GateDef& res01();
const GateDef& res02();

// A probe with the shared defaults filled in: nominal dims (overridden by `dims`), one call
// whose input seed derives from (settings.seed, id), output poison 0xFF.
Probe make_probe(const Contract& c, const Settings& s, const std::string& gate, const std::string& label,
                 const DimValues& dims = {});

// The ORD-01 criterion for one call of an outcome, over every output: the contract's error
// model (analytic, or envelope against the controls), r ≤ 1. Used by every gate that requires
// "ORD-01 holds".
struct NumericCheck {
    bool pass = true;
    double r = 0;                  // the largest ratio over outputs (NaN if any NaN compared)
    size_t output = 0;             // output with the largest ratio
    std::string model;             // "analytic" | "envelope"
    Evidence evidence;             // filled for the worst output when !pass
};
NumericCheck check_outputs(const Contract& c, const Settings& s, const ProbeOutcome& o, size_t call = 0);

// Evidence at an element of one output of one call: coordinates, expected (y* rounded to the
// output dtype) and actual values with their bits.
Evidence evidence_at(const ProbeOutcome& o, size_t call, size_t output, int64_t worst, int64_t first,
                     const std::string& signature, const Contract& c);

// The first output element whose bits differ between two calls, over every output, and how
// many elements of that output differ. Throws std::logic_error if an output changed shape or
// dtype between the calls (the executor shapes outputs, so that is a verifier bug).
struct BitDifference {
    size_t output = 0;
    int64_t index = -1;
    int64_t count = 0;
};
std::optional<BitDifference> first_bit_difference(const CallOutcome& a, const CallOutcome& b, const char* gate);

// Whether an output is judged under the envelope model, whose error bound comes from the
// positive controls on the same inputs: such probes must run with_controls.
bool needs_controls(const Contract& c);

// How evidence prints a number (a printf format for one double) and an element ("y[3,14]").
std::string format_number(double v, const char* format);
std::string element_name(const std::string& name, const Tensor& t, int64_t i);

// Shared verdict helpers.
GateResult make_result(const GateDef& g);
// A probe that could not run, or a candidate call that returned nonzero, ends the gate with
// verdict error (verifier problem) or fail (launch error) in a uniform way; returns true if so.
bool probe_failed(const ProbeOutcome& o, GateResult& r);
// Adds a signature class once.
void add_signature(GateResult& r, const std::string& cls);
// A call that returned nonzero becomes launch-error evidence; returns true if it did.
bool launch_error(GateResult& r, const ProbeOutcome& o, const CallOutcome& co);

}  // namespace kcv::gates
