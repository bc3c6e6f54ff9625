#include "nn/embedding.h"

#include "nn/lora.h"
#include "nn/tensor_parallel.h"
#include "ops/ops.h"

namespace census::nn {

Embedding::Embedding(std::string path, int64_t num_embeddings, int64_t embedding_dim, ParameterList& params)
    : path_(std::move(path)), weight_(register_parameter(params, path_, "weight", Dims{num_embeddings, embedding_dim})) {
  // PEFT's modules_to_save: the original table frozen, its trained copy looked up.
  if (lora_saves(path_)) weight_ = make_module_to_save(path_, weight_, params);
}

Tensor Embedding::forward(const Tensor& input_ids) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  if (const ParallelStyles* styles = parallel_styles()) return styles->embedding(path_, weight_, input_ids);
  return ops::embedding(weight_, input_ids);
}

}  // namespace census::nn
