// Golden numbers of Qwen3-Next's gated delta net derived op by op, as closed forms a reader can check
// by hand against the op lists in nn/gated_delta_rule.h and models/qwen3_next.h. The shapes are
// those of Qwen3-Next-80B-A3B (its MoE feed-forward aside: these layers are built dense) at 4096 tokens
// and at 100, which pads to a second chunk.
//
// Legend: S = seq_length, S' = S padded to whole chunks of 64, C = S'/64, Nk / Nv = key / value heads,
// Dk / Dv = their head dims, r = Nv / Nk, K = conv kernel, W = 2*Nk*Dk + Nv*Dv (the conv's channels),
// H = hidden_size; bf16 is 2 bytes, fp32 4.
#include <gtest/gtest.h>

#include "census/layer_census.h"
#include "census/parts.h"
#include "models/registry.h"

namespace census {
namespace {

struct Gdn {
  int64_t S, Nk, Nv, Dk, Dv, K, H;
  int64_t r() const { return Nv / Nk; }
  int64_t W() const { return 2 * Nk * Dk + Nv * Dv; }
  int64_t C() const { return (S + 63) / 64; }
  int64_t Sp() const { return 64 * C(); }
};

ModelConfig qwen3_next(const Gdn& x) {
  auto config = read_config({{"model_type", "qwen3_next"}, {"hidden_size", x.H}, {"intermediate_size", 5120},
                             {"num_hidden_layers", 4}, {"mlp_only_layers", {0, 1, 2, 3}}, {"linear_num_key_heads", x.Nk},
                             {"linear_num_value_heads", x.Nv}, {"linear_key_head_dim", x.Dk},
                             {"linear_value_head_dim", x.Dv}, {"linear_conv_kernel_dim", x.K}});
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

int64_t saved(const LayerCensus& c, SavedOp op) { return c.saved_by_op[static_cast<size_t>(op)]; }

// attMM: what the gated delta net saves outside its rule and its norm.
int64_t gdn_att_mm(const Gdn& x) {
  return 2 * x.S * x.H                      // the input norm's output, saved by in_proj_qkvz and in_proj_ba
         + 2 * x.S * x.W()                  // cat(q, k, v) (1, S, W), saved by the convolution
         + 2 * x.W() * (x.S + x.K - 1)      // the conv's output, whose slice silu saves
         + 2 * x.S * x.Nv                   // beta = sigmoid(b), its result
         + 4 * x.Nv + 4 * x.Nv              // exp(A_log.float()) and its negation, saved by exp and the mul
         + 4 * x.S * x.Nv + 4 * x.S * x.Nv  // a.float() + dt_bias (softplus's input) and softplus's output
         + 2 * x.S * x.Nv * x.Dv;           // the gated norm's output, saved by out_proj
}

// linrec of the kernel's contract: the repeated q and k and their l2 norms, the rule's saves.
int64_t triton_linrec(const Gdn& x) {
  const int64_t repeated = x.r() > 1 ? 2 * (2 * x.S * x.Nv * x.Dk) : 0;  // repeat_interleave copies, saved by x*x
  return repeated + 2 * (2 * x.S * x.Nv)       // l2norm's rsqrt results (1, S, Nv, 1) bf16
         + 2 * (2 * x.S * x.Nv * x.Dk)          // the l2-normalised q and k, saved by the contract
         + 2 * x.S * x.W()                      // v: a view of silu's output, whose whole storage is kept
         + 4 * x.S * x.Nv                       // the fp32 cumulated gates (1, S, Nv)
         + 2 * x.S * x.Nv * 64;                 // the chunk matrix (1, S, Nv, 64) bf16
}

// linrec of Transformers' eager chunked rule (Note: per chunk c of C, the state carried into it).
int64_t eager_linrec(const Gdn& x) {
  const int64_t Hv = x.Nv, C = x.C(), Sp = x.Sp();
  const int64_t block = 4 * C * Hv * 64 * 64;  // one fp32 (1, Nv, C, 64, 64) tensor
  int64_t bytes = (x.r() > 1 ? 2 * (2 * x.S * Hv * x.Dk) : 2 * x.S * x.W())  // l2norm's inputs (x*x saves x)
                  + 2 * (2 * x.S * Hv);                                          // their rsqrt results
  bytes += 4 * Sp * Hv * (x.Dk + x.Dv) + 4 * Sp * Hv;  // padded fp32 key, value (saved by the beta muls) and beta
  bytes += 4 * Sp * Hv * x.Dk;                         // query * Dk^-0.5, saved by each chunk's matmuls
  bytes += 4 * Sp * Hv * (x.Dk + x.Dv);                // k_beta and v_beta
  bytes += 64 * 64;                                    // the bool triu mask masked_fill keeps
  bytes += 3 * block;                                  // exp of the decays, the tril'ed decay_mask, k_beta @ key^T
  bytes += 4 * C * Hv * (2016 + 85344);                // the 63-step loop's row and sub clones: sum i, sum i^2
  bytes += block;                                      // attn + eye, saved by both matmuls
  bytes += 4 * C * Hv * 64 + 4 * Sp * Hv * x.Dk;       // exp(g), and k_beta * exp(g) saved by its matmul
  if (C > 1) bytes += 4 * Sp * Hv * x.Dk;              // k_cumdecay, saved once a state needs grad
  const int64_t state = 4 * Hv * x.Dk * x.Dv, tile = 4 * Hv * 64 * 64;
  for (int64_t c = 0; c < C; ++c) {
    bytes += tile + state + 4 * Hv * 64 + tile + 4 * Hv * 64 * x.Dv;  // q k^T, the state, exp(g_c), attn, v_new
    if (c > 0) bytes += 4 * Hv * 64 * x.Dk;                           // q * exp(g_c), once the state needs grad
    if (c + 1 < C) bytes += 4 * Hv + 4 * Hv * 64 + 4 * Hv * 64 * x.Dk;  // the next state's decays and scaled k
  }
  return bytes;
}

class GdnDerivation : public ::testing::TestWithParam<int64_t> {};

TEST_P(GdnDerivation, Qwen3Next80BShapesSaveWhatTheOpListsSay) {
  const Gdn x{GetParam(), 16, 32, 128, 128, 4, 2048};
  ModelConfig config = qwen3_next(x);
  for (const nn::GdnBackend backend : {nn::GdnBackend::kEager, nn::GdnBackend::kTriton}) {
    config.gdn_backend = backend;
    const LayerCensus c = census_layer(config, 0, x.S);
    EXPECT_EQ(saved(c, SavedOp::kAttMM), gdn_att_mm(x));
    EXPECT_EQ(saved(c, SavedOp::kLinrec), backend == nn::GdnBackend::kEager ? eager_linrec(x) : triton_linrec(x))
        << nn::gdn_backend_name(backend);
  }
}

// FLOPs by part: the projections' toward the attention, the rule's matmuls toward linrec, whatever the
// backend (hf_families.md §2.6, per value head):
//   outside the chunk loop 2*C*64*64*(Dk + Dv + Dk);  inside C*(2*64*(64*Dk + 64*Dv + 2*Dk*Dv) + 2*Dk*64*Dv).
TEST_P(GdnDerivation, FlopsOfTheProjectionsAndTheChunkedRule) {
  const Gdn x{GetParam(), 16, 32, 128, 128, 4, 2048};
  ModelConfig config = qwen3_next(x);
  config.gdn_backend = nn::GdnBackend::kTriton;  // FLOPs are the eager rule's either way
  const PartCounts flops = census_flops(config, 0, x.S);
  const int64_t qkvz = 2 * x.Nk * x.Dk + 2 * x.Nv * x.Dv, ba = 2 * x.Nv;
  EXPECT_EQ(flops.at("attention"), 2 * x.S * x.H * (qkvz + ba) + 2 * x.S * x.Nv * x.Dv * x.H);
  const int64_t C = x.C();
  const int64_t per_head = 2 * C * 64 * 64 * (x.Dk + x.Dv + x.Dk) +
                           C * (2 * 64 * (64 * x.Dk + 64 * x.Dv + 2 * x.Dk * x.Dv) + 2 * x.Dk * 64 * x.Dv);
  EXPECT_EQ(flops.at("linrec"), x.Nv * per_head);
  EXPECT_EQ(flops.at("ffn"), 3 * 2 * x.S * x.H * 5120);
}

INSTANTIATE_TEST_SUITE_P(SeqLengths, GdnDerivation, ::testing::Values(4096, 100));

}  // namespace
}  // namespace census
