// File: causal_lm.h
// CausalLM: a family's causal language model around its decoder layers, as Transformers 5 writes it in
// the family's modeling_*.py: *Model.forward (the token embedding and any scale on it, what the model
// computes once for its layers such as the rotary, the layers in order, the final norm) and
// *ForCausalLM.forward (the LM head, tied to the embedding or not, any transform of the logits, the
// loss). Every command that runs more than one layer (stack, step, plan) runs the model through it.
// A family whose model is written as Llama's needs nothing of its own; one whose model differs says
// how in its own file (Family::build_causal_lm), overriding the pieces that differ.
//
// Built for one model chunk: the decoder layers [begin, end) a pipeline stage (or one of its
// interleaved chunks) holds, the embedding where the chunk is the model's first, the final norm, head
// and loss where it is the last. A chunk that is not the first receives its hidden states as
// inputs_embeds; one that is not the last returns its last layer's output (its final norm an
// nn.Identity), as a pipeline stage runs the model.
//
// Not for: one layer alone (DecoderLayer), or the reference's output census (census/output_census.h),
// which prices a final norm of the layer's class, a plain head and the loss.
//
// Legend: B = micro-batch size (sequences), S = tokens a sequence, H = hidden_size, V = vocab_size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "models/config.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/loss.h"

namespace census {

struct ModelChunk {
  int64_t begin = 0;  // the chunk's decoder layers [begin, end)
  int64_t end = 0;
  bool first = true;  // holds the token embedding
  bool last = true;   // holds the final norm, the LM head and the loss
};

// How the caller runs each decoder layer of the model's loop: plainly, under a checkpoint, or between
// hooks. `forward` is the layer's call with every argument but its hidden states bound, by value where
// the model hands them by value, as a checkpoint's partial binds a GradientCheckpointingLayer's
// keyword arguments.
using LayerForward = std::function<Tensor(const Tensor&)>;
class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  virtual Tensor run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const = 0;
  // The model's other calls, made through the runner where a wrapper hooks them (FSDP2's units of their own
  // around the embedding and around the final norm with the head, as torchtitan wraps them): the embedding of
  // the input ids, the final norm, and the head's logits once made (before the loss). Plain by default.
  using ModuleForward = std::function<Tensor(const Tensor&)>;
  virtual Tensor run_embedding(const Tensor& input_ids, const ModuleForward& embed) const { return embed(input_ids); }
  virtual Tensor run_final_norm(const Tensor& hidden_states, const ModuleForward& norm) const {
    return norm(hidden_states);
  }
  virtual Tensor head_output(const Tensor& logits) const { return logits; }
  // The model's forward returns `outputs` where the loss runs past it (torchtune's chunked output: the
  // head's chunks): a wrapper's post-forward of the model runs here, and it may hook each output.
  virtual void model_returns(std::vector<Tensor>& /*outputs*/) const {}
  // The dtype the runner casts a layer's floating-point arguments to before it runs the layer, or none:
  // FSDP2's MixedPrecisionPolicy(cast_forward_inputs=True) casts them to its param_dtype.
  virtual std::optional<DType> forward_input_dtype() const { return std::nullopt; }
};

// A layer's position embeddings as `runner` hands them to it: each floating-point tensor of another
// dtype than runner.forward_input_dtype() copied to it, as FSDP2's pre-forward casts its unit's args
// and kwargs (_cast_fp_tensor) before it unshards: ERNIE-4.5's fp32 cos and sin reach a layer under the
// policy as bf16 copies, cos first. The copies are the layer's call's arguments: bound into its
// LayerForward, they go once the runner returns (a struct's members last to first: sin before cos, as
// Python drops a tuple's items). Only the position embeddings pass through here: a layer's other
// floating-point arguments (Gemma 4's per-layer input and its carried cos and sin) are bf16 in every
// family under the policy, which the parallel oracle's Gemma 4 cases confirm, so the cast leaves them.
nn::PositionEmbeddings layer_position_embeddings(const nn::PositionEmbeddings& positions, const LayerRunner& runner);

// Each layer called plainly.
class PlainLayers final : public LayerRunner {
 public:
  Tensor run(int64_t /*index*/, const Tensor& hidden_states, const LayerForward& forward) const override {
    return forward(hidden_states);
  }
};

