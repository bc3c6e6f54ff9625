// The time model's records of layers read off the model's forward (record_stack,
// census_stack_recomputed), which price the layers that cannot run alone (Note [Layers priced through
// the stack] in plan/plan_time.cpp). Where a layer can also run alone, its record from the stack must be
// the lone census's, op for op: every step case's toy family (tests/data/step, 4 layers) at 128 tokens,
// at TP 1 and at TP 2 (EP 2 and both expert TPs where it has experts), compared field by field, bar what
// a lone layer makes for itself that the model hands it (Gemma 4's per-layer input). And the kept bytes
// the memory bound takes from the model's forward (stack_kept_bytes), held below the step oracle's peak.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "census/parts.h"
#include "cli/request.h"
#include "cli/shipped_models.h"
#include "models/causal_lm.h"
#include "models/registry.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "plan/plan_cost.h"
#include "plan/plan_layout.h"
#include "plan/plan_time.h"
#include "step/step_census.h"
#include "step/tensor_parallel.h"
#include "../step/step_cases.h"

namespace census {
namespace {

constexpr int64_t kTokens = 128;

// The families of the step cases, each with the first of its cases by name.
std::map<std::string, std::string> families() {
  std::map<std::string, std::string> out;
  for (const std::string& name : testing::step_case_names()) {
    const size_t toy = name.find("_toy_");
    if (toy != std::string::npos) out.try_emplace(name.substr(0, toy), name);
  }
  return out;
}

// A family's toy. Granite-4.0-H's toy states no position_embedding_type: its model computes no rotary
// and its attention layers rotate nothing, while its lone layer census rotates as the per-layer reference
// does (models/granitemoehybrid.cpp); with "rope" both rotate, and the records are compared there.
ModelConfig case_config(const std::string& family) {
  nlohmann::json json = testing::step_case(families().at(family)).at("config");
  if (family == "granitemoehybrid") json["position_embedding_type"] = "rope";
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

bool alone(const ModelConfig& c, int64_t i) { return c.family->stack_only == nullptr || c.family->stack_only(c, i) == nullptr; }

void expect_same(const LayerOps& stack, const LayerOps& lone, const std::string& what) {
  ASSERT_EQ(stack.ops.size(), lone.ops.size()) << what;
  for (size_t k = 0; k < lone.ops.size(); ++k) {
    const OpRecord &a = stack.ops[k], &b = lone.ops[k];
    const std::string op = what + " op " + std::to_string(k);
    EXPECT_EQ(a.cls, b.cls) << op;
    EXPECT_EQ(a.attention_part, b.attention_part) << op;
    EXPECT_EQ(a.flops, b.flops) << op;
    EXPECT_EQ(a.bytes, b.bytes) << op;
    EXPECT_EQ(a.parameter_bytes, b.parameter_bytes) << op;
    EXPECT_EQ(a.groups, b.groups) << op;
    EXPECT_EQ(a.rows, b.rows) << op;
    EXPECT_EQ(a.count, b.count) << op;
  }
  EXPECT_EQ(stack.shares.attention_mm, lone.shares.attention_mm) << what;
  EXPECT_EQ(stack.shares.ffn_mm, lone.shares.ffn_mm) << what;
  EXPECT_EQ(stack.attention_kernel, lone.attention_kernel) << what;
  EXPECT_EQ(stack.parameters, lone.parameters) << what;
  EXPECT_EQ(stack.expert_parameters, lone.expert_parameters) << what;
  EXPECT_EQ(stack.untrained_parameters, lone.untrained_parameters) << what;
}

// The (TP, EP, ETP) ranks a family's toy is compared at: TP 1, TP 2 where its heads split, and with
// experts EP 2 under TP 1 and 2, the experts split by TP (ETP 0) or whole (ETP 1); and where DTensor's
// plan names the family's layers, TP 2 with sequence parallelism (ETP kSequenceParallel).
constexpr int64_t kSequenceParallel = -1;
std::vector<std::tuple<int64_t, int64_t, int64_t>> ranks_of(const ModelConfig& c) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out = {{1, 1, 0}};
  RunShape run;
  run.seq_length = kTokens;
  const bool tp2 = tensor_parallel_rule(c, run, 2).empty();
  if (tp2) out.emplace_back(2, 1, 0);
  if (tp2 && tensor_parallel_refusal(c) == nullptr) out.emplace_back(2, 1, kSequenceParallel);
  // As the plan shards experts: grouped ones, EP dividing them.
  if (c.moe.num_experts % 2 == 0 && c.moe.experts_implementation == nn::ExpertsImplementation::kGroupedMm) {
    out.emplace_back(1, 2, 0);
    if (tp2) out.emplace_back(2, 2, 0), out.emplace_back(2, 2, 1);
  }
  return out;
}

TEST(PlanStackCost, EveryLayerThatRunsAloneIsRecordedAsAlone) {
  int64_t compared = 0;
  for (const auto& [family, first_case] : families()) {
    const ModelConfig c = case_config(family);
    for (const auto& [tp, ep, etp] : ranks_of(c)) {
      StepOptions sequence_parallel;
      sequence_parallel.seq_length = kTokens, sequence_parallel.tensor_parallel = tp;
      sequence_parallel.sequence_parallel = sequence_parallel.loss_parallel = true;
      const bool sp = etp == kSequenceParallel;
      const ModelConfig rank = sp ? rank_config(c, sequence_parallel) : rank_config(c, tp, ep, etp);
      const int64_t shards = sp ? tp : 1;
      const std::vector<LayerOps> stack =
          record_stack(c, rank, kTokens, census_stack_recomputed(c, rank, kTokens), /*whole=*/false, shards);
      ASSERT_EQ(static_cast<int64_t>(stack.size()), c.num_hidden_layers) << family;
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        if (!alone(c, i)) continue;
        const std::string what = family + " TP " + std::to_string(tp) + (sp ? " SP" : "") + " EP " +
                                 std::to_string(ep) + " ETP " + std::to_string(etp) + " layer " + std::to_string(i);
        LayerOps lone = record_layer(rank, i, kTokens, census_recomputed(rank, i, kTokens), shards);
        if (rank.gemma4.hidden_size_per_layer_input > 0) {
          // Gemma 4's lone layer makes the per-layer input the model hands it (1, S, P) as the reference
          // hands a lone layer one (a randn, first): the model's forward makes it once, outside the layers.
          ASSERT_FALSE(lone.ops.empty()) << what;
          EXPECT_EQ(lone.ops.front().cls, OpClass::kMemory) << what;
          EXPECT_EQ(lone.ops.front().bytes, kTokens * rank.gemma4.hidden_size_per_layer_input * 2) << what;
          lone.ops.erase(lone.ops.begin());
        }
        expect_same(stack[static_cast<size_t>(i)], lone, what);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 100);  // every family's layers at one rank or more
}

// Note [Parameters no gradient reaches]: every step case's toy family, the whole model's forward, loss
// and backward run for real: each layer's parameters left without a .grad (routed experts apart) are
// what its record from the model's forward counts untrained, at every layer. The DSA indexers of the
// DeepSeek-V4 and GLM-5 toys (their scores only pick keys by index) are such, and counted.
TEST(PlanStackCost, UntrainedParametersAreThoseTheBackwardLeavesWithoutAGradient) {
  int64_t untrained_families = 0;
  for (const auto& [family, name] : families()) {
    const ModelConfig c = case_config(family);
    const std::vector<LayerOps> stack = record_stack(c, c, kTokens, census_stack_recomputed(c, c, kTokens));
    Session session;
    const std::unique_ptr<CausalLM> model = build_causal_lm(c, c, whole_model(c));
    {
      const Tensor loss = model->causal_lm_loss(
          model->model_forward(make_tensor(Dims{1, kTokens}, DType::kInt64), Tensor(), PlainLayers()),
          make_tensor(Dims{1, kTokens}, DType::kInt64));
      run_backward(loss, ops::ones_like(loss));
    }
    int64_t family_untrained = 0;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      int64_t without_grad = 0;
      for (const Tensor& p : model->layers()[static_cast<size_t>(i)]->parameters())
        if (!p.impl()->grad && parameter_part(p.name()) != "routed") without_grad += p.numel();
      EXPECT_EQ(stack[static_cast<size_t>(i)].untrained_parameters, without_grad) << family << " layer " << i;
      family_untrained += without_grad;
    }
    untrained_families += family_untrained > 0 ? 1 : 0;
    if (family == "deepseek_v4" || family == "glm_moe_dsa") {
      EXPECT_GT(family_untrained, 0) << family;
    }
  }
  EXPECT_GE(untrained_families, 2);
}

// A layer that cannot run alone is recorded all the same: DeepSeek-V4's (every one) and Gemma 4's
// KV-shared ones, each with its GEMMs and its own parameters, as many as the model builds for it.
TEST(PlanStackCost, LayersThatCannotRunAloneAreRecorded) {
  for (const std::string family : {"deepseek_v4", "glm_moe_dsa", "gemma4"}) {
    const ModelConfig c = case_config(family);
    const std::vector<LayerOps> stack = record_stack(c, c, kTokens, census_stack_recomputed(c, c, kTokens));
    int64_t stack_only = 0;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      if (alone(c, i)) continue;
      ++stack_only;
      const LayerOps& layer = stack[static_cast<size_t>(i)];
      int64_t gemm_flops = 0;
      for (const OpRecord& op : layer.ops)
        if (op.cls == OpClass::kGemm) gemm_flops += op.flops * op.count;
      EXPECT_GT(gemm_flops, 0) << family << " layer " << i;
      EXPECT_GT(layer.parameters, 0) << family << " layer " << i;
      EXPECT_GT(layer.shares.attention_mm + layer.shares.ffn_mm, 0) << family << " layer " << i;
    }
    EXPECT_GT(stack_only, 0) << family;
  }
}

// A family whose layers are alike by kind (Family::stack_layers_alike_by_kind) has its forward read
// only as far as each kind's first layer: every layer's record and selective shares equal the whole
// forward's, op for op, on every shipped config of
// such a family (DeepSeek-V4-Flash's 43 layers and -Pro's 61), at ranks the search reaches (TP 1 to 64,
// EP 1 to 256, the experts split by TP or whole) and at a sequence's tokens, a context-parallel shard's
// and one.
TEST(PlanStackCost, LayersAlikeByKindAreRecordedAsTheWholeForward) {
  int64_t compared = 0;
  for (const cli::ShippedModel& model : cli::shipped_models()) {
    const ModelConfig c = cli::resolve_model(std::string(model.name)).take();
    if (!c.family->stack_layers_alike_by_kind) continue;
    for (const auto& [tp, ep, etp] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 0}, {8, 8, 0}, {8, 8, 1}, {64, 256, 0}})
      for (int64_t tokens : {4096, 256, 1}) {
        const ModelConfig rank = rank_config(c, tp, ep, etp);
        const std::string what = std::string(model.name) + " TP " + std::to_string(tp) + " EP " + std::to_string(ep) +
                                 " ETP " + std::to_string(etp) + " tokens " + std::to_string(tokens);
        const std::vector<RecomputeShares> shares = census_stack_recomputed(c, rank, tokens);
        const std::vector<RecomputeShares> whole_shares = census_stack_recomputed(c, rank, tokens, /*whole=*/true);
        const std::vector<LayerOps> kinds_first = record_stack(c, rank, tokens, shares);
        const std::vector<LayerOps> whole = record_stack(c, rank, tokens, whole_shares, /*whole=*/true);
        ASSERT_EQ(kinds_first.size(), whole.size()) << what;
        for (size_t i = 0; i < whole.size(); ++i) expect_same(kinds_first[i], whole[i], what + " layer " + std::to_string(i));
        for (Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
          for (int64_t batch : {1, 2})
            EXPECT_EQ(stack_kept_bytes(c, rank, tokens, batch, mode), stack_kept_bytes(c, rank, tokens, batch, mode, /*whole=*/true))
                << what << " mode " << static_cast<int>(mode) << " batch " << batch;
        compared += static_cast<int64_t>(whole.size());
      }
  }
  EXPECT_GT(compared, 1000);  // DeepSeek-V4-Flash's and -Pro's layers at every rank and length
}

