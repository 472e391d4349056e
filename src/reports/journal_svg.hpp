// Inline SVG charts for the report pages: plain markup, no scripts, readable with no network.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kcv::svg {

struct Bar {
    std::string label;        // left of the bar
    double value = 0;         // in [0, max]
    std::string text;         // right of the bar ("12.5% (3/24)")
    std::string tooltip;      // <title>
    std::string color = "#c0392b";
};
// Horizontal bars, one per row, scaled to max_value.
std::string bar_chart(const std::string& label, const std::vector<Bar>& bars, double max_value);

// A 2×2 matrix: rows and columns are named; counts[row][col]; `alarm` marks cells drawn red
// (the disagreements that matter).
struct Matrix2 {
    std::string title, row_axis, col_axis;
    std::string rows[2], cols[2];
    long long counts[2][2] = {};
    bool alarm[2][2] = {};
};
std::string matrix_chart(const Matrix2& m);

// Lines over a shared x axis; y in [0, 1] shown as percent. A series may carry a band (low and
// high per point) drawn as a shaded area behind its line.
struct Series {
    std::string name, color;
    std::vector<std::pair<double, double>> points;   // (x, y)
    std::vector<std::pair<double, double>> band;      // (low, high) per point, or empty
};
struct LineChart {
    std::string title, x_label, y_label;
    std::vector<double> x_ticks;
    std::vector<Series> series;
};
std::string line_chart(const LineChart& c);

std::string escape(const std::string& s);

}  // namespace kcv::svg
