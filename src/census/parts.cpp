#include "census/parts.h"

#include <memory>

namespace census {
namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Observers that attribute each forward op to a part. FLOPs are the catalogue's (OpDef::flops), as
// the reference counts them: the attention kernel's are the scores', a matmul's its module's part's.
class PartFlops final : public Observer {
 public:
  void on_op(const OpCall& call) override {
    switch (call.def.flops_rule) {
      case FlopsRule::kNone:
        return;
      case FlopsRule::kScores:
        flops["scores"] += call.def.flops(call.inputs) * Session::current().op_weight();
        return;
      case FlopsRule::kMatmul:
      case FlopsRule::kBiasedMatmul:
      case FlopsRule::kGemm4bit:
        flops[std::string(part_of_op(call, Session::current().modules(), /*recurrent=*/true))] +=
            call.def.flops(call.inputs) * Session::current().op_weight();
        return;
    }
  }
  void prepare(const DecoderLayer& /*layer*/) {}
  PartCounts flops;
};

class PartTraffic final : public Observer {
 public:
  // A layer's attention has a recurrence where it is a linear attention: its weightless ops are the
  // recurrence's. Else they are the attention's own (rotary, the output copy).
  void prepare(const DecoderLayer& layer) { recurrent_ = layer.has_recurrence(); }
  void on_op(const OpCall& call) override {
    if (call.def.is_view()) return;  // renames bytes its producer wrote: no kernel, nothing moved
    const std::string part(call.def.kind == OpKind::kAttentionKernel
                               ? std::string_view("scores")
                               : part_of_op(call, Session::current().modules(), recurrent_));
    int64_t moved = 0, parameter = 0;
    for (const Tensor& input : call.inputs) {
      moved += input.nbytes();
      if (input.is_parameter()) parameter += input.nbytes();
    }
    for (const Tensor& output : call.outputs) moved += output.nbytes();
    const int64_t weight = Session::current().op_weight();  // Note [Alike iterations]
    traffic.moved[part] += moved * weight;
    traffic.parameter[part] += parameter * weight;
    traffic.launches[part] += weight;
  }
  LayerTraffic traffic;

 private:
  bool recurrent_ = false;
};

template <class Counter>
void run_forward(const ModelConfig& config, int64_t layer_index, int64_t seq_length, Counter& counter) {
  Session session;
  session.set_fold_alike_iterations(true);  // the counters weigh each op (Note [Alike iterations])
  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  Tensor hidden = make_tensor(Dims{config.micro_batch_size, seq_length, config.hidden_size}, DType::kBFloat16);
  // The positions are embedded before the count starts: the model does it once for all layers.
  nn::PositionEmbeddings positions = layer->embed_positions(hidden);
  counter.prepare(*layer);
  session.add_observer(&counter);
  Tensor out = layer->forward(hidden, positions);
  session.remove_observer(&counter);
}

}  // namespace

std::string_view parameter_part(std::string_view name) {
  const size_t first_dot = name.find('.');
  const std::string_view first = name.substr(0, first_dot);
  std::string_view module;
  if (first_dot != std::string_view::npos) {
    const size_t last_dot = name.rfind('.');
    const size_t before = name.rfind('.', last_dot - 1);
    module = name.substr(before == std::string_view::npos ? 0 : before + 1,
                         last_dot - (before == std::string_view::npos ? 0 : before + 1));
  }
  if (contains(first, "norm") || module == "q_norm" || module == "k_norm") return "norm";
  if (contains(first, "attn") || contains(first, "attention")) return "attention";
  bool experts = false;
  for (size_t begin = 0; begin <= name.size();) {
    const size_t end = std::min(name.find('.', begin), name.size());
    const std::string_view segment = name.substr(begin, end - begin);
    if (contains(segment, "shared")) return "shared";
    experts = experts || segment == "experts";
    begin = end + 1;
  }
  if (experts) return "routed";
  if (module == "gate" || module == "router") return "router";
  return "ffn";
}

std::string_view part_of_op(const OpCall& call, const std::vector<ModuleFrame>& modules, bool recurrent) {
  if (modules.empty() || modules.back().path.empty()) return "ffn";
  // The part of a weight of the innermost module: its path with ".weight" appended.
  std::string name(modules.back().path);
  name += ".weight";
  const std::string_view part = parameter_part(name);
  if (part == "attention" && recurrent) {
    bool weighted = false;
    for (const Tensor& input : call.inputs) weighted = weighted || input.is_parameter();
    if (!weighted) return "linrec";
  }
  return part;
}

PartCounts census_flops(const ModelConfig& config, int64_t layer_index, int64_t seq_length) {
  // The FLOPs of a gated delta rule are those of Transformers' chunked rule, whatever backend runs:
  // the kernel runs the same matmuls, which its contract does not dispatch.
  ModelConfig eager = config;
  eager.gdn_backend = nn::GdnBackend::kEager;
  // Likewise a Mamba-2 mixer's: the fused kernel runs the output projection inside its Function.
  if (eager.mamba) eager.mamba->backend = nn::MambaBackend::kTorch;
  PartFlops counter;
  run_forward(eager, layer_index, seq_length, counter);
  return counter.flops;
}

LayerTraffic census_traffic(const ModelConfig& config, int64_t layer_index, int64_t seq_length) {
  PartTraffic counter;
  run_forward(config, layer_index, seq_length, counter);
  return counter.traffic;
}

LayerParameters census_parameters(const ModelConfig& config, int64_t layer_index) {
  Session session;
  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  LayerParameters result;
  for (const Tensor& parameter : layer->parameters())
    result.parts[std::string(parameter_part(parameter.name()))] += parameter.numel();
  result.final_norm = layer->final_norm_parameters();
  return result;
}

}  // namespace census
