#include "nn/adafactor.h"

#include "ops/ops.h"

namespace census::nn {

namespace {

constexpr double kEps1Squared = 0.0, kEps1 = 0.0;  // torch.finfo(dtype).eps: values never change a byte

}  // namespace

void Adafactor::make_state(size_t i) {
  const Tensor& p = params_[i];
  Tensor step = ops::scalar_tensor_fresh();
  add_state(i, step);
  on_host(step);
  if (factored(i)) {
    Dims row = p.sizes(), col = p.sizes();
    row[row.size() - 1] = 1;
    col[col.size() - 2] = 1;
    add_state(i, ops::new_zeros(p, row));
    add_state(i, ops::new_zeros(p, col));
  } else {
    add_state(i, ops::zeros_like(p));
  }
}

void Adafactor::single_tensor_update() {
  // The loop's names, alive across its iterations until rebound (Python's scoping).
  Tensor row_mean, col_mean, var_estimate, update, grad_squared;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!has_grad(i)) continue;
    Tensor param = params_[i];
    const Tensor g = grad(i);
    ops::add_(state(i, kStep), 1.0);
    ops::item(state(i, kStep));
    ops::item(ops::linalg_vector_norm(param));
    if (factored(i)) {
      const int64_t last = param.dim() - 1;
      Tensor fresh = ops::linalg_vector_norm(g, last, /*keepdim=*/true);
      ops::div_number_(ops::pow_(fresh, 2.0), static_cast<double>(param.size(last)));
      row_mean = std::move(fresh);
      ops::lerp_(state(i, kRowVar), row_mean, 0.0);
      fresh = ops::linalg_vector_norm(g, last - 1, /*keepdim=*/true);
      ops::div_number_(ops::pow_(fresh, 2.0), static_cast<double>(param.size(last - 1)));
      col_mean = std::move(fresh);
      ops::lerp_(state(i, kColVar), col_mean, 0.0);
      var_estimate = ops::matmul(state(i, kRowVar), state(i, kColVar));
      Tensor row_var_mean = ops::mean(state(i, kRowVar), -2, /*keepdim=*/true);
      ops::div_(var_estimate, ops::clamp_min_(row_var_mean, kEps1));
    } else {
      grad_squared = ops::mul(g, g);
      ops::lerp_(state(i, kVariance), grad_squared, 0.0);
      var_estimate = ops::clone(state(i, kVariance));
    }
    update = ops::rsqrt_(ops::clamp_min_(var_estimate, kEps1Squared));  // the previous update dies here
    ops::mul_(update, g);
    ops::item(ops::linalg_vector_norm(update));
    ops::add_(param, update);  // alpha=-alpha / denom
  }
}

void Adafactor::multi_tensor_update() {
  // _group_tensors_by_device_dtype_and_is_multidim: by dtype in order of first appearance, each dtype's
  // matrices and vectors in order of their first parameter.
  std::vector<std::vector<size_t>> groups;
  for (const std::vector<size_t>& by_dtype : groups_with_grad()) {
    std::vector<size_t> matrices, vectors;
    for (size_t i : by_dtype) (factored(i) ? matrices : vectors).push_back(i);
    const bool matrices_first = !matrices.empty() && (vectors.empty() || matrices.front() < vectors.front());
    for (std::vector<size_t>* list : matrices_first ? std::array{&matrices, &vectors} : std::array{&vectors, &matrices})
      if (!list->empty()) groups.push_back(std::move(*list));
  }
  std::vector<Tensor> updates;  // the previous group's, alive until this group's replace them
  for (const std::vector<size_t>& group : groups) {
    std::vector<Tensor> params, grads, steps;
    for (size_t i : group) {
      params.push_back(params_[i]);
      grads.push_back(grad(i));
      steps.push_back(state(i, kStep));
    }
    {
      // The steps are on the host: torch.tensor(1.0, device="cpu") once for the list.
      const Tensor one = ops::scalar_tensor_fresh();
      on_host(one);
      ops::foreach_add_(steps, one);
    }
    for (int reads = 0; reads < 3; ++reads)  // one_minus_beta2_t, beta2_t, rho_t: a read of each step each
      for (const Tensor& step : steps) ops::item(step);
    for (const Tensor& p : params) ops::item(ops::linalg_vector_norm(p));
    const std::vector<double> weights(group.size(), 0.0);
    std::vector<Tensor> var_estimates;
    if (factored(group.front())) {
      std::vector<Tensor> row_vars, col_vars;
      std::vector<double> row_sizes, col_sizes;
      for (size_t i : group) {
        row_vars.push_back(state(i, kRowVar));
        col_vars.push_back(state(i, kColVar));
        row_sizes.push_back(static_cast<double>(params_[i].size(-1)));
        col_sizes.push_back(static_cast<double>(params_[i].size(-2)));
      }
      for (auto [vars, dim_from_last, sizes] :
           {std::tuple{&row_vars, int64_t{1}, &row_sizes}, std::tuple{&col_vars, int64_t{2}, &col_sizes}}) {
        std::vector<Tensor> means;
        for (const Tensor& g : grads) means.push_back(ops::linalg_vector_norm(g, g.dim() - dim_from_last, true));
        ops::foreach_mul_(means, std::span<const Tensor>(means));
        ops::foreach_div_(means, *sizes);
        ops::foreach_lerp_(*vars, means, weights);
      }  // del row_means, col_means
      for (size_t k = 0; k < group.size(); ++k) var_estimates.push_back(ops::matmul(row_vars[k], col_vars[k]));
      std::vector<Tensor> row_var_means;
      for (const Tensor& row_var : row_vars) row_var_means.push_back(ops::mean(row_var, -2, true));
      ops::foreach_clamp_min_(row_var_means, kEps1);
      ops::foreach_div_(var_estimates, row_var_means);
    } else {
      std::vector<Tensor> variances;
      for (size_t i : group) variances.push_back(state(i, kVariance));
      {
        const std::vector<Tensor> grads_squared = ops::foreach_mul(grads, grads);
        ops::foreach_lerp_(variances, grads_squared, weights);
      }
      for (const Tensor& v : variances) var_estimates.push_back(ops::clone(v));
    }
    ops::foreach_clamp_min_(var_estimates, kEps1Squared);
    ops::foreach_rsqrt_(var_estimates);
    ops::foreach_mul_(var_estimates, std::span<const Tensor>(grads));
    updates = std::move(var_estimates);  // the previous group's list dies here
    for (const Tensor& u : updates) ops::item(ops::linalg_vector_norm(u));
    ops::foreach_mul_(updates, std::span<const double>(weights));
    ops::foreach_add_(params, std::span<const Tensor>(updates));
  }
}

void Adafactor::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    if (has_grad(i) && !made(i)) make_state(i);
  if (impl_ == OptimizerImpl::kForEach) multi_tensor_update();
  else single_tensor_update();
}

}  // namespace census::nn
