// Human-readable renderings of records: console tables and the self-contained HTML page.
#pragma once

#include <string>

#include "kcv/record.hpp"
#include "kcv/redteam.hpp"

namespace kcv {

struct ConsoleStyle {
    bool color = false;   // ANSI colour, only on a TTY
};
ConsoleStyle console_style_for(int fd);

std::string render_record(const Record& r, const ConsoleStyle& st);
std::string render_redteam(const RedteamReport& r, const ConsoleStyle& st);
// A page that works with no network: inline CSS and SVG, no scripts from elsewhere.
std::string render_redteam_html(const RedteamReport& r);
std::string html_escape(const std::string& s);

}  // namespace kcv
