#include "torch_environment.hpp"

#include <string>

#include "gates/gate_common.hpp"

namespace kcv::py {

std::vector<Probe> torch_environment_probes(const Contract& c, const Settings& s, bool gpu) {
    std::vector<std::string> toggles = {"tf32", "deterministic"};
    if (gpu) {
        toggles.push_back("cuda-graph");
        toggles.push_back("side-stream");
    }
    // The task's own values: inputs its reference is known to accept, in the normal range, on
    // which a correct kernel computes the same result under every toggle.
    std::vector<Probe> probes;
    for (const std::string& t : toggles) {
        Probe p = gates::make_probe(c, s, "CMP-02", "torch:" + t);
        p.family = Family::of(Family::Kind::task);
        p.note = {{"signature_class", "ambient-state: " + t}, {"torch_env", t}};
        probes.push_back(std::move(p));
    }
    return probes;
}

}  // namespace kcv::py
