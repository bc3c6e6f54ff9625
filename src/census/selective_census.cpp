#include "census/selective_census.h"

#include "autograd/checkpoint.h"
#include "census/measurement.h"
#include "census/parts.h"
#include "census/selective_reading.h"
#include "models/causal_lm.h"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>

namespace census {

namespace {

// The ops a region's forward runs, views aside, by aten op: how often, and the bytes they return.
class RegionOps final : public Observer {
 public:
  void on_op(const OpCall& call) override {
    if (call.def.is_view() || Session::current().mode() == nullptr) return;
    auto& [calls, bytes] = ops[std::string(call.def.name)];
    ++calls;
    for (const Tensor& output : call.outputs) {
      bool aliases = false;  // _unsafe_view renames its input's bytes; it allocates nothing
      for (const Tensor& input : call.inputs) aliases = aliases || input.storage() == output.storage();
      if (!aliases) bytes += output.nbytes();
    }
  }
  std::map<std::string, std::pair<int64_t, int64_t>> ops;
};

}  // namespace

void RecomputeLedger::on_op(const OpCall& call) {
  const bool saved = call.decision == ModeDecision::kSave;
  if (!call.def.is_matmul() || (!saved && call.decision != ModeDecision::kRecompute)) return;
  count(call, saved);
}

void RecomputeLedger::count(const OpCall& call, bool saved) {
  bool attention = false;
  for (const Tensor& input : call.inputs)
    for (int64_t id : attention_parameters_) attention = attention || input.storage_id() == id;
  (attention ? attention_flops : rest_flops)[saved ? 0 : 1] += call.def.flops(call.inputs) * Session::current().op_weight();
}

std::vector<int64_t> attention_parameter_ids(const DecoderLayer& layer) {
  std::vector<int64_t> attention;
  for (const Tensor& parameter : layer.parameters()) {
    const std::string_view name = parameter.name();
    const std::string_view first = name.substr(0, name.find('.'));
    if (first.find("attn") != std::string_view::npos || first.find("attention") != std::string_view::npos)
      attention.push_back(parameter.storage_id());
  }
  return attention;
}

RecomputeShares shares_of(const RecomputeLedger& ledger) {
  auto share = [](const std::array<int64_t, 2>& flops) {
    const int64_t total = flops[0] + flops[1];
    return total ? static_cast<double>(flops[1]) / static_cast<double>(total) : 0.0;
  };
  return RecomputeShares{share(ledger.attention_flops), share(ledger.rest_flops)};
}

// census_recomputed prices the layer as Transformers builds it: the eager delta rule and no
// replacements. Where the config already asks for that, the selective forward's decisions are its.
bool recompute_prices_as_built(const ModelConfig& config) {
  return config.gdn_backend == nn::GdnBackend::kEager && config.replacements.empty();
}

namespace {

// One selective census: the checkpointed layer's forward, and its backward where `backward`; with
// `ledger`, the recompute shares of that same forward.
SelectiveCensus run_selective(const ModelConfig& config, int64_t layer_index, int64_t seq_length, bool explain,
                              bool backward, RecomputeShares* ledger_shares) {
  Measurement measurement(/*attached=*/false);
  // Explain lists every storage it keeps: each alike iteration's, unfolded.
  if (!explain) measurement.fold_alike_iterations();
  RegionOps region_ops;
  std::vector<CachedOutput> cached;
  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  const Dims shape{config.micro_batch_size, seq_length, config.hidden_size};
  Tensor hidden = make_tensor(shape, DType::kBFloat16, /*requires_grad=*/true);
  // The model embeds the positions once for all its layers, outside their checkpoints: the layer's
  // census starts after, and they are shared, not the layer's to keep.
  const nn::PositionEmbeddings positions = layer->embed_positions(hidden);
  measurement.attach();
  measurement.track(hidden);
  // The call's other arguments, made before the checkpoint, which keeps them for its recompute.
  LayerCarry arguments = layer->lone_arguments(hidden);
  if (explain) measurement.add_observer(&region_ops);
  std::optional<RecomputeLedger> ledger;
  if (ledger_shares != nullptr) {
    ledger.emplace(attention_parameter_ids(*layer));
    measurement.add_observer(&*ledger);
  }
  auto forward = [&] {
    Tensor out = checkpoint([&](const Tensor& input) { return layer->forward_alone(input, positions, arguments); },
                            hidden, explain ? &cached : nullptr);
    measurement.remove_observer(&region_ops);
    if (ledger) measurement.remove_observer(&*ledger);
    return out;
  };
  const std::vector<Tensor> shared{positions.position_ids, positions.cos, positions.sin};
  const Measured measured = backward ? measurement.run(forward, layer->parameters(), make_tensor(shape, DType::kBFloat16), shared)
                                     : measurement.run_forward(forward, shared);
  if (ledger) *ledger_shares = shares_of(*ledger);
  // The plain census reads this census's kept bytes off its own forward only for a layer that says it
  // takes no arguments here (Note [Selective kept bytes from the plain forward]).
  if (!layer->has_lone_arguments() && !arguments.empty())
    throw std::logic_error("a layer that takes lone arguments must say so in has_lone_arguments");

  SelectiveCensus result;
  result.kept_bytes = measured.kept_bytes;
  result.working_bytes = measured.working_bytes;
  if (explain) {
    result.kept.push_back({"input", "(layer)", hidden.sizes(), std::string(dtype_name(hidden.dtype())), hidden.nbytes()});
    for (const CachedOutput& c : cached) {
      result.kept.push_back({std::string(c.aten_op), std::string(c.module), c.shape, std::string(dtype_name(c.dtype)), c.bytes});
      auto& [calls, bytes] = region_ops.ops[std::string(c.aten_op)];
      bytes -= c.bytes;
      if (c.first_output) --calls;
    }
    std::stable_sort(result.kept.begin(), result.kept.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
    for (const auto& [op, count] : region_ops.ops)
      if (count.first > 0) result.recomputed.push_back({op, count.first, count.second});
  }
  return result;
}

}  // namespace

SelectiveCensus census_selective(const ModelConfig& config, int64_t layer_index, int64_t seq_length, bool explain) {
  return run_selective(config, layer_index, seq_length, explain, /*backward=*/true, nullptr);
}

int64_t census_selective_kept(const ModelConfig& config, int64_t layer_index, int64_t seq_length,
                              RecomputeShares* shares) {
  const bool shares_here = shares != nullptr && recompute_prices_as_built(config);
  const int64_t kept = run_selective(config, layer_index, seq_length, /*explain=*/false, /*backward=*/false,
                                     shares_here ? shares : nullptr)
                           .kept_bytes;
  if (shares != nullptr && !shares_here) *shares = census_recomputed(config, layer_index, seq_length);
  return kept;
}

int64_t selective_kept(const ModelConfig& config, int64_t layer_index, int64_t seq_length,
                       const SelectiveReading& reading, RecomputeShares* shares) {
  if (!reading.read) return census_selective_kept(config, layer_index, seq_length, shares);
  if (shares != nullptr)
    *shares = reading.shares ? *reading.shares : census_recomputed(config, layer_index, seq_length);
  return reading.kept_bytes;
}

RecomputeShares census_recomputed(const ModelConfig& config_in, int64_t layer_index, int64_t seq_length) {
  // As the reference, on Transformers' own modules: the chunked delta rule whatever backend the layer
  // runs, and no fused module a train.yaml installs (their kernels run matmuls no dispatch sees).
  ModelConfig config = config_in;
  config.gdn_backend = nn::GdnBackend::kEager;
  config.replacements.clear();
  Session session;
  session.set_fold_alike_iterations(true);  // the ledger weighs each op (Note [Alike iterations])
  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  Tensor hidden = make_tensor(Dims{config.micro_batch_size, seq_length, config.hidden_size}, DType::kBFloat16, /*requires_grad=*/true);
  const nn::PositionEmbeddings positions = layer->embed_positions(hidden);
  LayerCarry arguments = layer->lone_arguments(hidden);
  RecomputeLedger ledger(attention_parameter_ids(*layer));
  session.add_observer(&ledger);
  Tensor out = checkpoint([&](const Tensor& input) { return layer->forward_alone(input, positions, arguments); },
                          hidden);
  session.remove_observer(&ledger);
  return shares_of(ledger);
}

namespace {

// Each decoder layer of the model's loop under the selective checkpoint, as the step wraps it, with
// its own ledger.
class LedgeredLayers final : public LayerRunner {
 public:
  LedgeredLayers(const CausalLM& model, std::vector<RecomputeShares>& shares) : model_(model), shares_(shares) {}
  Tensor run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const override {
    RecomputeLedger ledger(attention_parameter_ids(*model_.layers()[static_cast<size_t>(index - model_.chunk().begin)]));
    Session::current().add_observer(&ledger);
    Tensor out = checkpoint(forward, hidden_states);
    Session::current().remove_observer(&ledger);
    shares_[static_cast<size_t>(index)] = shares_of(ledger);
    return out;
  }

