// The step's and the plan's charts draw exactly the numbers their commands print: each bar's total and
// each of its segments, read back from the SVG's data attributes, against the JSON the chart was
// drawn from (`census step --format json`, `census plan --format json`, as the browser page hands them).
#include "report/step_charts.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "cli/plan_command.h"
#include "cli/request.h"
#include "cli/step_command.h"

namespace census {
namespace {

using nlohmann::ordered_json;

struct Drawn {
  std::string group;
  double total = 0;
  std::vector<double> segments;
};

// Each row's (or column's) data-group, data-total and its segments' data-value, in drawing order.
std::vector<Drawn> drawn(const std::string& svg) {
  std::vector<Drawn> rows;
  const std::regex group(R"re(<g class="(?:row|column)" data-group="([^"]*)" data-total="([^"]*)">)re");
  const std::regex segment(R"re(<rect class="segment" data-series="[^"]*" data-value="([^"]*)")re");
  for (auto g = std::sregex_iterator(svg.begin(), svg.end(), group); g != std::sregex_iterator(); ++g) {
    Drawn row{(*g)[1], std::stod((*g)[2]), {}};
    const size_t end = svg.find("</g>", g->position());
    const std::string body = svg.substr(g->position(), end - g->position());
    for (auto s = std::sregex_iterator(body.begin(), body.end(), segment); s != std::sregex_iterator(); ++s)
      row.segments.push_back(std::stod((*s)[1]));
    rows.push_back(row);
  }
  return rows;
}

const std::string& chart(const std::vector<std::pair<std::string, std::string>>& charts, const std::string& id) {
  for (const auto& [name, svg] : charts)
    if (name == id) return svg;
  ADD_FAILURE() << "no chart " << id;
  static const std::string kNone;
  return kNone;
}

ordered_json step_json(cli::StepArgs a) {
  auto json = cli::step_report_json(a, cli::resolve_model(a.model).take());
  EXPECT_TRUE(json) << json.refusal().message();
  return *json;
}

// Llama-3.1-8B on 4 stages of 1F1B, TP 8, ZeRO-1 with fp32 master weights, a stated CUDA context: every
// stage's total (its composed peak and the overheads) and what holds it.
TEST(StepCharts, EachStageIsItsTotalSplitAsTheStepSplitsIt) {
  cli::StepArgs a;
  a.model = "llama-3.1-8b";
  a.seq_length = 1024;
  a.micro_batches = 4;
  a.pp = 4;
  a.tp = 8;
  a.dp = 2;
  a.zero = 1;
  a.master_weights = "fp32";
  a.cuda_context = 1 << 30;
  const ordered_json step = step_json(a);
  const auto charts = step_charts(step, 80LL << 30);
  const std::vector<Drawn> stages = drawn(chart(charts, "step-stages"));
  ASSERT_EQ(stages.size(), 4u);
  for (size_t i = 0; i < stages.size(); ++i) {
    const ordered_json& s = step["stages"][i];
    EXPECT_EQ(stages[i].total, s["total_bytes"].get<double>()) << stages[i].group;
    double sum = 0;
    for (double v : stages[i].segments) sum += v;
    EXPECT_EQ(sum, s["total_bytes"].get<double>()) << stages[i].group;
    // The composed peak's parameters come first, the stated CUDA context last.
    EXPECT_EQ(stages[i].segments.front(), s["composed"]["peak"]["split"]["parameters"].get<double>());
    EXPECT_EQ(stages[i].segments.back(), static_cast<double>(1 << 30));
  }
  EXPECT_NE(chart(charts, "step-stages").find("<g class=\"limit\" data-value=\"85899345920\""), std::string::npos);

  // The worst stage's phases, each at its simulated peak.
  const ordered_json* worst = nullptr;
  for (const ordered_json& s : step["stages"])
    if (s["stage"]["index"] == step["worst_stage"]) worst = &s;
  ASSERT_NE(worst, nullptr);
  const std::vector<Drawn> phases = drawn(chart(charts, "step-phases"));
  ASSERT_EQ(phases.size(), (*worst)["phases"].size());
  for (size_t i = 0; i < phases.size(); ++i) {
    EXPECT_EQ(phases[i].group, (*worst)["phases"][i]["name"].get<std::string>());
    EXPECT_EQ(phases[i].total, (*worst)["phases"][i]["peak_bytes"].get<double>()) << phases[i].group;
  }
}

// Under FSDP2 the peak's other bytes are mostly FSDP2's own (its unsharded parameters, its all-gather
// buffers): each is a segment, so the bar is the step's total, and each phase's column its peak.
TEST(StepCharts, FsdpBuffersAreSegmentsOfTheirOwn) {
  cli::StepArgs a;
  a.model = "llama-3.1-8b";
  a.seq_length = 1024;
  a.fsdp = true;
  a.dp = 8;
  a.master_weights = "fp32";
  a.cpu_offload = true;
  const ordered_json step = step_json(a);
  const auto charts = step_charts(step, 0);
  const std::vector<Drawn> stages = drawn(chart(charts, "step-stages"));
  ASSERT_EQ(stages.size(), 1u);
  double sum = 0;
  for (double v : stages[0].segments) sum += v;
  EXPECT_EQ(sum, step["total_bytes"].get<double>());
  EXPECT_GT(step["peak"]["split"]["other_detail"]["fsdp_unsharded_params"].get<double>(), 0);
  const std::vector<Drawn> phases = drawn(chart(charts, "step-phases"));
  ASSERT_EQ(phases.size(), step["phases"].size());
  for (size_t i = 0; i < phases.size(); ++i) {
    double column = 0;
    for (double v : phases[i].segments) column += v;
    EXPECT_EQ(column, step["phases"][i]["peak_bytes"].get<double>()) << phases[i].group;
  }
}

// One stage's object (no pipeline) draws as one row, and no limit where none is given.
TEST(StepCharts, OneStageWithoutALimit) {
  cli::StepArgs a;
  a.model = "qwen3-30b-a3b";
  a.seq_length = 1024;
  a.ep = 4;
  const ordered_json step = step_json(a);
  const auto charts = step_charts(step, 0);
  const std::vector<Drawn> stages = drawn(chart(charts, "step-stages"));
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0].total, step["total_bytes"].get<double>());
  EXPECT_EQ(chart(charts, "step-stages").find("class=\"limit\""), std::string::npos);
}

