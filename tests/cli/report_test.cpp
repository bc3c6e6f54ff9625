// `census report`: the page renders for every shipped config, its charts draw the numbers its
// embedded JSON holds (and those are the censuses' and `activations --format json`'s), and bad input
// and unwritable paths are refused in one line with nothing left behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "census/layer_census.h"
#include "census/selective_census.h"
#include "cli_run.h"
#include "cli/report.h"
#include "report/svg.h"
#include "cli/shipped_models.h"

namespace census {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using testing::CliRun;
using testing::census;

// A fresh empty directory for one test.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("census-report-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

json embedded_json(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"census-data\">";
  const size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  const size_t start = begin + open.size();
  std::string text = html.substr(start, html.find("</script>", start) - start);
  for (size_t at = text.find("<\\/"); at != std::string::npos; at = text.find("<\\/", at)) text.replace(at, 3, "</");
  return json::parse(text);
}

// The text of the chart with this id, from its <svg> to its </svg>.
std::string chart(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" + id + "\"");
  EXPECT_NE(begin, std::string::npos) << id;
  if (begin == std::string::npos) return {};
  return html.substr(begin, html.find("</svg>", begin) + 6 - begin);
}

// Each element opening with `tag`, as its attributes.
std::vector<std::map<std::string, std::string>> elements(const std::string& svg, const std::string& tag) {
  std::vector<std::map<std::string, std::string>> found;
  for (size_t at = svg.find(tag); at != std::string::npos; at = svg.find(tag, at + 1)) {
    const std::string element = svg.substr(at, svg.find('>', at) - at);
    std::map<std::string, std::string> attributes;
    for (size_t eq = element.find("=\""); eq != std::string::npos; eq = element.find("=\"", eq + 2)) {
      const size_t name_start = element.rfind(' ', eq) + 1;
      const size_t value_end = element.find('"', eq + 2);
      attributes[element.substr(name_start, eq - name_start)] = element.substr(eq + 2, value_end - eq - 2);
    }
    found.push_back(std::move(attributes));
  }
  return found;
}

double number(const std::string& text) { return std::stod(text); }

cli::Request request(const std::string& model, int64_t seq_length, int64_t layer_index = 0, int64_t tp = 1) {
  cli::Request r;
  r.command = "report";
  r.model_name = model;
  r.config = cli::resolve_model(model).take();
  r.seq_length = seq_length;
  r.layer_index = layer_index;
  r.tp = tp;
  return r;
}

