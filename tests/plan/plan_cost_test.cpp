// The time model's prices of ops and messages (plan/plan_cost.h), derived by hand: the step oracle's Llama
// toy (hidden 256, 8 heads of 32, 2 KV heads, intermediate 512, vocabulary 4096) at 128 tokens on a
// device of 10^12 FLOP/s and 10^12 B/s, and ops and collectives made up to show one rule each; what a
// layer keeps for the memory bound; the device presets and the calibration file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "census/layer_census.h"
#include "models/registry.h"
#include "plan/plan_cost.h"
#include "plan/plan_device.h"
#include "step/step_census.h"

namespace census {
namespace {

ModelConfig read(nlohmann::json json) {
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

ModelConfig toy() {
  return read({{"model_type", "llama"}, {"hidden_size", 256}, {"num_attention_heads", 8}, {"num_key_value_heads", 2},
               {"head_dim", 32}, {"intermediate_size", 512}, {"num_hidden_layers", 4}, {"vocab_size", 4096},
               {"max_position_embeddings", 8192}});
}

ModelConfig moe_toy() {
  return read({{"model_type", "qwen3_moe"}, {"hidden_size", 256}, {"num_attention_heads", 8}, {"num_key_value_heads", 2},
               {"head_dim", 32}, {"intermediate_size", 512}, {"num_hidden_layers", 4}, {"vocab_size", 4096},
               {"max_position_embeddings", 8192}, {"num_experts", 8}, {"num_experts_per_tok", 2},
               {"moe_intermediate_size", 256}});
}

// 10^12 FLOP/s and B/s, GEMMs at the whole peak from any size (no half-size), the attention kernel at
// half of it forward and a quarter backward, no kernel floor.
Rates unit() {
  Rates r;
  r.flops_per_s = 1e12;
  r.hbm_bytes_per_s = 1e12;
  r.calibration = {1.0, 0.0, 0.5, 0.25, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, "test"};
  return r;
}

double sum_bytes(const LayerOps& ops, OpClass cls) {
  double bytes = 0;
  for (const OpRecord& op : ops.ops)
    if (op.cls == cls) bytes += static_cast<double>(op.bytes * op.count);
  return bytes;
}

// The toy's GEMMs: q and o 2 x 128 x 256 x 256 = 16,777,216 FLOPs each, k and v 2 x 128 x 256 x 64 =
// 4,194,304 each; gate, up and down 2 x 128 x 256 x 512 = 33,554,432 each: 142,606,336 in all, each
// compute-bound (q's bytes: x 65,536 + W 131,072 + out 65,536, far below its FLOPs), so F / 10^12 s.
// The attention kernel's op spans 2 x 8 heads x 128 x 128 x (32 + 32) = 16,777,216 FLOPs; under the
// causal mask it runs (128 + 1) / 256 of them, 8,454,144, at half the peak: 16.908288 us; its backward
// 2.5 x those at a quarter: 84.54144 us. Every other op is memory-bound: its bytes / 10^12, twice back.
TEST(PlanCost, LayerOpsPricedByKind) {
  const ModelConfig c = toy();
  const LayerOps ops = record_layer(c, 0, 128, RecomputeShares{});
  int64_t gemm_flops = 0, attention_flops = 0;
  for (const OpRecord& op : ops.ops) {
    if (op.cls == OpClass::kGemm) gemm_flops += op.flops;
    if (op.cls == OpClass::kAttention) attention_flops += op.flops;
  }
  EXPECT_EQ(gemm_flops, 142'606'336);
  EXPECT_EQ(attention_flops, 16'777'216);
  EXPECT_TRUE(ops.attention_kernel);
  const PassTime t = pass_time(ops, 1, unit());
  EXPECT_NEAR(t.gemm_forward, 142'606'336 / 1e12, 1e-18);
  EXPECT_NEAR(t.attention_forward, 8'454'144 / 0.5e12, 1e-18);
  EXPECT_NEAR(t.attention_backward, 2.5 * 8'454'144 / 0.25e12, 1e-18);
  const double memory = sum_bytes(ops, OpClass::kMemory) / 1e12;
  EXPECT_NEAR(t.forward, t.gemm_forward + t.attention_forward + memory, 1e-15);
  EXPECT_NEAR(t.backward, 2 * t.gemm_forward + t.attention_backward + 2 * memory, 1e-15);
}

// The toy layer's memory-bound ops at 128 tokens, each its bytes read and written (x = 128 x 256 bf16 =
// 65,536 B):
//   each RMSNorm: x.to(fp32) 65,536 + 131,072; pow 131,072 x 2; mean 131,072 + 512; + eps 512 x 2;
//     rsqrt 512 x 2; x * rsqrt 131,072 + 512 + 131,072; .to(bf16) 131,072 + 65,536; weight * x
//     512 + 65,536 x 2: 1,183,232, twice
//   rotary on q (8 heads, 65,536 B; cos and sin 8,192): q * cos 139,264, neg of a half 65,536, cat
//     131,072, * sin 139,264, add 196,608: 671,744; on k (2 heads, 16,384 B): 40,960 + 16,384 + 32,768 +
//     40,960 + 49,152 = 180,224
//   the attention output made contiguous 131,072; the two residual adds 196,608 each
//   silu of gate (128 x 512 bf16, 131,072 B) 262,144; silu * up 393,216
// 4,398,080 in all. The seven projections each end in _unsafe_view (matmul's view back to 3-d), which
// returns the product's storage: no kernel, no bytes.
TEST(PlanCost, MemoryBoundOpsAreTheKernelsThatRun) {
  const LayerOps ops = record_layer(toy(), 0, 128, RecomputeShares{});
  EXPECT_EQ(sum_bytes(ops, OpClass::kMemory), 4'398'080);
  // 16 norm ops, 10 rotary, the clone, 2 adds, silu and the product; 7 GEMMs and the attention kernel.
  EXPECT_EQ(ops.ops.size(), 39u);
}

// Under DTensor's plan with sequence parallelism over TP 2, the rank's layer as the step runs it: q, k, v,
// o, gate, up and down at their TP shares (q 2 x 128 x 256 x 128 = 8,388,608 FLOPs, k and v 2,097,152
// each, o 8,388,608, gate, up and down 16,777,216 each: 71,303,168), on the all-gathered 128 tokens; the
// norms and the residual adds on the rank's 64 (each norm (1,183,232 - 512) / 2 + 512 = 591,872 B, each
// add 3 x 32,768); the rotary of 4 q heads (344,064) and 1 KV head (98,304); the attention output made
// contiguous (65,536); silu (131,072) and its product (196,608) on 128 x 256; before each reduce-scatter
// DTensor lays the partial sum's two halves of the sequence one after another (cat: 131,072, twice).
// 2,478,080 B in all; the all-gathers and reduce-scatters are the TP term's, not the record's.
TEST(PlanCost, SequenceParallelLayerRunsItsNormsOnTheShard) {
  StepOptions o;
  o.seq_length = 128, o.tensor_parallel = 2, o.sequence_parallel = o.loss_parallel = true;
  const ModelConfig rank = rank_config(toy(), o);
  const LayerOps ops = record_layer(rank, 0, 128, RecomputeShares{}, /*sequence_shards=*/2);
  int64_t gemm_flops = 0;
  for (const OpRecord& op : ops.ops) gemm_flops += op.cls == OpClass::kGemm ? op.flops : 0;
  EXPECT_EQ(gemm_flops, 71'303'168);
  EXPECT_EQ(sum_bytes(ops, OpClass::kMemory), 2'478'080);
  // The same rank's layer recorded plainly runs its norms and adds on all 128 tokens, and no cat.
  const LayerOps plain = record_layer(rank, 0, 128, RecomputeShares{});
  EXPECT_EQ(sum_bytes(plain, OpClass::kMemory), 2'478'080 - 2 * 591'872 - 2 * 98'304 - 2 * 131'072 +
                                                    2 * 1'183'232 + 2 * 196'608);
}

// Two sequences: every GEMM's FLOPs and every op's activation bytes twice, the weights read once; the
// attention kernel twice (per sequence).
TEST(PlanCost, MicroBatchScalesActivationsNotWeights) {
  const LayerOps ops = record_layer(toy(), 0, 128, RecomputeShares{});
  const PassTime one = pass_time(ops, 1, unit()), two = pass_time(ops, 2, unit());
  EXPECT_NEAR(two.gemm_forward, 2 * one.gemm_forward, 1e-18);  // compute-bound: FLOPs alone
  EXPECT_NEAR(two.attention_forward, 2 * one.attention_forward, 1e-18);
  LayerOps made;
  made.ops.push_back({OpClass::kMemory, false, 0, 1000, 400, 1, 0, 1});
  EXPECT_NEAR(pass_time(made, 3, unit()).forward, (3 * 600 + 400) / 1e12, 1e-21);
}

// The saturation curve: a GEMM of W½ FLOPs takes twice what its FLOPs take at the large-size rate, so it
// reaches half the efficiency: (2e9 + 2e9) / (10^12 x 0.5) = 8 ms. A grouped GEMM of 4 groups over 256
// rows has 64 rows a group, half a 128-row tile: 1e9 FLOPs take as long as 2e9. A memory-bound op of one
// byte still takes the kernel floor, 4 us.
TEST(PlanCost, SaturationTilesAndFloor) {
  Rates r = unit();
  r.calibration.gemm_efficiency = 0.5;
  r.calibration.gemm_half_gflop = 2;
  LayerOps gemm;
  gemm.ops.push_back({OpClass::kGemm, false, 2'000'000'000, 1000, 0, 1, 0, 1});
  EXPECT_NEAR(pass_time(gemm, 1, r).forward, 8e-3, 1e-15);
  Rates plain = unit();
  LayerOps grouped;
  grouped.ops.push_back({OpClass::kGemm, false, 1'000'000'000, 1000, 0, 4, 256, 1});
  EXPECT_NEAR(pass_time(grouped, 1, plain).forward, 2e-3, 1e-15);
  EXPECT_NEAR(pass_time(grouped, 2, plain).forward, 2e-3, 1e-15);  // 128 rows a group: full tiles, 2e9 FLOPs
  plain.calibration.kernel_floor_us = 4;
  LayerOps tiny;
  tiny.ops.push_back({OpClass::kMemory, false, 0, 1, 0, 1, 0, 1});
  EXPECT_NEAR(pass_time(tiny, 1, plain).forward, 4e-6, 1e-18);
  EXPECT_NEAR(pass_time(tiny, 1, plain).backward, 4e-6, 1e-18);
}

// Context parallelism 2: the rank's 64 tokens, its attention kernel twice the shard's (its 64 queries meet
// all 128 keys under the causal mask: (2 x 64 + 1) / 128 of the shard op's 2 x 8 x 64 x 64 x 64 =
// 4,194,304 FLOPs, 4,227,072, at half the peak).
TEST(PlanCost, RingRunsTheKernelCTimes) {
  const LayerOps shard = record_layer(toy(), 0, 64, RecomputeShares{});
  EXPECT_NEAR(pass_time(shard, 1, unit(), 2).attention_forward, 4'227'072 / 0.5e12, 1e-18);
}

// The selective backward runs again the policy's share of the attention projections' and of the other
// matmuls, every weightless op, and not the attention kernel (the policy saves its outputs).
TEST(PlanCost, SelectiveRecomputeIsThePolicysShare) {
  const RecomputeShares shares{0.25, 0.5};
  const LayerOps ops = record_layer(toy(), 0, 128, shares);
  const PassTime t = pass_time(ops, 1, unit());
  // q, k, v, o are the attention's: 41,943,040 FLOPs; gate, up, down the rest: 100,663,296.
  const double expected = 0.25 * 41'943'040 / 1e12 + 0.5 * 100'663'296 / 1e12 + sum_bytes(ops, OpClass::kMemory) / 1e12;
  EXPECT_NEAR(t.selective_recompute, expected, 1e-15);
}

// The output layer: the LM head 2 x 128 x 256 x 4096 = 268,435,456 FLOPs, the loss's fp32 logits written
// at least once (128 x 4096 x 4 B).
TEST(PlanCost, OutputLayerHeadAndLoss) {
  const LayerOps out = record_output(toy(), 128);
  int64_t gemm = 0;
  for (const OpRecord& op : out.ops) gemm += op.cls == OpClass::kGemm ? op.flops : 0;
  EXPECT_EQ(gemm, 268'435'456);
  EXPECT_GE(sum_bytes(out, OpClass::kMemory), 128 * 4096 * 4);
  EXPECT_EQ(out.parameters, 4096 * 256 + 256);  // the head and the final norm
}

// A link of 100 GB/s and 2 us a message, a NIC of 10 GB/s and 10 us, both at their whole bandwidth:
//   all-reduce of 1 MB over 4 ranks of a node: ring latency 2 x 3 x 2 us, tree 2 x log2(4) x 2 us = 8 us,
//     the less, + 2 x 3/4 x 1 MB / 100 GB/s = 15 us: 23 us
//   all-gather of 1 MB over 4 ranks, one a node: 3 x 10 us + 3/4 x 1 MB / 10 GB/s = 105 us
//   all-to-all of a rank's 8 MB over 8 ranks, 4 a node: 10 us + the longer of 3/8 x 8 MB / 100 GB/s =
//     30 us (its node) and 4/8 x 8 MB / 10 GB/s = 400 us (the others): 410 us
//   send of 1 MB inside a node: 2 us + 10 us; nothing over one rank
// Under LoRA on q_proj and v_proj (r 8, fp32 adapters; PEFT's lora.Linear forward: the base's product, then
// x.to(fp32) (dropout 0: the identity), lora_A, lora_B, * scaling, the add to the base's output, the
// result's cast back), the toy layer is recorded as census step builds it: the base frozen, so each of its
// seven products runs one GEMM backward (its input's gradient), and each adapter's two products run two
// (the input's and the adapter weight's). A's are 2 x 128 x 256 x 8 = 524,288 FLOPs; B's on q 2 x 128 x 8 x
// 256 = 524,288, on v 2 x 128 x 8 x 64 = 131,072. The base's parameters are untrained: a gradient reaches
// the four adapter weights alone (q's A 8 x 256 and B 256 x 8, v's A 8 x 256 and B 64 x 8: 6,656).
TEST(PlanCost, FineTunedLayerRecordsAFrozenBaseAndItsAdapters) {
  const ModelConfig c = toy();
  StepOptions tuned;
  tuned.lora = nn::LoraConfig{};
  tuned.lora->target_modules = {"q_proj", "v_proj"};
  const LayerOps plain = record_layer(c, 0, 128, RecomputeShares{});
  const LayerOps lora = record_layer(c, 0, 128, RecomputeShares{}, 1, tuned);
  int64_t frozen_flops = 0, trained_flops = 0, frozen = 0, trained = 0;
  for (const OpRecord& op : lora.ops) {
    if (op.cls != OpClass::kGemm) continue;
    (op.backward_gemms == 1 ? frozen_flops : trained_flops) += op.flops;
    ++(op.backward_gemms == 1 ? frozen : trained);
  }
  EXPECT_EQ(frozen, 7);
  EXPECT_EQ(frozen_flops, 142'606'336);
  EXPECT_EQ(trained, 4);
  EXPECT_EQ(trained_flops, 524'288 + 524'288 + 524'288 + 131'072);
  for (const OpRecord& op : plain.ops)
    if (op.cls == OpClass::kGemm) EXPECT_EQ(op.backward_gemms, 2);
  EXPECT_EQ(lora.parameters - plain.parameters, 6'656);
  EXPECT_EQ(lora.untrained_parameters, plain.parameters);
  EXPECT_EQ(plain.untrained_parameters, 0);
  // Priced on the unit device: the frozen products' backward is their forward once, the adapters' twice.
  const PassTime t = pass_time(lora, 1, unit());
  EXPECT_NEAR(t.gemm_backward, (142'606'336 + 2.0 * 1'703'936) / 1e12, 1e-18);
}

// On a 4-bit base (nf4, bf16 compute) the seven products run inside MatMul4Bit.forward, under its no_grad, as
// an autograd.Function's forward runs: each still runs one GEMM backward, MatMul4Bit.backward's input gradient
// over the weight dequantized again. At 128 tokens bitsandbytes 0.50 runs its fused kernel; 0.49 dequantizes
// the weight and runs a plain product: each of them one backward GEMM.
TEST(PlanCost, FourBitProductsRunTheirInputsGradient) {
  for (const ops::BnbVersion version : {ops::BnbVersion::k0_50, ops::BnbVersion::k0_49}) {
    StepOptions tuned;
    tuned.lora = nn::LoraConfig{};
    tuned.lora->target_modules = {"q_proj", "v_proj"};
    nn::Bnb4bitConfig quantize;
    quantize.quant_type = nn::Bnb4bitType::kNf4;
    quantize.compute_dtype = DType::kBFloat16;
    quantize.version = version;
    tuned.quantize = quantize;
    int64_t frozen_flops = 0, trained = 0;
    for (const OpRecord& op : record_layer(toy(), 0, 128, RecomputeShares{}, 1, tuned).ops) {
      if (op.cls != OpClass::kGemm) continue;
      if (op.backward_gemms == 1) frozen_flops += op.flops;
      trained += op.backward_gemms == 2 ? 1 : 0;
    }
    EXPECT_EQ(frozen_flops, 142'606'336);
    EXPECT_EQ(trained, 4);
  }
}

// The embedding under adapters is frozen: its lookup runs forward and no backward, unless modules_to_save
// trains a copy of it.
TEST(PlanCost, FrozenEmbeddingRunsNoBackward) {
  StepOptions tuned;
  tuned.lora = nn::LoraConfig{};
  const PassTime trained = pass_time(record_embedding(toy(), 128), 1, unit());
  const PassTime frozen = pass_time(record_embedding(toy(), 128, tuned), 1, unit());
  EXPECT_EQ(frozen.forward, trained.forward);
  EXPECT_GT(trained.backward, 0);
  EXPECT_EQ(frozen.backward, 0);
  // modules_to_save's copy of it trains: its backward runs as the whole table's.
  tuned.lora->modules_to_save = {"embed_tokens"};
  EXPECT_EQ(pass_time(record_embedding(toy(), 128, tuned), 1, unit()).backward, trained.backward);
}

TEST(PlanCost, CollectivesWithLatency) {
  Network net;
  net.link_bytes_per_s = 100e9;
  net.nic_bytes_per_s = 10e9;
  net.calibration = {1, 1, 1, 1, 1, 0, 1.0, 2.0, 1.0, 10.0, "test"};
  EXPECT_NEAR(all_reduce_seconds(1'000'000, Group{4, 4}, net), 23e-6, 1e-15);
  EXPECT_NEAR(all_gather_seconds(1'000'000, Group{4, 1}, net), 105e-6, 1e-15);
  EXPECT_NEAR(all_to_all_seconds(8'000'000, Group{8, 4}, net), 410e-6, 1e-15);
  EXPECT_NEAR(send_seconds(1'000'000, true, net), 12e-6, 1e-15);
  EXPECT_EQ(all_reduce_seconds(1'000'000, Group{1, 1}, net), 0);
  EXPECT_EQ(all_to_all_seconds(1'000'000, Group{1, 1}, net), 0);
}

// What a layer keeps: each storage a micro-batch's or none of it, so b sequences keep one's and b - 1
// times the difference two make (MemoryBound's premise), for a dense and an MoE layer under every mode;
// a checkpoint keeps less than the plain layer, a full one the least.
TEST(PlanCost, KeptBytesGrowByTheSequence) {
  for (const ModelConfig& c : {toy(), moe_toy()})
    for (Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      const int64_t one = layer_kept_bytes(c, 0, 128, 1, mode), two = layer_kept_bytes(c, 0, 128, 2, mode);
      EXPECT_EQ(layer_kept_bytes(c, 0, 128, 3, mode), one + 2 * (two - one)) << c.model_type;
      EXPECT_EQ(layer_kept_bytes(c, 0, 128, 5, mode), one + 4 * (two - one)) << c.model_type;
    }
  const ModelConfig c = toy();
  const int64_t plain = layer_kept_bytes(c, 0, 128, 1, Recompute::kNone);
  EXPECT_LT(layer_kept_bytes(c, 0, 128, 1, Recompute::kSelective), plain);
  EXPECT_LE(layer_kept_bytes(c, 0, 128, 1, Recompute::kFull), layer_kept_bytes(c, 0, 128, 1, Recompute::kSelective));
  // At most what the layer census saves (which may count the layer's input too).
  EXPECT_LE(plain, census_layer(c, 0, 128).saved_bytes);
}

TEST(PlanDevice, EveryPresetHasFiguresACalibrationAndSources) {
  for (const char* name : {"h100", "h200", "a100", "b200", "910b", "910c"}) {
    const Device* d = find_device(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_GT(d->peak_tflops, 0);
    EXPECT_GT(d->hbm_gbs, 0);
    EXPECT_GT(d->link_gbs, 0);
    EXPECT_GT(d->nic_gbs, 0);
    EXPECT_GT(d->memory_bytes, 0);
    EXPECT_FALSE(d->source.empty());
    EXPECT_FALSE(d->calibration.source.empty());
    EXPECT_TRUE(check_calibration(d->calibration, name).ok()) << name;
  }
  EXPECT_EQ(find_device("tpu"), nullptr);
  EXPECT_STREQ(kDefaultDevice, "h100");
  // H100 SXM5's datasheet: 989 TFLOPS dense BF16, 3.35 TB/s.
  EXPECT_EQ(find_device("h100")->peak_tflops, 989);
  EXPECT_EQ(find_device("h100")->hbm_gbs, 3350);
}

TEST(PlanDevice, CalibrationFileHasEveryField) {
  nlohmann::json full = {{"gemm_efficiency", 0.6},       {"gemm_half_gflop", 2},
                         {"attention_forward_efficiency", 0.4}, {"attention_backward_efficiency", 0.3},
                         {"memory_efficiency", 0.8},     {"kernel_floor_us", 4},
                         {"link_efficiency", 0.8},       {"link_latency_us", 3},
                         {"nic_efficiency", 0.9},        {"nic_latency_us", 10},
                         {"source", "my own runs"}};
  auto read_back = read_calibration(full, "cal.json");
  ASSERT_TRUE(read_back.ok()) << read_back.refusal().message();
  EXPECT_EQ(read_back->gemm_efficiency, 0.6);
  EXPECT_EQ(read_back->source, "my own runs");
  nlohmann::json missing = full;
  missing.erase("nic_latency_us");
  auto refused = read_calibration(missing, "cal.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.refusal().message().find("nic_latency_us"), std::string::npos);
  nlohmann::json unknown = full;
  unknown["gemm_speed"] = 1;
  EXPECT_FALSE(read_calibration(unknown, "cal.json").ok());
  nlohmann::json out_of_range = full;
  out_of_range["memory_efficiency"] = 1.5;
  EXPECT_FALSE(read_calibration(out_of_range, "cal.json").ok());
  EXPECT_FALSE(read_calibration(nlohmann::json::array(), "cal.json").ok());
}

}  // namespace
}  // namespace census
