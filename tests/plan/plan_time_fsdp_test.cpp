// FSDP2's terms of the step-time estimate (plan/plan_time.cpp) in the dtypes its mixed-precision policy
// gives, as census step --fsdp runs it (step/fsdp.h): without fp32 master weights its shards are the
// model's bf16 and it reduce-scatters bf16 gradients, with them its shards and moments are fp32 and it
// reduces in fp32 (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)). Either way it moves, a
// layer a pass, the bytes ZeRO-3 moves in the same dtypes: the bf16 all-gather of the parameters, the
// reduce-scatter of the gradients. So its estimate is ZeRO-3's of the same shape with bf16 gradients
// and states, term for term, and with fp32 master weights ZeRO-3's with fp32 gradients in every term
// but the optimizer step's: there FSDP2's fp32 shards are their own master, and AdamW reads and writes
// 28 B a parameter (fp32 parameter 4 + 4, fp32 gradient 4, two fp32 moments 8 + 8) where ZeRO-3's bf16
// parameters beside fp32 masters move 32 (2 + 2, 4, master and moments 12 + 12).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/registry.h"
#include "plan/plan_device.h"
#include "plan/plan_layout.h"
#include "plan/plan_time.h"

namespace census {
namespace {

ModelConfig llama_toy() {
  auto config = read_config(nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192})"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

double term(const TimeEstimate& e, const std::string& name) {
  for (const TimeTerm& t : e.terms)
    if (t.name == name) return t.seconds;
  ADD_FAILURE() << "no term " << name;
  return -1;
}

TEST(PlanTimeFsdp, MovesWhatZero3MovesInItsPolicysDtypes) {
  const ModelConfig c = llama_toy();
  RunShape run;
  run.gpus = 16, run.gpus_per_node = 8, run.seq_length = 128, run.global_batch = 32;
  // DP 16 across two nodes, one sequence a micro-batch, two micro-batches; and the same on a 2-stage pipeline.
  for (const int64_t pp : {1, 2}) {
    Layout zero3;
    zero3.dp = 16 / pp, zero3.pp = pp;
    zero3.split = balanced_splits(c.num_hidden_layers, pp, 1).front();
    zero3.micro_batch_size = 1, zero3.micro_batches = run.global_batch / zero3.dp;
    zero3.zero = 3;
    Layout fsdp = zero3;
    fsdp.zero = 0, fsdp.fsdp = true;
    const std::string what = "PP " + std::to_string(pp);

    TimeOptions bf16, fp32_masters, fp32_masters_and_grads;
    fp32_masters.fp32_master_weights = true;
    fp32_masters_and_grads.fp32_master_weights = fp32_masters_and_grads.fp32_gradients = true;
    const Device& h100 = *find_device("h100");
    const TimeEstimate fsdp_bf16 = TimeModel(c, run, h100, bf16).estimate(fsdp, true);
    const TimeEstimate zero3_bf16 = TimeModel(c, run, h100, bf16).estimate(zero3, true);
    const TimeEstimate fsdp_mixed = TimeModel(c, run, h100, fp32_masters).estimate(fsdp, true);
    const TimeEstimate zero3_fp32 = TimeModel(c, run, h100, fp32_masters_and_grads).estimate(zero3, true);
    ASSERT_EQ(fsdp_bf16.terms.size(), zero3_bf16.terms.size());
    for (size_t i = 0; i < fsdp_bf16.terms.size(); ++i) {
      EXPECT_EQ(fsdp_bf16.terms[i].seconds, zero3_bf16.terms[i].seconds) << what << " bf16: " << fsdp_bf16.terms[i].name;
      if (fsdp_mixed.terms[i].name == "optimizer_step") continue;
      EXPECT_EQ(fsdp_mixed.terms[i].seconds, zero3_fp32.terms[i].seconds) << what << " fp32: " << fsdp_mixed.terms[i].name;
    }
    EXPECT_EQ(fsdp_bf16.seconds, zero3_bf16.seconds) << what;
    const double fsdp_step = term(fsdp_mixed, "optimizer_step"), zero3_step = term(zero3_fp32, "optimizer_step");
    EXPECT_DOUBLE_EQ(fsdp_step, zero3_step * 28 / 32) << what;
    EXPECT_DOUBLE_EQ(fsdp_mixed.seconds, zero3_fp32.seconds - (zero3_step - fsdp_step)) << what;
    // The dtypes decide: fp32 reduce-scatters take longer, fp32 shards and moments more of HBM.
    EXPECT_GT(term(fsdp_mixed, "fsdp_communication"), term(fsdp_bf16, "fsdp_communication")) << what;
    EXPECT_GT(term(fsdp_mixed, "optimizer_step"), term(fsdp_bf16, "optimizer_step")) << what;
  }
}

}  // namespace
}  // namespace census
