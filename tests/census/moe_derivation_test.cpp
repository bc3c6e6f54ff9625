// Golden numbers derived op by op for the MoE blocks of public models (grouped_mm experts), where no
// oracle case runs at their shapes: what the router, the experts and the shared experts save, their
// FLOPs and parameters, as closed forms a reader can check by hand. The same forms give the oracle's
// numbers at its toy shapes (golden_test.cpp).
//
// Legend: T = tokens (the sequence), H = hidden_size, E = routed experts, K = experts per token,
// S = T * K token-expert pairs, I = an expert's width, Ish = the shared experts' width; bf16 is 2
// bytes, fp32 and int32 4, int64 8, bool 1.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/parts.h"
#include "cli/request.h"
#include "models/registry.h"

namespace census {
namespace {

ModelConfig shipped(const char* name) { return cli::resolve_model(name).take(); }

int64_t saved(const LayerCensus& c, SavedOp op) { return c.saved_by_op[static_cast<size_t>(op)]; }

struct MoeShape {
  int64_t T, H, E, K, I;
  int64_t S() const { return T * K; }
};

// The grouped_mm experts, per token-expert pair: the gathered inputs (S, H) and the gated product
// (S, I) saved by the two _grouped_mm; the activation's output (S, I) saved by the product; the down
// projection (S, H) and the routing weights (S, 1) saved by the weighting; three int64 gather
// indices (S) (perm // K, perm, inv_perm); the sentinel mask (S, 1) bool; the int32 offsets (E).
int64_t experts_ffmm(const MoeShape& x, int64_t weight_bytes) {
  return 2 * x.S() * x.H + 2 * x.S() * x.I + 2 * x.S() * x.I + 2 * x.S() * x.H + weight_bytes * x.S() + 3 * 8 * x.S() +
         x.S() + 4 * x.E;
}
// The up projection (S, 2I), saved by the activation (which is ffAct's) and the product.
int64_t experts_ffact(const MoeShape& x) { return 2 * x.S() * 2 * x.I; }

// Qwen3-MoE's softmax router: the normed input (T, H) bf16 saved by its mm; the fp32 probabilities
// (T, E) by softmax; the int64 indices (T, K) by topk; where it renormalizes (Qwen3-30B-A3B does),
// the in-place division keeps a clone of the fp32 values (T, K) and their sum (T, 1). The weights
// go to the experts in bf16.
TEST(MoeDerivation, Qwen3_30B_A3B_MoeLayerAt4096Tokens) {
  const ModelConfig config = shipped("qwen3-30b-a3b");
  ASSERT_TRUE(config.moe.norm_topk_prob);
  const MoeShape x{4096, config.hidden_size, config.moe.num_experts, config.moe.num_experts_per_tok,
                   config.moe.moe_intermediate_size};
  const LayerCensus c = census_layer(config, 0, x.T);
  const int64_t router = 2 * x.T * x.H + 4 * x.T * x.E + 8 * x.T * x.K + 4 * x.T * x.K + 4 * x.T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, /*bf16 weights*/ 2));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x));

  // FLOPs: the router's T*H*E, each pair's three expert matmuls of H*I.
  const PartCounts flops = census_flops(config, 0, x.T);
  EXPECT_EQ(flops.at("router"), 2 * x.T * x.H * x.E);
  EXPECT_EQ(flops.at("routed"), 2 * x.S() * x.H * 2 * x.I + 2 * x.S() * x.I * x.H);
  const LayerParameters parameters = census_parameters(config, 0);
  EXPECT_EQ(parameters.parts.at("router"), x.E * x.H);
  EXPECT_EQ(parameters.parts.at("routed"), x.E * 3 * x.H * x.I);
}

// Mixtral's router keeps its renormalized weights fp32: the weighting saves them (S, 1) fp32 and
// its output, summed and cast back, is fp32 until then (nothing more saved).
TEST(MoeDerivation, Mixtral_8x7B_At4096Tokens) {
  const ModelConfig config = shipped("mixtral-8x7b");
  const MoeShape x{4096, config.hidden_size, config.moe.num_experts, config.moe.num_experts_per_tok,
                   config.intermediate_size};
  const LayerCensus c = census_layer(config, 0, x.T);
  const int64_t router = 2 * x.T * x.H + 4 * x.T * x.E + 8 * x.T * x.K + 4 * x.T * x.K + 4 * x.T;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, /*fp32 weights*/ 4));
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x));
}

