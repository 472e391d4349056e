#include "document.hpp"

#include <algorithm>
#include <set>
#include <vector>

// toml++ 3.3 asserts preconditions its parser does not guarantee: "[{" in a table header fails
// an assertion right before the code that reports it as a syntax error. Under NDEBUG its
// assertions become optimiser assumptions (__builtin_assume with clang), which is undefined
// behaviour on such input. This is the only file that compiles toml++, so it compiles it with
// assertions that neither check nor assume, whatever NDEBUG says; the parser then reports the
// error, as the library's own release builds with gcc do.
#define TOML_ASSERT(expr) static_assert(true)
#pragma push_macro("NDEBUG")
#undef NDEBUG
// The installed toml++ names its entry header toml.h (3.3) or toml.hpp (later releases).
#if __has_include(<toml++/toml.hpp>)
#include <toml++/toml.hpp>
#else
#include <toml++/toml.h>
#endif
#pragma pop_macro("NDEBUG")

#include "kcv/contract.hpp"
#include "toml_precheck.hpp"
#include "vocabulary.hpp"

namespace kcv::contracts {

using nlohmann::json;

Document::Document(const std::string& text, const std::string& source) : source_(source) {
    if (text.size() > kMaxBytes)
        fail("", "file of " + std::to_string(text.size()) + " bytes exceeds the " +
                     std::to_string(kMaxBytes) + "-byte limit for a contract");
    auto first = std::find_if(text.begin(), text.end(),
                              [](char c) { return c != ' ' && c != '\t' && c != '\n' && c != '\r'; });
    if (first != text.end() && *first == '{')
        read_json(text);
    else
        read_toml(text);
}

int Document::line(const std::string& path) const {
    std::string p = path;
    while (true) {
        auto it = lines_.find(p);
        if (it != lines_.end()) return it->second;
        size_t cut = p.find_last_of(".[");
        if (cut == std::string::npos || cut == 0) return 0;
        p.resize(cut);
    }
}

void Document::fail(const std::string& path, const std::string& problem) const {
    throw ContractError(contract_message(source_, line(path), path, problem));
}

namespace {

// Converts a parsed TOML tree into the shared JSON tree, remembering each value's line.
class TomlConverter {
public:
    TomlConverter(const Document& doc, std::map<std::string, int>& lines) : doc_(doc), lines_(lines) {}

    json convert(const toml::node& node, const std::string& path, int depth) {
        if (depth > Document::kMaxDepth)
            doc_.fail(path, "nested deeper than " + std::to_string(Document::kMaxDepth) + " levels");
        if (int line = int(node.source().begin.line); line > 0) lines_.emplace(path, line);
        switch (node.type()) {
        case toml::node_type::table: {
            json out = json::object();
            for (auto&& [key, child] : *node.as_table()) {
                std::string k(key.str());
                out[k] = convert(child, child_path(path, k), depth + 1);
            }
            return out;
        }
        case toml::node_type::array: {
            json out = json::array();
            const toml::array& a = *node.as_array();
            for (size_t i = 0; i < a.size(); ++i) out.push_back(convert(a[i], element_path(path, i), depth + 1));
            return out;
        }
        case toml::node_type::string: return node.as_string()->get();
        case toml::node_type::integer: return node.as_integer()->get();
        case toml::node_type::floating_point: return node.as_floating_point()->get();
        case toml::node_type::boolean: return node.as_boolean()->get();
        default: doc_.fail(path, "dates and times are not contract values");
        }
    }

private:
    const Document& doc_;
    std::map<std::string, int>& lines_;
};

}  // namespace

void Document::read_toml(const std::string& text) {
    precheck_toml(text, source_);
    toml::table table;
    try {
        table = toml::parse(text, source_);
    } catch (const toml::parse_error& e) {
        const auto& where = e.source().begin;
        std::string at = where.line > 0 ? std::to_string(where.line) + ":" + std::to_string(where.column) + ": " : "";
        throw ContractError(source_ + ":" + at + "TOML syntax error: " + std::string(e.description()));
    }
    root_ = TomlConverter(*this, lines_).convert(table, "", 0);
}

void Document::read_json(const std::string& text) {
    // nlohmann keeps the last of two equal keys silently; a contract must not, so the parse
    // callback tracks the keys of every open object. It also bounds the nesting depth.
    struct Frame {
        std::string path;
        bool array = false;
        size_t next_index = 0;
        std::set<std::string> keys;
        std::string key;
    };
    std::vector<Frame> open;
    auto path_of_next_value = [&]() -> std::string {
        if (open.empty()) return "";
        Frame& top = open.back();
        return top.array ? element_path(top.path, top.next_index++) : child_path(top.path, top.key);
    };
    auto callback = [&](int, json::parse_event_t event, json& parsed) -> bool {
        switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start: {
            std::string path = path_of_next_value();
            if (int(open.size()) >= kMaxDepth)
                fail(path, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
            open.push_back(Frame{path, event == json::parse_event_t::array_start, 0, {}, {}});
            break;
        }
        case json::parse_event_t::key: {
            Frame& top = open.back();
            top.key = parsed.get<std::string>();
            if (!top.keys.insert(top.key).second)
                fail(child_path(top.path, top.key), "duplicate key " + quote(top.key));
            break;
        }
        case json::parse_event_t::value:
            if (!open.empty() && open.back().array) ++open.back().next_index;
            break;
        case json::parse_event_t::object_end:
        case json::parse_event_t::array_end:
            open.pop_back();
            break;
        }
        return true;
    };
    try {
        root_ = json::parse(text, callback);
    } catch (const json::exception& e) {
        std::string what = e.what();
        // Drop nlohmann's "[json.exception.parse_error.101] " prefix; the rest says where and why.
        if (size_t cut = what.find("] "); cut != std::string::npos) what = what.substr(cut + 2);
        fail("", "JSON syntax error: " + what);
    }
}

}  // namespace kcv::contracts
