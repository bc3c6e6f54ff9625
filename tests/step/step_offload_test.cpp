// Activation offloading in a whole step (census step --offload-activations), derived by hand on the Llama
// toy of the steady-state oracle's cases (tests/data/step/steady/, where every offloading case is compared
// whole, its host record too, by step_steady_oracle_test.cpp): hidden 256, intermediate 512, vocabulary
// 4,096, 4 layers; 128 tokens, one micro-batch, the for-loop AdamW.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "step/step_census.h"
#include "step_cases.h"

namespace census {
namespace {

ModelConfig llama_toy() {
  auto config =
      read_config(testing::step_case("llama_toy_L4_s128_single_adamw_steady", "step/steady").at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

StepOptions stepping(Recompute recompute, bool offload) {
  StepOptions o;
  o.seq_length = 128;
  o.optimizer = StepOptimizer::kAdamW;
  o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  o.recompute = recompute;
  if (offload) o.offload_activations = OffloadPolicy::kTrl;
  return o;
}

// Under full checkpointing every decoder layer's saves are the checkpoint's; the offloading packs the
// 15 saves made outside them, in order:
//    1  the embedding's input ids, int64 [1, 128]              1,024 B  offloaded
//  2-5  each layer's input (_NoopSaveInputs), bf16 [1,128,256] 65,536 B  offloaded, 4 of them
//    6  the final norm's fp32 input, saved by pow             131,072 B  offloaded
//  7,8  its rsqrt, fp32 [1, 128, 1], by rsqrt and mul            512 B  kept: under 1 KiB
//    9  its fp32 input again, by mul                                      kept: the key of 6
//   10  its bf16 output, by the weight's mul                   65,536 B  offloaded
//   11  the weight, bf16 [256]                                     512 B  kept: under 1 KiB
//       (the head's saves: kept by its NoOpManager, never packed)
//   12  log_softmax's fp32 [128, 4096], by _log_softmax     2,097,152 B  offloaded
//   13  the same, by nll_loss                                             kept: the key of 12
//   14  the shifted labels, int64 [128] at offset 1             1,024 B  cloned, then offloaded
//   15  nll_loss's total_weight, fp32 []                             4 B  kept: under 1 KiB
// 9 offloaded, 2,557,952 B on the host at once. The backward's first node (NllLossBackward0) finds 14 in
// the forward stash; the other 8 come back: 2,556,928 B.
TEST(StepOffload, TheCheckpointedLlamaOffloadsItsLayerInputsAndItsLoss) {
  const StepCensus s = testing::step_or_throw(llama_toy(), stepping(Recompute::kFull, true));
  ASSERT_TRUE(s.host.has_value());
  const int64_t host = 1'024 + 4 * 65'536 + 131'072 + 65'536 + 2'097'152 + 1'024;
  EXPECT_EQ(host, 2'557'952);
  EXPECT_EQ(s.host->peak_bytes, host);
  EXPECT_EQ(s.host->offloaded_bytes, host);
  EXPECT_EQ(s.host->brought_back_bytes, host - 1'024);
  EXPECT_EQ(s.host->pinned_reserved_bytes, host);  // each a power of two: its own block
  EXPECT_EQ(s.offload.packs, 15);
  EXPECT_EQ(s.offload.offloaded, 9);
  EXPECT_EQ(s.offload.kept_small, 4);
  EXPECT_EQ(s.offload.deduplicated, 2);
  EXPECT_EQ(s.offload.kept_parameter, 0);
  EXPECT_EQ(s.offload.copied_before_offload, 1);
  EXPECT_EQ(s.offload.brought_back, 8);
  // The forward peaks at nll_loss_forward, the stash then holding 10, 12 and 14. Of what the
  // checkpointed step holds there, the four layer inputs have gone (their frames keep none); the
  // final norm's fp32 input stays (9 keeps it), and the labels' clone is new.
  const StepCensus kept = testing::step_or_throw(llama_toy(), stepping(Recompute::kFull, false));
  EXPECT_FALSE(kept.host.has_value());
  EXPECT_EQ(s.forward_peak.bytes, kept.forward_peak.bytes - 4 * 65'536 + 1'024);
  EXPECT_EQ(s.analysis.peak.bytes, kept.analysis.peak.bytes);  // AdamW's step: no activation is live
}

// torchtune's recipe enters its context around the model's forward alone, and its rules keep no storage
// keys: with torchtune's chunked loss (the head's chunks under the NoOpManager) the loss saves nothing
// here, and of the final norm's saves the fp32 input goes twice. 11 packs:
//    1  the input ids                                            1,024 B  offloaded
//  2-5  each layer's input                                  4 x 65,536 B  offloaded
//    6  the final norm's fp32 input, by pow                    131,072 B  offloaded
//    7  its rsqrt, by rsqrt                                        512 B  kept: under 1 KiB
//  8,9  its fp32 input again and the rsqrt, by mul             131,072 B  offloaded; 512 B kept
// 10,11 the weight [256] (512 B, kept) and its bf16 output      65,536 B  offloaded
// 590,848 B on the host; the backward's first node to unpack one (the weight's mul) finds 11 in the
// forward stash, which the context left as it was: 525,312 B come back.
TEST(StepOffload, TheTorchtuneRecipeOffloadsTheModelsForwardAlone) {
  StepOptions o = stepping(Recompute::kFull, false);
  o.offload_activations = OffloadPolicy::kTorchtune;
  o.loss = nn::CausalLMLoss::kTorchtuneChunked;
  const StepCensus s = testing::step_or_throw(llama_toy(), o);
  ASSERT_TRUE(s.host.has_value());
  const int64_t host = 1'024 + 4 * 65'536 + 131'072 + 131'072 + 65'536;
  EXPECT_EQ(host, 590'848);
  EXPECT_EQ(s.host->peak_bytes, host);
  EXPECT_EQ(s.host->brought_back_bytes, host - 65'536);
  EXPECT_EQ(s.offload.packs, 11);
  EXPECT_EQ(s.offload.offloaded, 8);
  EXPECT_EQ(s.offload.kept_small, 3);
  EXPECT_EQ(s.offload.deduplicated, 0);
}

// What TRL's context cannot be priced beside: each refused in one line naming both.
TEST(StepOffload, RefusesWhatItDoesNotPrice) {
  const ModelConfig config = llama_toy();
  const auto refusal = [&](const StepOptions& o) {
    const Status status = check_step_options(config, o);
    return status.ok() ? std::string("accepted") : status.refusal().message();
  };
  StepOptions pipeline = stepping(Recompute::kNone, true);
  pipeline.pipeline_stages = 2;
  EXPECT_EQ(refusal(pipeline).substr(0, 38), "--offload-activations trl with --pp: o");
  StepOptions reentrant = stepping(Recompute::kFullReentrant, true);
  EXPECT_EQ(refusal(reentrant).substr(0, 64), "--offload-activations trl with --recompute full-reentrant: a ree");
  StepOptions liger = stepping(Recompute::kNone, false);
  liger.loss = nn::CausalLMLoss::kLigerFlce;
  liger.offload_activations = OffloadPolicy::kTorchtune;
  EXPECT_EQ(refusal(liger).substr(0, 61), "--offload-activations torchtune with --loss liger-flce: torch");
  liger.offload_activations = OffloadPolicy::kTrl;
  EXPECT_EQ(refusal(liger), "accepted");
  EXPECT_EQ(refusal(stepping(Recompute::kTorchtitanOp, true)).substr(0, 68),
            "--offload-activations trl with --recompute torchtitan-op: torchtitan");
  EXPECT_EQ(refusal(stepping(Recompute::kSelective, true)), "accepted");
  StepOptions torchtune_trl_loss = stepping(Recompute::kNone, false);
  torchtune_trl_loss.offload_activations = OffloadPolicy::kTorchtune;
  torchtune_trl_loss.loss = nn::CausalLMLoss::kTrlChunkedNll;
  EXPECT_EQ(refusal(torchtune_trl_loss).substr(0, 63), "--offload-activations torchtune with --loss trl-chunked-nll: to");
  StepOptions every_other = stepping(Recompute::kNone, true);
  every_other.recompute_every_nth_layer = 2;
  every_other.micro_batches = 4;
  EXPECT_EQ(refusal(every_other), "accepted");
}

}  // namespace
}  // namespace census