// The storages ops make that are still live, parameters left out.
class LiveStorages final : public Observer {
 public:
  LiveStorages() : Observer(kOnOp | kOnFree) {}
  void on_op(const OpCall& call) override {
    for (const Tensor& out : call.outputs)
      if (!out.storage()->is_parameter) live_.insert(out.storage()->id);
  }
  void on_free(const Storage& storage) override { live_.erase(storage.id); }
  size_t count() const { return live_.size(); }

 private:
  std::set<int64_t> live_;
};

// Each layer under the selective policy, as the plan's measurements and the step run it.
class SelectiveLayers final : public LayerRunner {
 public:
  Tensor run(int64_t /*index*/, const Tensor& hidden_states, const LayerForward& forward) const override {
    return checkpoint(forward, hidden_states);
  }
};

// Note [Cycles no backward breaks]: each of Gemma 4's checkpointed layers closes a cycle through the
// model's carry (its recompute closure holds the carry; the keys and values the carry keeps for the
// KV-shared layers hold, through their graph, the checkpoint frames). A forward that no backward
// follows leaves the cycle standing once every handle is dropped, as Python does until its garbage
// collector runs; release_cycles() frees every storage the forward made. The plan measures such
// forwards once per layout it reaches, so without this each measurement would leak.
TEST(PlanStackCost, CyclesOfAForwardWithoutBackwardAreReleased) {
  const ModelConfig c = case_config("gemma4");
  ASSERT_GT(c.gemma4.num_kv_shared_layers, 0);
  Session session;
  LiveStorages live;
  session.add_observer(&live);
  {
    const std::unique_ptr<CausalLM> model = build_causal_lm(c, c, whole_model(c));
    const Tensor out = model->model_forward(make_tensor(Dims{1, kTokens}, DType::kInt64), Tensor(), SelectiveLayers());
    EXPECT_GT(live.count(), 0u);
  }
  EXPECT_GT(live.count(), 0u) << "the carry's cycle should stand until it is released";
  session.release_cycles();
  EXPECT_EQ(live.count(), 0u);
  session.remove_observer(&live);
}