// Every property of a page the tests rely on: the charts against the JSON, the JSON against the
// censuses.
void expect_page_agrees(const cli::Request& r, const Report& report) {
  SCOPED_TRACE(r.model_name + " at " + std::to_string(r.seq_length));
  const std::string html = report_html(report);
  const json data = embedded_json(html);
  // Self-contained: no address but the SVG namespace's, no element loading a source.
  for (size_t at = html.find("http"); at != std::string::npos; at = html.find("http", at + 1))
    EXPECT_EQ(html.compare(at, 26, "http://www.w3.org/2000/svg"), 0) << html.substr(at, 40);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);

  // The layer's numbers are census_layer's and census_selective's.
  const ModelConfig rank = tp_config(r.config, r.tp);
  const LayerCensus plain = census_layer(rank, r.layer_index, r.seq_length);
  const SelectiveCensus kept = census_selective(rank, r.layer_index, r.seq_length);
  EXPECT_EQ(data["layer"]["saved"], plain.saved_bytes);
  EXPECT_EQ(data["layer"]["working"], plain.working_bytes);
  EXPECT_EQ(data["layer"]["selective"]["saved"], kept.kept_bytes);
  EXPECT_EQ(data["layer"]["selective"]["working"], kept.working_bytes);

  // The timeline: its highest point in the backward is working plus the parameters' gradients then
  // live (the band the chart says it includes); the saved bands at the forward's end are `saved`.
  const json& t = data["timeline"];
  const int64_t forward_ops = t["forward_ops"];
  const int64_t bands = static_cast<int64_t>(t["bands"].size());
  int64_t highest = 0, highest_backward = 0, next_op = 0;
  for (const json& row : t["buckets"]) {
    EXPECT_EQ(row[0].get<int64_t>(), next_op);
    EXPECT_TRUE(row[1].get<int64_t>() < forward_ops || row[0].get<int64_t>() >= forward_ops) << "a bucket spans the boundary";
    next_op = row[1].get<int64_t>() + 1;
    int64_t total = 0;
    for (int64_t b = 0; b < bands; ++b) total += row[b + 2].get<int64_t>();
    highest = std::max(highest, total);
    if (row[0].get<int64_t>() >= forward_ops) highest_backward = std::max(highest_backward, total);
  }
  EXPECT_EQ(next_op, forward_ops + t["backward_ops"].get<int64_t>());
  EXPECT_LE(t["buckets"].size(), static_cast<size_t>(kChartWidth));
  // Plain, the forward ends with what autograd saved; under checkpointing, with what the layer keeps.
  const bool selective = t["selective"];
  EXPECT_EQ(selective, r.selective);
  const int64_t working = selective ? kept.working_bytes : plain.working_bytes;
  EXPECT_EQ(t["working"], working);
  EXPECT_EQ(highest_backward, working + t["at_peak"]["parameter grads"].get<int64_t>());
  int64_t saved_at_end = 0;
  for (const char* op : {"attMM", "attBMM", "softmax", "dropout", "normOp", "ffAct", "ffMM", "linrec", "other"})
    saved_at_end += t["forward_end"][op].get<int64_t>();
  EXPECT_EQ(saved_at_end, t["saved"].get<int64_t>());
  if (!selective) {
    EXPECT_EQ(t["saved"], plain.saved_bytes);
  }
  EXPECT_EQ(t["kept"], selective ? kept.kept_bytes : plain.kept_bytes);
  const std::string timeline = chart(html, "timeline");
  const auto group = elements(timeline, "<g class=\"timeline\"");
  ASSERT_EQ(group.size(), 1u);
  EXPECT_EQ(number(group[0].at("data-highest")), highest);
  EXPECT_EQ(number(group[0].at("data-saved")), t["saved"].get<int64_t>());
  EXPECT_EQ(number(group[0].at("data-kept")), t["kept"].get<int64_t>());
  EXPECT_EQ(number(elements(timeline, "<g class=\"working-marker\"")[0].at("data-bytes")), working);
  const auto end_marker = elements(timeline, selective ? "<g class=\"kept-marker\"" : "<g class=\"saved-marker\"");
  ASSERT_EQ(end_marker.size(), 1u);
  EXPECT_EQ(number(end_marker[0].at("data-bytes")), selective ? kept.kept_bytes : plain.saved_bytes);
  EXPECT_EQ(number(elements(timeline, "<line class=\"boundary\"")[0].at("data-op")), forward_ops);
  EXPECT_FALSE(elements(timeline, "<path class=\"band\"").empty());

  // Bars: one per number of the JSON, equal to it.
  const auto op_bars = elements(chart(html, "saved-by-op"), "<rect class=\"bar\"");
  EXPECT_EQ(op_bars.size(), data["saved_by_op"]["plain"].size());
  for (const auto& bar : op_bars) EXPECT_EQ(number(bar.at("data-value")), data["saved_by_op"]["plain"][bar.at("data-group")]);
  const auto module_bars = elements(chart(html, "saved-by-module"), "<rect class=\"bar\"");
  EXPECT_EQ(module_bars.size(), data["saved_by_module"]["plain"].size() + data["saved_by_module"]["selective"].size());
  int64_t plain_sum = 0, kept_sum = 0;
  for (const auto& bar : module_bars) {
    const json& side = data["saved_by_module"][bar.at("data-series")];
    EXPECT_EQ(number(bar.at("data-value")), side[bar.at("data-group")]);
    (bar.at("data-series") == "plain" ? plain_sum : kept_sum) += static_cast<int64_t>(number(bar.at("data-value")));
  }
  EXPECT_EQ(plain_sum, plain.saved_bytes);
  EXPECT_EQ(kept_sum, kept.kept_bytes);
  const auto kind_bars = elements(chart(html, "layer-kinds"), "<rect class=\"bar\"");
  size_t expected_kind_bars = 0;
  for (const auto& [kind, k] : data["activations"].items()) expected_kind_bars += k.contains("selective") ? 6 : 4;
  EXPECT_EQ(kind_bars.size(), expected_kind_bars);
  for (const auto& bar : kind_bars) {
    const std::string series = bar.at("data-series");  // "saved TP2"
    const std::string field = series.substr(0, series.find(' '));
    const int tp = series.back() - '0';
    const json& k = data["activations"][bar.at("data-group")];
    EXPECT_DOUBLE_EQ(number(bar.at("data-value")), k[field].get<double>() + k[field + "_tp"].get<double>() / tp) << series;
  }
  const auto points = elements(chart(html, "sequence-length"), "<circle class=\"point\"");
  EXPECT_EQ(points.size(), 3 * data["sequence_length"]["points"].size());
  for (const auto& point : points) {
    const auto& sweep = data["sequence_length"]["points"];
    const auto it = std::find_if(sweep.begin(), sweep.end(),
                                 [&](const json& p) { return p["seq_length"].get<double>() == number(point.at("data-x")); });
    ASSERT_NE(it, sweep.end());
    EXPECT_EQ(number(point.at("data-value")), (*it)[point.at("data-series")]);
  }
}

