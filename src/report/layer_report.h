// File: layer_report.h
// The layer report's page (`census report`): one self-contained HTML page (inline SVG and CSS, a few
// lines of script for hover details, nothing loaded from the network) with the layer's memory
// timeline, its saved bytes by op class and by module (plain beside selective), every layer kind of
// the stack and the output layer, memory against the sequence length, and the numbers it draws as
// embedded JSON. The front doors run the censuses and fill a Report; this draws it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "census/timeline.h"

namespace census {

struct Report {
  std::string title;
  nlohmann::ordered_json data;  // every number the page draws, embedded in it
  Timeline timeline;
  std::vector<std::pair<std::string, std::string>> charts;  // file stem, standalone SVG
};

std::string report_html(const Report& report);

}  // namespace census
