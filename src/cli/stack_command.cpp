#include "cli/stack_command.h"

#include <nlohmann/json.hpp>

#include "census/stack_census.h"
#include "report/table.h"

namespace census::cli {

void command_stack(const Request& r, std::ostream& out) {
  const std::vector<StackLayerCensus> layers = census_stack(tp_config(r.config, r.tp), r.seq_length);
  const auto kinds = stack_activations(r.config, r.seq_length);
  const std::vector<std::string> kind_of = layer_kinds(r.config);
  if (r.format == Format::kJson) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (size_t i = 0; i < layers.size(); ++i)
      rows.push_back({{"layer", i}, {"kind", kind_of[i]}, {"kept", layers[i].kept}, {"held", layers[i].held}});
    nlohmann::ordered_json records = nlohmann::ordered_json::object();
    for (const auto& [kind, k] : kinds)
      records[kind] = {{"saved", k.saved}, {"saved_tp", k.saved_tp}, {"working", k.working},
                       {"working_tp", k.working_tp}, {"seq_length", k.seq_length}};
    out << nlohmann::ordered_json{{"layers", rows}, {"kinds", records}}.dump(2) << '\n';
    return;
  }
  out << "Stack census of " << r.model_name << " (" << r.config.model_type << "), " << layers.size() << " layers, "
      << r.seq_length << " tokens, micro-batch " << r.micro_batch_size << ", bf16";
  if (r.tp > 1) out << ", one rank of TP " << r.tp;
  out << "\nthe whole decoder runs forward then backward; a save counts toward the layer whose forward makes it first\n";
  Table table({"layer", "kind", "kept", "", "held", ""});
  for (size_t i = 0; i < layers.size(); ++i)
    table.add({std::to_string(i), kind_of[i], grouped(layers[i].kept), human_bytes(layers[i].kept),
               grouped(layers[i].held), human_bytes(layers[i].held)});
  table.print(out);
  out << "\neach kind's mean over its layers, per token (TP 1 and TP 2); at TP t a rank holds x + x_tp / t\n";
  Table records({"kind", "saved", "saved_tp", "working", "working_tp"});
  for (const auto& [kind, k] : kinds)
    records.add({kind, decimal(k.saved), decimal(k.saved_tp), decimal(k.working), decimal(k.working_tp)});
  records.print(out);
}

}  // namespace census::cli