// The memory bound's premise (MemoryBound::activations): a micro-batch in flight holds at least what
// each of its layers keeps alone (layer_kept_bytes), with its input where it keeps it (Note [A layer's
// input in the memory bound]). Every step case's toy family, every layer that can run alone, one and two
// sequences, each recompute mode: the lone layer keeps at most what the same layer keeps inside the
// model's forward (stack_kept_bytes), which counts its output to it where the next layer keeps it: with
// the next layer's kept input, at most as much, and on the Llama toy exactly as much at every layer (its
// output kept by the next layer's checkpoint, 128 x 256 x 2 B a sequence, under selective and full
// recompute; under none, its norm keeps an fp32 copy instead, counted to it). (The lone census once
// counted the model's cos and sin, 16 KiB on the Llama toy, as the layer's: its rotary hands out views of
// them.)
TEST(PlanStackCost, ALoneLayerKeepsWhatItKeepsInTheModel) {
  for (const auto& [family, name] : families()) {
    const ModelConfig c = case_config(family);
    for (Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
      for (int64_t batch : {1, 2}) {
        const std::vector<int64_t> in_model = stack_kept_bytes(c, c, kTokens, batch, mode);
        std::vector<int64_t> lone(static_cast<size_t>(c.num_hidden_layers) + 1, 0), input(lone.size(), 0);
        for (int64_t i = 0; i < c.num_hidden_layers; ++i)
          if (alone(c, i)) lone[static_cast<size_t>(i)] = layer_kept_bytes(c, i, kTokens, batch, mode, &input[static_cast<size_t>(i)]);
        for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
          if (!alone(c, i) || (i + 1 < c.num_hidden_layers && !alone(c, i + 1))) continue;
          const std::string what = family + " layer " + std::to_string(i) + " mode " +
                                   std::to_string(static_cast<int>(mode)) + " batch " + std::to_string(batch);
          const size_t at = static_cast<size_t>(i);
          EXPECT_LE(lone[at] + input[at + 1], in_model[at]) << what;
          if (family == "llama") {
            EXPECT_EQ(lone[at] + input[at + 1], in_model[at]) << what;
            EXPECT_EQ(input[at], mode == Recompute::kNone ? 0 : batch * kTokens * c.hidden_size * 2) << what;
          }
        }
      }
  }
}

