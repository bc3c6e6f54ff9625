// File: step_charts.h
// The pictures of `census step` and `census plan`, drawn from the JSON those commands print
// (`--format json`), so that a chart holds exactly the numbers the command printed. The browser page
// (web/) draws them beside its tables; each is a standalone SVG (report/svg.h), every drawn number
// also an attribute (data-value on a segment, data-total on a row).
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace census {

// One rank's training step, from one stage's object or {"stages": [...], "worst_stage", ...}:
//   "step-stages": each stage's reported peak (the composed one where terms were composed) stacked by
//                  what holds it, with the overheads the user stated, against `limit_bytes` (> 0: a
//                  device's memory to read it against; 0: none);
//   "step-phases": the stage that needs the most, each phase's peak in the simulated step, in order.
std::vector<std::pair<std::string, std::string>> step_charts(const nlohmann::ordered_json& step, int64_t limit_bytes);

// A plan, from its JSON:
//   "plan-memory": each layout shown (or, where nothing fits, the smallest) at its peak, stacked as
//                  above, against the memory of a device;
//   "plan-time":   each layout's estimated step time, term by term.
std::vector<std::pair<std::string, std::string>> plan_charts(const nlohmann::ordered_json& plan);

}  // namespace census
