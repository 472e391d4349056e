// Inline SVG charts: bars, a 2×2 matrix and line charts, drawn with plain elements so the page
// needs no script and renders the same in every browser.
#include "reports/journal_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kcv::svg {

std::string escape(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

namespace {

std::string fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
}

std::string header(int w, int h, const std::string& label) {
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + std::to_string(w) + "\" height=\"" +
           std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) +
           "\" role=\"img\" aria-label=\"" + escape(label) + "\"><title>" + escape(label) + "</title>";
}

// A rough width of text in the 12 px sans-serif the page uses.
int text_width(const std::string& s) { return static_cast<int>(s.size()) * 7 + 6; }

}  // namespace

std::string bar_chart(const std::string& label, const std::vector<Bar>& bars, double max_value) {
    int label_w = 60;
    for (const auto& b : bars) label_w = std::max(label_w, text_width(b.label));
    const int row = 24, bar_w = 420, text_w = 170, top = 18;
    const int w = label_w + bar_w + text_w, h = static_cast<int>(bars.size()) * row + 12 + top;
    if (!(max_value > 0)) max_value = 1;
    std::ostringstream os;
    os << header(w, h, label);
    // A scale in quarters of the maximum, so short bars still read against it.
    for (int q = 0; q <= 4; ++q) {
        const double x = label_w + bar_w * q / 4.0;
        char tick[32];
        std::snprintf(tick, sizeof tick, "%g", max_value * q / 4.0 * (max_value == 1.0 ? 100.0 : 1.0));
        os << "<line x1=\"" << fmt(x) << "\" y1=\"" << top << "\" x2=\"" << fmt(x) << "\" y2=\"" << (h - 6)
           << "\" stroke=\"" << (q == 0 ? "#888" : "#eee") << "\" stroke-width=\"1\"/><text x=\"" << fmt(x)
           << "\" y=\"12\" text-anchor=\"middle\" font-size=\"10\" fill=\"#777\">" << tick
           << (max_value == 1.0 ? "%" : "") << "</text>";
    }
    for (size_t i = 0; i < bars.size(); ++i) {
        const Bar& b = bars[i];
        const double v = std::isfinite(b.value) ? std::clamp(b.value, 0.0, max_value) : 0.0;
        const double bw = bar_w * v / max_value;
        const int y = static_cast<int>(i) * row + 6 + top;
        os << "<g class=\"bar\"><title>" << escape(b.tooltip.empty() ? b.label + ": " + b.text : b.tooltip)
           << "</title><text x=\"" << (label_w - 6) << "\" y=\"" << (y + 14)
           << "\" text-anchor=\"end\" font-size=\"12\">" << escape(b.label) << "</text><rect x=\"" << label_w
           << "\" y=\"" << y << "\" width=\"" << fmt(std::max(bw, v > 0 ? 1.0 : 0.0)) << "\" height=\"" << (row - 8)
           << "\" fill=\"" << b.color << "\"/><text x=\"" << fmt(label_w + bw + 5) << "\" y=\"" << (y + 13)
           << "\" font-size=\"12\">" << escape(b.text) << "</text></g>";
    }
    os << "</svg>";
    return os.str();
}

std::string matrix_chart(const Matrix2& m) {
    const int cell_w = 150, cell_h = 62, left = 150, top = 58;
    const int w = left + 2 * cell_w + 10, h = top + 2 * cell_h + 12;
    long long total = 0;
    for (const auto& r : m.counts)
        for (long long c : r) total += c;
    std::ostringstream os;
    os << header(w, h, m.title);
    os << "<text x=\"" << (left + cell_w) << "\" y=\"16\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">"
       << escape(m.title) << "</text>";
    os << "<text x=\"" << (left + cell_w) << "\" y=\"34\" text-anchor=\"middle\" font-size=\"12\">"
       << escape(m.col_axis) << "</text>";
    for (int c = 0; c < 2; ++c) {
        os << "<text x=\"" << (left + c * cell_w + cell_w / 2) << "\" y=\"" << (top - 6)
           << "\" text-anchor=\"middle\" font-size=\"12\">" << escape(m.cols[c]) << "</text>";
    }
    for (int r = 0; r < 2; ++r) {
        os << "<text x=\"" << (left - 8) << "\" y=\"" << (top + r * cell_h + cell_h / 2 + 4)
           << "\" text-anchor=\"end\" font-size=\"12\">" << escape(m.row_axis + " " + m.rows[r]) << "</text>";
        for (int c = 0; c < 2; ++c) {
            const long long n = m.counts[r][c];
            const double share = total > 0 ? double(n) / double(total) : 0.0;
            // Opacity grows with the share so the eye finds the big cells; alarms are red.
            const char* hue = m.alarm[r][c] ? "192,57,43" : "39,110,180";
            const int x = left + c * cell_w, y = top + r * cell_h;
            os << "<g class=\"cell\"><title>" << escape(m.row_axis + " " + m.rows[r] + ", " + m.col_axis + " " +
                                                        m.cols[c] + ": " + std::to_string(n))
               << "</title><rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << (cell_w - 4) << "\" height=\""
               << (cell_h - 4) << "\" fill=\"rgba(" << hue << "," << fmt(0.12 + 0.75 * share)
               << ")\" stroke=\"#666\"/><text x=\"" << (x + cell_w / 2 - 2) << "\" y=\"" << (y + 26)
               << "\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">" << n << "</text><text x=\""
               << (x + cell_w / 2 - 2) << "\" y=\"" << (y + 46) << "\" text-anchor=\"middle\" font-size=\"12\">"
               << fmt(100.0 * share) << "%</text></g>";
        }
    }
    os << "</svg>";
    return os.str();
}