// Note [Sequence parallelism in the activations' bound]: under DTensor's plan with sequence parallelism
// (TP 2 on the Llama toy), the lone layer measured under the plan's styles on its 64 of the 128 tokens
// keeps, with the next layer's kept input, exactly what the same layer keeps inside the step's model run
// under the same styles (its embedding and head V / 2 rows) at every layer, in every recompute mode, at
// one and two sequences; and, but under full recompute, more than the 1 / T of the plain layer the bound
// once took.
TEST(PlanStackCost, ALoneLayerUnderSequenceParallelismKeepsWhatItKeepsInTheModel) {
  constexpr int64_t kShards = 2;
  const ModelConfig c = case_config("llama");
  StepOptions o;
  o.seq_length = kTokens;
  o.tensor_parallel = kShards;
  o.sequence_parallel = o.loss_parallel = true;
  const ModelConfig rank = rank_config(c, o);
  ModelConfig model = c;
  model.vocab_size = c.vocab_size / kShards;
  const DTensorStyles styles(TensorParallelPlan{kShards, true, true, c.vocab_size, kTokens});
  for (Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    for (int64_t batch : {1, 2}) {
      std::vector<int64_t> in_model;
      {
        const nn::ParallelStylesScope scope(&styles);
        in_model = stack_kept_bytes(model, rank, kTokens, batch, mode);
      }
      std::vector<int64_t> lone(static_cast<size_t>(c.num_hidden_layers) + 1, 0), input(lone.size(), 0);
      for (int64_t i = 0; i < c.num_hidden_layers; ++i)
        lone[static_cast<size_t>(i)] = layer_kept_bytes(rank, i, kTokens, batch, mode, &input[static_cast<size_t>(i)], kShards);
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        const std::string what = "layer " + std::to_string(i) + " mode " + std::to_string(static_cast<int>(mode)) +
                                 " batch " + std::to_string(batch);
        const size_t at = static_cast<size_t>(i);
        EXPECT_EQ(lone[at] + input[at + 1], in_model[at]) << what;
        EXPECT_EQ(input[at], mode == Recompute::kNone ? 0 : batch * kTokens / kShards * c.hidden_size * 2) << what;
        if (mode != Recompute::kFull) {  // (a full checkpoint keeps its input alone, counted apart)
          EXPECT_GT(lone[at], layer_kept_bytes(rank, i, kTokens, batch, mode) / kShards) << what;
        }
      }
    }
}

