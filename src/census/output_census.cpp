#include "census/output_census.h"

#include "census/measurement.h"
#include "nn/linear.h"
#include "nn/loss.h"

namespace census {
OutputCensus census_output(const ModelConfig& config, int64_t seq_length, int64_t vocab_size) {
  Measurement measurement;
  nn::ParameterList parameters;
  std::unique_ptr<nn::Norm> norm = config.family->build_final_norm(config, parameters);
  nn::Linear lm_head("lm_head", config.hidden_size, vocab_size, /*bias=*/false, parameters);
  Tensor hidden = make_tensor(norm->input_sizes(config.micro_batch_size, seq_length, config.hidden_size), DType::kBFloat16, /*requires_grad=*/true);
  measurement.track(hidden);
  // The labels are made before the measurement: only what the loss makes of them is counted.
  Tensor labels = make_tensor(Dims{config.micro_batch_size, seq_length}, DType::kInt64);
  // loss.backward(): the root gradient is ones_like(loss), held until the backward returns.
  const Measured measured = measurement.run(
      [&] { return nn::for_causal_lm_loss(lm_head.forward(norm->forward(hidden)), labels, vocab_size); },
      parameters, Tensor());
  return OutputCensus{measured.saved_bytes, measured.working_bytes, measured.kept_bytes};
}

KindActivations census_output_activations(const ModelConfig& config, int64_t seq_length) {
  const OutputCensus full = census_output(config, seq_length, config.vocab_size);
  const OutputCensus half = census_output(config, seq_length, std::max<int64_t>(1, config.vocab_size / 2));
  return split_record(full.saved_bytes, half.saved_bytes, full.working_bytes, half.working_bytes, seq_length,
                      config.micro_batch_size);
}

}  // namespace census
