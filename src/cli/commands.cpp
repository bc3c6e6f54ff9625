#include "cli/commands.h"

#include <nlohmann/json.hpp>

#include "census/activations.h"
#include "census/layer_census.h"
#include "census/output_census.h"
#include "census/parts.h"
#include "census/selective_census.h"
#include "cli/request.h"
#include "cli/shipped_models.h"
#include "report/table.h"
#include "models/registry.h"
#include "models/llama.h"

namespace census::cli {
namespace {

using nlohmann::ordered_json;

void print_json(const ordered_json& json, std::ostream& out) { out << json.dump(2) << '\n'; }

std::string heading(const Request& r, bool with_layer) {
  std::string text = r.model_name + " (" + r.config.model_type + ")";
  if (with_layer) text += ", layer " + std::to_string(r.layer_index) + " (" +
                          layer_kind(r.config, r.layer_index) + ")";
  text += ", " + std::to_string(r.seq_length) + " tokens, micro-batch " + std::to_string(r.micro_batch_size) + ", bf16";
  if (r.tp > 1) text += ", one rank of TP " + std::to_string(r.tp);
  if (r.config.linear_num_key_heads > 0 && r.command != "flops")
    text += ", gated delta rule " + std::string(nn::gdn_backend_name(r.config.gdn_backend));
  return text;
}

ModelConfig rank_config(const Request& r) { return tp_config(r.config, r.tp); }

void command_layer_selective(const Request& r, std::ostream& out) {
  const SelectiveCensus c = census_selective(rank_config(r), r.layer_index, r.seq_length);
  const RecomputeShares shares = census_recomputed(rank_config(r), r.layer_index, r.seq_length);
  if (r.format == Format::kJson)
    return print_json({{"kept", c.kept_bytes}, {"working", c.working_bytes},
                       {"selective_attention_mm", shares.attention_mm}, {"selective_ffn_mm", shares.ffn_mm}},
                      out);
  out << heading(r, true) << ", under HyperParallel's selective checkpointing\n";
  const double s = static_cast<double>(r.seq_length * r.micro_batch_size);  // per token of the micro-batch
  Table table({"", "bytes", "", "per token"});
  table.add({"kept", grouped(c.kept_bytes), human_bytes(c.kept_bytes), decimal(c.kept_bytes / s)});
  table.add({"working", grouped(c.working_bytes), human_bytes(c.working_bytes), decimal(c.working_bytes / s)});
  table.print(out);
  out << "recomputed share of matmul FLOPs: attention projections " << decimal(shares.attention_mm)
      << ", rest of the layer " << decimal(shares.ffn_mm) << '\n';
}

void command_layer(const Request& r, std::ostream& out) {
  if (r.selective) return command_layer_selective(r, out);
  const LayerCensus c = census_layer(rank_config(r), r.layer_index, r.seq_length);
  if (r.format == Format::kJson) return print_json({{"saved", c.saved_bytes}, {"working", c.working_bytes}}, out);
  out << heading(r, true) << '\n';
  const double s = static_cast<double>(r.seq_length * r.micro_batch_size);  // per token of the micro-batch
  Table table({"", "bytes", "", "per token"});
  table.add({"saved", grouped(c.saved_bytes), human_bytes(c.saved_bytes), decimal(c.saved_bytes / s)});
  table.add({"working", grouped(c.working_bytes), human_bytes(c.working_bytes), decimal(c.working_bytes / s)});
  table.print(out);
}

void command_saved_ops(const Request& r, std::ostream& out) {
  const LayerCensus c = census_layer(rank_config(r), r.layer_index, r.seq_length);
  const double s = static_cast<double>(r.seq_length * r.micro_batch_size);  // per token of the micro-batch
  ordered_json json;
  for (size_t i = 0; i < kSavedOpCount; ++i) json[std::string(saved_op_name(static_cast<SavedOp>(i)))] = c.saved_by_op[i] / s;
  if (r.format == Format::kJson) return print_json(json, out);
  out << heading(r, true) << "; saved bytes per token by the op whose backward takes them\n";
  Table table({"op", "bytes/token", "share"});
  for (size_t i = 0; i < kSavedOpCount; ++i) {
    const double share = c.saved_bytes ? 100.0 * c.saved_by_op[i] / c.saved_bytes : 0.0;
    char percent[16];
    std::snprintf(percent, sizeof percent, "%.1f%%", share);
    table.add({std::string(saved_op_name(static_cast<SavedOp>(i))), decimal(c.saved_by_op[i] / s), percent});
  }
  table.add({"saved", decimal(c.saved_bytes / s), "100.0%"});
  table.print(out);
}

void print_parts(const PartCounts& parts, const char* unit, std::ostream& out) {
  Table table({"part", unit});
  int64_t total = 0;
  for (const auto& [part, value] : parts) {
    table.add({part, grouped(value)});
    total += value;
  }
  table.add({"total", grouped(total)});
  table.print(out);
}

void command_flops(const Request& r, std::ostream& out) {
  const PartCounts flops = census_flops(rank_config(r), r.layer_index, r.seq_length);
  if (r.format == Format::kJson) return print_json(ordered_json(flops), out);
  out << heading(r, true) << "; forward FLOPs by part\n";
  print_parts(flops, "FLOPs", out);
}

void command_traffic(const Request& r, std::ostream& out) {
  const LayerTraffic t = census_traffic(rank_config(r), r.layer_index, r.seq_length);
  if (r.format == Format::kJson)
    return print_json({{"moved", t.moved}, {"parameter", t.parameter}, {"launches", t.launches}}, out);
  out << heading(r, true) << "; forward bytes moved by part\n";
  Table table({"part", "moved bytes", "parameter bytes", "launches"});
  for (const auto& [part, moved] : t.moved)
    table.add({part, grouped(moved), grouped(t.parameter.at(part)), grouped(t.launches.at(part))});
  table.print(out);
}

void command_parameters(const Request& r, std::ostream& out) {
  const LayerParameters p = census_parameters(rank_config(r), r.layer_index);
  int64_t total = 0;
  for (const auto& [part, count] : p.parts) total += count;
  if (r.format == Format::kJson)
    return print_json({{"parts", p.parts}, {"total", total}, {"final_norm", p.final_norm}}, out);
  out << heading(r, true) << "; parameters by part\n";
  print_parts(p.parts, "parameters", out);
  out << "final norm: " << grouped(p.final_norm) << " parameters\n";
}

}  // namespace

// The record as the reference's KindActivations.to_dict() gives it: fields that are None left out.
ordered_json activations_json(const KindActivations& k) {
  ordered_json json = {{"saved", k.saved}, {"saved_tp", k.saved_tp}, {"working", k.working},
                       {"working_tp", k.working_tp}, {"seq_length", k.seq_length}};
  for (const auto& [name, value] : {std::pair{"selective", k.selective}, std::pair{"selective_tp", k.selective_tp},
                                    std::pair{"selective_attention_mm", k.selective_attention_mm},
                                    std::pair{"selective_ffn_mm", k.selective_ffn_mm}})
    if (value) json[name] = *value;
  if (!k.ops.empty()) {
    json["ops"] = k.ops;
    json["ops_tp"] = k.ops_tp;
  }
  return json;
}

namespace {

// A record's optional figure, or "-" where the record does not state it.
std::string stated(const std::optional<double>& value) { return value ? decimal(*value) : "-"; }

void command_activations(const Request& r, std::ostream& out) {
  const auto kinds = census_activations(r.config, r.seq_length, r.stack);
  std::optional<KindActivations> output;
  if (r.output) output = census_output_activations(r.config, r.seq_length);
  if (r.format == Format::kJson) {
    ordered_json json = ordered_json::object();
    for (const auto& [kind, record] : kinds) json[kind] = activations_json(record);
    if (output) json["output"] = activations_json(*output);
    return print_json(json, out);
  }
  out << "Activation census of " << r.model_name << " (" << r.config.model_type << "), "
      << r.seq_length << " tokens, micro-batch " << r.micro_batch_size << ", bf16\n"
      << "bytes per token; at TP t a rank holds x + x_tp / t\n\n";
  Table table({"kind", "layers", "saved", "saved_tp", "working", "working_tp", "selective", "selective_tp"});
  for (const auto& [kind, k] : kinds) {
    int64_t layers = 0;
    for (const LayerGroup& group : r.stack.empty() ? layer_stack(r.config) : r.stack)
      if (group.kind == kind && !group.mtp) layers += group.count;
    table.add({kind, std::to_string(layers), decimal(k.saved), decimal(k.saved_tp), decimal(k.working),
               decimal(k.working_tp), stated(k.selective), stated(k.selective_tp)});
  }
  table.print(out);
  out << "\nrecomputed by the selective backward (share of matmul FLOPs)\n";
  Table shares({"kind", "attention projections", "rest of the layer"});
  for (const auto& [kind, k] : kinds)
    shares.add({kind, stated(k.selective_attention_mm), stated(k.selective_ffn_mm)});
  shares.print(out);
  if (output) {
    out << "\noutput layer (TP part: what a vocabulary-parallel loss splits)\n";
    Table table({"saved", "saved_tp", "working", "working_tp"});
    table.add({decimal(output->saved), decimal(output->saved_tp), decimal(output->working), decimal(output->working_tp)});
    table.print(out);
  }
  bool unstated = false;
  for (const auto& [kind, k] : kinds) {
    if (k.ops.empty()) {
      unstated = true;
      continue;
    }
    out << "\nsaved by op, " << kind << " layer (bytes per token)\n";
    Table ops({"op", "saved", "saved_tp"});
    for (const auto& [op, value] : k.ops) ops.add({op, decimal(value), decimal(k.ops_tp.at(op))});
    ops.print(out);
  }
  // The reference's records of a kind priced through the stack state its plain layer's bytes only.
  if (unstated)
    out << "\n- : not stated for a kind whose layers cannot run alone (priced through the model's stack, its"
           " plain layer's bytes only); census step --recompute selective prices the whole model's\n";
}

void command_explain_selective(const Request& r, std::ostream& out) {
  const SelectiveCensus c = census_selective(rank_config(r), r.layer_index, r.seq_length, /*explain=*/true);
  if (r.format == Format::kJson) {
    ordered_json kept = ordered_json::array(), recomputed = ordered_json::array();
    for (const auto& row : c.kept)
      kept.push_back({{"bytes", row.bytes}, {"dtype", row.dtype}, {"shape", std::vector<int64_t>(row.shape.begin(), row.shape.end())},
                      {"module", row.module}, {"aten_op", row.what}});
    for (const auto& row : c.recomputed)
      recomputed.push_back({{"aten_op", row.aten_op}, {"calls", row.calls}, {"bytes", row.bytes}});
    return print_json({{"kept", c.kept_bytes}, {"storages", kept}, {"recomputed", recomputed}}, out);
  }
  out << heading(r, true) << ", under HyperParallel's selective checkpointing\n"
      << "what the layer keeps: its input and the outputs the policy saves, largest first\n";
  Table kept({"bytes", "dtype", "shape", "module", "aten op"});
  for (const auto& row : c.kept) kept.add({grouped(row.bytes), row.dtype, row.shape.str(), row.module, row.what});
  kept.print(out);
  out << "kept: " << grouped(c.kept_bytes) << " bytes (the positions, embedded once for all layers, are shared)\n\n"
      << "what it leaves to the backward: the other ops, run again up to the last one that saves\n";
  Table recomputed({"aten op", "calls", "output bytes"});
  for (const auto& row : c.recomputed) recomputed.add({row.aten_op, grouped(row.calls), grouped(row.bytes)});
  recomputed.print(out);
}

// How a MoE layer's tokens were assigned to its experts, for explain (Note [Eager experts under shapes
// alone]); empty for a dense layer.
std::string routing_note(const ModelConfig& c, int64_t layer_index) {
  if (!is_moe_layer(c, layer_index)) return {};
  const bool eager = c.moe.experts_implementation == nn::ExpertsImplementation::kEager;
  const bool fused = layer_replacement(c, layer_index, "mlp.experts", "Experts").has_value();
  if (fused || !eager)
    return "routing: each token's experts are data a census does not have; grouped experts keep tensors per "
           "token-expert pair, so these bytes hold for any routing";
  return "routing: balanced, pair t*K+k to expert (t*K+k) % " + std::to_string(c.moe.num_experts) +
         ", every expert hit; the eager loop's saved bytes hold for any routing that hits every expert, its op "
         "count and backward peak grow with the experts hit";
}

void command_explain(const Request& r, std::ostream& out) {
  if (r.selective) return command_explain_selective(r, out);
  const std::string routing = routing_note(r.config, r.layer_index);
  const LayerCensus c = census_layer(rank_config(r), r.layer_index, r.seq_length, /*explain=*/true);
  if (r.format == Format::kJson) {
    ordered_json rows = ordered_json::array();
    for (const SavedRow& row : c.saved)
      rows.push_back({{"bytes", row.bytes}, {"dtype", row.dtype},
                      {"shape", std::vector<int64_t>(row.shape.begin(), row.shape.end())},
                      {"module", row.module}, {"aten_op", row.by_op}, {"op", row.op_class}});
    ordered_json json = {{"saved", c.saved_bytes}, {"storages", rows}};
    if (!routing.empty()) json["routing"] = routing;
    return print_json(json, out);
  }
  out << heading(r, true) << "\nevery storage the layer keeps for its backward, largest first\n";
  Table table({"bytes", "dtype", "shape", "module", "aten op", "op"});
  for (const SavedRow& row : c.saved)
    table.add({grouped(row.bytes), row.dtype, row.shape.str(), row.module.empty() ? "(layer)" : row.module, row.by_op, row.op_class});
  table.print(out);
  out << "saved: " << grouped(c.saved_bytes) << " bytes in " << c.saved.size() << " storages\n";
  if (!routing.empty()) out << routing << "\n";
}

void command_output(const Request& r, std::ostream& out) {
  const int64_t half_vocab = std::max<int64_t>(1, r.config.vocab_size / 2);
  const OutputCensus full = census_output(r.config, r.seq_length, r.config.vocab_size);
  const OutputCensus half = census_output(r.config, r.seq_length, half_vocab);
  const KindActivations record =
      split_record(full.saved_bytes, half.saved_bytes, full.working_bytes, half.working_bytes, r.seq_length,
                   r.config.micro_batch_size);
  if (r.format == Format::kJson)
    return print_json({{"vocab", {{"vocab_size", r.config.vocab_size}, {"saved", full.saved_bytes}, {"working", full.working_bytes}}},
                       {"half_vocab", {{"vocab_size", half_vocab}, {"saved", half.saved_bytes}, {"working", half.working_bytes}}},
                       {"record", {{"saved", record.saved}, {"saved_tp", record.saved_tp}, {"working", record.working},
                                   {"working_tp", record.working_tp}, {"seq_length", record.seq_length}}}},
                      out);
  out << heading(r, false) << "\noutput layer: final norm, LM head, causal-LM loss on fp32 logits\n";
  Table table({"vocabulary", "saved", "", "working", ""});
  table.add({std::to_string(r.config.vocab_size), grouped(full.saved_bytes), human_bytes(full.saved_bytes),
             grouped(full.working_bytes), human_bytes(full.working_bytes)});
  table.add({std::to_string(half_vocab), grouped(half.saved_bytes), human_bytes(half.saved_bytes),
             grouped(half.working_bytes), human_bytes(half.working_bytes)});
  table.print(out);
  out << "\nper token; a vocabulary-parallel loss over t ranks holds x + x_tp / t\n";
  Table split({"saved", "saved_tp", "working", "working_tp"});
  split.add({decimal(record.saved), decimal(record.saved_tp), decimal(record.working), decimal(record.working_tp)});
  split.print(out);
}

void command_layers(const Request& r, std::ostream& out) {
  ordered_json json = ordered_json::array();
  Table table({"kind", "count", "first layer"});
  int64_t first = 0;
  for (const LayerGroup& group : layer_stack(r.config)) {
    ordered_json entry = {{"kind", group.kind}, {"count", group.count}};
    if (group.mtp) entry["mtp"] = true;  // omitted when false, as the stack's files write it
    json.push_back(entry);
    // Multi-token-prediction layers follow the body; Transformers' CausalLM builds none of them.
    table.add({group.kind + (group.mtp ? " (mtp)" : ""), std::to_string(group.count),
               group.mtp ? "after the body" : std::to_string(first)});
    if (!group.mtp) first += group.count;
  }
  if (r.format == Format::kJson) return print_json(json, out);
  out << r.model_name << " (" << r.config.model_type << "): " << r.config.num_hidden_layers << " layers\n";
  table.print(out);
}

void command_tp_config(const Request& r, std::ostream& out) {
  const ModelConfig c = rank_config(r);
  ordered_json json = {{"num_attention_heads", c.num_attention_heads}, {"num_key_value_heads", c.num_key_value_heads},
                       {"intermediate_size", c.intermediate_size}, {"head_dim", c.head_dim}};
  // The experts' widths, where the model states them (the number of experts is expert parallelism's).
  if (c.moe.moe_intermediate_size > 0) json["moe_intermediate_size"] = c.moe.moe_intermediate_size;
  if (c.moe.shared_expert_intermediate_size > 0)
    json["shared_expert_intermediate_size"] = c.moe.shared_expert_intermediate_size;
  if (c.linear_num_key_heads > 0) {
    json["linear_num_key_heads"] = c.linear_num_key_heads;
    json["linear_num_value_heads"] = c.linear_num_value_heads;
  }
  // Gemma 4's full-attention layers: their own head width and K/V heads (head_dim and
  // num_key_value_heads above are its sliding layers').
  if (c.gemma4.global_head_dim > 0) {
    json["global_head_dim"] = c.gemma4.global_head_dim;
    json["num_global_key_value_heads"] = c.gemma4.num_global_key_value_heads;
  }
  // Whole-projection q/k norms (MiniMax-M2): the widths a rank's norms have, over its own heads.
  if (c.qk_norm_over_heads) {
    json["q_norm_width"] = c.num_attention_heads * c.head_dim;
    json["k_norm_width"] = c.num_key_value_heads * c.head_dim;
  }
  if (r.format == Format::kJson) return print_json(json, out);
  out << r.model_name << " as one rank of TP " << r.tp << " holds a layer\n";
  Table table({"field", "value"});
  for (const auto& [field, value] : json.items()) table.add({field, std::to_string(value.get<int64_t>())});
  table.print(out);
  if (c.qk_norm_over_heads && r.tp > 1)
    out << "q_norm and k_norm normalize over the whole projection in the model (" << r.config.num_attention_heads *
           r.config.head_dim << " and " << r.config.num_key_value_heads * r.config.head_dim
        << " wide); a rank is priced as the reference builds it, each norm over its own heads' slice\n";
}

}  // namespace

void list_models(Format format, std::ostream& out) {
  ordered_json json = ordered_json::array();
  Table table({"name", "model_type", "layers", "hidden", "heads", "kv heads"});
  for (const ShippedModel& model : shipped_models()) {
    auto config = resolve_model(std::string(model.name));
    if (!config) continue;
    json.push_back({{"name", model.name}, {"model_type", config->model_type}, {"num_hidden_layers", config->num_hidden_layers},
                    {"hidden_size", config->hidden_size}});
    table.add({std::string(model.name), config->model_type, std::to_string(config->num_hidden_layers),
               std::to_string(config->hidden_size), std::to_string(config->num_attention_heads),
               std::to_string(config->num_key_value_heads)});
  }
  if (format == Format::kJson) return print_json(json, out);
  table.print(out);
}

void run_command(const Request& r, std::ostream& out) {
  if (r.command == "layer") command_layer(r, out);
  else if (r.command == "saved-ops") command_saved_ops(r, out);
  else if (r.command == "flops") command_flops(r, out);
  else if (r.command == "traffic") command_traffic(r, out);
  else if (r.command == "parameters") command_parameters(r, out);
  else if (r.command == "activations") command_activations(r, out);
  else if (r.command == "explain") command_explain(r, out);
  else if (r.command == "tp-config") command_tp_config(r, out);
  else if (r.command == "output") command_output(r, out);
  else if (r.command == "layers") command_layers(r, out);
}

}  // namespace census::cli