// Note [A layer's backward in the memory bound]: while layer j runs its first backward, the layers before
// it keep what they kept (layer_kept_bytes) and it holds its backward's most (layer_backward_bytes), all
// beside the parameters: for every step case without a pipeline of every family whose layers all run
// alone (one sequence and two, each recompute mode, one micro-batch and four), that sum at each layer is
// at most the step oracle's peak. On the hybrid Nemotron-H toy the Mamba-2 layer's backward holds more
// than every layer keeps: the bound rises there.
TEST(PlanStackCost, ALayersBackwardIsAMomentOfTheStep) {
  int64_t checked = 0;
  for (const auto& [family, first_case] : families()) {
    const ModelConfig c = case_config(family);
    bool every_alone = true;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) every_alone = every_alone && alone(c, i);
    if (!every_alone) continue;
    for (const std::string& name : testing::step_case_names()) {
      if (name.rfind(family + "_toy_", 0) != 0) continue;
      const nlohmann::json oracle = testing::step_case(name);
      const StepOptions o = testing::options_of(oracle);
      if (o.pipeline_stages != 1 || o.seq_length != kTokens) continue;
      const int64_t parameters = oracle.at("parameters").at("bytes"), peak = oracle.at("peak").at("bytes");
      int64_t before = 0, all_kept = 0, most = 0;
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) all_kept += layer_kept_bytes(c, i, kTokens, o.micro_batch_size, o.recompute);
      for (int64_t j = 0; j < c.num_hidden_layers; ++j) {
        const int64_t moment = parameters + before + layer_backward_bytes(c, j, kTokens, o.micro_batch_size, o.recompute);
        EXPECT_LE(moment, peak) << name << " layer " << j;
        most = std::max(most, moment);
        before += layer_kept_bytes(c, j, kTokens, o.micro_batch_size, o.recompute);
        ++checked;
      }
      if (family == "nemotron_h" && o.recompute == Recompute::kNone) {
        EXPECT_GT(most, parameters + all_kept) << name;
      }
    }
  }
  EXPECT_GT(checked, 400);
}

