#include "census/selective_census.h"

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "census/live_bytes.h"
#include "census/parts.h"

namespace census {

SelectiveCensus census_selective(const ModelConfig& config, int64_t layer_index, int64_t seq_length) {
  Session session;
  LiveBytes live;  // declared before every tensor: it hears each one's end
  ParameterGrads parameter_grads;
  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  const Dims shape{1, seq_length, config.hidden_size};
  Tensor hidden = make_tensor(shape, DType::kBFloat16, /*requires_grad=*/true);
  Tensor grad = make_tensor(shape, DType::kBFloat16);
  // The model embeds the positions once for all its layers, outside their checkpoints: the layer's
  // census starts after.
  const nn::PositionEmbeddings positions = layer->embed_positions(hidden);
  session.add_observer(&live);
  session.add_observer(&parameter_grads);
  live.track(hidden);
  Tensor out = checkpoint([&](const Tensor& input) { return layer->forward(input, positions); }, hidden);

  const size_t start = live.event_count();
  StorageSet excluded;
  excluded.insert(out.storage_id());
  StorageSet not_kept = excluded;
  for (const Tensor* shared : {&positions.position_ids, &positions.cos, &positions.sin}) not_kept.insert(shared->storage_id());
  SelectiveCensus result;
  result.kept_bytes = live.live_bytes(not_kept);

  live.track(grad);
  run_backward(out, grad);
  for (const Tensor& parameter : layer->parameters())
    if (parameter.impl()->grad) parameter_grads.ids.insert(parameter.impl()->grad->storage->id);
  result.working_bytes = live.peak_from(start, excluded, parameter_grads.ids).bytes;
  return result;
}

RecomputeShares census_recomputed(const ModelConfig& config, int64_t layer_index, int64_t seq_length) {
  Session session;
  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  // The attention's parameters: those of a child named for attention (self_attn, attention, ...).
  std::vector<int64_t> attention;
  for (const Tensor& parameter : layer->parameters()) {
    const std::string_view name = parameter.name();
    const std::string_view first = name.substr(0, name.find('.'));
    if (first.find("attn") != std::string_view::npos || first.find("attention") != std::string_view::npos)
      attention.push_back(parameter.storage_id());
  }
  Tensor hidden = make_tensor(Dims{1, seq_length, config.hidden_size}, DType::kBFloat16, /*requires_grad=*/true);
  const nn::PositionEmbeddings positions = layer->embed_positions(hidden);
  RecomputeLedger ledger;
  Tensor out = checkpoint([&](const Tensor& input) { return layer->forward(input, positions); }, hidden, &ledger,
                          &attention);
  auto share = [](const std::array<int64_t, 2>& flops) {
    const int64_t total = flops[0] + flops[1];
    return total ? static_cast<double>(flops[1]) / static_cast<double>(total) : 0.0;
  };
  return RecomputeShares{share(ledger.attention_flops), share(ledger.rest_flops)};
}

}  // namespace census
