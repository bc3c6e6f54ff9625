// The trainer's loss (nn/loss.h), each number derived here by hand on the Llama toy of the steady-state
// oracle's cases (tests/data/step/steady/, where every case of TRL's chunked loss is compared whole by
// step_steady_oracle_test.cpp): Transformers' ForCausalLMLoss on the whole logits, TRL's chunked loss
// (nn/trl_chunked_loss.h), which makes no logits and computes the loss in checkpointed chunks of 256
// tokens, Liger's fused linear cross-entropy (nn/liger_fused_linear_cross_entropy.h), which makes
// both gradients in the forward, and torchtune's two losses (nn/torchtune_loss.h).
//
// The toy: hidden H = 256, vocabulary V = 4,096, 4 layers; P = 8,655,360 B of bf16 parameters. One
// sequence of S = 600 tokens, so T = S - 1 = 599 tokens are scored by TRL, in three chunks: 256, 256
// and 87. No optimizer: the step is the forward and the backward.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

constexpr int64_t kS = 600, kT = kS - 1, kH = 256, kV = 4'096, kChunk = 256;

ModelConfig llama_toy() {
  auto config =
      read_config(testing::step_case("llama_toy_L4_s600_single_adamw_trl_chunked_nll_steady", "step/steady").at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepCensus run(nn::CausalLMLoss loss) {
  StepOptions o;
  o.seq_length = kS;
  o.optimizer = StepOptimizer::kNone;
  o.loss = loss;
  return testing::step_or_throw(llama_toy(), o);
}

// What each loss leaves saved at the forward's end, beside the layers' own saves (the same in both):
//   hf    log_softmax's fp32 (S, V) result, which nll_loss saves too    600 x 4,096 x 4 = 9,830,400
//         the labels padded by one, which the shifted view keeps        601 x 8         =     4,808
//         nll_loss's total_weight                                                        =         4
//         the head's input, the final norm's (S, H) bf16, kept by mm    600 x 256 x 2   =   307,200
//                                                                                           10,142,412
//   TRL   the hidden states gathered into (T, H) bf16, which each chunk's checkpoint keeps
//                                                                        599 x 256 x 2   =   306,688
//         the sort's int64 order, kept by IndexBackward0                 599 x 8         =     4,792
//         the labels gathered, kept by the chunks' checkpoints           599 x 8         =     4,792
//         the valid count, kept by loss / n_valid's DivBackward0                         =         8
//                                                                                              316,280
// Both keep their loss (4 B). Nothing of a chunk's forward is saved: its (256, V) fp32 logits, log-
// probabilities and their entropy terms are made and freed chunk by chunk.
TEST(StepLosses, TrlChunkedLossSavesTheGatheredHiddenStatesInsteadOfTheLogits) {
  const StepCensus hf = run(nn::CausalLMLoss::kForCausalLM);
  const StepCensus trl = run(nn::CausalLMLoss::kTrlChunkedNll);
  const int64_t hf_saves = kS * kV * 4 + (kS + 1) * 8 + 4 + kS * kH * 2;
  const int64_t trl_saves = kT * kH * 2 + kT * 8 + kT * 8 + 8;
  ASSERT_EQ(hf.analysis.phases[1].name, "F0");
  EXPECT_EQ(hf.analysis.phases[1].live_at_end - trl.analysis.phases[1].live_at_end, hf_saves - trl_saves);  // 9,826,132
}

// The backward's most under TRL's loss is in the recompute of the second chunk of 256 tokens it runs (the
// engine runs the last chunk, of 87, first), at its row sums of the entropy, over what the backward
// started from:
//   the fp32 copy of the head, which mm's backward keeps          4,096 x 256 x 4   = 4,194,304
//   the chunk's fp32 hidden states, which it keeps too            256 x 256 x 4     =   262,144
//   the head's bf16 gradient, from the first chunk's backward     4,096 x 256 x 2   = 2,097,152
//   the chunk's fp32 (256, V) logits, log-probabilities (kept by log_softmax), their exp (kept by exp)
//   and the exp's product with them                           4 x 256 x 4,096 x 4  = 16,777,216
//   the gathered hidden states' gradient, every chunk's added into one (T, H) bf16   =   306,688
//   the row sums (256) fp32 1,024; the chunk's mask (256) bool 256                   =     1,280
//   the accuracy, the chunk's loss and nll_loss's total weight; the root gradient and
//   DivBackward0's, 0-d fp32 each                                                    =        20
// less the valid count DivBackward0 let go of                                        =        -8
TEST(StepLosses, TrlChunkedLossBackwardHoldsOneChunkAndAnFp32CopyOfTheHead) {
  const StepCensus trl = run(nn::CausalLMLoss::kTrlChunkedNll);
  const int64_t fp32_head = kV * kH * 4, bf16_head = kV * kH * 2;
  const int64_t chunk_rows = kChunk * kV * 4;
  const int64_t expected = fp32_head + kChunk * kH * 4 + bf16_head + 4 * chunk_rows + kT * kH * 2 + kChunk * 4 +
                           kChunk + 5 * 4 - 8;
  EXPECT_EQ(trl.backward_peak.phase, "B0");
  EXPECT_EQ(trl.backward_peak.op, "aten.sum.dim_IntList");
  EXPECT_EQ(trl.backward_peak.bytes - trl.analysis.phases[2].live_at_start, expected);  // 23,638,796
}

// Liger keeps only the gradients its forward made: the hidden states' (S, H) bf16 and the head's (V, H)
// bf16, 307,200 + 2,097,152 = 2,404,352 B, where the whole logits' loss keeps 10,142,412 B (above).
TEST(StepLosses, LigerKeepsTheGradientsItsForwardMade) {
  const StepCensus hf = run(nn::CausalLMLoss::kForCausalLM);
  const StepCensus liger = run(nn::CausalLMLoss::kLigerFlce);
  const int64_t hf_saves = kS * kV * 4 + (kS + 1) * 8 + 4 + kS * kH * 2;
  const int64_t liger_saves = kS * kH * 2 + kV * kH * 2;
  EXPECT_EQ(hf.analysis.phases[1].live_at_end - liger.analysis.phases[1].live_at_end, hf_saves - liger_saves);  // 7,738,060
}

// Liger's chunks: cdiv(V, H) = 16, so chunk_size = next_power_of_2(cdiv(600, 16) = 38) = 64 tokens. The
// forward's most is the first chunk's fp32 copy of its head gradient's product, over what the forward
// ends with (the two gradients and the loss, 4 B):
//   the last hidden state (S, H) bf16, which the model's frame holds through the loss   307,200
//   the labels (S) int64, which nothing saves: the step's forward lets go of them          4,800
//   the padded labels (S + 1) int64, of which the shifted ones are a view                  4,808
//   loss_1d (S) fp32 and target_mask (S) bool                                              3,000
//   the chunk's logits (64, V) bf16                                                       524,288
//   mm(grad_logits_chunk.t(), _input_chunk) (V, H) bf16 and its .float() copy       6,291,456
// less the loss, not made yet                                                                   -4
TEST(StepLosses, LigerForwardHoldsAChunksLogitsAndTwoCopiesOfTheHeadsGradient) {
  const StepCensus liger = run(nn::CausalLMLoss::kLigerFlce);
  const int64_t chunk = 64;
  const int64_t expected = kS * kH * 2 + kS * 8 + (kS + 1) * 8 + kS * 4 + kS + chunk * kV * 2 + kV * kH * (2 + 4) - 4;
  EXPECT_EQ(liger.forward_peak.phase, "F0");
  EXPECT_EQ(liger.analysis.phases[1].peak.op, "aten._to_copy.default");
  EXPECT_EQ(liger.forward_peak.bytes - liger.analysis.phases[1].live_at_end, expected);  // 7,135,548
}

// torchtune's chunked loss (nn/torchtune_loss.h) saves, in eager mode, what the whole logits' loss saves:
// each chunk's log_softmax keeps its fp32 result, and the eight make the whole (S, V). Its labels are
// torchtune's, shifted already, so nothing is padded; what differs is small:
//   hf         the labels padded by one (S + 1) int64, one total_weight              4,808 + 4
//   torchtune  the labels themselves (S) int64, of which each chunk's are a view     4,800
//              eight total_weights, one a chunk                                     8 x 4 = 32
//              the valid count (int64), kept by total_loss / total_elements                8
// so torchtune's forward ends 28 B above hf's.
TEST(StepLosses, TorchtuneChunkedLossSavesTheWholeLogProbabilitiesInEagerMode) {
  const StepCensus hf = run(nn::CausalLMLoss::kForCausalLM);
  const StepCensus chunked = run(nn::CausalLMLoss::kTorchtuneChunked);
  const int64_t hf_small = (kS + 1) * 8 + 4;
  const int64_t chunked_small = kS * 8 + 8 * 4 + 8;
  EXPECT_EQ(chunked.analysis.phases[1].live_at_end - hf.analysis.phases[1].live_at_end, chunked_small - hf_small);
}

// What it does save is the transient: its forward's most is at the last chunk's nll_loss, over what the
// forward ends with:
//   the eight chunks' bf16 logits, which the model's output list holds through the loss   600 x 4,096 x 2
//   the last chunk's fp32 copy, 75 = 600 / 8 tokens, F.cross_entropy's argument until it returns
//                                                                                          75 x 4,096 x 4
//   the running total beside the chunk's loss, where the forward ends with their quotient alone     4
// = 6,144,004 B, where the whole logits' loss holds an fp32 copy of all of them (9,830,400 B) instead.
TEST(StepLosses, TorchtuneChunkedLossUpcastsOneChunkAtATime) {
  const StepCensus chunked = run(nn::CausalLMLoss::kTorchtuneChunked);
  const int64_t expected = kS * kV * 2 + kS / 8 * kV * 4 + 4;
  EXPECT_EQ(chunked.analysis.phases[1].peak.op, "aten.nll_loss_forward.default");
  EXPECT_EQ(chunked.forward_peak.bytes - chunked.analysis.phases[1].live_at_end, expected);
}

// torchtune's linear loss gathers the T = S - 1 tokens whose labels are not ignore_index (torchtune's
// dataset ignores each row's last) and runs the head on them chunk by chunk. It saves:
//   each chunk's fp32 log-probabilities, T rows in all                 599 x 4,096 x 4 = 9,814,016
//   the gathered (T, H) bf16 hidden states, which the chunks' mm keep  599 x 256 x 2   =   306,688
//   the gathered labels (T) int64, the chunks' nll_loss targets        599 x 8         =     4,792
//   the index, nonzero's (T, 1) int64, kept by IndexSelectBackward0   599 x 8         =     4,792
//   eight total_weights                                                8 x 4           =        32
// while hf keeps 10,142,408 B besides its loss (the first test): 12,092 B more.
TEST(StepLosses, TorchtuneLinearLossSavesTheGatheredTokensOnly) {
  const StepCensus hf = run(nn::CausalLMLoss::kForCausalLM);
  const StepCensus linear = run(nn::CausalLMLoss::kTorchtuneLinear);
  const int64_t hf_saves = kS * kV * 4 + (kS + 1) * 8 + 4 + kS * kH * 2;
  const int64_t linear_saves = kT * kV * 4 + kT * kH * 2 + kT * 8 + kT * 8 + 8 * 4;
  EXPECT_EQ(hf.analysis.phases[1].live_at_end - linear.analysis.phases[1].live_at_end, hf_saves - linear_saves);
}

}  // namespace
}  // namespace census