// Note [A layer's backward inside the model]: while layer j of the DeepSeek-V4 toy (whose layers cannot
// run alone, alike by kind) runs its first backward, the layers before it keep what they kept inside the
// model's forward (stack_kept_bytes) and it holds its backward's most (stack_layer_backward_bytes), all
// beside the parameters: for every unpipelined step case of the toy at 128 tokens (one sequence and two,
// each recompute mode, one micro-batch and four), that sum at each layer is at most the step oracle's
// peak, and at some layer it is more than the parameters and every layer's kept bytes: the term can
// raise the bound.
TEST(PlanStackCost, ALayersBackwardInsideTheModelIsAMomentOfTheStep) {
  const ModelConfig c = case_config("deepseek_v4");
  int64_t checked = 0, raised = 0;
  for (const std::string& name : testing::step_case_names()) {
    if (name.rfind("deepseek_v4_toy_", 0) != 0) continue;
    const nlohmann::json oracle = testing::step_case(name);
    const StepOptions o = testing::options_of(oracle);
    if (o.pipeline_stages != 1 || o.seq_length != kTokens) continue;
    const int64_t parameters = oracle.at("parameters").at("bytes"), peak = oracle.at("peak").at("bytes");
    const std::vector<int64_t> kept = stack_kept_bytes(c, c, kTokens, o.micro_batch_size, o.recompute);
    const std::vector<int64_t> backward = stack_layer_backward_bytes(c, c, kTokens, o.micro_batch_size, o.recompute);
    ASSERT_EQ(backward.size(), kept.size()) << name;
    int64_t all_kept = 0, before = 0;
    for (int64_t bytes : kept) all_kept += bytes;
    for (size_t j = 0; j < kept.size(); ++j) {
      const int64_t moment = parameters + before + backward[j];
      EXPECT_LE(moment, peak) << name << " layer " << j;
      raised += moment > parameters + all_kept ? 1 : 0;
      before += kept[j];
      ++checked;
    }
  }
  EXPECT_GE(checked, 16);
  EXPECT_GT(raised, 0);
}

