#include "census/layer_census.h"

#include <algorithm>

#include "autograd/engine.h"
#include "census/live_bytes.h"
#include "ops/dispatch.h"

namespace census {
LayerCensus census_layer(const ModelConfig& config, int64_t layer_index, int64_t seq_length, bool explain) {
  Session session;
  LiveBytes live;
  SavedTensors saved;
  ParameterGrads parameter_grads;
  session.add_observer(&live);
  session.add_observer(&saved);
  session.add_observer(&parameter_grads);

  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  const Dims shape{1, seq_length, config.hidden_size};
  Tensor hidden = make_tensor(shape, DType::kBFloat16, /*requires_grad=*/true);
  live.track(hidden);
  Tensor out;
  {
    // The positions are embedded inside the measured forward, as the reference runs it: cos and sin
    // are the layer's to keep.
    nn::PositionEmbeddings positions = layer->embed_positions(hidden);
    out = layer->forward(hidden, positions);
  }
  const size_t start = live.event_count();
  StorageSet excluded;
  excluded.insert(out.storage_id());

  LayerCensus result;
  result.kept_bytes = live.live_bytes(excluded);
  std::vector<const SavedStorage*> held;
  for (const SavedStorage& storage : saved.storages()) {
    if (!live.is_live(storage.storage_id)) continue;  // a graph the forward dropped is no backward's
    result.saved_bytes += storage.bytes;
    result.saved_by_op[static_cast<size_t>(storage.op)] += storage.bytes;
    held.push_back(&storage);
  }
  if (explain) {
    std::stable_sort(held.begin(), held.end(),
                     [](const SavedStorage* a, const SavedStorage* b) { return a->bytes > b->bytes; });
    for (const SavedStorage* s : held)
      result.saved.push_back(SavedRow{s->bytes, std::string(dtype_name(s->dtype)), s->shape,
                                      std::string(s->module), std::string(s->by_op), std::string(saved_op_name(s->op))});
  }

  Tensor grad = make_tensor(shape, DType::kBFloat16);
  live.track(grad);
  run_backward(out, grad);
  for (const Tensor& parameter : layer->parameters())
    if (parameter.impl()->grad) parameter_grads.ids.insert(parameter.impl()->grad->storage->id);
  result.working_bytes = live.peak_from(start, excluded, parameter_grads.ids).bytes;
  return result;
}

}  // namespace census
