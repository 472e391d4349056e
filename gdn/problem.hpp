// The problem every implementation of the gated linear recurrence solves: which member of the
// family, the sizes and the sequences. gdn/oracle/gdn_oracle.hpp states the recurrence and the
// layout these sizes describe.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kcv::gdn {

enum class GateKind : uint8_t { none, scalar, channel };

// A member of the family: the gate kind and whether the delta term is on.
struct Member {
    GateKind gate = GateKind::none;
    bool delta = false;
    bool operator==(const Member&) const = default;
};

inline constexpr Member kLinearAttention{GateKind::none, false};
inline constexpr Member kSsd{GateKind::scalar, false};        // Mamba-2, simple GLA
inline constexpr Member kGla{GateKind::channel, false};
inline constexpr Member kGatedDeltaNet{GateKind::scalar, true};
inline constexpr Member kKda{GateKind::channel, true};

// "linear_attention", "ssd", "gla", "gdn", "kda"; throws std::invalid_argument otherwise.
Member member_from_name(std::string_view name);
const char* member_name(Member m);
std::vector<Member> all_members();

struct Shape {
    int64_t B = 1, T = 1, H = 1, HV = 1, K = 1, V = 1;
    std::vector<int64_t> cu_seqlens;   // empty: B sequences of length T

    int64_t sequences() const;
    // Elements of each tensor of the layout (gdn/oracle/gdn_oracle.hpp).
    int64_t qk_size() const { return B * T * H * K; }
    int64_t v_size() const { return B * T * HV * V; }
    int64_t beta_size() const { return B * T * HV; }
    int64_t g_size(GateKind gate) const;
    int64_t state_size() const { return sequences() * HV * K * V; }
};

struct Problem {
    Member member;
    Shape shape;
    double scale = 1.0;
};

// One sequence of a problem: tokens [start, start + length) of batch row `batch`.
struct Span {
    int64_t batch, start, length;
};
// Sequence n of the problem: batch row n without cu_seqlens, else tokens [cu[n], cu[n+1]).
std::vector<Span> sequence_spans(const Shape& s);

// Throws std::invalid_argument naming the problem: positive sizes, HV a multiple of H, and for
// varlen B = 1 and cu_seqlens non-decreasing from 0 to T.
void validate(const Problem& p);

// Inputs of a native call of the family (the CPU controls' gdn/cpu/kcv_call_io.hpp, the CUDA
// candidates' kernels/gdn/cuda/gdn_call.cuh): q, k, v, [g], [beta], [h0], for the backward do and
// [dht], and [cu_seqlens] last.
inline int call_input_count(bool gated, bool delta, bool initial_state, bool backward, bool final_state,
                            bool varlen) {
    return 3 + gated + delta + initial_state + (backward ? 1 + final_state : 0) + varlen;
}

}  // namespace kcv::gdn
