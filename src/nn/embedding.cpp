#include "nn/embedding.h"

#include "ops/ops.h"

namespace census::nn {

Embedding::Embedding(std::string path, int64_t num_embeddings, int64_t embedding_dim, ParameterList& params)
    : path_(std::move(path)), weight_(register_parameter(params, path_, "weight", Dims{num_embeddings, embedding_dim})) {}

Tensor Embedding::forward(const Tensor& input_ids) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  return ops::embedding(weight_, input_ids);
}

}  // namespace census::nn
