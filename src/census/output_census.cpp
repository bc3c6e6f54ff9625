#include "census/output_census.h"

#include "autograd/engine.h"
#include "census/live_bytes.h"
#include "census/saved_tensors.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "ops/ops.h"

namespace census {
OutputCensus census_output(const ModelConfig& config, int64_t seq_length, int64_t vocab_size) {
  Session session;
  LiveBytes live;
  SavedTensors saved;
  ParameterGrads parameter_grads;
  session.add_observer(&live);
  session.add_observer(&saved);
  session.add_observer(&parameter_grads);

  nn::ParameterList parameters;
  std::unique_ptr<nn::Norm> norm = config.family->build_final_norm(config, parameters);
  nn::Linear lm_head("lm_head", config.hidden_size, vocab_size, /*bias=*/false, parameters);
  Tensor hidden = make_tensor(Dims{1, seq_length, config.hidden_size}, DType::kBFloat16, /*requires_grad=*/true);
  live.track(hidden);
  // The labels are made before the measurement: only what the loss makes of them is counted.
  Tensor labels = make_tensor(Dims{1, seq_length}, DType::kInt64);
  Tensor loss = nn::for_causal_lm_loss(lm_head.forward(norm->forward(hidden)), labels, vocab_size);

  const size_t start = live.event_count();
  StorageSet excluded;
  excluded.insert(loss.storage_id());
  OutputCensus result;
  result.kept_bytes = live.live_bytes(excluded);
  for (const SavedStorage& storage : saved.storages())
    if (live.is_live(storage.storage_id)) result.saved_bytes += storage.bytes;

  // loss.backward(): the root gradient is ones_like(loss), held until the backward returns.
  Tensor grad = ops::ones_like(loss);
  run_backward(loss, grad);
  for (const Tensor& parameter : parameters)
    if (parameter.impl()->grad) parameter_grads.ids.insert(parameter.impl()->grad->storage->id);
  result.working_bytes = live.peak_from(start, excluded, parameter_grads.ids).bytes;
  return result;
}

KindActivations census_output_activations(const ModelConfig& config, int64_t seq_length) {
  const OutputCensus full = census_output(config, seq_length, config.vocab_size);
  const OutputCensus half = census_output(config, seq_length, std::max<int64_t>(1, config.vocab_size / 2));
  return split_record(full.saved_bytes, half.saved_bytes, full.working_bytes, half.working_bytes, seq_length);
}

}  // namespace census
