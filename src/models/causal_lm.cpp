#include "models/causal_lm.h"

#include <algorithm>

#include "autograd/offload_activations.h"
#include "nn/float8_training.h"
#include "nn/lora.h"
#include "nn/loss.h"
#include "nn/liger_fused_linear_cross_entropy.h"
#include "nn/torchtune_loss.h"
#include "nn/trl_chunked_loss.h"
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
  // The rotary kinds, each computed by its first layer's rotary.
  const bool per_type = config.family->rotary_per_layer_type && !config.layer_types.empty();
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const std::string kind = per_type ? config.layer_types[static_cast<size_t>(i)] : std::string();
    if (std::find(rotary_kinds_.begin(), rotary_kinds_.end(), kind) != rotary_kinds_.end()) continue;
    rotary_kinds_.push_back(kind);
    const DecoderLayer* layer = nullptr;
    for (int64_t j = std::max(i, chunk_.begin); j < chunk_.end && layer == nullptr; ++j)
      if (!per_type || config.layer_types[static_cast<size_t>(j)] == kind) layer = layers_[static_cast<size_t>(j - chunk_.begin)].get();
    if (layer == nullptr) {
      spare_layers_.push_back(config.family->build_layer(layer_config, i));
      layer = spare_layers_.back().get();
    }
    rotary_layers_.push_back(layer);
    if (!per_type) break;
  }
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
    for (const Tensor& buffer : layer->registered_buffers()) buffers_.push_back(buffer);
  // The model's rotary module's buffers, each kind's: inv_freq, which its forward reads, and
  // original_inv_freq, its copy of the same size, which no op reads. Found by running each kind's
  // rotary once, before any step.
  for (const DecoderLayer* layer : rotary_layers_) {
    if (rotary_buffers_stated_) break;
    const Tensor marker = make_tensor(Dims{1}, DType::kFloat32);
    RotaryBufferProbe probe(marker.storage_id());
    Session::current().add_observer(&probe);
    {
      const Tensor hidden = make_tensor(Dims{1, 1, config_.hidden_size}, DType::kBFloat16);
      NoGradGuard no_grad;
      layer->embed_positions(hidden);
    }
    Session::current().remove_observer(&probe);
    if (!probe.found.defined()) continue;
    buffers_.push_back(probe.found);
    buffers_.push_back(make_tensor(probe.found.sizes(), probe.found.dtype()));
  }
}

void CausalLM::state_rotary_buffers(const std::vector<Tensor>& inv_freqs) {
  rotary_buffers_stated_ = true;
  for (const Tensor& inv_freq : inv_freqs) {
    buffers_.push_back(inv_freq);
    buffers_.push_back(make_tensor(inv_freq.sizes(), inv_freq.dtype()));
  }
}