TEST(Report, RendersEveryShippedConfigAndDrawsItsJsonsNumbers) {
  for (const cli::ShippedModel& model : cli::shipped_models()) {
    const cli::Request r = request(std::string(model.name), 1024);
    // A model whose layers run only inside its forward (DeepSeek-V4) has no page: census report refuses it.
    if (r.config.family->stack_only != nullptr && r.config.family->stack_only(r.config, 0) != nullptr) continue;
    expect_page_agrees(r, cli::build_report(r, {1024, 2048}));
  }
}

// The default length and the whole sweep, on the model `census` runs by default: the page's record
// of every layer kind is what `activations --output --format json` prints, and every length from 1k
// to 128k is censused.
TEST(Report, LlamaAtTheDefaultLengthWithTheWholeSweep) {
  const cli::Request r = request("llama-3.1-8b", 4096);
  const Report report = cli::build_report(r);
  expect_page_agrees(r, report);
  const CliRun activations = census({"activations", "llama-3.1-8b", "--output", "--format", "json"});
  ASSERT_EQ(activations.code, 0);
  EXPECT_EQ(report.data["activations"], nlohmann::ordered_json::parse(activations.out));
  // 66056 + 145408 bytes per token (README): 211464 x 4096.
  EXPECT_EQ(report.data["layer"]["saved"], int64_t{211464} * 4096);
  const json& sweep = report.data["sequence_length"];
  ASSERT_EQ(sweep["points"].size(), 8u);
  EXPECT_TRUE(sweep["refused"].empty());
  for (size_t i = 0; i < 8; ++i) {
    const int64_t s = int64_t{1024} << i;
    EXPECT_EQ(sweep["points"][i]["seq_length"], s);
    EXPECT_EQ(sweep["points"][i]["saved"], census_layer(r.config, 0, s).saved_bytes);
  }
}

TEST(Report, SelectiveTimelineDrawsTheCheckpointedLayer) {
  for (const char* model : {"llama-3.1-8b", "qwen3-30b-a3b", "qwen3-next-80b-a3b"}) {
    cli::Request r = request(model, 2048);
    r.selective = true;
    const Report report = cli::build_report(r, {1024});
    expect_page_agrees(r, report);
    EXPECT_NE(report_html(report).find("kept (at the forward's end)"), std::string::npos);
  }
}

