// One rank of a parallel training step against the parallel step oracle (torch 2 + Transformers 5 on fake
// tensors and torch.distributed's fake process group, rank 0 of a real fully_shard / parallelize_module
// step, every storage the rank allocates tracked), copied into tests/data/step/parallel/: the Llama and
// Qwen3-MoE toys at 128 tokens (hidden 256, 8 heads, 2 KV heads, head_dim 32, vocab 4096, 4 layers;
// Qwen3-MoE 8 experts top-2 of width 256), and the other families DTensor's plan names (Mistral, Qwen2,
// Qwen3, Mixtral) at their step oracle toys, each layout's `parallel` record mapped onto StepOptions one to
// one. Every number to the byte, FSDP2's parts of `other` included, for every layout: the control (world 1),
// FSDP2 over 4 (fp32 shards under MixedPrecisionPolicy(bf16, fp32), and bf16 shards), TP 2 with and without
// sequence parallelism (with loss_parallel), FSDP2 2 x TP 2 with SP, and FSDP2 over 4 (both dtypes) under
// CPUOffloadPolicy, the host's side too (census_oracle_parallel_cpu_offload.py), and torchao's Float8Linear
// under each of its three recipes, alone and under FSDP2 over 4 (census_oracle_parallel_fp8.py). The Llama and Qwen3-MoE toys' FSDP2
// 4 (both dtypes), TP 2 with SP and FSDP2 2 x TP 2 layouts are also run for two steps (`*_steady`, step 2;
// `*_first`, its step 1) with the for-loop and the foreach AdamW (and the fused one under FSDP2); where
// PyTorch itself refuses the step (foreach or fused AdamW over a list that mixes DTensors and plain
// tensors: Qwen3-MoE's router, experts and q/k norms under DTensor's plan alone, Llama's norms without
// sequence parallelism), the case records its error and Census refuses it.
//
// What FSDP2 adds, by hand, for llama_toy_L4_s128_fsdp4_single (4 ranks, fp32 shards under
// MixedPrecisionPolicy(bf16, fp32)): the shards hold 4,327,680 parameters / 4 x 4 B = 4,327,680 B. The
// root unit (embedding 4096 x 256, final norm 256, head 4096 x 256: 2,097,408 parameters) gathers
// 524,352 elements a rank: a bf16 copy-in of 1,048,704 B, the bf16 output 4 x 1,048,704 = 4,194,816 B,
// then its unsharded bf16 parameters 2,097,152 + 512 + 2,097,152 = 4,194,816 B, alive through the whole
// forward (the root reshards when the model returns). A layer gathers 139,392 elements a rank (its 557,568
// parameters / 4): its unsharded parameters are 1,115,136 B, and its all-gather output, 1,115,136 B, is
// kept until the next unit's copy-out. At the loss (the forward's peak, F0 at nll_loss_forward) the rank
// holds the shards 4,327,680 + buffers 128 + inputs 2,048 + the root's unsharded parameters 4,194,816 +
// the last layer's (never resharded after forward) 1,115,136 + the last all-gather output 1,115,136 + the
// control's activations there: 21,655,952 B.
//
// And for llama_toy_L4_s128_tp2_sp_single (TP 2, SP, loss_parallel): a layer holds q 128 x 256, k and v
// 32 x 256, o 256 x 128, gate, up and down 256 x 256 each (278,528) and its two norms whole (512):
// 279,040 parameters; with 4 layers, the embedding's and the head's 2048 x 256 rows each and the final
// norm, 2,164,992 parameters, 4,329,984 B in bf16. The embedding's gradient is the whole 4096 x 256 table
// (a replicated gradient of the Shard(0) table), 1,048,576 B more than its shard: 5,378,560 B of gradients.
//
// And FSDP2's padding, for llama_toy_L4_s128_fsdp3_bf16_single (3 ranks, bf16 shards): each unsharded
// parameter's storage is its dim 0 padded to a multiple of 3, as its all-gather output part is. At the
// peak (F0, the loss) the root and the last layer are unsharded. The root: the embedding and the head
// 4096 -> 4098 rows of 256 (2 x 1,024 B more) and the final norm 256 -> 258 (4 B): 2,052 B. The last
// layer: q and o 256 -> 258 rows of 256, k and v 64 -> 66 rows of 256 (4 x 1,024 B), gate and up 512 ->
// 513 rows of 256 (2 x 512 B), down 256 -> 258 rows of 512 (2,048 B), its two norms (2 x 4 B): 7,176 B.
// 9,228 B above the unpadded parameters: fsdp_unsharded_params 5,319,180 B, the oracle's.
//
// And a parameter no gradient reaches, for deepseek_v32_toy_L4_s128_fsdp4_bf16_single: FSDP2 reduces only
// the parameters whose unsharded .grad is set (fsdp_params_with_grad), so the Lightning indexers' (whose
// scores only pick keys by index: Note [Parameters no gradient reaches]) keep no sharded gradient and
// have no rows in the reduce-scatter buffers: the four layers' indexers hold 102,656 parameters, 25,664
// a rank, so the rank's bf16 gradients are 25,664 x 2 = 51,328 B fewer than a sharded gradient for every
// parameter would be: 4,305,408 B, the oracle's.
//
// And the model torchtitan builds in fp32, for gemma_toy_L4_s128_fsdp4_single (fp32 shards under the
// mixed-precision policy): the embedding's scale, a buffer made in the default dtype, is fp32, 4 B where
// the bf16 model's is 2 (buffers 132 B, not 130); its forward's `self.embed_scale.to(self.weight.dtype)`
// then casts it to the bf16 weight's dtype, a 0-dim copy of 2 B that the product keeps for its backward.
// Both are at the peak, 4 B above a bf16 scale and no copy: 19,109,270 B, the oracle's (other_peak
// 15,830,166 B).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "step/step_census.h"
#include "models/registry.h"
#include "step_record_expect.h"

