// File: report.h
// `census report CONFIG [--output report.html] [--svg DIR]`: where a layer's memory goes, drawn. One
// self-contained HTML page (inline SVG and CSS, a few lines of script for hover details, nothing
// loaded from the network) with the layer's memory timeline, its saved bytes by op class and by module
// (plain beside selective), every layer kind of the stack and the output layer, memory against the
// sequence length, and the numbers it draws as embedded JSON. --svg DIR writes each chart as its own
// SVG file. Every file is written whole under a temporary name and renamed, so a refused path leaves
// nothing half-written behind.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "census/timeline.h"
#include "cli/request.h"

namespace census::cli {

struct ReportOptions {
  std::string output = "report.html";
  std::string svg_dir;  // empty: no SVG files
};

struct Report {
  std::string title;
  nlohmann::ordered_json data;  // every number the page draws, embedded in it
  Timeline timeline;
  std::vector<std::pair<std::string, std::string>> charts;  // file stem, standalone SVG
};

// The sequence lengths the report sweeps: 1k, 2k, 4k, ..., 128k tokens.
std::vector<int64_t> sweep_lengths();

// Run the report's censuses on a checked request, sweeping the sequence lengths `sweep`.
Report build_report(const Request& request, const std::vector<int64_t>& sweep = sweep_lengths());
std::string report_html(const Report& report);

// The `report` subcommand and its options, bound to what the command line fills in.
CLI::App* add_report_command(CLI::App& app, Request& request, std::string& model, std::string& gdn_backend,
                             ReportOptions& options);
// Write the report's files; a path that cannot be written is refused in one line on `err`, exit 2.
int run_report(const Request& request, const ReportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace census::cli