std::string line_chart(const LineChart& c) {
    const int left = 52, right = 120, top = 28, bottom = 44, plot_w = 300, plot_h = 180;
    const int w = left + plot_w + right, h = top + plot_h + bottom;
    double x0 = 0, x1 = 1;
    if (!c.x_ticks.empty()) {
        x0 = *std::min_element(c.x_ticks.begin(), c.x_ticks.end());
        x1 = *std::max_element(c.x_ticks.begin(), c.x_ticks.end());
    }
    if (!(x1 > x0)) x1 = x0 + 1;
    auto px = [&](double x) { return left + plot_w * (x - x0) / (x1 - x0); };
    auto py = [&](double y) { return top + plot_h * (1.0 - std::clamp(y, 0.0, 1.0)); };
    std::ostringstream os;
    os << header(w, h, c.title);
    os << "<text x=\"" << (left + plot_w / 2) << "\" y=\"16\" text-anchor=\"middle\" font-size=\"13\" "
          "font-weight=\"bold\">"
       << escape(c.title) << "</text>";
    for (int k = 0; k <= 4; ++k) {
        const double y = py(k / 4.0);
        os << "<line x1=\"" << left << "\" y1=\"" << fmt(y) << "\" x2=\"" << (left + plot_w) << "\" y2=\"" << fmt(y)
           << "\" stroke=\"#e3e3e3\"/><text x=\"" << (left - 6) << "\" y=\"" << fmt(y + 4)
           << "\" text-anchor=\"end\" font-size=\"11\">" << 25 * k << "%</text>";
    }
    for (double t : c.x_ticks) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", t);
        os << "<line x1=\"" << fmt(px(t)) << "\" y1=\"" << top << "\" x2=\"" << fmt(px(t)) << "\" y2=\""
           << (top + plot_h) << "\" stroke=\"#f0f0f0\"/><text x=\"" << fmt(px(t)) << "\" y=\"" << (top + plot_h + 16)
           << "\" text-anchor=\"middle\" font-size=\"11\">" << buf << "</text>";
    }
    os << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\"" << plot_h
       << "\" fill=\"none\" stroke=\"#888\"/>";
    os << "<text x=\"" << (left + plot_w / 2) << "\" y=\"" << (h - 6) << "\" text-anchor=\"middle\" font-size=\"12\">"
       << escape(c.x_label) << "</text>";
    os << "<text x=\"14\" y=\"" << (top + plot_h / 2) << "\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 14 "
       << (top + plot_h / 2) << ")\">" << escape(c.y_label) << "</text>";
    for (size_t si = 0; si < c.series.size(); ++si) {
        const Series& s = c.series[si];
        if (!s.band.empty() && s.band.size() == s.points.size()) {
            std::string pts;
            for (size_t i = 0; i < s.points.size(); ++i)
                pts += fmt(px(s.points[i].first)) + "," + fmt(py(s.band[i].second)) + " ";
            for (size_t i = s.points.size(); i-- > 0;)
                pts += fmt(px(s.points[i].first)) + "," + fmt(py(s.band[i].first)) + " ";
            os << "<polygon points=\"" << pts << "\" fill=\"" << s.color << "\" fill-opacity=\"0.18\" stroke=\"none\"/>";
        }
        std::string pts;
        for (const auto& [x, y] : s.points) pts += fmt(px(x)) + "," + fmt(py(y)) + " ";
        // Dashes differ per series, so lines lying on one another stay distinguishable.
        static const char* kDashes[] = {"", "7 4", "2 3", "9 3 2 3"};
        const char* dash = kDashes[si % 4];
        os << "<g class=\"series\"><title>" << escape(s.name) << "</title><polyline points=\"" << pts
           << "\" fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
           << (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) << "/>";
        for (const auto& [x, y] : s.points) {
            os << "<circle cx=\"" << fmt(px(x)) << "\" cy=\"" << fmt(py(y)) << "\" r=\"3\" fill=\"" << s.color
               << "\"><title>" << escape(s.name) << ": " << fmt(100.0 * y) << "%</title></circle>";
        }
        os << "</g>";
        const int ly = top + 10 + static_cast<int>(si) * 18;
        os << "<line x1=\"" << (left + plot_w + 8) << "\" y1=\"" << (ly - 4) << "\" x2=\"" << (left + plot_w + 26)
           << "\" y2=\"" << (ly - 4) << "\" stroke=\"" << s.color << "\" stroke-width=\"2\""
           << (*dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) << "/><text x=\"" << (left + plot_w + 30) << "\" y=\"" << ly << "\" font-size=\"11\">"
           << escape(s.name) << "</text>";
    }
    os << "</svg>";
    return os.str();
}

}  // namespace kcv::svg
