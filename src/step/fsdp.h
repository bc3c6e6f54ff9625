// File: fsdp.h
// FSDP2 (torch.distributed.fsdp.fully_shard) on one rank of N, as torchtitan applies it: one unit per
// decoder layer, then the root (the rest of the model: embedding, final norm, head). Each parameter is
// held as its Shard(0) slice (dim 0 padded to a multiple of N), in the sharded dtype (fp32 under
// MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), else the model's bf16); the model's own
// parameter tensors are the unsharded parameters, present only while their unit is unsharded.
//
// What a unit does, as _fsdp_param_group.py runs it on the rank (every buffer a storage of the step):
//   unshard           all-gather: under mixed precision a copy-in (the rank's shards cast to bf16,
//                     empty(shard numel)), the output empty(N x shard numel) in bf16, the copy-in freed
//   wait_for_unshard  copy-out: each unsharded parameter made (empty, dim 0 padded to a multiple of N)
//                     the first time, else grown back by resize_; in forward the all-gather output is kept until the next unit's
//                     copy-out (implicit prefetch), in backward freed at once
//   reshard           each unsharded parameter resize_(0)
//   pre_forward       unshard, wait_for_unshard; its input passed through RegisterPostBackwardFunction
//   post_forward      reshard where reshard_after_forward (every layer but the last; the root always);
//                     its output's gradient hook is the unit's pre_backward
//   pre_backward      unshard, wait_for_unshard, then prefetch the unit that ran forward before it
//   post_backward     the unsharded gradients taken from .grad (under TP redistributed to their
//                     parameters' placements), reshard, the oldest reduce-scatter
//                     input freed (one kept in flight), the reduce-scatter input empty(N x shard
//                     numel) in the reduce dtype, the unsharded gradients freed (the list cleared from
//                     its end; the last one lives until the reduce returns, as the oracle's region
//                     wrapper holds it), the output empty(shard numel) in the reduce dtype: the shards'
//                     .grad (views of it), or added into them and freed
//   root's end of backward (the engine's final callback): the root's post_backward, then the last
//                     reduce-scatter input freed
// Prefetch is FSDP2's default: implicit in forward, one unit ahead in backward.
// CPUOffloadPolicy (cpu_offload; _fsdp_param.py and _fsdp_collectives.py, torch 2.14): the shards are
// host tensors, pinned (pin_memory=True, its default), and so are their gradients; the optimizer steps
// them on the host. The all-gather takes no foreach copy-in: each shard is copied to the device on its
// own (all_gather_inputs: .to(device)), under mixed precision that copy cast to bf16 and freed at once,
// and the copies live until the all-gather is issued. The reduce-scatter's output is no gradient: each
// new sharded gradient is copied to the host (.to("cpu")), the first micro-batch's copy pinned (a
// non_blocking copy) and made the .grad, a later one's pageable, added into the .grad and freed; the
// output is freed as the reduce returns.
// Streams (StepStream): the all-gather's copy-in and output on the all-gather copy-in stream; the
// unsharded parameters and gradients and the reduce-scatter input on the compute stream; the
// reduce-scatter output (the sharded gradients) on the reduce-scatter stream. FSDP2 calls no
// record_stream: each buffer lives as long as a reference holds it, which the units above follow.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "models/causal_lm.h"
#include "step/step_bytes.h"

namespace census {

enum class ReshardAfterForward : uint8_t { kDefault, kAlways, kNever };

// Which modules are FSDP2's units (fully_shard's calls):
//   kLayers      each decoder layer, then the root, which holds the rest (the embedding, final norm and
//                head); by default every layer but the last resharded after forward, and the root
//                (torchtitan's apply_fsdp until v0.1)
//   kTorchtitan  torchtitan v0.2's apply_fsdp (29624e3): the embedding, each decoder layer, the final norm
//                with the head as one unit (fully_shard([norm, output])), then the root, which holds no
//                parameter; by default the embedding and every layer resharded after forward, the norm
//                and head only under kAlways. The norm and head's unit unshards at the norm's forward, and
//                its post-forward (and pre-backward hook) comes with the head's logits, before the loss;
//                the embedding's input needs no gradient, so its post-backward runs at the backward's end.
enum class FsdpWrap : uint8_t { kLayers, kTorchtitan };

struct FsdpPolicy {
  int64_t shards = 1;                  // the data-parallel shard degree
  bool mixed_precision = false;        // fp32 shards, bf16 all-gather, fp32 reduce-scatter
  ReshardAfterForward reshard_after_forward = ReshardAfterForward::kDefault;
  FsdpWrap wrap = FsdpWrap::kLayers;
  // FSDP2 over DTensor's TP shards (set by the step): before the reduce-scatter each unsharded gradient is
  // redistributed to its parameter's placement: the replicated whole embedding table to the rank's rows
  // (a copy), a norm's partial gradient under SP all-reduced.
  int64_t tensor_parallel = 1;
  bool sequence_parallel = false;
  bool cpu_offload = false;  // CPUOffloadPolicy(pin_memory=True)
  DType sharded_dtype() const { return mixed_precision ? DType::kFloat32 : DType::kBFloat16; }
  DType reduce_dtype() const { return mixed_precision ? DType::kFloat32 : DType::kBFloat16; }
};

class Fsdp2 {
 public:
  // Units over the chunks' models (each chunk: its layers, then its root); the sharded parameters made
  // now, in the order model.parameters() lists them.
  Fsdp2(StepBytes& bytes, const FsdpPolicy& policy, const std::vector<const CausalLM*>& chunks);

