// Verifying one candidate against one contract: every gate, each in its own sandboxed worker,
// with the fairness rules applied (a gate the positive controls fail is n/a; a failure is
// reported only after it replays).
#pragma once

#include <string>
#include <vector>

#include "kcv/contract.hpp"
#include "kcv/gate.hpp"
#include "kcv/record.hpp"

namespace kcv {

struct VerifyOptions {
    Settings settings;
    std::vector<std::string> only_gates;   // empty: all twelve
    std::string only_probe;                // replay: run the gate's probes up to this one
    bool sandbox = true;                   // each gate in a forked worker with a time limit
    bool check_controls = true;            // fairness rule 1
    bool confirm_failures = true;          // fairness rule 17: replay a failing probe first
    std::string kernel_dir;                // where kcv_controls_<name>.so live; "" = default
    double timeout_s = 0;                  // per gate; 0 = the contract's measurement.timeout_s
};

// Never throws for a candidate's misbehaviour or a missing file: such problems land in the
// record's error fields.
Record verify(const Contract& c, const std::string& candidate_path, const VerifyOptions& opts);

// The directory holding the project's kernels: $KCV_KERNEL_DIR, else <dir of the kcv
// executable>/../kernels, else the build tree's.
std::string default_kernel_dir();
std::string control_path(const std::string& kernel_dir, const std::string& control);

// Runs one gate on one loaded candidate in this process (no sandbox). With only_probe, runs the
// gate's probes in order up to and including that one.
GateResult run_gate(const GateDef& g, const Contract& c, Backend& candidate,
                    const std::vector<Backend*>& controls, const Settings& s, const std::string& only_probe);

// Content hash of a file (XXH3-128, hex), "" if unreadable.
std::string file_hash(const std::string& path);

}  // namespace kcv