size_t CausalLM::rotary_kind(int64_t index) const {
  if (rotary_kinds_.size() < 2) return 0;
  const std::string& type = config_.layer_types[static_cast<size_t>(index)];
  return static_cast<size_t>(std::find(rotary_kinds_.begin(), rotary_kinds_.end(), type) - rotary_kinds_.begin());
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

nn::PositionEmbeddings layer_position_embeddings(const nn::PositionEmbeddings& positions, const LayerRunner& runner) {
  const std::optional<DType> dtype = runner.forward_input_dtype();
  if (!dtype) return positions;
  nn::PositionEmbeddings cast = positions;
  for (Tensor* t : {&cast.position_ids, &cast.cos, &cast.sin, &cast.compress_cos, &cast.compress_sin})
    if (t->defined() && is_floating(t->dtype()) && t->dtype() != *dtype) *t = ops::to(*t, *dtype);
  return cast;
}

Tensor CausalLM::model_forward(const Tensor& input_ids, const Tensor& received, const LayerRunner& runner) const {
  // inputs_embeds = self.embed_tokens(input_ids), or the inputs_embeds a later stage is handed.
  const Tensor inputs_embeds =
      chunk_.first ? runner.run_embedding(input_ids, [this](const Tensor& ids) { return embed(ids); }) : received;  // (B, S, H)
  // enable_input_require_grads' forward hook on the input embeddings (the frozen base's, under checkpointing):
  // output.requires_grad_(True), which makes it a leaf that requires grad.
  if (chunk_.first && nn::lora_inputs_require_grad() && !inputs_embeds.requires_grad())
    inputs_embeds.impl()->requires_grad = true;
  std::vector<nn::PositionEmbeddings> positions;
  Tensor position_ids;  // formed by the model where no rotary embedding forms it
  {
    // Under sequence parallelism the rank holds S / T tokens of the stream; the positions are the whole
    // sequence's (a shape-only stand-in of the global shape, which no op makes).
    const nn::ParallelStyles* styles = nn::parallel_styles();
    const int64_t shards = styles ? styles->sequence_shards() : 1;
    const Tensor global = shards > 1 ? make_tensor(Dims{inputs_embeds.size(0), inputs_embeds.size(1) * shards,
                                                        inputs_embeds.size(2)}, inputs_embeds.dtype())
                                     : inputs_embeds;
    // position_ids = torch.arange(S) + past_seen_tokens: the arange is a temporary; the rotary
    // embedding's own arange stands for the sum, which a model without one forms itself.
    const Tensor arange = ops::arange(global.size(1));
    positions = embed_positions(global);
    if (positions.empty() || !positions.front().position_ids.defined()) {
      position_ids = ops::unsqueeze(ops::add(arange, 0.0), 0);
      if (layers_take_position_ids())
        for (nn::PositionEmbeddings& kind : positions) kind.position_ids = position_ids;
    }
  }
  Tensor hidden_states = inputs_embeds;
  for (size_t k = 0; k < layers_.size(); ++k) {
    const int64_t index = chunk_.begin + static_cast<int64_t>(k);
    const DecoderLayer* layer = layers_[k].get();
    // By value, as the checkpoint's partial binds the layer's keyword arguments: under checkpointing the
    // position ids, cos and sin live as long as a layer's frame can recompute it.
    nn::PositionEmbeddings kind = layer_position_embeddings(positions[rotary_kind(index)], runner);
    hidden_states = runner.run(index, hidden_states, [layer, kind = std::move(kind)](const Tensor& input) {
      return layer->forward(input, kind);
    });
  }
  if (chunk_.last) hidden_states = runner.run_final_norm(hidden_states, [this](const Tensor& h) { return final_norm(h); });
  return hidden_states;
}

Tensor CausalLM::causal_lm_loss(Tensor hidden_states, const Tensor& labels) const {
  Tensor logits_ = logits(hidden_states);
  hidden_states = Tensor();
  return loss_function(logits_, labels);  // logits_ goes on return, once the loss is made
}

CausalLM::Output CausalLM::causal_lm_output(Tensor hidden_states, const Tensor& labels, nn::CausalLMLoss loss,
                                             const LayerRunner* runner) const {
  // *ForCausalLM.forward's frame holds the model's last hidden state until it returns: where the head
  // keeps another tensor (the all-gathered one under sequence parallelism), it goes only then.
  Output out;
  if (loss == nn::CausalLMLoss::kLigerFlce) {
    // lce_forward's hidden_states[:, slice(-0, None), :] is the whole tensor, which Python hands on as it is.
    out.loss = nn::liger_for_causal_lm_loss(hidden_states, lm_head ? lm_head->weight() : embed_tokens->weight(), labels);
    return out;
  }
  if (loss == nn::CausalLMLoss::kTrlChunkedNll) {
    // TRL reads the config's logit_scale (none of these families has one) and final_logit_softcapping;
    // the head's weight is the embedding's where tied. A family's other transforms of its logits
    // (Granite's logits_scaling, Falcon-H1's lm_head_multiplier) are not TRL's, and do not run.
    const Tensor& weight = lm_head ? lm_head->weight() : embed_tokens->weight();
    nn::TrlChunkedLoss chunked = nn::trl_chunked_cross_entropy_loss(hidden_states, weight, labels, /*logit_scale=*/1.0,
                                                                    config_.final_logit_softcapping);
    out.loss = std::move(chunked.loss);
    out.counts = {std::move(chunked.num_correct_tokens), std::move(chunked.entropy_sum),
                  std::move(chunked.num_valid_tokens)};
    return out;
  }
  if (loss == nn::CausalLMLoss::kTorchtuneChunked || loss == nn::CausalLMLoss::kTorchtuneLinear) {
    const nn::OutputProjection output = [this](const Tensor& x) { return output_projection(x); };
    if (loss == nn::CausalLMLoss::kTorchtuneLinear) OffloadActivations::model_output_made();  // the normed hidden state
    const nn::ModelReturns returns = [runner](std::vector<Tensor>& outputs) {
      if (runner != nullptr) runner->model_returns(outputs);
    };
    out.loss = loss == nn::CausalLMLoss::kTorchtuneChunked
                   ? nn::torchtune_chunked_output_loss(std::move(hidden_states), output, labels, returns)
                   : nn::torchtune_linear_cross_entropy_loss(hidden_states, output, labels);
    return out;
  }
  out.logits = logits(hidden_states);
  if (runner != nullptr) out.logits = runner->head_output(out.logits);
  OffloadActivations::model_output_made();
  out.loss = loss_function(out.logits, labels);
  return out;
}

Tensor CausalLM::output_projection(const Tensor& x) const {
  const NoOpManager head_saves_kept;  // TRL's forward hooks on lm_head, while activations are offloaded
  std::optional<nn::Float8TrainingScope> bf16_head;  // FP8 training's filter leaves the head out
  if (nn::float8_skips_head()) bf16_head.emplace(std::nullopt);
  if (lm_head) return lm_head->forward(x);
  ModuleScope scope("lm_head", ModuleKind::kOther);  // tied: lm_head's forward over the embedding's weight
  return nn::linear(x, embed_tokens->weight(), Tensor());
}

Tensor CausalLM::embed(const Tensor& input_ids) const { return embed_tokens->forward(input_ids); }

std::vector<nn::PositionEmbeddings> CausalLM::embed_positions(const Tensor& inputs_embeds) const {
  std::vector<nn::PositionEmbeddings> out;
  for (const DecoderLayer* layer : rotary_layers_) {
    out.push_back(layer->embed_positions(inputs_embeds));
    // Every kind rotates the model's one position_ids: a later kind's own arange goes at once.
    if (out.size() > 1) out.back().position_ids = out.front().position_ids;
  }
  return out;
}

Tensor CausalLM::final_norm(const Tensor& hidden_states) const { return norm->forward(hidden_states); }

Tensor CausalLM::logits(const Tensor& hidden_states) const {
  // logits = self.lm_head(hidden_states[:, slice_indices, :]), slice_indices = slice(-0, None): all.
  return output_projection(ops::slice(hidden_states, 1, 0, hidden_states.size(1)));
}

Tensor CausalLM::loss_function(Tensor logits, const Tensor& labels) const {
  return nn::for_causal_lm_loss(std::move(logits), labels, config_.vocab_size);
}

std::vector<int64_t> layers_read_as(const ModelConfig& config, bool whole) {
  const std::vector<std::string> kinds = layer_kinds(config);
  const bool alike = !whole && config.family->stack_layers_alike_by_kind;
  std::vector<int64_t> out;
  for (auto kind = kinds.begin(); kind != kinds.end(); ++kind)
    out.push_back(alike ? std::find(kinds.begin(), kind, *kind) - kinds.begin() : kind - kinds.begin());
  return out;
}

std::unique_ptr<CausalLM> build_causal_lm(const ModelConfig& config, const ModelConfig& layer_config, ModelChunk chunk) {
  if (config.family->build_causal_lm != nullptr) return config.family->build_causal_lm(config, layer_config, chunk);
  return make_causal_lm<CausalLM>(config, layer_config, chunk);
}

}  // namespace census
