// File: report.h
// `census report CONFIG [--output report.html] [--svg DIR]`: where a layer's memory goes, drawn: the
// censuses of the page report/layer_report.h draws. --svg DIR writes each chart as its own
// SVG file. Every file is written whole under a temporary name and renamed, so a refused path leaves
// nothing half-written behind.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/request.h"
#include "report/layer_report.h"

namespace census::cli {

struct ReportOptions {
  std::string output = "report.html";
  std::string svg_dir;  // empty: no SVG files
};

// The sequence lengths the report sweeps: 1k, 2k, 4k, ..., 128k tokens.
std::vector<int64_t> sweep_lengths();

// Run the report's censuses on a checked request, sweeping the sequence lengths `sweep`.
Report build_report(const Request& request, const std::vector<int64_t>& sweep = sweep_lengths());

// The `report` subcommand and its options, bound to what the command line fills in.
CLI::App* add_report_command(CLI::App& app, Request& request, std::string& model, std::string& gdn_backend,
                             ReportOptions& options);
// Write the report's files; a path that cannot be written is refused in one line on `err`, exit 2.
int run_report(const Request& request, const ReportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace census::cli
