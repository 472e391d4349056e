// A contract file read into a tree. TOML and JSON become the same nlohmann::json tree, so one
// decoder serves both formats; for TOML the tree keeps the line of every value for messages.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace kcv::contracts {

class Document {
public:
    // Reads TOML, or JSON when the first non-space character is '{'. Throws ContractError on a
    // syntax error, a duplicate key, a date or time value, oversized or too deeply nested input.
    Document(const std::string& text, const std::string& source);

    const nlohmann::json& root() const { return root_; }
    const std::string& source() const { return source_; }
    // The line of the value at `path` ("inputs[1].dtype") or of its nearest ancestor that has
    // one; 0 when unknown (JSON).
    int line(const std::string& path) const;
    [[noreturn]] void fail(const std::string& path, const std::string& problem) const;

    static constexpr size_t kMaxBytes = size_t(1) << 20;
    static constexpr int kMaxDepth = 32;

private:
    void read_toml(const std::string& text);
    void read_json(const std::string& text);

    nlohmann::json root_;
    std::map<std::string, int> lines_;
    std::string source_;
};

}  // namespace kcv::contracts