// DeepSeek-V3's router runs in fp32: fp32 copies of the input (T, H) and of the weight (E, H) saved
// by its mm, the sigmoid scores (T, E) saved by sigmoid and gather, the indices (T, K) by gather, and
// the renormalization's clone (T, K) and denominator (T, 1). The group selection's graph reaches no
// loss and keeps nothing. The shared experts, Ish wide, save as a dense MLP on the normed input
// (T, H), which the router's fp32 copy leaves to them.
TEST(MoeDerivation, DeepSeekV3_MoeLayerAt4096Tokens) {
  const ModelConfig config = shipped("deepseek-v3");
  const int64_t layer = config.moe.first_k_dense_replace;  // the first MoE layer
  const MoeShape x{4096, config.hidden_size, config.moe.num_experts, config.moe.num_experts_per_tok,
                   config.moe.moe_intermediate_size};
  const int64_t Ish = config.moe.moe_intermediate_size * config.moe.n_shared_experts;
  const LayerCensus c = census_layer(config, layer, x.T);
  const int64_t router = 4 * x.T * x.H + 4 * x.E * x.H + 4 * x.T * x.E + 8 * x.T * x.K + 4 * x.T * x.K + 4 * x.T;
  const int64_t shared = 2 * x.T * x.H + 3 * 2 * x.T * Ish;
  EXPECT_EQ(saved(c, SavedOp::kFfMM), router + experts_ffmm(x, /*fp32 weights*/ 4) + shared);
  EXPECT_EQ(saved(c, SavedOp::kFfAct), experts_ffact(x) + 2 * x.T * Ish);

  const LayerParameters parameters = census_parameters(config, layer);
  EXPECT_EQ(parameters.parts.at("shared"), 3 * x.H * Ish);
  EXPECT_EQ(parameters.parts.at("router"), x.E * x.H);  // e_score_correction_bias is a buffer
  // MLA: q_a (H -> Rq), its norm, q_b (Rq -> N*(Dn + Dr)), kv_a (H -> Rkv + Dr), its norm,
  // kv_b (Rkv -> N*(Dn + Dv)), o (N*Dv -> H).
  const MlaConfig& m = config.mla;
  const int64_t N = config.num_attention_heads, H = x.H;
  EXPECT_EQ(parameters.parts.at("attention"),
            H * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * N * (m.qk_nope_head_dim + m.qk_rope_head_dim) +
                H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
                m.kv_lora_rank * N * (m.qk_nope_head_dim + m.v_head_dim) + N * m.v_head_dim * H);
}

// The stack: DeepSeek-V3's first_k_dense_replace dense layers, the MoE rest, then its MTP layer.
TEST(MoeDerivation, DeepSeekV3Stack) {
  const std::vector<LayerGroup> stack = layer_stack(shipped("deepseek-v3"));
  ASSERT_EQ(stack.size(), 3u);
  EXPECT_EQ(stack[0].kind, "dense");
  EXPECT_EQ(stack[0].count, 3);
  EXPECT_EQ(stack[1].kind, "moe");
  EXPECT_EQ(stack[1].count, 58);
  EXPECT_EQ(stack[2].kind, "moe");
  EXPECT_EQ(stack[2].count, 1);
  EXPECT_TRUE(stack[2].mtp);
}

// TP divides the experts' width, not their number: per pair, the saved expert activations halve.
TEST(MoeDerivation, TensorParallelismHalvesTheExpertsWidth) {
  const ModelConfig config = shipped("qwen3-30b-a3b");
  const ModelConfig rank = tp_config(config, 2);
  EXPECT_EQ(rank.moe.moe_intermediate_size, config.moe.moe_intermediate_size / 2);
  EXPECT_EQ(rank.moe.num_experts, config.moe.num_experts);
  const LayerCensus one = census_layer(config, 0, 1024), two = census_layer(rank, 0, 1024);
  EXPECT_EQ(saved(two, SavedOp::kFfAct) * 2, saved(one, SavedOp::kFfAct));
}

}  // namespace
}  // namespace census