  const std::vector<Tensor>& sharded_parameters() const { return sharded_; }
  // Under FsdpWrap::kTorchtitan: whether every embedding and final-norm unit was run through the model's
  // hooks (a family whose model runs them itself is not wrapped so).
  bool units_hooked() const;

  // The root of chunk `chunk` (the CausalLM): its forward's start and end, its output's backward start,
  // and the end of the backward (the engine's final callback).
  void root_pre_forward(size_t chunk);
  void root_post_forward(size_t chunk);
  Tensor root_output(size_t chunk, const Tensor& output);  // the pre-backward hook on the root's output
  void end_of_backward(size_t chunk);
  // Whether the chunk's model returned before its loss (Layers::model_returns) in the forward now running:
  // its root's post-forward has run, and the caller's is not to.
  bool root_returned(size_t chunk) const { return root_returned_[chunk]; }

  // Each decoder layer as fully_shard(layer) runs it, around `inner` (plain or checkpointed).
  class Layers final : public LayerRunner {
   public:
    Layers(Fsdp2& fsdp, size_t chunk, const LayerRunner& inner) : fsdp_(fsdp), chunk_(chunk), inner_(inner) {}
    Tensor run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const override;
    // MixedPrecisionPolicy(param_dtype=bf16): cast_forward_inputs, its default.
    std::optional<DType> forward_input_dtype() const override {
      if (fsdp_.policy_.mixed_precision) return DType::kBFloat16;
      return inner_.forward_input_dtype();
    }
    // torchtitan's units of their own (FsdpWrap::kTorchtitan); plain where the chunk has none.
    Tensor run_embedding(const Tensor& input_ids, const ModuleForward& embed) const override;
    Tensor run_final_norm(const Tensor& hidden_states, const ModuleForward& norm) const override;
    Tensor head_output(const Tensor& logits) const override;
    // torchtune's chunked output: the root's forward ends with the chunks (its post-forward, then its
    // pre-backward hook on each), before the loss.
    void model_returns(std::vector<Tensor>& outputs) const override;

   private:
    Fsdp2& fsdp_;
    size_t chunk_;
    const LayerRunner& inner_;
  };

 private:
  struct Unit {
    std::vector<Tensor> params;   // the model's (unsharded) parameters
    std::vector<Tensor> shards;   // the rank's Shard(0) slices
    int64_t shard_numel = 0;      // the unit's all-gather input: its shards' padded elements
    bool reshard_after_forward = true;
    bool allocated = false;       // the unsharded parameters made once
    bool unsharded = false;
    bool hooked = true;           // an embedding's or head's unit: the model has run it through the hooks
    Tensor all_gather_output;     // pending between unshard and wait_for_unshard
    std::vector<int64_t> post_forward_indices;
  };
  void unshard(Unit& unit);
  void unshard_from_host(Unit& unit);  // unshard under CPUOffloadPolicy
  void wait_for_unshard(Unit& unit, bool forward);
  void reshard(Unit& unit);
  void pre_forward(Unit& unit);
  void post_forward(Unit& unit);
  void pre_backward(Unit& unit);
  void post_backward(Unit& unit);
  Unit* unit_at(size_t chunk, int64_t index) {
    return index < 0 ? nullptr : &units_[chunk][static_cast<size_t>(index)];
  }

  StepBytes& bytes_;
  FsdpPolicy policy_;
  std::vector<Tensor> sharded_;
  std::vector<std::vector<Unit>> units_;  // by chunk: its layers', its embedding's and head's, then its root's (last)
  std::vector<int64_t> embedding_unit_;   // by chunk: the embedding's unit (FsdpWrap::kTorchtitan), or -1
  std::vector<int64_t> head_unit_;        // by chunk: the final norm and head's unit, or -1
  std::vector<bool> root_returned_;       // by chunk: root_returned()
  std::vector<int64_t> begins_;           // by chunk: its first layer's index
  std::vector<Unit*> post_forward_order_;
  Tensor all_gather_state_;               // the last forward all-gather's output, kept for overlap
  std::deque<Tensor> reduce_scatter_states_;
};

}  // namespace census
