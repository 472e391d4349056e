// Names of the members and the checks every implementation applies to a problem.
#include "problem.hpp"

namespace kcv::gdn {

Member member_from_name(std::string_view name) {
    if (name == "linear_attention") return kLinearAttention;
    if (name == "ssd") return kSsd;
    if (name == "gla") return kGla;
    if (name == "gdn") return kGatedDeltaNet;
    if (name == "kda") return kKda;
    throw std::invalid_argument("unknown recurrence member '" + std::string(name) +
                                "' (known: linear_attention, ssd, gla, gdn, kda)");
}

const char* member_name(Member m) {
    if (m == kLinearAttention) return "linear_attention";
    if (m == kSsd) return "ssd";
    if (m == kGla) return "gla";
    if (m == kGatedDeltaNet) return "gdn";
    if (m == kKda) return "kda";
    return m.delta ? "delta-without-gate" : "unknown";
}

std::vector<Member> all_members() { return {kLinearAttention, kSsd, kGla, kGatedDeltaNet, kKda}; }

int64_t Shape::sequences() const {
    return cu_seqlens.empty() ? B : static_cast<int64_t>(cu_seqlens.size()) - 1;
}

int64_t Shape::g_size(GateKind gate) const {
    switch (gate) {
        case GateKind::none: return 0;
        case GateKind::scalar: return B * T * HV;
        case GateKind::channel: return B * T * HV * K;
    }
    return 0;
}

std::vector<Span> sequence_spans(const Shape& s) {
    std::vector<Span> spans;
    if (s.cu_seqlens.empty()) {
        for (int64_t b = 0; b < s.B; ++b) spans.push_back({b, 0, s.T});
    } else {
        for (size_t n = 0; n + 1 < s.cu_seqlens.size(); ++n)
            spans.push_back({0, s.cu_seqlens[n], s.cu_seqlens[n + 1] - s.cu_seqlens[n]});
    }
    return spans;
}

void validate(const Problem& p) {
    const Shape& s = p.shape;
    auto bad = [](const std::string& m) { throw std::invalid_argument("recurrence problem: " + m); };
    if (s.B < 1 || s.T < 0 || s.H < 1 || s.HV < 1 || s.K < 1 || s.V < 1)
        bad("sizes must be positive (B, H, HV, K, V >= 1, T >= 0)");
    if (s.HV % s.H != 0)
        bad("HV = " + std::to_string(s.HV) + " is not a multiple of H = " + std::to_string(s.H));
    if (p.member.delta && p.member.gate == GateKind::none) bad("the delta term without a gate is not a member");
    if (!s.cu_seqlens.empty()) {
        if (s.B != 1) bad("cu_seqlens needs B = 1, got B = " + std::to_string(s.B));
        if (s.cu_seqlens.size() < 2) bad("cu_seqlens needs at least two entries");
        if (s.cu_seqlens.front() != 0 || s.cu_seqlens.back() != s.T)
            bad("cu_seqlens must run from 0 to T = " + std::to_string(s.T));
        for (size_t i = 1; i < s.cu_seqlens.size(); ++i)
            if (s.cu_seqlens[i] < s.cu_seqlens[i - 1])
                bad("cu_seqlens decreases at entry " + std::to_string(i));
    }
}

}  // namespace kcv::gdn
