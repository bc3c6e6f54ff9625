#include "models/causal_lm.h"

#include "nn/loss.h"
#include "nn/tensor_parallel.h"
#include "ops/ops.h"

namespace census {
namespace {

// Finds the buffer the model's rotary module reads when it runs: a storage made before the probe
// that one of its ops hands on, and that is no parameter (its inv_freq).
class RotaryBufferProbe final : public Observer {
 public:
  explicit RotaryBufferProbe(int64_t first_new_id) : Observer(kOnOp), first_new_id_(first_new_id) {}
  void on_op(const OpCall& call) override {
    for (const Tensor& out : call.outputs)
      if (out.storage_id() < first_new_id_ && !out.is_parameter() && !found.defined()) found = out;
  }
  Tensor found;

 private:
  int64_t first_new_id_;
};

}  // namespace

CausalLM::CausalLM(const ModelConfig& config, const ModelConfig& layer_config, ModelChunk chunk)
    : config_(config), chunk_(chunk) {
  if (chunk_.first) embed_tokens.emplace("model.embed_tokens", config.vocab_size, config.hidden_size, embedding_params_);
  for (int64_t i = chunk_.begin; i < chunk_.end; ++i) layers_.push_back(config.family->build_layer(layer_config, i));
  if (chunk_.last) {
    norm = config.family->build_final_norm(config, norm_params_);
    // Tied (tie_word_embeddings) where the chunk holds the embedding too: the head reads its weight and
    // has no parameter of its own. A pipeline's last stage holds the head as its own parameter.
    if (!(config.tie_word_embeddings && embed_tokens))
      lm_head.emplace("lm_head", config.hidden_size, config.vocab_size, /*bias=*/false, head_params_);
  }
}

void CausalLM::finish() {
  parameters_ = embedding_params_;
  for (const auto& layer : layers_)
    parameters_.insert(parameters_.end(), layer->parameters().begin(), layer->parameters().end());
  for (const nn::ParameterList* list : {&norm_params_, &model_params_, &head_params_})
    parameters_.insert(parameters_.end(), list->begin(), list->end());

  for (const auto& layer : layers_)
    for (const Tensor& buffer : layer->buffers()) buffers_.push_back(buffer);
  if (layers_.empty()) return;
  // The model's rotary module's buffers: inv_freq, which its forward reads, and original_inv_freq, its
  // copy of the same size, which no op reads. Found by running the rotary once, before any step.
  const Tensor marker = make_tensor(Dims{1}, DType::kFloat32);
  RotaryBufferProbe probe(marker.storage_id());
  Session::current().add_observer(&probe);
  {
    const Tensor hidden = make_tensor(Dims{1, 1, config_.hidden_size}, DType::kBFloat16);
    NoGradGuard no_grad;
    embed_positions(hidden);
  }
  Session::current().remove_observer(&probe);
  if (probe.found.defined()) {
    buffers_.push_back(probe.found);
    buffers_.push_back(make_tensor(probe.found.sizes(), probe.found.dtype()));
  }
}

int64_t CausalLM::largest_layer_parameter_bytes() const {
  int64_t largest = 0;
  for (const auto& layer : layers_) {
    int64_t bytes = 0;
    for (const Tensor& p : layer->parameters()) bytes += p.storage()->nbytes;
    largest = std::max(largest, bytes);
  }
  return largest;
}

Tensor CausalLM::model_forward(const Tensor& input_ids, const Tensor& received, const LayerRunner& runner) const {
  // inputs_embeds = self.embed_tokens(input_ids), or the inputs_embeds a later stage is handed.
  const Tensor inputs_embeds = chunk_.first ? embed(input_ids) : received;  // (B, S, H)
  nn::PositionEmbeddings positions;
  {
    // Under sequence parallelism the rank holds S / T tokens of the stream; the positions are the whole
    // sequence's (a shape-only stand-in of the global shape, which no op makes).
    const nn::ParallelStyles* styles = nn::parallel_styles();
    const int64_t shards = styles ? styles->sequence_shards() : 1;
    const Tensor global = shards > 1 ? make_tensor(Dims{inputs_embeds.size(0), inputs_embeds.size(1) * shards,
                                                        inputs_embeds.size(2)}, inputs_embeds.dtype())
                                     : inputs_embeds;
    // position_ids = torch.arange(S) + past_seen_tokens: the arange is a temporary; the rotary
    // embedding's own arange stands for the sum.
    const Tensor arange = ops::arange(global.size(1));
    positions = embed_positions(global);
  }
  Tensor hidden_states = inputs_embeds;
  for (size_t k = 0; k < layers_.size(); ++k) {
    const DecoderLayer* layer = layers_[k].get();
    // By value, as the checkpoint's partial binds the layer's keyword arguments: under checkpointing the
    // position ids, cos and sin live as long as a layer's frame can recompute it.
    hidden_states = runner.run(chunk_.begin + static_cast<int64_t>(k), hidden_states,
                               [layer, positions](const Tensor& input) { return layer->forward(input, positions); });
  }
  if (chunk_.last) hidden_states = final_norm(hidden_states);
  return hidden_states;
}

Tensor CausalLM::causal_lm_loss(Tensor hidden_states, const Tensor& labels) const {
  Tensor logits_ = logits(hidden_states);
  hidden_states = Tensor();
  return loss_function(logits_, labels);  // logits_ goes on return, once the loss is made
}

CausalLM::Output CausalLM::causal_lm_output(Tensor hidden_states, const Tensor& labels) const {
  // *ForCausalLM.forward's frame holds the model's last hidden state until it returns: where the head
  // keeps another tensor (the all-gathered one under sequence parallelism), it goes only then.
  Output out;
  out.logits = logits(hidden_states);
  out.loss = loss_function(out.logits, labels);
  return out;
}

Tensor CausalLM::embed(const Tensor& input_ids) const { return embed_tokens->forward(input_ids); }

nn::PositionEmbeddings CausalLM::embed_positions(const Tensor& inputs_embeds) const {
  if (layers_.empty()) return {};
  return layers_.front()->embed_positions(inputs_embeds);
}

Tensor CausalLM::final_norm(const Tensor& hidden_states) const { return norm->forward(hidden_states); }

Tensor CausalLM::logits(const Tensor& hidden_states) const {
  // logits = self.lm_head(hidden_states[:, slice_indices, :]), slice_indices = slice(-0, None): all.
  const Tensor kept = ops::slice(hidden_states, 1, 0, hidden_states.size(1));
  if (lm_head) return lm_head->forward(kept);
  ModuleScope scope("lm_head", ModuleKind::kOther);  // tied: lm_head's forward over the embedding's weight
  return ops::linear(kept, embed_tokens->weight(), Tensor());
}

Tensor CausalLM::loss_function(Tensor logits, const Tensor& labels) const {
  return nn::for_causal_lm_loss(std::move(logits), labels, config_.vocab_size);
}

std::unique_ptr<CausalLM> build_causal_lm(const ModelConfig& config, const ModelConfig& layer_config, ModelChunk chunk) {
  if (config.family->build_causal_lm != nullptr) return config.family->build_causal_lm(config, layer_config, chunk);
  return make_causal_lm<CausalLM>(config, layer_config, chunk);
}

}  // namespace census