TEST(Report, MixtureOfExpertsAndHybridLayersAtTp2) {
  const cli::Request moe = request("deepseek-v3", 4096, 3, 2);
  expect_page_agrees(moe, cli::build_report(moe, {1024, 4096}));
  const cli::Request hybrid = request("qwen3-next-80b-a3b", 4096, 3, 2);
  expect_page_agrees(hybrid, cli::build_report(hybrid, {1024, 4096}));
}

// A config whose 64-bit counts overflow past some length: those lengths are listed as refused, with
// the census's refusal, and the shorter ones drawn. Its intermediate_size (4e6) puts the MLP's matmul
// FLOPs past the bound at 32k tokens (2 * S * width^2 > INT64_MAX / 16), not at 16k.
TEST(Report, LengthsTheCensusRefusesAreListedNotDrawn) {
  const fs::path dir = scratch("refused");
  json config;
  for (const cli::ShippedModel& model : cli::shipped_models())
    if (model.name == "llama-3.1-8b") config = json::parse(model.json);
  config["intermediate_size"] = 4'000'000;
  std::ofstream(dir / "config.json") << config.dump();
  cli::Request r = request("llama-3.1-8b", 1024);
  r.model_name = (dir / "config.json").string();
  r.config = cli::resolve_model(r.model_name).take();
  const Report report = cli::build_report(r, {1024, 16384, 32768, 65536});
  const json& sweep = report.data["sequence_length"];
  ASSERT_EQ(sweep["points"].size(), 2u);
  ASSERT_EQ(sweep["refused"].size(), 2u);
  EXPECT_EQ(sweep["refused"][0]["seq_length"], 32768);
  EXPECT_NE(sweep["refused"][0]["refusal"].get<std::string>().find("overflow"), std::string::npos);
  EXPECT_EQ(report.data["config_source"], r.model_name);
  const std::string html = report_html(report);
  EXPECT_NE(html.find("32768 tokens: not censused"), std::string::npos);
  EXPECT_EQ(elements(chart(html, "sequence-length"), "<circle class=\"point\"").size(), 6u);
}

TEST(ReportCommand, WritesThePageAndEachChart) {
  const fs::path dir = scratch("writes");
  const CliRun run = census({"report", "qwen3-8b", "--seq-length", "2048", "--tp", "2", "--output",
                             (dir / "r.html").string(), "--svg", (dir / "charts").string()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(run.err.empty());
  EXPECT_NE(run.out.find("r.html"), std::string::npos);
  const std::string html = read(dir / "r.html");
  EXPECT_EQ(embedded_json(html)["options"]["tp"], 2);
  EXPECT_EQ(embedded_json(html)["census_version"], "0.1.0");
  for (const char* stem : {"timeline", "saved-by-op", "saved-by-module", "layer-kinds", "sequence-length"}) {
    const std::string svg = read(dir / "charts" / (std::string(stem) + ".svg"));
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << stem;
    EXPECT_NE(html.find(svg.substr(svg.find("<svg"))), std::string::npos) << stem << " is the page's chart";
  }
  size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 6u) << "no temporary file left";
}

TEST(ReportCommand, OptionsInForceAreInTheHeader) {
  const fs::path dir = scratch("options");
  const CliRun run = census({"report", "qwen3-30b-a3b", "--seq-length", "512", "--experts-implementation", "eager",
                             "--kernels", "cuda", "--output", (dir / "r.html").string()});
  ASSERT_EQ(run.code, 0) << run.err;
  const json data = embedded_json(read(dir / "r.html"));
  EXPECT_EQ(data["options"]["experts_implementation"], "eager");
  EXPECT_EQ(data["options"]["kernels"], "cuda");
  EXPECT_EQ(data["options"]["seq_length"], 512);
  EXPECT_EQ(data["config_source"], "configs/qwen3-30b-a3b.json, shipped with Census");
  const CliRun gdn = census({"report", "qwen3-next-80b-a3b", "--seq-length", "512", "--gdn-backend", "triton",
                             "--output", (dir / "g.html").string()});
  ASSERT_EQ(gdn.code, 0) << gdn.err;
  EXPECT_EQ(embedded_json(read(dir / "g.html"))["options"]["gdn_backend"], "triton");
  const CliRun yaml = census({"report", "qwen3-30b-a3b", "--seq-length", "512", "--train-yaml",
                              std::string(CENSUS_TEST_DATA) + "/recipes/qwen3_moe_train.yaml", "--output",
                              (dir / "y.html").string()});
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  const json fused = embedded_json(read(dir / "y.html"));
  EXPECT_NE(fused["options"]["train_yaml"].get<std::string>().find("qwen3_moe_train.yaml"), std::string::npos);
  // The recipe's fused modules: what README's `census layer ... --train-yaml` prints.
  EXPECT_EQ(fused["layer"]["saved"], census_layer([] {
              cli::Request r = request("qwen3-30b-a3b", 512);
              r.train_yaml = std::string(CENSUS_TEST_DATA) + "/recipes/qwen3_moe_train.yaml";
              EXPECT_TRUE(cli::apply_options(r));
              return r.config;
            }(), 0, 512).saved_bytes);
}

void expect_refused(const std::vector<std::string>& args, const std::string& names) {
  const CliRun run = census(args);
  EXPECT_EQ(run.code, 2) << run.out;
  EXPECT_TRUE(run.out.empty());
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find(names), std::string::npos) << run.err;
}

