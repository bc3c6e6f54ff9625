// File: tensor_parallel.h
// The rank's tensor-parallel styles, as parallelize_module applies a plan to a model's modules by their
// names: while a ParallelStylesScope is in force on the thread, the modules that a plan can name ask it
// how to run (nn.Linear, nn.Embedding, a decoder layer's self_attn and mlp inputs and output, the
// causal-LM loss); without one they run plainly. The styles themselves (ColwiseParallel,
// RowwiseParallel, SequenceParallel, PrepareModuleInput/Output, loss_parallel) are the step's
// (step/tensor_parallel.h): the modules only name themselves.
#pragma once

#include <string_view>

#include "tensor/tensor.h"

namespace census::nn {

class ParallelStyles {
 public:
  virtual ~ParallelStyles() = default;
  // The tensor module `module` ("self_attn", "mlp") receives for `x` (PrepareModuleInput).
  virtual Tensor module_input(std::string_view module, const Tensor& x) const = 0;
  // What the caller of module `module` gets for its output `y` (PrepareModuleOutput).
  virtual Tensor module_output(std::string_view module, const Tensor& y) const = 0;
  // nn.Linear at `path` ("self_attn.q_proj", "lm_head") on the rank's shard of its weight.
  virtual Tensor linear(std::string_view path, const Tensor& input, const Tensor& weight, const Tensor& bias) const = 0;
  // nn.Embedding at `path` on the rank's shard of its table.
  virtual Tensor embedding(std::string_view path, const Tensor& weight, const Tensor& input_ids) const = 0;
  // Whether the causal-LM loss runs on logits sharded over the vocabulary (loss_parallel), over how many
  // ranks (0: the plain loss).
  virtual int64_t loss_parallel_ranks() const = 0;
  // How many ranks the residual stream's sequence is sharded over (SequenceParallel; 1: none). The model
  // derives its positions from the global length, as Transformers reads inputs_embeds.shape[1] of the
  // Shard(1) DTensor.
  virtual int64_t sequence_shards() const = 0;
};

// The styles in force on this thread, or null.
const ParallelStyles* parallel_styles();

class ParallelStylesScope {
 public:
  explicit ParallelStylesScope(const ParallelStyles* styles);
  ~ParallelStylesScope();
  ParallelStylesScope(const ParallelStylesScope&) = delete;
  ParallelStylesScope& operator=(const ParallelStylesScope&) = delete;

 private:
  const ParallelStyles* previous_;
};

}  // namespace census::nn
