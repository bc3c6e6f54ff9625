#include "nn/mamba2_mixer.h"

#include <limits>

#include "nn/causal_conv1d.h"
#include "ops/ops.h"

namespace census::nn {
namespace {

// pad_tensor_by_size: zeros after the tokens (dim 1) up to a whole number of chunks. F.pad always
// copies, even by nothing.
Tensor pad_tensor_by_size(const Tensor& input, int64_t pad_size) {
  if (input.dim() == 4) return ops::constant_pad_nd(input, {0, 0, 0, 0, 0, pad_size, 0, 0});
  return ops::constant_pad_nd(input, {0, 0, 0, pad_size, 0, 0});
}

// reshape_into_chunks: padded, then (B, S', ...) -> (B, C, L, ...), a view of the padded copy.
Tensor reshape_into_chunks(const Tensor& input, int64_t pad_size, int64_t chunk_size) {
  Tensor padded = pad_tensor_by_size(input, pad_size);
  Dims sizes{padded.size(0), padded.size(1) / chunk_size, chunk_size};
  for (int64_t d = 2; d < padded.dim(); ++d) sizes.push_back(padded.size(d));
  return ops::reshape(padded, sizes);
}

// segment_sum: x (..., T) -> (..., T, T), the sums of x over (j, i] below the diagonal and -inf above:
// x expanded along a new last dim, masked below the diagonal, cumsum over the rows, masked above.
// Each masked_fill keeps its (T, T) bool mask.
Tensor segment_sum(Tensor input) {
  const int64_t chunk_size = input.size(-1);
  Dims expanded = input.sizes();
  expanded.push_back(chunk_size);
  input = ops::expand(ops::unsqueeze(input, input.dim()), expanded);
  Tensor mask = ops::tril(ops::ones(Dims{chunk_size, chunk_size}, DType::kBool), -1);
  input = ops::masked_fill(input, ops::bitwise_not(mask));
  Tensor tensor_segsum = ops::cumsum(input, input.dim() - 2);
  mask = ops::tril(ops::ones(Dims{chunk_size, chunk_size}, DType::kBool), 0);
  return ops::masked_fill(tensor_segsum, ops::bitwise_not(mask));
}

}  // namespace

std::optional<MambaBackend> parse_mamba_backend(std::string_view name) {
  if (name == "torch") return MambaBackend::kTorch;
  if (name == "kernel") return MambaBackend::kKernel;
  return std::nullopt;
}

Mamba2Mixer::Mamba2Mixer(std::string path, const Mamba2Sizes& sizes, ParameterList& params)
    : path_(std::move(path)), norm_path_(child_path(path_, "norm")), s_(sizes),
      conv_dim_(sizes.intermediate_size + 2 * sizes.n_groups * sizes.ssm_state_size),
      dt_bias_(register_parameter(params, path_, "dt_bias", Dims{sizes.num_heads})),
      A_log_(register_parameter(params, path_, "A_log", Dims{sizes.num_heads})),
      D_(register_parameter(params, path_, "D", Dims{sizes.num_heads})),
      conv1d_weight_(register_parameter(params, child_path(path_, "conv1d"), "weight", Dims{conv_dim_, 1, sizes.conv_kernel})),
      conv1d_bias_(sizes.use_conv_bias ? register_parameter(params, child_path(path_, "conv1d"), "bias", Dims{conv_dim_})
                                       : Tensor()),
      in_proj(child_path(path_, "in_proj"), sizes.hidden_size, sizes.intermediate_size + conv_dim_ + sizes.num_heads,
              sizes.use_bias, params),
      norm_weight_(sizes.rms_norm ? register_parameter(params, norm_path_, "weight", Dims{sizes.intermediate_size})
                                  : Tensor()),
      out_proj(child_path(path_, "out_proj"), sizes.intermediate_size, sizes.hidden_size, sizes.out_proj_bias, params) {
  if (sizes.mup)
    mup_vector_ = make_tensor(Dims{1, 1, sizes.intermediate_size + conv_dim_ + sizes.num_heads},
                              Session::current().default_dtype());
}

Tensor Mamba2Mixer::forward(const Tensor& input) const {
  ModuleScope scope(path_, ModuleKind::kOther);
  const int64_t batch = input.size(0), seq_len = input.size(1);
  const DType dtype = input.dtype();
  // 1. apply_mask_to_padding_states (no mask: no op), the projection, A.
  // Falcon-H1's μP: the input scaled (no save), the projection times the buffer (which its mul keeps).
  Tensor projected_states = in_proj.forward(s_.mup ? ops::mul_number(input, s_.ssm_in_multiplier) : input);
  if (s_.mup) projected_states = ops::mul(projected_states, mup_vector_);  // (B, S, I + conv_dim + Nh) bf16
  Tensor A = ops::neg(ops::exp(ops::to(A_log_, DType::kFloat32)));  // (Nh) fp32
  if (s_.backend == MambaBackend::kKernel) {
    // mamba_ssm's fused Function: the conv weight handed over squeezed, as the mixer calls it.
    return ops::mamba_split_conv1d_scan_combined(projected_states, ops::squeeze(conv1d_weight_, 1), conv1d_bias_,
                                                 dt_bias_, A, D_, norm_weight_, out_proj.weight(), s_.num_heads,
                                                 s_.head_dim, s_.n_groups);
  }
  // mamba2_split_conv1d_scan_combined returns None without mamba_ssm: the torch path follows.
  std::vector<Tensor> parts = ops::split_with_sizes(projected_states, {s_.intermediate_size, conv_dim_, s_.num_heads}, -1);
  const Tensor gate = parts[0];
  Tensor hidden_states_B_C = parts[1];
  const Tensor dt = parts[2];
  parts.clear();

  // 2. The convolution over (B, conv_dim, S): it keeps the projection's storage (its input is a view).
  hidden_states_B_C = ops::transpose(hidden_states_B_C, 1, 2);
  hidden_states_B_C = causal_conv1d_fn(hidden_states_B_C, ops::squeeze(conv1d_weight_, 1), HiddenAct::kSilu, conv1d_bias_);

  // 3. The SSM: x, B, C as views of the conv's output.
  hidden_states_B_C = ops::transpose(hidden_states_B_C, 1, 2);
  const int64_t group_width = s_.n_groups * s_.ssm_state_size;
  std::vector<Tensor> xbc = ops::split_with_sizes(hidden_states_B_C, {s_.intermediate_size, group_width, group_width}, -1);
  Tensor x = ops::view(xbc[0], Dims{batch, seq_len, s_.num_heads, s_.head_dim});
  Tensor B = ops::view(xbc[1], Dims{batch, seq_len, s_.n_groups, s_.ssm_state_size});
  Tensor C = ops::view(xbc[2], Dims{batch, seq_len, s_.n_groups, s_.ssm_state_size});
  xbc.clear();
  // The caller's A and scan_result stay its locals until it returns (what a checkpointed forward, which
  // saves nothing, shows).
  const Tensor scan_result = chunk_scan(std::move(x), dt, A, std::move(B), std::move(C));
  Tensor scan_output = ops::reshape(scan_result, Dims{batch, seq_len, s_.intermediate_size});
  // The gated norm, or (Falcon-H1 without mamba_rms_norm) the gate alone: silu of the bf16 gate.
  scan_output = s_.rms_norm ? gated_norm(scan_output, gate) : ops::mul(scan_output, ops::silu(gate));

  // 4. The output projection, from the norm's fp32 back to the input's dtype.
  return out_proj.forward(ops::to(scan_output, dtype));
}

// mamba2_chunk_scan's torch body, statement by statement (dt_softplus, D, no initial state, no final
// state returned); its named locals (L, G, M, states, C_times_states, ...) live until it returns. x (B, S, Nh, P) and B, C (B, S, G, N) in bf16, dt (B, S, Nh) bf16, A (Nh) fp32.
Tensor Mamba2Mixer::chunk_scan(Tensor hidden_states, Tensor dt, Tensor A, Tensor B, Tensor C) const {
  const int64_t batch = hidden_states.size(0), sequence_length = hidden_states.size(1);
  const int64_t num_heads = s_.num_heads, head_dim = s_.head_dim, chunk_size = s_.chunk_size;
  dt = ops::add(dt, ops::to(dt_bias_, dt.dtype()));
  dt = ops::softplus(dt);
  dt = ops::clamp(dt, s_.time_step_min, std::numeric_limits<double>::infinity());

  hidden_states = ops::to(hidden_states, DType::kFloat32);
  B = ops::repeat_interleave(ops::to(B, DType::kFloat32), num_heads / s_.n_groups, 2);  // (B, S, Nh, N)
  C = ops::repeat_interleave(ops::to(C, DType::kFloat32), num_heads / s_.n_groups, 2);

  const int64_t pad_size = (chunk_size - sequence_length % chunk_size) % chunk_size;
  // Operands are formed in Python's order, left to right: their nodes' sequence numbers follow it.
  Tensor D_column = ops::unsqueeze(D_, -1);
  Tensor D_residual = ops::mul(D_column, pad_tensor_by_size(hidden_states, pad_size));
  D_column = Tensor();

  // Discretize x and A.
  hidden_states = ops::mul(hidden_states, ops::to(ops::unsqueeze(dt, -1), DType::kFloat32));
  A = ops::mul(ops::to(A, hidden_states.dtype()), ops::to(dt, DType::kFloat32));  // (B, S, Nh)

  // Chunks: (B, C, L, ...).
  hidden_states = reshape_into_chunks(hidden_states, pad_size, chunk_size);
  A = reshape_into_chunks(A, pad_size, chunk_size);
  B = reshape_into_chunks(B, pad_size, chunk_size);
  C = reshape_into_chunks(C, pad_size, chunk_size);

  A = ops::permute(A, {0, 3, 1, 2});  // (B, Nh, C, L)
  Tensor A_cumsum = ops::cumsum(A, -1);

  // 1. The intra-chunk output (the diagonal blocks).
  Tensor L = ops::exp(segment_sum(A));  // (B, Nh, C, L, L)
  // G = (C[:, :, :, None, :, :] * B[:, :, None, :, :, :]).sum(dim=-1)   (B, C, L, L, Nh)
  Tensor lhs = ops::unsqueeze(C, 3), rhs = ops::unsqueeze(B, 2);
  Tensor G = ops::sum(ops::mul(lhs, rhs), {5}, /*keepdim=*/false);
  // M = (G[..., None] * L.permute(0, 2, 3, 4, 1)[..., None]).sum(dim=-1)
  lhs = ops::unsqueeze(G, 5);
  rhs = ops::unsqueeze(ops::permute(L, {0, 2, 3, 4, 1}), 5);
  Tensor M = ops::sum(ops::mul(lhs, rhs), {5}, false);
  // Y_diag = (M[..., None] * hidden_states[:, :, None]).sum(dim=3)   (B, C, L, Nh, P)
  lhs = ops::unsqueeze(M, 5);
  rhs = ops::unsqueeze(hidden_states, 2);
  Tensor Y_diag = ops::sum(ops::mul(lhs, rhs), {3}, false);

  // 2. The state of each chunk (the B terms).
  const int64_t chunks = A_cumsum.size(2);
  Tensor decay_states = ops::exp(ops::sub(ops::slice(A_cumsum, 3, chunk_size - 1, chunk_size), A_cumsum));
  Tensor B_decay = ops::mul(B, ops::unsqueeze(ops::permute(decay_states, {0, 2, 3, 1}), 4));  // (B, C, L, Nh, N)
  // states = (B_decay[..., None, :] * hidden_states[..., None]).sum(dim=2)   (B, C, Nh, P, N)
  lhs = ops::unsqueeze(B_decay, 4);
  rhs = ops::unsqueeze(hidden_states, 5);
  Tensor states = ops::sum(ops::mul(lhs, rhs), {2}, false);

  // 3. The recurrence over the chunk boundaries (the A terms): zeros for the initial state.
  Tensor previous_states = ops::zeros_like(ops::slice(states, 1, 0, 1));
  states = ops::cat({previous_states, states}, 1);  // (B, C + 1, Nh, P, N)
  Tensor decay_chunk = ops::exp(segment_sum(ops::constant_pad_nd(ops::select(A_cumsum, 3, chunk_size - 1), {1, 0})));
  decay_chunk = ops::transpose(decay_chunk, 1, 3);  // (B, C + 1, C + 1, Nh)
  // new_states = (decay_chunk[..., None, None] * states[:, :, None, ...]).sum(dim=1)
  lhs = ops::unsqueeze(ops::unsqueeze(decay_chunk, 4), 5);
  rhs = ops::unsqueeze(states, 2);
  Tensor new_states = ops::sum(ops::mul(lhs, rhs), {1}, false);
  states = ops::slice(new_states, 1, 0, chunks);
  const Tensor final_state = ops::select(new_states, 1, chunks);  // not returned (no cache)

  // 4. The state-to-output term of each chunk (the C terms).
  Tensor state_decay_out = ops::exp(A_cumsum);
  lhs = ops::unsqueeze(C, 4);
  rhs = ops::unsqueeze(states, 2);
  Tensor C_times_states = ops::mul(lhs, rhs);  // (B, C, L, Nh, P, N)
  lhs = ops::sum(C_times_states, {5}, false);
  rhs = ops::unsqueeze(ops::permute(state_decay_out, {0, 2, 3, 1}), 4);
  Tensor Y_off = ops::mul(lhs, rhs);
  lhs = rhs = Tensor();  // the sum was a temporary of the expression

  Tensor output = ops::add(Y_diag, Y_off);
  output = ops::reshape(output, Dims{batch, output.size(1) * chunk_size, num_heads, head_dim});
  output = ops::add(output, D_residual);
  if (pad_size > 0) output = ops::slice(output, 1, 0, sequence_length);
  return output;  // (B, S, Nh, P) fp32
}

// The gated RMSNorm (Zamba2RMSNormGated / GraniteMoeHybridRMSNormGated): x * silu(gate) in fp32, then
// the RMS over groups of group_size (one group, with no view, in Granite's), scaled by the weight.
Tensor Mamba2Mixer::gated_norm(const Tensor& input, const Tensor& gate) const {
  ModuleScope scope(norm_path_, ModuleKind::kNorm);
  const DType input_dtype = input.dtype();
  Tensor hidden_states = ops::to(input, DType::kFloat32);
  // nn.functional.silu is called as a function: its saves are the norm's.
  hidden_states = ops::mul(hidden_states, ops::silu(ops::to(gate, DType::kFloat32)));
  if (s_.norm_group_size) {
    Dims grouped = hidden_states.sizes();
    const size_t last = grouped.size() - 1;
    grouped[last] = grouped[last] / *s_.norm_group_size;
    grouped.push_back(*s_.norm_group_size);
    Tensor hidden_states_group = ops::view(hidden_states, grouped);
    Tensor variance = ops::mean(ops::pow(hidden_states_group, 2), -1, /*keepdim=*/true);
    hidden_states_group = ops::mul(hidden_states_group, ops::rsqrt(ops::add(variance, s_.norm_eps)));
    hidden_states = ops::view(hidden_states_group, input.sizes());
  } else {
    Tensor variance = ops::mean(ops::pow(hidden_states, 2), -1, /*keepdim=*/true);
    hidden_states = ops::mul(hidden_states, ops::rsqrt(ops::add(variance, s_.norm_eps)));
  }
  return ops::mul(norm_weight_, ops::to(hidden_states, input_dtype));
}

}  // namespace census::nn