TEST(ReportCommand, UnwritablePathsAreRefusedAndNothingIsLeftBehind) {
  const fs::path dir = scratch("unwritable");
  expect_refused({"report", "llama-3.1-8b", "--seq-length", "512", "--output", (dir / "missing" / "r.html").string()},
                 "--output");
  EXPECT_FALSE(fs::exists(dir / "missing"));
  // A directory where the page should go: refused at the rename, its temporary file removed.
  fs::create_directories(dir / "taken.html");
  expect_refused({"report", "llama-3.1-8b", "--seq-length", "512", "--output", (dir / "taken.html").string()},
                 "--output");
  // A chart directory under a regular file: the page is not written either.
  std::ofstream(dir / "file") << "x";
  expect_refused({"report", "llama-3.1-8b", "--seq-length", "512", "--output", (dir / "r.html").string(), "--svg",
                  (dir / "file" / "charts").string()},
                 "--svg");
  EXPECT_FALSE(fs::exists(dir / "r.html"));
  size_t entries = 0;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) ++entries;
  EXPECT_EQ(entries, 2u) << "only taken.html/ and file remain";
  expect_refused({"report", "llama-3.1-8b", "--output", ""}, "--output");
}

TEST(ReportCommand, BadInputGetsTheUsualRefusals) {
  const fs::path dir = scratch("bad");
  const std::string out = (dir / "r.html").string();
  expect_refused({"report", "no-such-model", "--output", out}, "no-such-model");
  expect_refused({"report", "llama-3.1-8b", "--layer-index", "32", "--output", out}, "--layer-index");
  expect_refused({"report", "llama-3.1-8b", "--seq-length", "0", "--output", out}, "--seq-length");
  expect_refused({"report", "llama-3.1-8b", "--tp", "3", "--output", out}, "--tp");
  expect_refused({"report", "llama-3.1-8b", "--experts-implementation", "eager", "--output", out},
                 "--experts-implementation");
  expect_refused({"report", "llama-3.1-8b", "--gdn-backend", "fast", "--output", out}, "--gdn-backend");
  expect_refused({"report", "llama-3.1-8b", "--kernels", "tpu", "--output", out}, "--kernels");
  expect_refused({"report", "llama-3.1-8b", "--format", "json", "--output", out}, "--format");
  expect_refused({"report", "--output", out}, "config");
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace census
