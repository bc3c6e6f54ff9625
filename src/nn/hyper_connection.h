// File: hyper_connection.h
// DeepSeek-V4's manifold-constrained hyper-connections (DeepseekV4HyperConnection, DeepseekV4HyperHead,
// transformers/models/deepseek_v4/modeling_deepseek_v4.py): the residual is hc_mult parallel streams
// (B, S, M, H); each sublayer reads one weighted collapse of them and writes its output back into
// every stream, beside a Sinkhorn-projected mix of the streams.
//
// Legend: B = batch, S = seq_length, M = hc_mult, H = hidden_size, X = (2 + M) * M mixing logits.
//
// HyperConnection.forward(streams (B, S, M, H) bf16), in fp32 throughout, saves:
//   x = streams.flatten(2).float()   (B, S, M*H) fp32   by the norm's pow and mul
//   r = rsqrt(mean(x^2) + eps)       (B, S, 1) fp32     by rsqrt and the norm's mul
//   flat = x * r                     (B, S, M*H) fp32   by the mixing linear's mm
//   fn.float()                       (X, M*H) fp32      by that mm (a copy of the parameter, not it)
//   mix = F.linear(flat, fn.float()) (B, S, X) fp32     by the three scale multiplies (its views)
//   sigmoid(pre), sigmoid(post)      (B, S, M) fp32     each by its sigmoid
//   softmax(comb)                    (B, S, M, M) fp32  by the softmax
//   each Sinkhorn division (1 + 2 * (iters - 1) of them): its numerator (B, S, M, M) and its
//   denominator (B, S, 1, M) or (B, S, M, 1), fp32
//   pre + eps                        (B, S, M) fp32     by the collapse's multiply, with the streams
#pragma once

#include "nn/module.h"

namespace census::nn {

struct HyperConnectionSizes {
  int64_t hc_mult;
  int64_t hidden_size;
  int64_t sinkhorn_iters;
  double hc_eps;
  double rms_norm_eps;
};

// DeepseekV4UnweightedRMSNorm: x * rsqrt(x.float().square().mean(-1, keepdim=True) + eps).to(x.dtype).
Tensor unweighted_rms_norm(const Tensor& x, double eps);

class HyperConnection {
 public:
  HyperConnection(std::string path, HyperConnectionSizes sizes, ParameterList& params);
  struct Output {
    Tensor post;       // (B, S, M) fp32: where the sublayer's output goes, in [0, 2]
    Tensor comb;       // (B, S, M, M) fp32: the doubly stochastic stream mix
    Tensor collapsed;  // (B, S, H) in the streams' dtype: the sublayer's input
  };
  Output forward(const Tensor& hidden_streams) const;

 private:
  std::string path_;
  std::string norm_path_;  // path_ + ".input_norm": a module's path must outlive the census that records it
  HyperConnectionSizes sizes_;
  Tensor fn_;     // (X, M*H)
  Tensor base_;   // (X)
  Tensor scale_;  // (3)
};

// DeepseekV4HyperHead: the model's final collapse of the streams, (pre.unsqueeze(-1) * x).sum(2).
class HyperHead {
 public:
  HyperHead(std::string path, HyperConnectionSizes sizes, ParameterList& params);
  Tensor forward(const Tensor& x) const;

 private:
  std::string path_;
  std::string norm_path_;  // path_ + ".input_norm": a module's path must outlive the census that records it
  HyperConnectionSizes sizes_;
  Tensor hc_fn_;     // (M, M*H)
  Tensor hc_base_;   // (M)
  Tensor hc_scale_;  // (1)
};

}  // namespace census::nn