class CausalLM {
 public:
  // `layer_config`: the config the chunk's decoder layers are built from (one tensor- and expert-
  // parallel rank's share of their heads, widths and experts); the model's own modules (embedding,
  // final norm, head) are built from `config`.
  CausalLM(const ModelConfig& config, const ModelConfig& layer_config, ModelChunk chunk);
  virtual ~CausalLM() = default;
  CausalLM(const CausalLM&) = delete;
  CausalLM& operator=(const CausalLM&) = delete;

  // *Model.forward over the chunk: from input_ids (B, S) int64 where the chunk is the first, else from
  // the received inputs_embeds (B, S, H) bf16; each layer run by `runner`. Returns the model's last
  // hidden state (after the final norm where the chunk is the last). Its locals (the embeddings, the
  // positions) die when it returns, as the Python frame's do.
  virtual Tensor model_forward(const Tensor& input_ids, const Tensor& inputs_embeds, const LayerRunner& runner) const;

  // *ForCausalLM.forward past the model: the logits of the last hidden state and the loss against
  // `labels` (B, S) int64. The logits go when the loss is made, as the trainer drops the model's output.
  Tensor causal_lm_loss(Tensor hidden_states, const Tensor& labels) const;
  // The same, with the logits handed back alive: the model's output object (loss and logits) as the
  // caller holds it until it drops it, so that what runs as the model returns (FSDP2's post-forward)
  // runs before the logits go.
  // Under TRL's chunked loss (`loss`), the forward TRL patches in: no logits; the output holds the
  // loss's counts instead (nn/trl_chunked_loss.h), from the head's weight as the model holds it.
  struct Output {
    Tensor loss;
    Tensor logits;
    std::vector<Tensor> counts;  // TRL's num_correct_tokens, entropy_sum, num_valid_tokens
  };
  // `runner`, where given, sees the head's logits as they are made (LayerRunner::head_output).
  Output causal_lm_output(Tensor hidden_states, const Tensor& labels,
                          nn::CausalLMLoss loss = nn::CausalLMLoss::kForCausalLM,
                          const LayerRunner* runner = nullptr) const;

  // The chunk's parameters in the order model.parameters() lists them: the embedding, the layers, the
  // final norm, the model's other modules, the head (each storage once: a tied head adds none).
  const nn::ParameterList& parameters() const { return parameters_; }
  // The tensors the model registers as buffers (the rotary module's inv_freq and original_inv_freq, an
  // embedding scale, the layers' own), tracked from the step's start as the oracle tracks them.
  const std::vector<Tensor>& buffers() const { return buffers_; }
  const std::vector<std::unique_ptr<DecoderLayer>>& layers() const { return layers_; }
  const ModelChunk& chunk() const { return chunk_; }
  // The parameters of the embedding (the first chunk's), and of the final norm and the head (the last
  // chunk's; no head of its own where it is tied).
  const nn::ParameterList& embedding_parameters() const { return embedding_params_; }
  nn::ParameterList final_norm_and_head_parameters() const {
    nn::ParameterList out = norm_params_;
    out.insert(out.end(), head_params_.begin(), head_params_.end());
    return out;
  }
  // The most parameter bytes one decoder layer of the chunk holds (ZeRO-3's gathered unit).
  int64_t largest_layer_parameter_bytes() const;

 protected:
  // The pieces of the forward a family overrides where its model differs from Llama's.
  // *Model.forward's embedding of the input ids (B, S) -> (B, S, H): embed_tokens, plainly.
  virtual Tensor embed(const Tensor& input_ids) const;
  // What the model computes once from its embeddings for the layers: the rotary's cos and sin of
  // positions 0..S-1 for each of its rotary kinds (rotary_kinds()), in that order.
  virtual std::vector<nn::PositionEmbeddings> embed_positions(const Tensor& inputs_embeds) const;
  // Whether *Model.forward hands the layers its position_ids (so a checkpointed layer's frame holds the
  // ones a model without a rotary forms): Llama's and most do; GraniteMoeHybrid's passes only the rotary's.
  virtual bool layers_take_position_ids() const { return true; }
  // The final norm on the last chunk's last hidden state.
  virtual Tensor final_norm(const Tensor& hidden_states) const;
  // *ForCausalLM.forward's logits of the last hidden state: lm_head(hidden_states[:, -0:, :]).
  virtual Tensor logits(const Tensor& hidden_states) const;
  // The head alone, lm_head(x) (the embedding's weight where tied), without a family's transform of its
  // logits: what a loss that holds the head runs.
  Tensor output_projection(const Tensor& x) const;
  // The loss function (ForCausalLMLoss) on the logits, which it takes and drops once cast.
  virtual Tensor loss_function(Tensor logits, const Tensor& labels) const;

