// Gemma 4's layers derived by hand, op by op: a sliding and a full layer at Gemma4TextConfig's own
// defaults (the gemma-4-e2b-it shape its docstring names) at 4096 tokens, saved bytes and FLOPs; and
// the MoE block beside the MLP, which no oracle case runs (its toy cases are dense), as what it adds
// to a dense layer's saves.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/parts.h"
#include "models/registry.h"

namespace census {
namespace {

ModelConfig read(const nlohmann::json& json) {
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

constexpr int64_t kBf16 = 2, kFp32 = 4, kInt64 = 8;

// Gemma4RMSNorm over (rows, D): its fp32 copy (kept by pow(2) and the product), the mean square plus
// eps and its pow(-0.5) ((rows, 1) fp32 each), and where it has a weight the fp32 normed states and
// the fp32 weight (kept by the weight's product).
int64_t norm_saves(int64_t rows, int64_t dim, bool with_scale) {
  return rows * dim * kFp32 + 2 * rows * kFp32 + (with_scale ? rows * dim * kFp32 + dim * kFp32 : 0);
}

// A layer of width D with Nkv K/V heads (the sliding layers' 256 and 4, the full layers' 512 and 4),
// H 2304, Nh 8, I 9216, P 256, S 4096, censused alone:
//   input_layernorm, post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm,
//     post_per_layer_input_norm      norm_saves(S, H, weight) each
//   q_proj, k_proj, v_proj           their shared input, the normed states (S, H) bf16
//   q_norm (on (S, Nh, D)), k_norm   norm_saves(S * Nh, D) and norm_saves(S * Nkv, D)
//   v_norm (no weight)               norm_saves(S * Nkv, D, no weight)
//   rotary                           cos and sin (1, S, D) bf16, kept by the q and k products
//   flash contract                   q (S, Nh, D), k and v (S, Nkv, D), out (Nh, S, D) bf16, two
//                                    (Nh, S, 8) fp32 statistics
//   o_proj                           the contiguous attention output (S, Nh * D) bf16
//   mlp                              its input (S, H); gate (S, I) by gelu; gelu's output and up (S, I)
//                                    by their product; the product (S, I) by down_proj
//   per-layer input                  per_layer_input_gate's input (S, H); the gate (S, P) by gelu; the
//                                    per-layer input (S, P) by the product (the lone layer's needs no
//                                    gradient, so gelu's output is not kept); the product (S, P) by
//                                    per_layer_projection
//   layer_scalar                     the (1) bf16 buffer, by the in-place multiply
int64_t derived_saved(int64_t S, int64_t D, int64_t Nkv) {
  const int64_t H = 2304, Nh = 8, I = 9216, P = 256;
  const int64_t norms = 5 * norm_saves(S, H, true);
  const int64_t attention = S * H * kBf16 + norm_saves(S * Nh, D, true) + norm_saves(S * Nkv, D, true) +
                            norm_saves(S * Nkv, D, false) + 2 * S * D * kBf16 + S * Nh * D * kBf16 +
                            2 * S * Nkv * D * kBf16 + S * Nh * D * kBf16 + 2 * Nh * S * 8 * kFp32 +
                            S * Nh * D * kBf16;
  const int64_t mlp = S * H * kBf16 + 4 * S * I * kBf16;
  const int64_t per_layer_input = S * H * kBf16 + 3 * S * P * kBf16;
  return norms + attention + mlp + per_layer_input + 1 * kBf16;
}

// FLOPs by part: the projections' 2 S in out (attention: q, k, v, o; ffn: gate, up, down and the
// per-layer gate and projection), the kernel's scores 4 S^2 Nh D (the reference's count, not halved).
PartCounts derived_flops(int64_t S, int64_t D, int64_t Nkv) {
  const int64_t H = 2304, Nh = 8, I = 9216, P = 256;
  return {{"attention", 2 * S * H * (Nh * D + 2 * Nkv * D) + 2 * S * Nh * D * H},
          {"ffn", 3 * 2 * S * H * I + 2 * 2 * S * H * P},
          {"scores", 4 * S * S * Nh * D}};
}

// Gemma4TextConfig's defaults: 30 layers, five sliding to one full, global_head_dim 512.
TEST(Gemma4Derivation, DefaultShapeSlidingAndFullLayersAt4096Tokens) {
  const ModelConfig config = read({{"model_type", "gemma4_text"}});
  const int64_t S = 4096;
  ASSERT_EQ(layer_kind(config, 0), "sliding_attention");
  ASSERT_EQ(layer_kind(config, 5), "full_attention");
  EXPECT_EQ(census_layer(config, 0, S).saved_bytes, derived_saved(S, 256, 4));
  EXPECT_EQ(census_layer(config, 5, S).saved_bytes, derived_saved(S, 512, 4));
  EXPECT_EQ(census_flops(config, 0, S), derived_flops(S, 256, 4));
  EXPECT_EQ(census_flops(config, 5, S), derived_flops(S, 512, 4));
}

// attention_k_eq_v on the full layers: no v_proj, the values are k_proj's output (its own v_norm, no
// second projection: the same saves), with num_global_key_value_heads K/V heads; the sliding layers
// keep num_key_value_heads. Saves of a full layer with 2 K/V heads, and FLOPs without v_proj's.
TEST(Gemma4Derivation, FullLayersOwnKeyValueHeadsWithKEqualsV) {
  const ModelConfig config =
      read({{"model_type", "gemma4_text"}, {"attention_k_eq_v", true}, {"num_global_key_value_heads", 2}});
  const int64_t S = 4096, H = 2304, D = 512, Nkv = 2;
  EXPECT_EQ(census_layer(config, 5, S).saved_bytes, derived_saved(S, D, Nkv));
  PartCounts flops = derived_flops(S, D, Nkv);
  flops["attention"] -= 2 * S * H * Nkv * D;
  EXPECT_EQ(census_flops(config, 5, S), flops);
  EXPECT_EQ(census_layer(config, 0, S).saved_bytes, derived_saved(S, 256, 4));
  // TP 2 halves each type's K/V heads.
  const ModelConfig rank = tp_config(config, 2);
  EXPECT_EQ(rank.num_key_value_heads, 2);
  EXPECT_EQ(rank.gemma4.num_global_key_value_heads, 1);
}

// The MoE block beside the MLP (enable_moe_block), over T tokens, E experts, K a token, I_e an
// expert's width, S' = T K pairs, grouped_mm experts. What it adds to the dense layer's saves:
//   post_feedforward_layernorm_1, pre_feedforward_layernorm_2, post_feedforward_layernorm_2
//                         norm_saves(T, H, weight) each
//   router.norm (no weight)   norm_saves(T, H, no weight)
//   * router.scale        the normed states (T, H) bf16 (the scale is a parameter)
//   router.proj           its input, the scaled states (T, H) bf16 (times 1/sqrt(H): no save)
//   softmax (fp32)        the probabilities (T, E) fp32
//   topk                  the indices (T, K) int64 (per_expert_scale[index] keeps the same)
//   /= sum                a clone of the values (T, K) fp32 and the sum (T, 1) fp32
//   * per_expert_scale[index]  the renormalized values (T, K) fp32 and the gathered scales (T, K) bf16
//   experts (grouped_mm)  the gather indices of the tokens, of the weights and the inverse permutation
//                         (S') int64 each; the sentinel mask (S', 1) bool; the gathered inputs (S', H)
//                         and the offsets (E) int32 by the first _grouped_mm; gate_up (S', 2 I_e) by
//                         gelu and the product; gelu's output (S', I_e); the product (S', I_e) by the
//                         second _grouped_mm; its output (S', H) and the sorted fp32 weights (S') by
//                         the weighting
TEST(Gemma4Derivation, MoeBlockBesideTheMlp) {
  const nlohmann::json dense = {{"model_type", "gemma4_text"}, {"hidden_size", 256}, {"num_attention_heads", 8},
                                {"num_key_value_heads", 2}, {"head_dim", 32}, {"global_head_dim", 64},
                                {"intermediate_size", 512}, {"num_hidden_layers", 2}, {"vocab_size", 4096},
                                {"hidden_size_per_layer_input", 32}, {"vocab_size_per_layer_input", 4096},
                                {"layer_types", {"sliding_attention", "full_attention"}}};
  nlohmann::json sparse = dense;
  sparse.update({{"enable_moe_block", true}, {"num_experts", 8}, {"top_k_experts", 2}, {"moe_intermediate_size", 128}});
  const int64_t T = 64, H = 256, E = 8, K = 2, I = 128, pairs = T * K;
  const int64_t router = norm_saves(T, H, false) + 2 * T * H * kBf16 + T * E * kFp32 + T * K * kInt64 +
                         T * K * kFp32 + T * kFp32 + T * K * kFp32 + T * K * kBf16;
  const int64_t experts = 3 * pairs * kInt64 + pairs + pairs * H * kBf16 + E * 4 + pairs * 2 * I * kBf16 +
                          pairs * I * kBf16 + pairs * I * kBf16 + pairs * H * kBf16 + pairs * kFp32;
  const int64_t added = 3 * norm_saves(T, H, true) + router + experts;
  for (int64_t layer : {0, 1})
    EXPECT_EQ(census_layer(read(sparse), layer, T).saved_bytes - census_layer(read(dense), layer, T).saved_bytes, added)
        << layer;
  // Its parameters: the router's proj (E, H), scale (H) and per_expert_scale (E), the experts'
  // gate_up_proj (E, 2 I_e, H) and down_proj (E, H, I_e), three norms' (H).
  const LayerParameters with = census_parameters(read(sparse), 0), without = census_parameters(read(dense), 0);
  int64_t total_with = 0, total_without = 0;
  for (const auto& [part, count] : with.parts) total_with += count;
  for (const auto& [part, count] : without.parts) total_without += count;
  EXPECT_EQ(total_with - total_without, E * H + H + E + E * 2 * I * H + E * H * I + 3 * H);
}

}  // namespace
}  // namespace census
