// File: gated_delta_rule.h
// The gated delta rule of a linear-attention layer (Qwen3-Next, Qwen3.5), in the two backends a run
// can take, named as HyperParallel's runtime names them:
//
//   eager   Transformers' own torch_chunk_gated_delta_rule: l2-normalised q and k, every input cast to
//           fp32 and padded to a whole number of chunks, a 63-step intra-chunk loop writing into the
//           chunk matrix in place, then one step per chunk carrying the (Dk, Dv) state. Its cost grows
//           with the chunks: one census op per tensor op, as Python runs them.
//   triton  the chunked kernel's contract (ops::gated_delta_rule_contract) after the l2 norms.
//
// While the rule runs its saves are the linrec op's (ModuleKind::kDeltaRule), as the reference census
// marks them. Eager is the default, as it is the runtime's.
//
// Legend: B = batch (1), S = seq_length, C = chunks, H = value heads, Dk / Dv = key / value head dim.
#pragma once

#include <optional>
#include <string_view>

#include "tensor/tensor.h"

namespace census::nn {

enum class GdnBackend : uint8_t { kEager, kTriton };

std::optional<GdnBackend> parse_gdn_backend(std::string_view name);
std::string_view gdn_backend_name(GdnBackend backend);

// Transformers' fixed chunk of the rule.
inline constexpr int64_t kGdnChunkSize = 64;

// x * rsqrt((x * x).sum(-1, keepdim=True) + eps), as FLA's l2norm.
Tensor l2norm(const Tensor& x, double eps = 1e-6);

// q, k (B, S, H, Dk) and v (B, S, H, Dv) in bf16, g (B, S, H) fp32, beta (B, S, H) bf16, with q/k l2
// normalised inside. Returns (B, S, H, Dv) in q's dtype. `path` is the attention running it.
Tensor chunk_gated_delta_rule(GdnBackend backend, std::string_view path, const Tensor& query, const Tensor& key,
                              const Tensor& value, const Tensor& g, const Tensor& beta);

}  // namespace census::nn