// A plan's layouts: each at its peak against the device's memory, and its time term by term.
TEST(PlanCharts, EachLayoutIsItsPeakAndItsTimeTerms) {
  cli::PlanArgs a;
  a.model = "llama-3.1-8b";
  a.gpus = 16;
  a.device = "h100";
  a.seq_length = 8192;
  auto json = cli::plan_report_json(a, cli::resolve_model(a.model).take());
  ASSERT_TRUE(json) << json.refusal().message();
  const ordered_json& plan = *json;
  const auto charts = plan_charts(plan);
  const std::vector<Drawn> peaks = drawn(chart(charts, "plan-memory"));
  const std::vector<Drawn> times = drawn(chart(charts, "plan-time"));
  ASSERT_EQ(peaks.size(), plan["layouts"].size());
  ASSERT_EQ(times.size(), plan["layouts"].size());
  for (size_t i = 0; i < peaks.size(); ++i) {
    const ordered_json& l = plan["layouts"][i];
    EXPECT_EQ(peaks[i].total, l["peak_bytes"].get<double>()) << peaks[i].group;
    size_t term = 0;
    for (const auto& [name, seconds] : l["time_estimate"].items()) {
      if (seconds.get<double>() <= 0) continue;  // a zero term draws no segment
      ASSERT_LT(term, times[i].segments.size());
      EXPECT_EQ(times[i].segments[term++], seconds.get<double>()) << name;
    }
  }
  EXPECT_NE(chart(charts, "plan-memory").find("data-value=\"" + std::to_string(plan["gpu_memory_bytes"].get<int64_t>()) + "\""),
            std::string::npos);
}

}  // namespace
}  // namespace census
