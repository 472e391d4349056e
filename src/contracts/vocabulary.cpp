#include "vocabulary.hpp"

#include <algorithm>
#include <cstdlib>

namespace kcv {

const char* name(ErrorModelKind k) {
    switch (k) {
    case ErrorModelKind::elementwise: return "elementwise";
    case ErrorModelKind::reduction: return "reduction";
    case ErrorModelKind::scan: return "scan";
    case ErrorModelKind::envelope: return "envelope";
    }
    return "?";
}

const char* name(Determinism d) {
    switch (d) {
    case Determinism::not_guaranteed: return "not_guaranteed";
    case Determinism::run_to_run: return "run_to_run";
    case Determinism::gpu_to_gpu: return "gpu_to_gpu";
    }
    return "?";
}

}  // namespace kcv

namespace kcv::contracts {

const Words& error_model_words() {
    static const Words w = {"elementwise", "reduction", "scan", "envelope"};
    return w;
}

const Words& determinism_words() {
    static const Words w = {"not_guaranteed", "run_to_run", "gpu_to_gpu"};
    return w;
}

const Words& distribution_words() {
    static const Words w = {"normal", "uniform", "integer", "positive", "logits"};
    return w;
}

const Words& structure_words() {
    static const Words w = {"none", "lower_triangular", "upper_triangular"};
    return w;
}

const Words& index_policy_words() {
    static const Words w = {"none", "raise", "clamp", "zero"};
    return w;
}

const Words& dtype_words() {
    static const Words w = [] {
        Words names;
        for (int t = 0; t <= int(DType::boolean); ++t) names.emplace_back(name(DType(t)));
        return names;
    }();
    return w;
}

const Words& violation_words() {
    static const Words w = {
        "PRC-01", "PRC-02", "PRC-03", "ORD-01", "ORD-02", "ORD-03", "CMP-01", "CMP-02",
        "EXC-01", "EXC-02", "RES-01", "RES-02",
        "poison-dependent", "run-to-run", "aliasing", "input-mutation", "stale-or-cached",
        "nan-swallowed", "nan-invented", "inf-lost", "inf-invented", "inf-sign",
        "ftz-output", "daz-input", "oob-write", "oob-read", "index-policy",
        "launch-error", "smem-budget", "tmem-budget", "register-budget",
    };
    return w;
}

std::optional<ErrorModelKind> error_model_from(std::string_view word) {
    const Words& w = error_model_words();
    for (size_t i = 0; i < w.size(); ++i)
        if (w[i] == word) return ErrorModelKind(i);
    return std::nullopt;
}

std::optional<Determinism> determinism_from(std::string_view word) {
    const Words& w = determinism_words();
    for (size_t i = 0; i < w.size(); ++i)
        if (w[i] == word) return Determinism(i);
    return std::nullopt;
}

int index_policy_code(std::string_view policy) {
    const Words& w = index_policy_words();
    for (size_t i = 0; i < w.size(); ++i)
        if (w[i] == policy) return int(i) - 1;
    return -1;
}

bool contains(const Words& words, std::string_view word) {
    return std::find(words.begin(), words.end(), word) != words.end();
}

std::string join(const Words& words) {
    std::string out;
    for (const std::string& w : words) {
        if (!out.empty()) out += ", ";
        out += w;
    }
    return out;
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

}  // namespace

std::string did_you_mean(std::string_view word, const Words& words) {
    // Longer strings are not typos of a short keyword; skipping them keeps the cost bounded.
    if (word.empty() || word.size() > 64) return "";
    const size_t limit = word.size() <= 3 ? 1 : 2;
    const std::string* best = nullptr;
    size_t best_distance = limit + 1;
    for (const std::string& w : words) {
        size_t d = edit_distance(word, w);
        if (d < best_distance) {
            best_distance = d;
            best = &w;
        }
    }
    return best ? " (did you mean '" + *best + "'?)" : "";
}

bool is_identifier(std::string_view s) {
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (s.empty() || !alpha(s[0])) return false;
    return std::all_of(s.begin(), s.end(), [&](char c) { return alpha(c) || digit(c); });
}

bool is_contract_id(std::string_view s) {
    auto allowed = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-';
    };
    return !s.empty() && s[0] != '.' && std::all_of(s.begin(), s.end(), allowed);
}

std::string quote(std::string_view text) {
    constexpr size_t kMax = 80;
    std::string out = "'";
    for (size_t i = 0; i < text.size() && i < kMax; ++i) {
        unsigned char c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += char(c);
        }
    }
    if (text.size() > kMax) out += "...";
    return out + "'";
}

std::string child_path(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
}

std::string element_path(const std::string& parent, size_t index) {
    return parent + "[" + std::to_string(index) + "]";
}

std::string contract_message(const std::string& source, int line, const std::string& path,
                             const std::string& problem) {
    std::string m = source;
    if (line > 0) m += ":" + std::to_string(line);
    m += ": ";
    if (!path.empty()) m += path + ": ";
    return m + problem;
}

}  // namespace kcv::contracts
