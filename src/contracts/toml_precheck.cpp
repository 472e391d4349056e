#include "toml_precheck.hpp"

#include <algorithm>
#include <vector>

#include "kcv/contract.hpp"

namespace kcv::contracts {

namespace {

class Scanner {
public:
    Scanner(const std::string& text, const std::string& source) : text_(text), source_(source) {}

    void run() {
        for (i_ = 0; i_ < text_.size(); ++i_) {
            unsigned char c = byte(i_);
            control(c);
            switch (state_) {
            case State::normal: normal(c); break;
            case State::comment:
                if (c == '\n') state_ = State::normal;
                break;
            case State::basic:
                if (c == '\\')
                    skip_escaped();
                else if (c == '"' || c == '\n')
                    state_ = State::normal;
                break;
            case State::literal:
                if (c == '\'' || c == '\n') state_ = State::normal;
                break;
            case State::multiline_basic:
                if (c == '\\')
                    multiline_escape();
                else if (closes(c, '"'))
                    state_ = State::normal;
                break;
            case State::multiline_literal:
                if (closes(c, '\'')) state_ = State::normal;
                break;
            }
            if (byte(i_) == '\n') ++line_;
        }
    }

private:
    enum class State { normal, comment, basic, literal, multiline_basic, multiline_literal };

    unsigned char byte(size_t i) const { return i < text_.size() ? static_cast<unsigned char>(text_[i]) : 0; }
    bool three(size_t i, char q) const { return byte(i) == q && byte(i + 1) == q && byte(i + 2) == q; }

    [[noreturn]] void fail(const std::string& problem) const {
        throw ContractError(source_ + ":" + std::to_string(line_) + ": TOML syntax error: " + problem);
    }

    void control(unsigned char c) const {
        bool line_end = c == '\n' || (c == '\r' && byte(i_ + 1) == '\n');
        if ((c < 0x20 && c != '\t' && !line_end) || c == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            fail(std::string("control character 0x") + hex[c >> 4] + hex[c & 15] +
                 " (write it as an escape inside a string)");
        }
    }

    // Where a quote opens a string. toml++ reads a bare value (a number, a date) ahead to the
    // next terminator, through any quotes ("0'x" and 1="x" are single tokens), and a date can
    // even continue past a space. So on the value side a quote opens a string only where a
    // value starts: right after '=', after '[' opening an array, or after ',' in an array.
    // On the key side (line starts, headers, inline-table keys) toml++ reads no bare value,
    // so every quote opens a string there.
    struct Frame {
        bool array = false;
        bool value_side = false;   // tables: after the '=' of the current key
    };

    bool on_value_side() const { return frames_.back().array || frames_.back().value_side; }

    void normal(unsigned char c) {
        Frame& top = frames_.back();
        switch (c) {
        case ' ': case '\t': case '\r': return;
        case '#': state_ = State::comment; return;
        case '\n':
            if (frames_.size() == 1) top.value_side = false;
            return;
        case '"': case '\'': {
            if (on_value_side() && !expect_value_) {
                expect_value_ = false;
                return;
            }
            bool multiline = three(i_, char(c));
            if (multiline) i_ += 2;
            state_ = c == '"' ? (multiline ? State::multiline_basic : State::basic)
                              : (multiline ? State::multiline_literal : State::literal);
            expect_value_ = false;
            return;
        }
        case '=':
            expect_value_ = !on_value_side();
            if (!top.array) top.value_side = true;
            return;
        case '[':
        case '{':
            if (on_value_side() && expect_value_) {
                frames_.push_back(Frame{c == '[', false});
                expect_value_ = c == '[';
            } else {
                expect_value_ = false;
            }
            return;
        case ',':
            if (top.array)
                expect_value_ = true;
            else if (frames_.size() > 1)
                top.value_side = false;
            return;
        case ']':
        case '}':
            if (frames_.size() > 1 && top.array == (c == ']')) frames_.pop_back();
            expect_value_ = false;
            return;
        default:
            if (c >= 0x80) fail("non-ASCII character outside a string or comment");
            expect_value_ = false;
        }
    }

    // The escaped character is part of the string whatever it is (a quote, a backslash).
    // Every TOML escape is an ASCII character; toml++ 3.3 reaches undefined behaviour on a
    // non-ASCII one, so that invalid escape is refused here.
    void skip_escaped() {
        if (byte(i_ + 1) == '\n' || i_ + 1 >= text_.size()) return;
        ++i_;
        if (byte(i_) >= 0x80) fail("invalid escape: a backslash before a non-ASCII character");
        control(byte(i_));
    }

    // A backslash at the end of a line trims the line break and the whitespace after it.
    void multiline_escape() {
        size_t j = i_ + 1;
        while (byte(j) == ' ' || byte(j) == '\t' || byte(j) == '\r') ++j;
        if (byte(j) != '\n') {
            // toml++ 3.3 reads the whitespace after such a backslash with a test that reaches
            // undefined behaviour on most non-ASCII characters; the document is invalid anyway.
            if (j > i_ + 1 && byte(j) >= 0x80)
                fail("a backslash followed by spaces must end the line (a non-ASCII character follows)");
            skip_escaped();
            return;
        }
        while (byte(j) == ' ' || byte(j) == '\t' || byte(j) == '\r' || byte(j) == '\n') ++j;
        if (byte(j) >= 0x80) {
            line_ += int(std::count(text_.begin() + std::ptrdiff_t(i_), text_.begin() + std::ptrdiff_t(j), '\n'));
            fail("a non-ASCII character right after a line-ending backslash is not supported; "
                 "start the line with an ASCII character or an escape such as \\u00a7");
        }
    }

    // Three quotes close a multi-line string; up to two more quotes right before them belong
    // to the string's content ("""a"""" is the string a").
    bool closes(unsigned char c, char q) {
        if (c != q || !three(i_, q)) return false;
        i_ += 2;
        for (int extra = 0; extra < 2 && byte(i_ + 1) == q; ++extra) ++i_;
        return true;
    }

    const std::string& text_;
    const std::string& source_;
    size_t i_ = 0;
    int line_ = 1;
    State state_ = State::normal;
    std::vector<Frame> frames_ = {Frame{}};   // the document's root table, then open values
    bool expect_value_ = false;
};

}  // namespace

void precheck_toml(const std::string& text, const std::string& source) {
    size_t nesting = size_t(std::count_if(text.begin(), text.end(),
                                          [](char c) { return c == '.' || c == '[' || c == '{'; }));
    if (nesting > kMaxNestingCharacters)
        throw ContractError(source + ": more than " + std::to_string(kMaxNestingCharacters) +
                            " '.', '[' and '{' characters; a contract needs a few hundred at most");
    Scanner(text, source).run();
}

}  // namespace kcv::contracts