 private:
  const CausalLM& model_;
  std::vector<RecomputeShares>& shares_;
};

}  // namespace

std::vector<RecomputeShares> census_stack_recomputed(const ModelConfig& config_in, const ModelConfig& layer_config_in,
                                                     int64_t seq_length, bool whole) {
  ModelConfig config = config_in, layer_config = layer_config_in;  // as census_recomputed prices a layer
  for (ModelConfig* c : {&config, &layer_config}) {
    c->gdn_backend = nn::GdnBackend::kEager;
    c->replacements.clear();
  }
  const std::vector<int64_t> read_as = layers_read_as(config, whole);  // itself, or its kind's first
  const ModelChunk chunk = layers_read_through(read_as);
  Session session;
  session.set_fold_alike_iterations(true);
  const std::unique_ptr<CausalLM> model = build_causal_lm(config, layer_config, chunk);
  std::vector<RecomputeShares> read(static_cast<size_t>(chunk.end));
  const Tensor input_ids = make_tensor(Dims{config.micro_batch_size, seq_length}, DType::kInt64);
  Tensor out = model->model_forward(input_ids, Tensor(), LedgeredLayers(*model, read));
  std::vector<RecomputeShares> shares;
  for (int64_t as : read_as) shares.push_back(read[static_cast<size_t>(as)]);
  return shares;
}

}  // namespace census