  // For a family's constructor: a module of the model's own, registered after the final norm (as the
  // families that have one register it), and a buffer the model registers.
  nn::ParameterList& model_parameters() { return model_params_; }
  void add_buffer(const Tensor& buffer) { buffers_.push_back(buffer); }
  // The family states its model's rotary buffers itself: each rotary's inv_freq, with original_inv_freq
  // (its copy of the same size, which no op reads) beside it; none where the model has no rotary.
  // finish() then probes for none.
  void state_rotary_buffers(const std::vector<Tensor>& inv_freqs);
  // Called by the family's builder once its constructor has run: the parameters in model order and
  // the rotary's buffers (the family's own registered ones kept).
  void finish();
  // The rotary kinds the model computes positions for: one, shared by every layer; or, where the
  // family's rotary is per layer type (Family::rotary_per_layer_type), each type of the config's
  // layers, in the order they first appear, on every chunk whatever layers it holds. A layer rotates
  // by rotary_kind(index).
  const std::vector<std::string>& rotary_kinds() const { return rotary_kinds_; }
  size_t rotary_kind(int64_t index) const;

  const ModelConfig& config_;
  ModelChunk chunk_;
  nn::ParameterList embedding_params_, model_params_, norm_params_, head_params_;
  std::optional<nn::Embedding> embed_tokens;  // (V, H), the chunk being the first
  std::vector<std::unique_ptr<DecoderLayer>> layers_;
  std::unique_ptr<nn::Norm> norm;             // the chunk being the last
  std::optional<nn::Linear> lm_head;          // (V, H); absent where tied to embed_tokens
  // Each rotary kind's rotary: the chunk's first layer of that kind, or one built for it where the
  // chunk holds none (its rotary is all the model uses of it).
  std::vector<const DecoderLayer*> rotary_layers_;
  std::vector<std::unique_ptr<DecoderLayer>> spare_layers_;
  std::vector<std::string> rotary_kinds_;
  bool rotary_buffers_stated_ = false;

  template <typename Model, typename... Args>
  friend std::unique_ptr<CausalLM> make_causal_lm(Args&&... args);

 private:
  nn::ParameterList parameters_;
  std::vector<Tensor> buffers_;
};

// A family's CausalLM built and finished: what Family::build_causal_lm returns.
template <typename Model, typename... Args>
std::unique_ptr<CausalLM> make_causal_lm(Args&&... args) {
  auto model = std::make_unique<Model>(std::forward<Args>(args)...);
  static_cast<CausalLM&>(*model).finish();
  return model;
}

// The family's model for `chunk` (Family::build_causal_lm, else Llama's).
std::unique_ptr<CausalLM> build_causal_lm(const ModelConfig& config, const ModelConfig& layer_config, ModelChunk chunk);

// The whole model as one chunk.
inline ModelChunk whole_model(const ModelConfig& config) { return ModelChunk{0, config.num_hidden_layers, true, true}; }

// The layer each decoder layer is read as, by layer index, for a measurement read off the model's
// forward layer by layer: itself, or where the family's layers are alike by kind
// (Family::stack_layers_alike_by_kind) and `whole` is not asked for, its kind's first. Such a
// measurement runs the model's first chunk as far as the last of them (layers_read_through).
std::vector<int64_t> layers_read_as(const ModelConfig& config, bool whole);
inline ModelChunk layers_read_through(const std::vector<int64_t>& read_as) {
  int64_t through = 0;
  for (int64_t as : read_as) through = std::max(through, as + 1);
  return ModelChunk{0, through, true, true};
}

}  // namespace census
