#include "report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/table.h"

namespace census {
namespace {

constexpr int kLeft = 84, kRight = 24;  // plot margins, px
constexpr const char* kFont = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

std::string num(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  std::string text(buffer);
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  return text;
}

std::string bytes_label(double bytes) { return human_bytes(bytes); }

std::string open_svg(const std::string& id, int height, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" + escape_xml(id) + "\" class=\"chart\" width=\"" +
         std::to_string(kChartWidth) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
         std::to_string(kChartWidth) + " " + std::to_string(height) + "\" " + kFont +
         " font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n<text x=\"" +
         std::to_string(kLeft) + "\" y=\"20\" font-size=\"15\" font-weight=\"bold\" fill=\"#222\">" +
         escape_xml(title) + "</text>\n";
}

// A step of 1, 2 or 5 times a power of ten, about `target` ticks over [0, top].
double nice_step(double top, int target) {
  const double raw = top / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * power >= raw) return m * power;
  return 10 * power;
}

// The binary unit a byte axis reads in, for its largest value.
std::pair<double, const char*> byte_unit(double top) {
  if (top >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
  if (top >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
  if (top >= 1024.0) return {1024.0, "KiB"};
  return {1.0, "B"};
}

std::string tick_label(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

// A stacked chart's value as its unit reads: bytes in binary units, seconds in s or ms.
std::string stacked_label(const StackedBarChart& chart, double v) {
  if (chart.unit == StackedBarChart::Unit::kBytes) return human_bytes(v);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, v >= 1 ? "%.2f s" : "%.1f ms", v >= 1 ? v : v * 1e3);
  return buffer;
}

// Each group's total, and the largest of them and the limit: the end of the value axis.
std::pair<std::vector<double>, double> stacked_totals(const StackedBarChart& chart) {
  std::vector<double> totals;
  double highest = chart.limit;
  for (const auto& values : chart.values) {
    double total = 0;
    for (double v : values) total += v;
    totals.push_back(total);
    highest = std::max(highest, total);
  }
  return {totals, highest};
}

// The stacked chart's heading under its title: its note, then one swatch per series from x = `left`,
// on as many lines as the chart's width needs. The heading, and the y below it.
std::pair<std::string, int> stacked_heading(const StackedBarChart& chart, double left) {
  std::string svg;
  int y = 42;
  if (!chart.note.empty()) {
    svg += "<text x=\"" + std::to_string(kLeft) + "\" y=\"38\" fill=\"#555\">" + escape_xml(chart.note) + "</text>\n";
    y = 58;
  }
  double lx = left;
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const double width = 30 + 7.0 * chart.series[s].size();
    if (lx > left && lx + width > kChartWidth - kRight) lx = left, y += 16;
    svg += "<rect x=\"" + num(lx) + "\" y=\"" + std::to_string(y - 10) + "\" width=\"12\" height=\"12\" fill=\"" +
           series_colour(s) + "\"/><text x=\"" + num(lx + 16) + "\" y=\"" + std::to_string(y) + "\" fill=\"#333\">" +
           escape_xml(chart.series[s]) + "</text>\n";
    lx += width;
  }
  return {svg, y + 10};
}

// One series' share of a group, with the numbers it draws as attributes and its hover title.
std::string stacked_segment(const StackedBarChart& chart, size_t g, size_t s, double x, double y, double w, double h) {
  const double v = chart.values[g][s];
  return "<rect class=\"segment\" data-series=\"" + escape_xml(chart.series[s]) + "\" data-value=\"" + decimal(v) +
         "\" x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) + "\" fill=\"" +
         series_colour(s) + "\"><title>" + escape_xml(chart.groups[g] + ", " + chart.series[s]) + ": " +
         stacked_label(chart, v) + "</title></rect>\n";
}

}  // namespace

std::string escape_xml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* band_colour(size_t band) {
  // The saved-op classes in warm-to-cool hues, forward temporaries grey, the backward's own
  // allocations red, the parameters' gradients a pale violet.
  static constexpr const char* kColours[kBandCount] = {
      "#4e79a7",  // attMM
      "#f28e2b",  // attBMM
      "#edc948",  // softmax
      "#59a14f",  // normOp
      "#76b7b2",  // ffMM
      "#b07aa1",  // ffAct
      "#ff9da7",  // dropout
      "#9c755f",  // linrec
      "#8cd17d",  // other
      "#bab0ac",  // forward
      "#e15759",  // backward
      "#d4a6c8",  // parameter grads
  };
  return kColours[band];
}

const char* series_colour(size_t series) {
  static constexpr const char* kColours[] = {"#4e79a7", "#a0cbe8", "#e15759", "#ff9d9a", "#59a14f", "#8cd17d",
                                             "#f28e2b", "#ffbe7d", "#b07aa1", "#d4a6c8", "#9c755f", "#bab0ac"};
  return kColours[series % (sizeof kColours / sizeof kColours[0])];
}

std::vector<TimelineColumn> timeline_buckets(const Timeline& t) {
  const int plot = kChartWidth - kLeft - kRight;
  const int64_t ops = t.forward_ops + t.backward_ops;
  const size_t forward_width = std::max<int64_t>(1, plot * t.forward_ops / std::max<int64_t>(ops, 1));
  const size_t backward_width = std::max<int64_t>(1, plot - static_cast<int64_t>(forward_width));
  const std::vector<TimelineColumn> forward(t.columns.begin(), t.columns.begin() + t.forward_ops);
  const std::vector<TimelineColumn> backward(t.columns.begin() + t.forward_ops, t.columns.end());
  std::vector<TimelineColumn> buckets = bucket_columns(forward, forward_width);
  for (TimelineColumn& b : bucket_columns(backward, backward_width)) buckets.push_back(std::move(b));
  return buckets;
}

std::string timeline_svg(const Timeline& t, const std::string& title) {
  const int height = 400, top = 56, bottom = 340;
  const int plot = kChartWidth - kLeft - kRight;
  const std::vector<TimelineColumn> buckets = timeline_buckets(t);
  const double ops = static_cast<double>(std::max<int64_t>(1, t.forward_ops + t.backward_ops));
  int64_t highest = 0;
  for (const TimelineColumn& b : buckets) highest = std::max(highest, b.at_max.total());
  const auto [unit, unit_name] = byte_unit(static_cast<double>(highest));
  const double step = nice_step(std::max(1.0, highest / unit), 5);
  const double y_top = std::max(step, std::ceil(highest / unit / step) * step) * unit;
  auto x_of = [&](double op) { return kLeft + op * plot / ops; };
  auto y_of = [&](double bytes) { return bottom - bytes / y_top * (bottom - top); };

  std::string svg = open_svg("timeline", height, title);
  svg += "<g class=\"timeline\" data-highest=\"" + std::to_string(highest) + "\" data-saved=\"" +
         std::to_string(t.saved_bytes) + "\" data-kept=\"" + std::to_string(t.kept_bytes) + "\" data-working=\"" + std::to_string(t.working_bytes) +
         "\" data-forward-ops=\"" + std::to_string(t.forward_ops) + "\" data-backward-ops=\"" +
         std::to_string(t.backward_ops) + "\">\n";
  for (double v = 0; v <= y_top / unit + 1e-9; v += step) {
    const std::string y = num(y_of(v * unit));
    svg += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(kLeft + plot) + "\" y1=\"" + y +
           "\" y2=\"" + y + "\" stroke=\"#e6e6e6\"/><text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + y +
           "\" dy=\"4\" text-anchor=\"end\" fill=\"#555\">" + tick_label(v) + " " + unit_name + "</text>\n";
  }
  // One path per band, stacked from the saved classes up: its top edge left to right, then the
  // band below's top edge back.
  std::vector<int64_t> below(buckets.size(), 0);
  for (size_t band = 0; band < kBandCount; ++band) {
    bool any = false;
    for (const TimelineColumn& b : buckets) any = any || b.at_max.bytes[band] != 0;
    if (!any) continue;
    std::string upper, lower;
    for (size_t i = 0; i < buckets.size(); ++i) {
      const std::string x0 = num(x_of(buckets[i].first_op)), x1 = num(x_of(buckets[i].last_op + 1));
      const std::string y = num(y_of(below[i] + buckets[i].at_max.bytes[band]));
      upper += (i == 0 ? "M" : "L") + x0 + " " + y + "L" + x1 + " " + y;
    }
    for (size_t i = buckets.size(); i-- > 0;) {
      const std::string y = num(y_of(below[i]));
      lower += "L" + num(x_of(buckets[i].last_op + 1)) + " " + y + "L" + num(x_of(buckets[i].first_op)) + " " + y;
      below[i] += buckets[i].at_max.bytes[band];
    }
    svg += "<path class=\"band\" data-band=\"" + escape_xml(band_name(band)) + "\" d=\"" + upper + lower +
           "Z\" fill=\"" + band_colour(band) + "\" stroke=\"none\"/>\n";
  }
  // The forward/backward boundary, and the two numbers the census reports.
  const std::string xb = num(x_of(t.forward_ops));
  svg += "<line class=\"boundary\" data-op=\"" + std::to_string(t.forward_ops) + "\" x1=\"" + xb + "\" x2=\"" + xb +
         "\" y1=\"" + std::to_string(top - 8) + "\" y2=\"" + std::to_string(bottom) +
         "\" stroke=\"#222\" stroke-dasharray=\"4 3\"/>\n";
  // Plain, what autograd saved; under checkpointing, what the layer keeps (autograd saves nothing).
  const int64_t end_bytes = t.selective ? t.kept_bytes : t.saved_bytes;
  const std::string ys = num(y_of(end_bytes));
  svg += std::string("<g class=\"") + (t.selective ? "kept-marker" : "saved-marker") + "\" data-bytes=\"" +
         std::to_string(end_bytes) + "\"><circle cx=\"" + xb + "\" cy=\"" + ys +
         "\" r=\"4\" fill=\"#222\"/><text x=\"" + num(x_of(t.forward_ops) - 6) + "\" y=\"" + ys +
         "\" dy=\"-8\" text-anchor=\"end\" font-weight=\"bold\" fill=\"#222\">" + (t.selective ? "kept " : "saved ") +
         bytes_label(end_bytes) + "</text></g>\n";
  const double xp = x_of(t.peak_op + 0.5);
  const std::string yw = num(y_of(t.working_bytes));
  const bool label_left = xp > kLeft + plot * 0.7;
  svg += "<g class=\"working-marker\" data-bytes=\"" + std::to_string(t.working_bytes) + "\" data-op=\"" +
         std::to_string(t.peak_op) + "\"><line x1=\"" + num(xp - 14) + "\" x2=\"" + num(xp + 14) + "\" y1=\"" + yw +
         "\" y2=\"" + yw + "\" stroke=\"#222\" stroke-width=\"2\"/><text x=\"" + num(label_left ? xp - 18 : xp + 18) +
         "\" y=\"" + yw + "\" dy=\"4\" text-anchor=\"" + (label_left ? "end" : "start") +
         "\" font-weight=\"bold\" fill=\"#222\">working " + bytes_label(t.working_bytes) + "</text></g>\n";
  svg += "<text x=\"" + num(x_of(t.forward_ops / 2.0)) + "\" y=\"" + std::to_string(bottom + 18) +
         "\" text-anchor=\"middle\" fill=\"#555\">forward: " + std::to_string(t.forward_ops) + " ops</text>\n";
  svg += "<text x=\"" + num(x_of(t.forward_ops + t.backward_ops / 2.0)) + "\" y=\"" + std::to_string(bottom + 18) +
         "\" text-anchor=\"middle\" fill=\"#555\">backward: " + std::to_string(t.backward_ops) + " ops</text>\n";
  svg += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(kLeft + plot) + "\" y1=\"" +
         std::to_string(bottom) + "\" y2=\"" + std::to_string(bottom) + "\" stroke=\"#222\"/>\n";
  // The legend: the bands drawn, in stacking order.
  double lx = kLeft;
  for (size_t band = 0; band < kBandCount; ++band) {
    bool any = false;
    for (const TimelineColumn& b : buckets) any = any || b.at_max.bytes[band] != 0;
    if (!any) continue;
    const std::string name(band_name(band));
    svg += "<rect x=\"" + num(lx) + "\" y=\"" + std::to_string(height - 26) + "\" width=\"12\" height=\"12\" fill=\"" +
           band_colour(band) + "\"/><text x=\"" + num(lx + 16) + "\" y=\"" + std::to_string(height - 16) +
           "\" fill=\"#333\">" + escape_xml(name) + "</text>\n";
    lx += 28 + 7.0 * name.size();
  }
  svg += "<text x=\"" + std::to_string(kLeft) + "\" y=\"40\" fill=\"#555\">live bytes per op, each pixel the highest "
         "moment of its ops; the layer's output left out, parameters' gradients a band apart</text>\n";
  svg += "<rect class=\"hover-area\" x=\"" + std::to_string(kLeft) + "\" y=\"" + std::to_string(top) + "\" width=\"" +
         std::to_string(plot) + "\" height=\"" + std::to_string(bottom - top) + "\" fill=\"transparent\"/>\n";
  svg += "</g>\n</svg>\n";
  return svg;
}

std::string bar_chart_svg(const BarChart& chart) {
  const int bar = 13, gap = 10, top = 50, label_width = 230, value_width = 110;
  const size_t n = std::max<size_t>(1, chart.series.size());
  const int row = static_cast<int>(n) * bar + gap;
  const int height = top + static_cast<int>(chart.groups.size()) * row + 20;
  const int plot = kChartWidth - label_width - value_width;
  double highest = 0;
  for (const auto& values : chart.values)
    for (double v : values) highest = std::max(highest, v);
  auto label = [&](double v) { return chart.per_token ? decimal(v) + " B/token" : bytes_label(v); };

  std::string svg = open_svg(chart.id, height, chart.title);
  double lx = label_width;
  for (size_t s = 0; s < chart.series.size(); ++s) {
    svg += "<rect x=\"" + num(lx) + "\" y=\"30\" width=\"12\" height=\"12\" fill=\"" + series_colour(s) +
           "\"/><text x=\"" + num(lx + 16) + "\" y=\"40\" fill=\"#333\">" + escape_xml(chart.series[s]) + "</text>\n";
    lx += 30 + 7.0 * chart.series[s].size();
  }
  for (size_t g = 0; g < chart.groups.size(); ++g) {
    const int y0 = top + static_cast<int>(g) * row;
    svg += "<text x=\"" + std::to_string(label_width - 8) + "\" y=\"" + num(y0 + n * bar / 2.0 + 4) +
           "\" text-anchor=\"end\" fill=\"#222\">" + escape_xml(chart.groups[g]) + "</text>\n";
    for (size_t s = 0; s < chart.series.size(); ++s) {
      const double v = chart.values[g][s];
      if (v < 0) continue;
      const double w = highest > 0 ? v / highest * plot : 0;
      const int y = y0 + static_cast<int>(s) * bar;
      svg += "<rect class=\"bar\" data-group=\"" + escape_xml(chart.groups[g]) + "\" data-series=\"" +
             escape_xml(chart.series[s]) + "\" data-value=\"" + decimal(v) + "\" x=\"" + std::to_string(label_width) +
             "\" y=\"" + std::to_string(y) + "\" width=\"" + num(w) + "\" height=\"" + std::to_string(bar - 2) +
             "\" fill=\"" + series_colour(s) + "\"><title>" + escape_xml(chart.groups[g] + ", " + chart.series[s]) +
             ": " + label(v) + "</title></rect><text x=\"" + num(label_width + w + 4) + "\" y=\"" +
             std::to_string(y + bar - 3) + "\" font-size=\"10\" fill=\"#444\">" + label(v) + "</text>\n";
    }
  }
  svg += "</svg>\n";
  return svg;
}

std::string stacked_bar_chart_svg(const StackedBarChart& chart) {
  const int bar = 18, gap = 8, label_width = 250, value_width = 110;
  const std::pair<std::string, int> heading = stacked_heading(chart, label_width);
  const int top = heading.second + 6;
  const int height = top + static_cast<int>(chart.groups.size()) * (bar + gap) + 24;
  const int plot = kChartWidth - label_width - value_width;
  const auto totals_and_top = stacked_totals(chart);  // (a lambda takes no structured binding in clang 14)
  const std::vector<double>& totals = totals_and_top.first;
  const double highest = totals_and_top.second;
  auto x_of = [&](double v) { return label_width + (highest > 0 ? v / highest * plot : 0); };

  std::string svg = open_svg(chart.id, height, chart.title) + heading.first;
  for (size_t g = 0; g < chart.groups.size(); ++g) {
    const int y = top + static_cast<int>(g) * (bar + gap);
    svg += "<g class=\"row\" data-group=\"" + escape_xml(chart.groups[g]) + "\" data-total=\"" + decimal(totals[g]) +
           "\"><text x=\"" + std::to_string(label_width - 8) + "\" y=\"" + std::to_string(y + bar - 5) +
           "\" text-anchor=\"end\" fill=\"#222\">" + escape_xml(chart.groups[g]) + "</text>\n";
    double at = 0;
    for (size_t s = 0; s < chart.series.size(); ++s) {
      const double v = chart.values[g][s];
      if (v <= 0) continue;
      svg += stacked_segment(chart, g, s, x_of(at), y, x_of(at + v) - x_of(at), bar);
      at += v;
    }
    svg += "<text x=\"" + num(x_of(totals[g]) + 4) + "\" y=\"" + std::to_string(y + bar - 5) +
           "\" font-size=\"11\" fill=\"#222\">" + stacked_label(chart, totals[g]) + "</text></g>\n";
  }
  if (chart.limit > 0) {
    const std::string x = num(x_of(chart.limit));
    svg += "<g class=\"limit\" data-value=\"" + decimal(chart.limit) + "\"><line x1=\"" + x + "\" x2=\"" + x +
           "\" y1=\"" + std::to_string(top - 4) + "\" y2=\"" + std::to_string(height - 20) +
           "\" stroke=\"#222\" stroke-dasharray=\"5 3\"/><text x=\"" + x + "\" y=\"" + std::to_string(height - 6) +
           "\" text-anchor=\"middle\" fill=\"#222\">" + escape_xml(chart.limit_label) + " " +
           stacked_label(chart, chart.limit) + "</text></g>\n";
  }
  return svg + "</svg>\n";
}

std::string stacked_column_chart_svg(const StackedBarChart& chart) {
  const std::pair<std::string, int> heading = stacked_heading(chart, kLeft);
  const int top = heading.second + 14, bottom_margin = 40, plot_height = 280;
  const int bottom = top + plot_height, height = bottom + bottom_margin;
  const int plot = kChartWidth - kLeft - kRight;
  const auto totals_and_top = stacked_totals(chart);
  const std::vector<double>& totals = totals_and_top.first;
  const double highest = totals_and_top.second;
  const double count = static_cast<double>(std::max<size_t>(1, chart.groups.size()));
  const double slot = plot / count, width = std::max(1.0, slot * 0.8);
  auto y_of = [&](double v) { return bottom - (highest > 0 ? v / highest * plot_height : 0); };

  std::string svg = open_svg(chart.id, height, chart.title) + heading.first;
  svg += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + num(y_of(highest)) +
         "\" dy=\"4\" text-anchor=\"end\" fill=\"#555\">" + stacked_label(chart, highest) + "</text>\n";
  // Every k-th group named under its column, so that the names never overlap.
  size_t every = 1;
  for (const std::string& group : chart.groups) every = std::max<size_t>(every, std::ceil((7.0 * group.size() + 8) / slot));
  for (size_t g = 0; g < chart.groups.size(); ++g) {
    const double x = kLeft + g * slot + (slot - width) / 2;
    svg += "<g class=\"column\" data-group=\"" + escape_xml(chart.groups[g]) + "\" data-total=\"" + decimal(totals[g]) +
           "\">";
    double at = 0;
    for (size_t s = 0; s < chart.series.size(); ++s) {
      const double v = chart.values[g][s];
      if (v <= 0) continue;
      svg += stacked_segment(chart, g, s, x, y_of(at + v), width, y_of(at) - y_of(at + v));
      at += v;
    }
    if (g % every == 0)
      svg += "<text x=\"" + num(x + width / 2) + "\" y=\"" + std::to_string(bottom + 16) +
             "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\">" + escape_xml(chart.groups[g]) + "</text>";
    svg += "</g>\n";
  }
  svg += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(kLeft + plot) + "\" y1=\"" +
         std::to_string(bottom) + "\" y2=\"" + std::to_string(bottom) + "\" stroke=\"#222\"/>\n";
  if (chart.limit > 0) {
    const std::string y = num(y_of(chart.limit));
    svg += "<g class=\"limit\" data-value=\"" + decimal(chart.limit) + "\"><line x1=\"" + std::to_string(kLeft) +
           "\" x2=\"" + std::to_string(kLeft + plot) + "\" y1=\"" + y + "\" y2=\"" + y +
           "\" stroke=\"#222\" stroke-dasharray=\"5 3\"/><text x=\"" + std::to_string(kLeft + plot) + "\" y=\"" + y +
           "\" dy=\"-4\" text-anchor=\"end\" fill=\"#222\">" + escape_xml(chart.limit_label) + " " +
           stacked_label(chart, chart.limit) + "</text></g>\n";
  }
  return svg + "</svg>\n";
}

std::string line_chart_svg(const LineChart& chart) {
  const int height = 380, top = 56, bottom = 320;
  const int plot = kChartWidth - kLeft - kRight - 140;  // the legend to its right
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
  bool first = true;
  for (size_t s = 0; s < chart.series.size(); ++s)
    for (size_t i = 0; i < chart.x.size(); ++i) {
      const double v = chart.values[s][i];
      if (v <= 0) continue;
      if (first) x_min = x_max = chart.x[i], y_min = y_max = v, first = false;
      x_min = std::min(x_min, chart.x[i]), x_max = std::max(x_max, chart.x[i]);
      y_min = std::min(y_min, v), y_max = std::max(y_max, v);
    }
  std::string svg = open_svg(chart.id, height, chart.title);
  if (first) return svg + "<text x=\"84\" y=\"80\">no length the census prices</text></svg>\n";
  // Decades of bytes (powers of two would crowd): the y axis spans whole powers of two.
  const double ly0 = std::floor(std::log2(y_min)), ly1 = std::max(ly0 + 1, std::ceil(std::log2(y_max)));
  const double lx0 = std::log2(x_min), lx1 = std::max(lx0 + 1, std::log2(x_max));
  auto x_of = [&](double x) { return kLeft + (std::log2(x) - lx0) / (lx1 - lx0) * plot; };
  auto y_of = [&](double v) { return bottom - (std::log2(v) - ly0) / (ly1 - ly0) * (bottom - top); };
  const int every = std::max(1, static_cast<int>((ly1 - ly0) / 8));
  for (int p = static_cast<int>(ly0); p <= static_cast<int>(ly1); p += every) {
    const std::string y = num(y_of(std::ldexp(1.0, p)));
    svg += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(kLeft + plot) + "\" y1=\"" + y +
           "\" y2=\"" + y + "\" stroke=\"#e6e6e6\"/><text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + y +
           "\" dy=\"4\" text-anchor=\"end\" fill=\"#555\">" + bytes_label(std::ldexp(1.0, p)) + "</text>\n";
  }
  for (double x : chart.x) {
    const std::string xs = num(x_of(x));
    svg += "<line x1=\"" + xs + "\" x2=\"" + xs + "\" y1=\"" + std::to_string(top) + "\" y2=\"" +
           std::to_string(bottom) + "\" stroke=\"#f0f0f0\"/><text x=\"" + xs + "\" y=\"" + std::to_string(bottom + 16) +
           "\" text-anchor=\"middle\" fill=\"#555\">" + (x >= 1024 ? tick_label(x / 1024) + "k" : tick_label(x)) +
           "</text>\n";
  }
  svg += "<text x=\"" + num(kLeft + plot / 2.0) + "\" y=\"" + std::to_string(bottom + 34) +
         "\" text-anchor=\"middle\" fill=\"#555\">tokens (log scale); bytes per layer (log scale)</text>\n";
  for (size_t s = 0; s < chart.series.size(); ++s) {
    std::string d, points;
    for (size_t i = 0; i < chart.x.size(); ++i) {
      const double v = chart.values[s][i];
      if (v <= 0) continue;
      const std::string x = num(x_of(chart.x[i])), y = num(y_of(v));
      d += (d.empty() ? "M" : "L") + x + " " + y;
      points += "<circle class=\"point\" data-series=\"" + escape_xml(chart.series[s]) + "\" data-x=\"" +
                decimal(chart.x[i]) + "\" data-value=\"" + decimal(v) + "\" cx=\"" + x + "\" cy=\"" + y +
                "\" r=\"3.5\" fill=\"" + series_colour(2 * s) + "\"><title>" + escape_xml(chart.series[s]) + " at " +
                decimal(chart.x[i]) + " tokens: " + bytes_label(v) + "</title></circle>\n";
    }
    svg += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + series_colour(2 * s) + "\" stroke-width=\"2\"/>\n" + points;
    const double ly = top + 16.0 * s;
    svg += "<rect x=\"" + num(kLeft + plot + 12) + "\" y=\"" + num(ly) + "\" width=\"12\" height=\"12\" fill=\"" +
           series_colour(2 * s) + "\"/><text x=\"" + num(kLeft + plot + 28) + "\" y=\"" + num(ly + 10) +
           "\" fill=\"#333\">" + escape_xml(chart.series[s]) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace census
