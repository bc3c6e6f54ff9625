// The report's numbers: every census it draws, run once, and the JSON the page embeds. The charts are
// drawn from the same values the JSON holds.
#include <algorithm>

#include "census/activations.h"
#include "census/layer_census.h"
#include "census/output_census.h"
#include "census/selective_census.h"
#include "cli/commands.h"
#include "cli/report.h"
#include "report/svg.h"
#include "cli/shipped_models.h"

#ifndef CENSUS_VERSION
#define CENSUS_VERSION "unknown"
#endif

namespace census::cli {
namespace {

using nlohmann::ordered_json;

std::string config_source(const std::string& model) {
  for (const ShippedModel& shipped : shipped_models())
    if (shipped.name == model) return "configs/" + model + ".json, shipped with Census";
  return model;
}

ordered_json options_json(const Request& r, const ModelConfig& c) {
  ordered_json options = {{"layer_index", r.layer_index}, {"layer_kind", layer_kind(c, r.layer_index)},
                          {"seq_length", r.seq_length}, {"micro_batch", r.micro_batch_size}, {"dtype", "bfloat16"}, {"tp", r.tp},
                          {"kernels", nn::kernel_profile(c.kernels).name}};
  if (c.moe.num_experts > 0)
    options["experts_implementation"] =
        c.moe.experts_implementation == nn::ExpertsImplementation::kEager ? "eager" : "grouped_mm";
  if (c.linear_num_key_heads > 0) options["gdn_backend"] = nn::gdn_backend_name(c.gdn_backend);
  options["selective"] = r.selective;
  options["train_yaml"] = r.train_yaml.empty() ? ordered_json(nullptr) : ordered_json(r.train_yaml);
  return options;
}

ordered_json bands_json(const Bands& bands) {
  ordered_json json = ordered_json::object();
  for (size_t b = 0; b < kBandCount; ++b) json[std::string(band_name(b))] = bands.bytes[b];
  return json;
}

ordered_json timeline_json(const Timeline& t, const std::vector<TimelineColumn>& buckets) {
  ordered_json names = ordered_json::array();
  for (size_t b = 0; b < kBandCount; ++b) names.push_back(band_name(b));
  // One row per bucket drawn: its first and last op, then each band's bytes at its highest moment.
  ordered_json rows = ordered_json::array();
  for (const TimelineColumn& bucket : buckets) {
    ordered_json row = {bucket.first_op, bucket.last_op};
    for (int64_t bytes : bucket.at_max.bytes) row.push_back(bytes);
    rows.push_back(std::move(row));
  }
  ordered_json live = ordered_json::array();
  for (const LiveStorage& s : t.live_at_peak)
    live.push_back({{"module", s.module.empty() ? "(layer)" : s.module}, {"aten_op", s.aten_op},
                    {"shape", std::vector<int64_t>(s.shape.begin(), s.shape.end())}, {"dtype", s.dtype},
                    {"bytes", s.bytes}, {"band", s.band}});
  return {{"includes", "live activation bytes; the layer's output left out; parameters' gradients as the band "
                       "'parameter grads', counted to find the backward's peak and not in working"},
          {"selective", t.selective}, {"forward_ops", t.forward_ops}, {"backward_ops", t.backward_ops},
          {"saved", t.saved_bytes}, {"kept", t.kept_bytes},
          {"working", t.working_bytes}, {"peak_op", t.peak_op}, {"forward_end", bands_json(t.forward_end)},
          {"at_peak", bands_json(t.at_peak)}, {"bands", names}, {"buckets", rows}, {"live_at_peak", live}};
}

// Bytes per token a rank of TP t holds: x + x_tp / t.
double at_tp(double x, double x_tp, int t) { return x + x_tp / t; }

BarChart kinds_chart(const ordered_json& activations) {
  BarChart chart{"layer-kinds", "Every layer kind of the stack and the output layer, bytes per token", true,
                 {"saved TP1", "saved TP2", "working TP1", "working TP2", "selective TP1", "selective TP2"}, {}, {}};
  for (const auto& [kind, k] : activations.items()) {
    chart.groups.push_back(kind);
    std::vector<double> row;
    for (const char* field : {"saved", "working", "selective"})
      for (int t : {1, 2})
        row.push_back(k.contains(field) ? at_tp(k[field].get<double>(), k[std::string(field) + "_tp"].get<double>(), t)
                                        : -1.0);
    chart.values.push_back(std::move(row));
  }
  return chart;
}

}  // namespace

std::vector<int64_t> sweep_lengths() {
  std::vector<int64_t> lengths;
  for (int64_t s = 1024; s <= 128 * 1024; s *= 2) lengths.push_back(s);
  return lengths;
}

Report build_report(const Request& r, const std::vector<int64_t>& sweep_at) {
  const ModelConfig rank = tp_config(r.config, r.tp);
  Report report;
  const std::string kind = layer_kind(r.config, r.layer_index);
  report.title = r.model_name + " (" + r.config.model_type + "), layer " + std::to_string(r.layer_index) + " (" +
                 kind + "), " + std::to_string(r.seq_length) + " tokens" +
                 (r.tp > 1 ? ", one rank of TP " + std::to_string(r.tp) : "");
  // The plain layer's saves by class and module, whichever timeline is drawn.
  const Timeline plain_timeline = census_timeline(rank, r.layer_index, r.seq_length);
  report.timeline = r.selective ? census_timeline(rank, r.layer_index, r.seq_length, /*selective=*/true) : plain_timeline;
  const Timeline& t = report.timeline;
  const std::vector<TimelineColumn> buckets = timeline_buckets(t);
  const SelectiveCensus selective = census_selective(rank, r.layer_index, r.seq_length, /*explain=*/true);

  ordered_json& data = report.data;
  data["census_version"] = CENSUS_VERSION;
  data["model"] = r.model_name;
  data["model_type"] = r.config.model_type;
  data["config_source"] = config_source(r.model_name);
  data["options"] = options_json(r, rank);
  data["layer"] = {{"saved", plain_timeline.saved_bytes}, {"working", plain_timeline.working_bytes},
                   {"selective", {{"saved", selective.kept_bytes}, {"working", selective.working_bytes}}}};
  data["timeline"] = timeline_json(t, buckets);

  // Saved bytes by op class (the plain layer's; the policy's outputs have no saved-op class) and by
  // module, plain beside what the selective policy keeps.
  ordered_json by_op = ordered_json::object();
  for (size_t op = 0; op < kSavedOpCount; ++op) by_op[std::string(saved_op_name(static_cast<SavedOp>(op)))] = plain_timeline.forward_end.bytes[op];
  data["saved_by_op"] = {{"plain", by_op}};
  ordered_json plain_modules = ordered_json::object(), kept_modules = ordered_json::object();
  for (const auto& [module, bytes] : plain_timeline.saved_by_module) plain_modules[module] = bytes;
  for (const SelectiveCensus::Kept& k : selective.kept) {
    const std::string module = k.module.empty() ? "(layer)" : k.module;
    kept_modules[module] = kept_modules.value(module, int64_t{0}) + k.bytes;
  }
  data["saved_by_module"] = {{"plain", plain_modules}, {"selective", kept_modules}};

  // Every layer kind of the stack, as `activations --output --format json` prints it.
  ordered_json activations = ordered_json::object();
  for (const auto& [name, record] : census_activations(r.config, r.seq_length)) activations[name] = activations_json(record);
  activations["output"] = activations_json(census_output_activations(r.config, r.seq_length));
  data["activations"] = activations;

  // Memory against the sequence length: real censuses of the same layer at each length the census
  // prices; a length it refuses is listed with the refusal.
  ordered_json points = ordered_json::array(), refused = ordered_json::array();
  for (int64_t s : sweep_at) {
    Request at = r;
    at.seq_length = s;
    if (Status checked = check_request(at); !checked) {
      refused.push_back({{"seq_length", s}, {"refusal", checked.refusal().message()}});
      continue;
    }
    const LayerCensus plain = census_layer(rank, r.layer_index, s);
    const SelectiveCensus kept = census_selective(rank, r.layer_index, s);
    points.push_back({{"seq_length", s}, {"saved", plain.saved_bytes}, {"working", plain.working_bytes},
                      {"selective", kept.kept_bytes}, {"selective_working", kept.working_bytes}});
  }
  data["sequence_length"] = {{"points", points}, {"refused", refused}};

  // The charts, from the JSON's numbers.
  report.charts.emplace_back("timeline", timeline_svg(t, std::string(t.selective ? "Selective checkpointing" : "Memory") +
                                                             " timeline: " + report.title));
  BarChart ops_chart{"saved-by-op", "Saved bytes by op class (plain layer)", false, {"plain"}, {}, {}};
  for (const auto& [op, bytes] : by_op.items()) {
    ops_chart.groups.push_back(op);
    ops_chart.values.push_back({bytes.get<double>()});
  }
  report.charts.emplace_back("saved-by-op", bar_chart_svg(ops_chart));
  BarChart modules_chart{"saved-by-module", "Saved bytes by module: plain, and what the selective policy keeps",
                         false, {"plain", "selective"}, {}, {}};
  for (const ordered_json* side : {&plain_modules, &kept_modules})
    for (const auto& [module, bytes] : side->items())
      if (std::find(modules_chart.groups.begin(), modules_chart.groups.end(), module) == modules_chart.groups.end())
        modules_chart.groups.push_back(module);
  for (const std::string& module : modules_chart.groups)
    modules_chart.values.push_back({plain_modules.contains(module) ? plain_modules[module].get<double>() : -1.0,
                                    kept_modules.contains(module) ? kept_modules[module].get<double>() : -1.0});
  report.charts.emplace_back("saved-by-module", bar_chart_svg(modules_chart));
  report.charts.emplace_back("layer-kinds", bar_chart_svg(kinds_chart(activations)));
  LineChart sweep{"sequence-length", "Memory against sequence length: layer " + std::to_string(r.layer_index) + " (" +
                                         kind + ")" + (r.tp > 1 ? ", one rank of TP " + std::to_string(r.tp) : ""),
                  {"saved", "working", "selective"}, {}, {{}, {}, {}}};
  for (const ordered_json& p : points) {
    sweep.x.push_back(p["seq_length"].get<double>());
    sweep.values[0].push_back(p["saved"].get<double>());
    sweep.values[1].push_back(p["working"].get<double>());
    sweep.values[2].push_back(p["selective"].get<double>());
  }
  report.charts.emplace_back("sequence-length", line_chart_svg(sweep));
  return report;
}

}  // namespace census::cli
