#include "census/layer_census.h"

#include <algorithm>

#include "census/measurement.h"
#include "census/selective_reading.h"

namespace census {
LayerCensus census_layer(const ModelConfig& config, int64_t layer_index, int64_t seq_length, bool explain,
                         SelectiveReading* selective) {
  Measurement measurement;
  // Explain lists every saved storage: each alike iteration's, unfolded (Note [Alike iterations]).
  if (!explain) measurement.fold_alike_iterations();
  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  const Dims shape{config.micro_batch_size, seq_length, config.hidden_size};
  Tensor hidden = make_tensor(shape, DType::kBFloat16, /*requires_grad=*/true);
  measurement.track(hidden);
  for (const Tensor& buffer : layer->buffers()) measurement.track(buffer);
  // The selective census's reading wants the layer's forward as the checkpoint would run it (its
  // positions made outside, no lone arguments) and no module keeping tensors past it (a train.yaml's
  // fused modules may: GroupedExperts keeps its group list, which its matmuls also save).
  const bool reads = selective != nullptr && !layer->has_lone_arguments() && config.replacements.empty();
  if (selective != nullptr) selective->read = false;
  const bool reads_shares = reads && selective->wants_shares && recompute_prices_as_built(config);
  const std::vector<int64_t> attention_parameters = reads_shares ? attention_parameter_ids(*layer) : std::vector<int64_t>();
  // The positions are embedded inside the measured forward, as the reference runs it: cos and sin
  // are the layer's to keep.
  const Measured measured = measurement.run(
      [&] {
        const nn::PositionEmbeddings positions = layer->embed_positions(hidden);
        if (!reads) return layer->forward(hidden, positions);
        SelectiveReader reader(reads_shares ? &attention_parameters : nullptr);
        measurement.add_observer(&reader);
        Tensor out = layer->forward(hidden, positions);
        measurement.remove_observer(&reader);
        reader.read(hidden, out, positions, measurement.live(), measurement.saved(), *selective);
        return out;
      },
      layer->parameters(), make_tensor(shape, DType::kBFloat16));

  LayerCensus result;
  result.saved_bytes = measured.saved_bytes;
  result.kept_bytes = measured.kept_bytes;
  result.working_bytes = measured.working_bytes;
  for (const SavedStorage* storage : measured.saved) result.saved_by_op[static_cast<size_t>(storage->op)] += storage->bytes;
  if (explain) {
    std::vector<const SavedStorage*> held = measured.saved;
    std::stable_sort(held.begin(), held.end(),
                     [](const SavedStorage* a, const SavedStorage* b) { return a->bytes > b->bytes; });
    for (const SavedStorage* s : held)
      result.saved.push_back(SavedRow{s->bytes, std::string(dtype_name(s->dtype)), s->shape, std::string(s->module),
                                      std::string(s->by_op), std::string(saved_op_name(s->op))});
  }
  return result;
}

}  // namespace census
