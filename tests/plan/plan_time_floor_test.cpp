// The lower bounds the search ranks by before it estimates (plan/plan.cpp): a shape's floor (Note [The
// shape's floor], plan/plan_time.cpp) until it nears the front of the line, then its shape bound, which
// stands for every variant of it (a recompute choice, a ZeRO stage or FSDP) until it nears the front,
// then each variant's incomplete estimate. The search takes the layouts in the order their estimates
// give only where floor <= shape bound <= every variant's estimate (the last up to rounding: where a
// variant adds nothing, its estimate is the bound's sum taken in another order, a few ulps apart). Held on every shape a search tries
// (every TP, CP, EP, expert TP, PP, V, split and micro-batch size the layout rules pass), each under
// every recompute mode per layer kind and every ZeRO stage and FSDP, of the Llama toy, the MoE toy
// (experts, EP) and the DeepSeek-V4 toy (layers priced through the stack) on 16 devices; TP's shapes of
// the first two also with sequence parallelism (DTensor's plan's layers, the vocabulary-parallel ends).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "models/registry.h"
#include "plan/plan_device.h"
#include "plan/plan_layout.h"
#include "plan/plan_time.h"
#include "../step/step_cases.h"

namespace census {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

ModelConfig config_of(const nlohmann::json& json) {
  auto config = read_config(json);
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

// Every shape the search's rules pass: the layouts but their recompute and ZeRO stage.
std::vector<Layout> shapes(const ModelConfig& c, const RunShape& run) {
  std::vector<Layout> out;
  const int64_t n = run.gpus, layers = c.num_hidden_layers;
  for (int64_t tp : divisors(n))
    for (int64_t cp : divisors(n / tp))
      for (int64_t pp : divisors(n / tp / cp))
        for (int64_t ep : c.moe.num_experts > 0 ? divisors(c.moe.num_experts) : std::vector<int64_t>{1})
          for (int64_t etp : tp > 1 && ep > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0})
            for (int64_t v = 1; v == 1 || (pp > 1 && v * pp <= layers); ++v) {
              std::vector<PipelineSplit> splits = balanced_splits(layers, pp, v);
              for (const PipelineSplit& split : splits) {
                const int64_t dp = n / tp / cp / pp;
                if (run.global_batch % dp != 0) continue;
                for (int64_t mbs : divisors(run.global_batch / dp)) {
                  if (mbs > 4) break;
                  Layout l;
                  l.tp = tp, l.cp = cp, l.ep = ep, l.etp = etp, l.pp = pp, l.dp = dp, l.virtual_stages = v;
                  l.schedule = v > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B;
                  l.split = split, l.micro_batch_size = mbs, l.micro_batches = run.global_batch / dp / mbs;
                  if (!layout_rule_broken(c, run, l).empty()) continue;
                  out.push_back(l);
                  // TP's other mode: DTensor's plan with sequence parallelism, where census step runs
                  // it (a family the plan names, no CP or EP beside it).
                  if (tp > 1 && cp == 1 && ep == 1 && c.family->names_llama_tp_plan) {
                    l.sp = true;
                    out.push_back(l);
                  }
                }
              }
            }
  return out;
}

// Every recompute mode for each layer kind (all the search's choices, and more).
std::vector<RecomputeChoice> recompute_variants(const ModelConfig& c) {
  std::vector<std::string> kinds;
  for (const std::string& kind : layer_kinds(c))
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  constexpr Recompute kModes[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  std::vector<RecomputeChoice> out;
  int64_t combinations = 1;
  for (size_t k = 0; k < kinds.size(); ++k) combinations *= 3;
  for (int64_t code = 0; code < combinations; ++code) {
    RecomputeChoice choice{kModes[code % 3], {}};
    for (int64_t rest = code / 3, k = 1; k < static_cast<int64_t>(kinds.size()); ++k, rest /= 3)
      if (kModes[rest % 3] != choice.all) choice.by_kind.emplace_back(kinds[static_cast<size_t>(k)], kModes[rest % 3]);
    out.push_back(choice);
  }
  return out;
}

TEST(PlanTimeFloor, NeverAboveTheShapeBound) {
  const nlohmann::json llama = nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192})");
  const nlohmann::json moe = nlohmann::json::parse(R"({"model_type": "qwen3_moe", "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512,
    "num_hidden_layers": 4, "vocab_size": 4096, "max_position_embeddings": 8192, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 256, "mlp_only_layers": [0]})");
  const std::vector<std::pair<std::string, nlohmann::json>> models = {
      {"llama toy", llama}, {"moe toy", moe}, {"deepseek-v4 toy", testing::step_case("deepseek_v4_toy_L4_s128_single").at("config")}};
  for (const auto& [name, json] : models) {
    const ModelConfig c = config_of(json);
    RunShape run;
    run.gpus = 16, run.gpus_per_node = 8, run.seq_length = 128, run.global_batch = 32;
    const std::vector<Layout> layouts = shapes(c, run);
    ASSERT_GE(layouts.size(), 20u) << name;
    TimeModel time(c, run, *find_device("h100"), TimeOptions{});
    const std::vector<RecomputeChoice> recomputes = recompute_variants(c);
    ASSERT_GE(recomputes.size(), 3u) << name;
    for (const Layout& l : layouts) {
      const std::string what = name + " TP " + std::to_string(l.tp) + " CP " + std::to_string(l.cp) + " EP " +
                               std::to_string(l.ep) + " ETP " + std::to_string(l.etp) + " PP " + std::to_string(l.pp) +
                               " V " + std::to_string(l.virtual_stages) + " " + split_name(l.split) + " b " +
                               std::to_string(l.micro_batch_size) + (l.sp ? " SP" : "");
      const double floor = time.shape_floor(l), bound = time.shape_bound(l);
      EXPECT_GT(floor, 0) << what;
      EXPECT_LE(floor, bound) << what;
      for (const RecomputeChoice& recompute : recomputes)
        for (int zero = 0; zero <= (l.dp * l.cp > 1 ? 4 : 0); ++zero) {
          Layout variant = l;
          variant.recompute = recompute;
          variant.zero = std::min(zero, 3);
          variant.fsdp = zero == 4;  // FSDP
          EXPECT_LE(bound * (1 - 1e-9), time.estimate(variant, /*complete=*/false).seconds)
              << what << " " << recompute_text(recompute) << " ZeRO " << zero;
        }
    }
  }
}

}  // namespace
}  // namespace census
