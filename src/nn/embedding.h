// File: embedding.h
// nn.Embedding: the model's token embedding (embed_tokens), as F.embedding runs it: its output in the
// weight's dtype; its backward allocates the whole (V, H) weight gradient, whatever the tokens.
#pragma once

#include "nn/module.h"

namespace census::nn {

class Embedding {
 public:
  Embedding(std::string path, int64_t num_embeddings, int64_t embedding_dim, ParameterList& params);
  Tensor forward(const Tensor& input_ids) const;
  const Tensor& weight() const { return weight_; }

 private:
  std::string path_;
  Tensor weight_;  // (V, H); modules_to_save's trained copy where PEFT saves it
};

}  // namespace census::nn
