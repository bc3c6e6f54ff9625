#include "nn/hyper_connection.h"

#include "ops/ops.h"

namespace census::nn {

Tensor unweighted_rms_norm(const Tensor& x, double eps) {
  Tensor r;
  {
    Tensor h = ops::to(x, DType::kFloat32);  // x itself where x is fp32
    r = ops::rsqrt(ops::add(ops::mean(ops::pow(h, 2), -1, /*keepdim=*/true), eps));
  }
  return ops::mul(x, ops::to(r, x.dtype()));
}

HyperConnection::HyperConnection(std::string path, HyperConnectionSizes sizes, ParameterList& params)
    : path_(std::move(path)), norm_path_(child_path(path_, "input_norm")), sizes_(sizes) {
  const int64_t mix = (2 + sizes.hc_mult) * sizes.hc_mult;
  fn_ = register_parameter(params, path_, "fn", Dims{mix, sizes.hc_mult * sizes.hidden_size});
  base_ = register_parameter(params, path_, "base", Dims{mix});
  scale_ = register_parameter(params, path_, "scale", Dims{3});
}

HyperConnection::Output HyperConnection::forward(const Tensor& hidden_streams) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t hc = sizes_.hc_mult;
  const Dims& streams = hidden_streams.sizes();  // (B, S, M, H)
  Tensor flat;
  {
    ModuleScope norm(norm_path_, ModuleKind::kNorm);
    flat = unweighted_rms_norm(
        ops::to(ops::reshape(hidden_streams, Dims{streams[0], streams[1], hc * streams[3]}), DType::kFloat32),
        sizes_.rms_norm_eps);
  }
  std::vector<Tensor> mix = ops::split_with_sizes(ops::linear(flat, ops::to(fn_, DType::kFloat32)), {hc, hc, hc * hc}, -1);
  flat = Tensor();
  std::vector<Tensor> base = ops::split_with_sizes(base_, {hc, hc, hc * hc}, 0);
  std::vector<Tensor> scale = ops::unbind(scale_, 0);

  Output out;
  Tensor pre = ops::add(ops::sigmoid(ops::add(ops::mul(mix[0], scale[0]), base[0])), sizes_.hc_eps);
  out.post = ops::mul_number(ops::sigmoid(ops::add(ops::mul(mix[1], scale[1]), base[1])), 2.0);
  Dims square = mix[2].sizes();
  square[square.size() - 1] = hc;
  square.push_back(hc);
  Tensor comb_logits = ops::add(ops::mul(ops::view(mix[2], square), scale[2]), ops::view(base[2], Dims{hc, hc}));
  Tensor comb = ops::add(ops::softmax(comb_logits, -1, std::nullopt), sizes_.hc_eps);
  comb_logits = Tensor();
  // Sinkhorn: columns (dim -2) first, then rows and columns alternately.
  const int columns = comb.dim() - 2, rows = comb.dim() - 1;
  comb = ops::div(comb, ops::add(ops::sum(comb, {columns}, /*keepdim=*/true), sizes_.hc_eps));
  for (int64_t i = 0; i + 1 < sizes_.sinkhorn_iters; ++i) {
    comb = ops::div(comb, ops::add(ops::sum(comb, {rows}, /*keepdim=*/true), sizes_.hc_eps));
    comb = ops::div(comb, ops::add(ops::sum(comb, {columns}, /*keepdim=*/true), sizes_.hc_eps));
  }
  out.comb = comb;
  // The streams collapsed by the pre weights: one weighted sum over the stream axis.
  out.collapsed =
      ops::to(ops::sum(ops::mul(ops::unsqueeze(pre, -1), hidden_streams), {2}, /*keepdim=*/false), hidden_streams.dtype());
  return out;
}

HyperHead::HyperHead(std::string path, HyperConnectionSizes sizes, ParameterList& params)
    : path_(std::move(path)), norm_path_(child_path(path_, "input_norm")), sizes_(sizes) {
  hc_fn_ = register_parameter(params, path_, "hc_fn", Dims{sizes.hc_mult, sizes.hc_mult * sizes.hidden_size});
  hc_base_ = register_parameter(params, path_, "hc_base", Dims{sizes.hc_mult});
  hc_scale_ = register_parameter(params, path_, "hc_scale", Dims{1});
}

Tensor HyperHead::forward(const Tensor& x) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const Dims& streams = x.sizes();
  Tensor flat;
  {
    ModuleScope norm(norm_path_, ModuleKind::kNorm);
    flat = unweighted_rms_norm(
        ops::to(ops::reshape(x, Dims{streams[0], streams[1], streams[2] * streams[3]}), DType::kFloat32),
        sizes_.rms_norm_eps);
  }
  Tensor mixes = ops::linear(flat, ops::to(hc_fn_, DType::kFloat32));
  flat = Tensor();
  Tensor pre = ops::add(ops::sigmoid(ops::add(ops::mul(mixes, ops::to(hc_scale_, DType::kFloat32)),
                                             ops::to(hc_base_, DType::kFloat32))),
                        sizes_.hc_eps);
  mixes = Tensor();
  return ops::to(ops::sum(ops::mul(ops::unsqueeze(pre, -1), x), {2}, /*keepdim=*/false), x.dtype());
}

}  // namespace census::nn
