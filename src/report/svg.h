// File: svg.h
// The report's charts, each a standalone SVG document (inline styles, no external fonts or scripts),
// so the same text goes inline into the HTML page and, with --svg, into files of their own.
//
// Every drawn number is also an attribute (data-value on a bar or point, data-bytes on a marker), so
// a test, or a reader's script, checks the picture against the numbers it claims to draw.
#pragma once

#include <string>
#include <vector>

#include "census/timeline.h"

namespace census {

inline constexpr int kChartWidth = 960;

// The timeline's columns as drawn: the forward's and the backward's bucketed apart (no bucket spans
// the boundary), at about one bucket per pixel of the plot.
std::vector<TimelineColumn> timeline_buckets(const Timeline& timeline);

std::string timeline_svg(const Timeline& timeline, const std::string& title);

// Horizontal bars, grouped: one row per group, one bar per series in it.
struct BarChart {
  std::string id;
  std::string title;
  bool per_token = false;  // values are bytes per token (else bytes)
  std::vector<std::string> series;
  std::vector<std::string> groups;
  std::vector<std::vector<double>> values;  // [group][series]; a negative value is not drawn
};
std::string bar_chart_svg(const BarChart& chart);

// Horizontal bars, one row per group, each bar its series stacked left to right, with the bar's total
// beside it; where `limit` > 0 a dashed line marks it (a device's memory: a bar past it does not fit).
struct StackedBarChart {
  enum class Unit { kBytes, kSeconds };
  std::string id;
  std::string title;
  std::string note;  // one line under the title; empty: none
  Unit unit = Unit::kBytes;
  std::vector<std::string> series;
  std::vector<std::string> groups;
  std::vector<std::vector<double>> values;  // [group][series], each >= 0
  double limit = 0;
  std::string limit_label;
};
std::string stacked_bar_chart_svg(const StackedBarChart& chart);
// The same numbers as columns left to right, for groups in an order of time (a step's phases); the
// limit a dashed horizontal line.
std::string stacked_column_chart_svg(const StackedBarChart& chart);

// Lines over a logarithmic x axis (tokens) and a logarithmic y axis (bytes): a line of slope one
// grows linearly with the sequence.
struct LineChart {
  std::string id;
  std::string title;
  std::vector<std::string> series;
  std::vector<double> x;
  std::vector<std::vector<double>> values;  // [series][x]; a value <= 0 is not drawn
};
std::string line_chart_svg(const LineChart& chart);

// The colour of a timeline band or of the i-th series.
const char* band_colour(size_t band);
const char* series_colour(size_t series);

std::string escape_xml(std::string_view text);

}  // namespace census