// What the memory bound takes of a model with a layer that cannot run alone: each layer's kept bytes
// from the model's forward, which the step's first backward holds at least (the same forward): their
// sum, with the parameters, is below the step oracle's peak of every case of the family at one sequence.
TEST(PlanStackCost, StackKeptBytesBoundTheStep) {
  for (const std::string family : {"deepseek_v4", "gemma4"}) {
    for (const auto& [kind, mode] : {std::pair{"single", Recompute::kNone}, std::pair{"sac_selective", Recompute::kSelective},
                                     std::pair{"ac_full", Recompute::kFull}}) {
      const nlohmann::json oracle = testing::step_case(family + "_toy_L4_s128_" + kind);
      const ModelConfig c = case_config(family);
      int64_t kept = 0;
      for (int64_t bytes : stack_kept_bytes(c, c, kTokens, 1, mode)) kept += bytes;
      EXPECT_GT(kept, 0) << family << " " << kind;
      EXPECT_LE(kept + oracle.at("parameters").at("bytes").get<int64_t>(), oracle.at("peak").at("bytes").get<int64_t>())
          << family << " " << kind;
    }
  }
}

}  // namespace
}  // namespace census

namespace census {
namespace {

// Note [Stack records made ahead], Note [Layer records made ahead]: the records made in parallel before
// the search price every layout as those made one by one do, term by term: for the families whose layers
// cannot run alone (the model's forwards) and for lone layers of one kind, of two (Qwen3-Next's gated
// delta net and attention), of three (Nemotron-H's Mamba-2, attention and MLP), with and without
// experts, at micro-batches of one and two sequences and under sequence parallelism.
TEST(PlanStackCost, RecordsMadeAheadPriceAsOneByOne) {
  for (const std::string family : {"deepseek_v4", "gemma4", "llama", "qwen3_next", "nemotron_h", "mixtral"}) {
    const ModelConfig config = case_config(family);
    RunShape run;
    run.gpus = 4, run.gpus_per_node = 4, run.seq_length = kTokens, run.global_batch = 8;
    std::vector<Layout> layouts;
    for (int64_t tp : {1, 2})
      for (int64_t cp : {1, 2})
        for (int64_t ep : config.moe.num_experts > 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1})
          for (int64_t mbs : {1, 2})
            for (bool sp : {false, true}) {
              // SP where the planner lays it out: TP > 1, on a family whose layers DTensor's plan names.
              if (sp && (tp == 1 || tensor_parallel_refusal(config) != nullptr)) continue;
              Layout l;
              l.tp = tp, l.cp = cp, l.ep = ep, l.sp = sp, l.micro_batch_size = mbs, l.dp = run.gpus / tp / cp;
              l.micro_batches = run.global_batch / l.dp / mbs;
              if (rank_config(config, tp, ep, 0).num_attention_heads * tp != config.num_attention_heads) continue;
              layouts.push_back(l);
            }
    ASSERT_GE(layouts.size(), 2u) << family;
    TimeModel ahead(config, run, *find_device("h100"), TimeOptions{});
    TimeModel one_by_one(config, run, *find_device("h100"), TimeOptions{});
    ahead.record_ahead(layouts);
    for (const Layout& l : layouts) {
      const std::string what = family + " TP " + std::to_string(l.tp) + " CP " + std::to_string(l.cp) + " EP " +
                               std::to_string(l.ep) + " b " + std::to_string(l.micro_batch_size) + (l.sp ? " SP" : "");
      EXPECT_EQ(ahead.shape_bound(l), one_by_one.shape_bound(l)) << what;
      const TimeEstimate a = ahead.estimate(l, /*complete=*/true), b = one_by_one.estimate(l, /*complete=*/true);
      ASSERT_EQ(a.terms.size(), b.terms.size()) << what;
      for (size_t k = 0; k < a.terms.size(); ++k) EXPECT_EQ(a.terms[k].seconds, b.terms[k].seconds) << what << " " << a.terms[k].name;
      EXPECT_EQ(a.stage_parameters, b.stage_parameters) << what;
    }
  }
}

}  // namespace
}  // namespace census
