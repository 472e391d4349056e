// The defences that run on the project's own kernels: the red team (each kernel must fail its
// target gate) and the positive controls (each must fail none). Kernels describe themselves
// through an exported manifest, `const char* kcv_kernel_manifest(void)` returning JSON.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcv/record.hpp"
#include "kcv/verify.hpp"

namespace kcv {

struct KernelManifest {
    std::string path, role, name, description, target_gate;
    std::vector<std::string> contracts;
};
// Reads the manifest of every kcv_redteam_*.so and kcv_controls_*.so in dir (each in a worker).
std::vector<KernelManifest> discover_kernels(const std::string& dir);

struct RedteamEntry {
    KernelManifest kernel;
    Record record;
    std::vector<std::string> failed_gates;
    bool caught = false;   // the target gate failed
};
struct ControlEntry {
    KernelManifest kernel;
    std::vector<Record> records;            // one per contract the control serves
    std::vector<std::string> failed_gates;  // union over them
    bool clean() const;                     // no gate failed and every contract could be judged
};
struct RedteamReport {
    std::vector<RedteamEntry> redteam;
    std::vector<ControlEntry> controls;
    int caught() const;
    int clean_controls() const;
};

using Progress = std::function<void(const std::string& what, int done, int total)>;
// Candidates are the kernels found in scan_dir (default: the kernel directory; its cuda/
// folder holds the CUDA forms); positive controls always come from the kernel directory.
RedteamReport run_redteam(const VerifyOptions& opts, const Progress& progress = {}, const std::string& scan_dir = "");
nlohmann::json to_json(const RedteamReport& r);   // {"redteam": [...], "controls": [...]}

}  // namespace kcv