namespace census {
namespace {

using testing::expect_phases;
using testing::expect_split;
using testing::expect_totals;

const std::string kFolder = std::string(CENSUS_TEST_DATA) + "/step/parallel";

nlohmann::json parallel_case(const std::string& name) {
  std::ifstream file(kFolder + "/" + name + ".json");
  return nlohmann::json::parse(file);
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kFolder))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

StepOptions options_of(const nlohmann::json& oracle) {
  StepOptions o;
  o.seq_length = oracle.at("seq");
  o.micro_batch_size = oracle.at("batch");
  o.micro_batches = oracle.at("m");
  o.optimizer = oracle.at("adamw").get<bool>() ? StepOptimizer::kAdamW : StepOptimizer::kNone;
  // The parallel oracle's first step, its for-loop AdamW; its two-step cases record step 2 (`*_steady`) or
  // step 1 (`*_first`) of the AdamW form the kind names.
  const std::string kind = oracle.at("kind");
  const bool steady = kind.ends_with("_steady");
  o.first_step = !steady;
  o.optimizer_impl = kind.find("_foreach") != std::string::npos ? nn::OptimizerImpl::kForEach
                     : kind.find("_fused") != std::string::npos ? nn::OptimizerImpl::kFused
                                                                : nn::OptimizerImpl::kForLoop;
  const auto& p = oracle.at("parallel");
  if (p.at("dp_shard").get<int64_t>() > 1) {
    o.fsdp.shards = p.at("dp_shard");
    o.fsdp.mixed_precision = p.at("mixed_precision");
    o.fsdp.cpu_offload = p.value("cpu_offload", false);
    // census_oracle_parallel_units.py: torchtitan v0.2's units (the embedding, each layer, [norm, head], root)
    if (p.value("fsdp_wrap", "") == "torchtitan") o.fsdp.wrap = FsdpWrap::kTorchtitan;
  }
  if (p.contains("fp8")) {  // census_oracle_parallel_fp8.py: torchao's recipe names
    const std::string recipe = p.at("fp8");
    o.fp8 = recipe == "tensorwise" ? ops::Float8Recipe::kTensorwise
            : recipe == "rowwise"  ? ops::Float8Recipe::kRowwise
                                   : ops::Float8Recipe::kRowwiseWithGwHp;
    for (const auto& fqn : p.value("fp8_filter_fqns", nlohmann::json::array()))
      if (fqn == "lm_head") o.fp8_skip_head = true;
  }
  if (p.value("recompute", "none") == "full") o.recompute = Recompute::kFull;
  if (p.contains("loss")) o.loss = *nn::causal_lm_loss_named(p.at("loss").get<std::string>());  // torchtune's
  o.tensor_parallel = p.at("tp");
  o.sequence_parallel = p.at("sequence_parallel");
  o.loss_parallel = p.at("loss_parallel");
  return o;
}

// The model the oracle built: with Liger's patch where the case records one (Transformers' loss beside it).
Result<ModelConfig> model_of(const nlohmann::json& oracle) {
  auto config = read_config(oracle.at("config"));
  if (config && oracle.contains("liger")) config->liger.rms_norm = config->liger.swiglu = config->liger.rope = true;
  return config;
}

class StepParallelOracleCase : public ::testing::TestWithParam<std::string> {};

TEST_P(StepParallelOracleCase, EveryNumberToTheByte) {
  const nlohmann::json oracle = parallel_case(GetParam());
  auto config = model_of(oracle);
  ASSERT_TRUE(config) << config.refusal().message();
  if (oracle.contains("error")) {
    // PyTorch itself refused the step (its error says why): Census refuses the same options, naming the
    // optimizer's form.
    auto refused = census_step(*config, options_of(oracle));
    ASSERT_FALSE(refused) << oracle.at("error");
    EXPECT_NE(refused.refusal().message().find("--optimizer-impl"), std::string::npos) << refused.refusal().message();
    return;
  }
  auto step = census_step(*config, options_of(oracle));
  ASSERT_TRUE(step) << step.refusal().message();
  const StepAnalysis& a = step->analysis;

  expect_totals(*step, oracle);

  for (const auto& [moment, key] : {std::pair{&a.peak, "peak"}, std::pair{&a.other_peak, "other_peak"}}) {
    const auto& expected = oracle.at(key);
    EXPECT_EQ(moment->bytes, expected.at("bytes").get<int64_t>()) << key;
    EXPECT_EQ(moment->phase, expected.at("phase").get<std::string>()) << key;
    EXPECT_EQ(moment->op, expected.at("op").get<std::string>()) << key;
    expect_split(moment->split, expected.at("split"), key);
  }
  expect_phases(*step, oracle);
  // Under CPUOffloadPolicy, the host's side (census_oracle_parallel_cpu_offload.py): its peak, its phase
  // and split, what is live at the end, and the bytes copied each way.
  ASSERT_EQ(step->offloaded_to_host.has_value(), oracle.contains("host"));
  if (!oracle.contains("host")) return;
  const StepHostAnalysis& host = *step->offloaded_to_host;
  const auto& expected = oracle.at("host");
  EXPECT_EQ(host.peak_bytes, expected.at("peak_bytes").get<int64_t>());
  EXPECT_EQ(host.peak_phase, expected.at("peak_phase").get<std::string>());
  const auto& split = expected.at("peak_split");
  EXPECT_EQ(host.peak_split.parameters(), split.at("parameters").get<int64_t>());
  EXPECT_EQ(host.peak_split.gradients(), split.at("gradients").get<int64_t>());
  EXPECT_EQ(host.peak_split.optimizer_states(), split.at("optimizer_states").get<int64_t>());
  EXPECT_EQ(host.peak_split.other(), split.at("other").get<int64_t>());
  EXPECT_EQ(host.live_at_end, expected.at("live_at_end_bytes").get<int64_t>());
  EXPECT_EQ(host.copied_to_host_bytes, expected.at("offloaded_bytes").get<int64_t>());
  EXPECT_EQ(host.copied_to_device_bytes, expected.at("brought_back_bytes").get<int64_t>());
}

// FSDP2's mixed-precision policy casts what a unit is handed (cast_forward_inputs), for
// ernie4_5_moe_toy_L4_s128_fsdp4_single (fp32 shards under the policy; hidden 256, 8 heads, head_dim 32):
// ERNIE-4.5's rotary keeps cos and sin (1, 128, 32) in fp32, and each layer's pre-forward copies them to
// bf16, 8,192 B each, before it all-gathers, freed when the layer returns. Its apply_rotary_pos_emb takes
// cos[..., :16].repeat_interleave(2), a clone (1, 1, 128, 16, 2) of the bf16 copy, 8,192 B (16,384 B of an
// fp32 cos), saved by q.float() * cos for the backward; likewise sin. The peak (B0, a reduce-scatter
// buffer) comes after layers 3, 2 and 1 ran their backward: layer 0's clones are alive, its two rotary
// clones and its attention output's contiguous (1, 128, 8 x 32) bf16, 65,536 B: 81,920 B by aten.clone
// made in F0, the oracle's (98,304 B were the rotary clones fp32).
TEST(StepParallelOracle, TheMixedPrecisionPolicyCastsALayersFp32ArgumentsToBf16) {
  const nlohmann::json oracle = parallel_case("ernie4_5_moe_toy_L4_s128_fsdp4_single");
  auto config = model_of(oracle);
  ASSERT_TRUE(config) << config.refusal().message();
  auto step = census_step(*config, options_of(oracle));
  ASSERT_TRUE(step) << step.refusal().message();
  int64_t clones = -1;
  for (const StepHolder& holder : step->analysis.peak_other_by_op)
    if (holder.label == "activations:aten.clone.default@F0") clones = holder.bytes;
  EXPECT_EQ(clones, 65'536 + 2 * 8'192);
  EXPECT_EQ(step->analysis.peak.bytes, oracle.at("peak").at("bytes").get<int64_t>());
}

// torchtitan v0.2's units (census_oracle_parallel_units.py: fully_shard of the embedding, each layer, the
// final norm with the head, then the root) against the classic ones, at the loss of llama_toy_L4_s128_fsdp4
// (F0, nll_loss_forward), by hand. Both hold the shards 4,327,680 B, the buffers 128 B, the ids 2,048 B and
// the activations there, 10,901,008 B. The classic units hold the root's unsharded embedding, norm and head
// (4,194,816 B), the last layer's parameters, never resharded (1,115,136 B), and its all-gather output, kept
// until the root's forward ends (1,115,136 B): 21,655,952 B. torchtitan's hold the embedding resharded and
// every layer too; the norm and head's unit is not resharded: its parameters (256 + 4096 x 256 bf16 =
// 2,097,664 B) and its all-gather output, the last one, 4 ranks x (64 + 262,144) elements x 2 B = 2,097,664 B:
// 19,426,192 B.
TEST(StepParallelOracle, TorchtitansUnitsHoldTheNormAndHeadAloneAtTheLoss) {
  const int64_t shared = 4'327'680 + 128 + 2'048 + 10'901'008;
  const nlohmann::json classic = parallel_case("llama_toy_L4_s128_fsdp4_single");
  const nlohmann::json torchtitan = parallel_case("llama_toy_L4_s128_fsdp4_tt_single");
  EXPECT_EQ(classic.at("peak").at("bytes").get<int64_t>(), shared + 4'194'816 + 1'115'136 + 1'115'136);
  EXPECT_EQ(torchtitan.at("peak").at("bytes").get<int64_t>(), shared + 2'097'664 + 2'097'664);
  auto config = model_of(torchtitan);
  ASSERT_TRUE(config) << config.refusal().message();
  auto step = census_step(*config, options_of(torchtitan));
  ASSERT_TRUE(step) << step.refusal().message();
  EXPECT_EQ(step->analysis.peak.bytes, shared + 2'097'664 + 2'097'664);
  EXPECT_EQ(step->analysis.peak.phase, "F0");
}

// Buffers made without a dtype follow the model's, for gemma4_toy_L4_s128_fsdp4_single (built in fp32, as
// torchtitan builds a model for fp32 shards) beside gemma4_toy_L4_s128_fsdp4_bf16_single (built in bf16):
// six of the toy's ten buffers are made with no dtype, the embedding's scale and the per-layer
// embedding's scale (0-d) and each of the 4 layers' layer_scalar (torch.ones(1)), 4 B each in fp32
// where bf16 makes them 2: 6 x 2 = 12 B more, 408 B where the bf16 model holds 396, the oracle's both.
// (The rotary inverse frequencies are fp32 in either.)
TEST(StepParallelOracle, BuffersMadeWithoutADtypeAreTheModelsDtype) {
  int64_t buffers[2] = {0, 0};
  const char* names[2] = {"gemma4_toy_L4_s128_fsdp4_single", "gemma4_toy_L4_s128_fsdp4_bf16_single"};
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json oracle = parallel_case(names[i]);
    auto config = model_of(oracle);
    ASSERT_TRUE(config) << config.refusal().message();
    auto step = census_step(*config, options_of(oracle));
    ASSERT_TRUE(step) << step.refusal().message();
    buffers[i] = step->buffer_bytes;
    EXPECT_EQ(buffers[i], oracle.at("parameters").at("buffers_bytes").get<int64_t>()) << names[i];
  }
  EXPECT_EQ(buffers[0] - buffers[1], 6 * (4 - 2));
  EXPECT_EQ(buffers[0], 408);
}

INSTANTIATE_TEST_SUITE_P(Oracle, StepParallelOracleCase, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace census
