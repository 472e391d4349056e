// Checks a TOML text before toml++ sees it, refusing the inputs that toml++ 3.3 cannot parse
// safely. Every input refused here is invalid TOML, with one documented exception below.
#pragma once

#include <string>

namespace kcv::contracts {

// Throws ContractError ("<source>:<line>: TOML syntax error: ...") when the text
//  - holds more than kMaxNestingCharacters '.', '[' and '{': toml++ builds and frees dotted
//    keys ("a.b.c = 1") and nested values recursively, so deep nesting could overflow the
//    stack; each level costs one of these characters, so bounding their count bounds depth;
//  - holds a raw control character other than tab and line ends (never valid TOML);
//  - holds a non-ASCII character outside strings and comments (never valid TOML 1.0), or as
//    the first character after a line-ending backslash in a multi-line string (valid TOML,
//    but refused). toml++ 3.3 classifies such characters as whitespace or not through a lookup
//    that reaches __builtin_unreachable() for many code points (upstream issue 190), and it
//    can reach them while reading a bare value ahead through quotes, so "outside strings"
//    follows toml++'s view of where strings start.
void precheck_toml(const std::string& text, const std::string& source);

constexpr size_t kMaxNestingCharacters = 4096;

}  // namespace kcv::contracts
