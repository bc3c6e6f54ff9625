// The step's and the plan's charts, read off the JSON the commands print: the names are the JSON's
// (the step oracle's), so the pictures follow the command rather than a second copy of its rules.
#include "report/step_charts.h"

#include "report/svg.h"

namespace census {
namespace {

using nlohmann::ordered_json;

// What holds a peak's bytes, as a step's JSON splits them: the "other" bytes by their detail.
constexpr const char* kHolders[][2] = {
    {"parameters", "parameters"},
    {"gradients", "gradients"},
    {"optimizer_states", "optimizer states"},
    {"activations", "activations"},
    {"inputs", "inputs"},
    {"param_grad_inflight", "gradients in flight"},
    {"buffers", "buffers"},
};

// And FSDP2's, which its steps' splits name too (census step --fsdp).
constexpr const char* kFsdpHolders[][2] = {
    {"fsdp_unsharded_params", "FSDP2's unsharded parameters"},
    {"fsdp_all_gather_buffers", "FSDP2's all-gather buffers"},
    {"fsdp_unsharded_grads", "FSDP2's unsharded gradients"},
    {"fsdp_reduce_scatter_buffers", "FSDP2's reduce-scatter buffers"},
};

bool names_fsdp(const ordered_json& split) { return split.at("other_detail").contains(kFsdpHolders[0][0]); }

std::vector<std::string> holder_series(bool overheads, bool fsdp) {
  std::vector<std::string> series;
  for (const auto& [key, name] : kHolders) series.push_back(name);
  if (fsdp)
    for (const auto& [key, name] : kFsdpHolders) series.push_back(name);
  if (overheads) series.push_back("overheads");
  return series;
}

// A split's bytes in kHolders' order (FSDP2's after, where `fsdp`), then `overheads`.
std::vector<double> holder_values(const ordered_json& split, int64_t overheads, bool fsdp) {
  std::vector<double> values;
  for (const auto& [key, name] : kHolders) {
    const ordered_json& from = split.contains(key) ? split : split.at("other_detail");
    values.push_back(from.at(key).get<double>());
  }
  if (fsdp)
    for (const auto& [key, name] : kFsdpHolders) values.push_back(split.at("other_detail").at(key).get<double>());
  values.push_back(static_cast<double>(overheads));
  return values;
}

std::vector<ordered_json> stages_of(const ordered_json& step) {
  if (!step.contains("stages")) return {step};
  return {step.at("stages").begin(), step.at("stages").end()};
}

// The peak a stage reports: the composed one where the step composed terms onto the simulated one.
const ordered_json& reported_peak(const ordered_json& stage) {
  return stage.contains("composed") ? stage.at("composed").at("peak") : stage.at("peak");
}

std::string stage_label(const ordered_json& stage) {
  return "stage " + std::to_string(stage.at("stage").at("index").get<int64_t>()) + ", peak at " +
         reported_peak(stage).at("phase").get<std::string>();
}

std::string layout_label(size_t rank, const ordered_json& l) {
  std::string label = rank == 0 ? std::string("smallest") : "#" + std::to_string(rank);
  for (const auto& [key, name] : {std::pair{"tp", " TP"}, std::pair{"cp", " CP"}, std::pair{"ep", " EP"},
                                  std::pair{"pp", " PP"}, std::pair{"dp", " DP"}})
    label += name + std::to_string(l.at(key).get<int64_t>());
  return label + " ZeRO-" + std::to_string(l.at("zero").get<int64_t>()) + " " + l.at("recompute").get<std::string>();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> step_charts(const ordered_json& step, int64_t limit_bytes) {
  const std::vector<ordered_json> stages = stages_of(step);
  const bool fsdp = names_fsdp(reported_peak(stages.front()).at("split"));
  StackedBarChart by_stage{"step-stages", "Each stage's peak, by what holds it", "", StackedBarChart::Unit::kBytes,
                           holder_series(true, fsdp), {}, {}, static_cast<double>(limit_bytes), "device memory"};
  by_stage.note = "the most-loaded moment of each pipeline stage's rank; overheads are the bytes you stated";
  size_t worst = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const ordered_json& peak = reported_peak(stages[i]);
    const int64_t total = stages[i].at("total_bytes").get<int64_t>();
    by_stage.groups.push_back(stage_label(stages[i]));
    by_stage.values.push_back(holder_values(peak.at("split"), total - peak.at("bytes").get<int64_t>(), fsdp));
    if (total > stages[worst].at("total_bytes").get<int64_t>()) worst = i;
  }
  const ordered_json& stage = stages[worst];
  StackedBarChart phases{"step-phases",
                         "Stage " + std::to_string(stage.at("stage").at("index").get<int64_t>()) +
                             " over the step: each phase's peak",
                         "simulated: F<m> and B<m> are micro-batch m's forward and backward" +
                             std::string(stage.contains("composed") ? "; before the composed terms" : ""),
                         StackedBarChart::Unit::kBytes, holder_series(false, fsdp), {}, {}, 0, ""};
  for (const ordered_json& phase : stage.at("phases")) {
    phases.groups.push_back(phase.at("name").get<std::string>());
    std::vector<double> values = holder_values(phase.at("split_at_peak"), 0, fsdp);
    values.pop_back();
    phases.values.push_back(std::move(values));
  }
  return {{by_stage.id, stacked_bar_chart_svg(by_stage)}, {phases.id, stacked_column_chart_svg(phases)}};
}

std::vector<std::pair<std::string, std::string>> plan_charts(const ordered_json& plan) {
  std::vector<std::pair<size_t, const ordered_json*>> layouts;  // rank (0: the smallest), layout
  for (size_t i = 0; i < plan.at("layouts").size(); ++i) layouts.push_back({i + 1, &plan.at("layouts").at(i)});
  if (layouts.empty() && !plan.at("nothing_fits").is_null()) layouts.push_back({0, &plan.at("nothing_fits").at("layout")});
  const int64_t memory = plan.at("gpu_memory_bytes").get<int64_t>();
  StackedBarChart peaks{"plan-memory", "Which layouts fit: each one's peak, by what holds it", "",
                        StackedBarChart::Unit::kBytes, {"parameters", "gradients", "optimizer states", "other", "overheads"},
                        {}, {}, static_cast<double>(memory), "device memory"};
  peaks.note = "the most-loaded stage's rank (census step); a bar past the line does not fit";
  StackedBarChart times{"plan-time", "Estimated step time, term by term", "an estimate from the device's figures",
                        StackedBarChart::Unit::kSeconds, {}, {}, {}, 0, ""};
  for (const auto& [rank, l] : layouts) {
    const ordered_json& split = l->at("peak_split");
    std::vector<double> bytes;
    int64_t held = 0;
    for (const char* key : {"parameters", "gradients", "optimizer_states", "other"}) {
      bytes.push_back(split.at(key).get<double>());
      held += split.at(key).get<int64_t>();
    }
    bytes.push_back(static_cast<double>(l->at("peak_bytes").get<int64_t>() - held));
    peaks.groups.push_back(layout_label(rank, *l));
    peaks.values.push_back(std::move(bytes));
    const ordered_json& terms = l->at("time_estimate");
    if (times.series.empty())
      for (const auto& [term, value] : terms.items()) times.series.push_back(term);
    std::vector<double> seconds;
    for (const std::string& term : times.series) seconds.push_back(terms.value(term, 0.0));
    times.groups.push_back(layout_label(rank, *l));
    times.values.push_back(std::move(seconds));
  }
  return {{peaks.id, stacked_bar_chart_svg(peaks)}, {times.id, stacked_bar_chart_svg(times)}};
}

}  // namespace census
