// The command line: answers, and refusals of bad input (one line on stderr, exit code 2, nothing on
// stdout).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

// A config.json written for one test.
std::string write_config(const std::string& name, const std::string& text) { return testing::write_test_file(name, text); }

const char* kToyLlama = R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
  "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512, "num_hidden_layers": 2,
  "vocab_size": 4096})";

void expect_refused(const CliRun& run, const std::string& mentions) {
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find(mentions), std::string::npos) << run.err;
}

TEST(Cli, LayerAsJson) {
  const CliRun run = census({"layer", write_config("toy.json", kToyLlama), "--seq-length", "128", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("saved"), 1360896);    // the oracle's llama_h256_s128
  EXPECT_EQ(json.at("working"), 1491520);
}

// The layer under Liger's kernels (nn/liger_kernels.h): its two norms keep their bf16 input and an fp32 rstd
// where the eager norms keep an fp32 copy, the rstd and the normalized input, 4 S H fewer each; its MLP keeps
// the gate and up projections and their product, 2 S I fewer than the eager one's four. At S = 128, H = 256,
// I = 512: 2 x 131,072 + 131,072 = 393,216 B. Beside HyperParallel's selective policy it is refused.
TEST(Cli, LayerUnderLigersKernels) {
  const std::string toy = write_config("toy.json", kToyLlama);
  const CliRun eager = census({"layer", toy, "--seq-length", "128", "--format", "json"});
  const CliRun liger = census({"layer", toy, "--seq-length", "128", "--format", "json", "--liger"});
  ASSERT_EQ(liger.code, 0) << liger.err;
  EXPECT_EQ(nlohmann::json::parse(eager.out).at("saved").get<int64_t>() -
                nlohmann::json::parse(liger.out).at("saved").get<int64_t>(),
            2 * 4 * 128 * 256 + 2 * 128 * 512);
  expect_refused(census({"layer", toy, "--liger", "--selective"}), "--liger with --selective");
  expect_refused(census({"layer", "phi-4", "--liger"}), "phi3");
}

TEST(Cli, ActivationsAsJsonHasTheRecordFields) {
  const CliRun run = census({"activations", write_config("toy.json", kToyLlama), "--seq-length", "128", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto record = nlohmann::json::parse(run.out).at("decoder");
  for (const char* field : {"saved", "saved_tp", "working", "working_tp", "seq_length", "ops", "ops_tp"})
    EXPECT_TRUE(record.contains(field)) << field;
  EXPECT_EQ(record.at("saved"), 4232.0);
}

// A kind priced through the model's stack (DeepSeek-V4's layers cannot run alone) states its plain
// layer's bytes only: the table shows its selective figures as not stated ("-"), never as 0, and lists
// no bytes by op; a kind whose layer runs alone states them.
TEST(Cli, ActivationsOfAStackKindStateNoSelectiveFigures) {
  const CliRun stacked = census({"activations", "deepseek-v4-flash", "--seq-length", "256"});
  ASSERT_EQ(stacked.code, 0) << stacked.err;
  EXPECT_NE(stacked.out.find("heavily_compressed_attention+moe                          -                  -"),
            std::string::npos) << stacked.out;
  EXPECT_EQ(stacked.out.find("saved by op"), std::string::npos);
  EXPECT_NE(stacked.out.find("- : not stated for a kind whose layers cannot run alone"), std::string::npos);
  const CliRun json = census({"activations", "deepseek-v4-flash", "--seq-length", "256", "--format", "json"});
  const nlohmann::json records = nlohmann::json::parse(json.out);
  for (const auto& [kind, record] : records.items())
    for (const char* field : {"selective", "selective_tp", "selective_attention_mm", "selective_ffn_mm", "ops", "ops_tp"})
      EXPECT_FALSE(record.contains(field)) << kind << " " << field;
  const CliRun alone = census({"activations", write_config("toy.json", kToyLlama), "--seq-length", "128"});
  EXPECT_NE(alone.out.find("saved by op, decoder layer"), std::string::npos);
  EXPECT_EQ(alone.out.find("not stated"), std::string::npos);
}

TEST(Cli, SavedOpsSumToSaved) {
  const CliRun ops = census({"saved-ops", write_config("toy.json", kToyLlama), "--seq-length", "128", "--format", "json"});
  const CliRun layer = census({"layer", write_config("toy.json", kToyLlama), "--seq-length", "128", "--format", "json"});
  const auto by_op = nlohmann::json::parse(ops.out);
  double sum = 0;
  for (const auto& [op, value] : by_op.items()) sum += value.get<double>();
  EXPECT_EQ(sum * 128, nlohmann::json::parse(layer.out).at("saved").get<double>());
}

TEST(Cli, ShippedModelsAreListedAndRun) {
  const CliRun models = census({"models", "--format", "json"});
  ASSERT_EQ(models.code, 0);
  const auto list = nlohmann::json::parse(models.out);
  std::vector<std::string> names;
  for (const auto& model : list) names.push_back(model.at("name"));
  for (const char* name : {"llama-3.1-8b", "llama-3.1-70b", "mistral-7b-v0.3", "qwen2.5-7b", "qwen3-8b", "qwen3-32b"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  // activations runs every model (a layer that runs only inside its model's forward, through the stack).
  for (const std::string& name : names) EXPECT_EQ(census({"activations", name, "--seq-length", "256"}).code, 0) << name;
}

TEST(Cli, NoArgumentsRunsActivationsOfTheDefaultModel) {
  const CliRun run = census({});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("llama-3.1-8b"), std::string::npos);
  EXPECT_NE(run.out.find("saved_tp"), std::string::npos);
}

TEST(Cli, ExplainListsStoragesLargestFirst) {
  const CliRun run = census({"explain", write_config("toy.json", kToyLlama), "--seq-length", "128", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("storages").size(), 21u);
  EXPECT_EQ(json.at("storages")[0].at("bytes"), 131072);
}

TEST(CliRefuses, MissingFile) { expect_refused(census({"layer", "/no/such/config.json"}), "cannot be read"); }

TEST(CliRefuses, InvalidJson) {
  expect_refused(census({"layer", write_config("bad.json", "{\"model_type\": ")}), "not valid JSON");
}

TEST(CliRefuses, UnknownModelTypeListingTheKnownOnes) {
  expect_refused(census({"layer", write_config("gpt.json", R"({"model_type": "gpt2"})")}), "known: deepseek_v3, ");
}

TEST(CliRefuses, MissingModelType) {
  expect_refused(census({"layer", write_config("none.json", R"({"hidden_size": 64})")}), "model_type");
}

TEST(CliRefuses, NonPositiveOrNonIntegerSizes) {
  std::string zero = kToyLlama;
  zero.replace(zero.find("\"hidden_size\": 256"), 18, "\"hidden_size\": 0");
  expect_refused(census({"layer", write_config("zero.json", zero)}), "hidden_size");
  std::string text = kToyLlama;
  text.replace(text.find("\"intermediate_size\": 512"), 24, "\"intermediate_size\": \"wide\"");
  expect_refused(census({"layer", write_config("text.json", text)}), "intermediate_size");
  std::string fraction = kToyLlama;
  fraction.replace(fraction.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 2.5");
  expect_refused(census({"layer", write_config("fraction.json", fraction)}), "num_hidden_layers");
}

TEST(CliRefuses, HeadsThatDoNotDivide) {
  std::string kv = kToyLlama;
  kv.replace(kv.find("\"num_key_value_heads\": 2"), 24, "\"num_key_value_heads\": 3");
  expect_refused(census({"layer", write_config("kv.json", kv)}), "num_key_value_heads");
  expect_refused(census({"layer", write_config("toy.json", kToyLlama), "--tp", "3"}), "--tp");
  const char* no_head_dim = R"({"model_type": "llama", "hidden_size": 250, "num_attention_heads": 8,
    "intermediate_size": 512, "num_hidden_layers": 2})";
  expect_refused(census({"layer", write_config("hd.json", no_head_dim)}), "num_attention_heads");
}

TEST(CliRefuses, LayerIndexOutOfRange) {
  expect_refused(census({"layer", write_config("toy.json", kToyLlama), "--layer-index", "2"}), "--layer-index");
  expect_refused(census({"layer", write_config("toy.json", kToyLlama), "--layer-index", "-1"}), "--layer-index");
}

TEST(CliRefuses, NonPositiveSequence) {
  expect_refused(census({"layer", write_config("toy.json", kToyLlama), "--seq-length", "0"}), "--seq-length");
  expect_refused(census({"layer", write_config("toy.json", kToyLlama), "--seq-length", "-5"}), "--seq-length");
  expect_refused(census({"layer", write_config("toy.json", kToyLlama), "--seq-length", "many"}), "seq-length");
}

TEST(CliRefuses, CountsThatWouldOverflow64Bits) {
  expect_refused(census({"layer", "llama-3.1-70b", "--seq-length", "4000000000"}), "overflow");
  std::string huge = kToyLlama;
  huge.replace(huge.find("\"intermediate_size\": 512"), 24, "\"intermediate_size\": 99999999999999");
  expect_refused(census({"layer", write_config("huge.json", huge)}), "intermediate_size");
}

const char* kToyQwen3Moe = R"({"model_type": "qwen3_moe", "hidden_size": 256, "num_attention_heads": 8,
  "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512, "num_hidden_layers": 2, "vocab_size": 4096,
  "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256})";

TEST(CliRefuses, UnknownExpertsImplementationAndModelsWithoutExperts) {
  expect_refused(census({"layer", write_config("moe.json", kToyQwen3Moe), "--experts-implementation", "batched"}),
                 "grouped_mm");
  expect_refused(census({"layer", write_config("toy.json", kToyLlama), "--experts-implementation", "eager"}),
                 "has no experts");
}

TEST(CliRefuses, MoeConfigsNoRouterCanRun) {
  std::string top_k = kToyQwen3Moe;
  top_k.replace(top_k.find("\"num_experts_per_tok\": 2"), 24, "\"num_experts_per_tok\": 9");
  expect_refused(census({"layer", write_config("topk.json", top_k)}), "num_experts_per_tok");
  std::string none = kToyQwen3Moe;
  none.replace(none.find("\"num_experts\": 8"), 16, "\"num_experts\": 0");
  expect_refused(census({"layer", write_config("none.json", none)}), "at least one expert");
  const char* groups = R"({"model_type": "deepseek_v3", "n_routed_experts": 12, "n_group": 8})";
  expect_refused(census({"layer", write_config("groups.json", groups)}), "n_group");
  // TP must divide the experts' width too.
  std::string width = kToyQwen3Moe;
  width.replace(width.find("\"moe_intermediate_size\": 256"), 28, "\"moe_intermediate_size\": 250");
  expect_refused(census({"layer", write_config("width.json", width), "--tp", "4"}), "moe_intermediate_size");
}

TEST(Cli, MoeLayerUnderBothExpertsImplementations) {
  const std::string path = write_config("moe.json", kToyQwen3Moe);
  const CliRun grouped = census({"layer", path, "--seq-length", "128", "--format", "json"});
  const CliRun eager = census({"layer", path, "--seq-length", "128", "--format", "json", "--experts-implementation", "eager"});
  ASSERT_EQ(grouped.code, 0);
  ASSERT_EQ(eager.code, 0);
  // The oracle's grouped_mm number for this layer at 128 tokens.
  EXPECT_EQ(nlohmann::json::parse(grouped.out).at("saved").get<int64_t>(), 1887008);
  EXPECT_NE(grouped.out, eager.out);
}

TEST(Cli, ExplainStatesHowAMoeLayerWasRouted) {
  const std::string path = write_config("moe.json", kToyQwen3Moe);
  const auto grouped = nlohmann::json::parse(census({"explain", path, "--seq-length", "64", "--format", "json"}).out);
  EXPECT_NE(grouped.at("routing").get<std::string>().find("any routing"), std::string::npos);
  const auto eager = nlohmann::json::parse(
      census({"explain", path, "--seq-length", "64", "--format", "json", "--experts-implementation", "eager"}).out);
  EXPECT_NE(eager.at("routing").get<std::string>().find("balanced"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(census({"explain", write_config("toy.json", kToyLlama), "--format", "json"}).out)
                   .contains("routing"));
}

TEST(Cli, LayersPrintsTheStackWithItsMtpGroup) {
  const CliRun run = census({"layers", "deepseek-v3", "--format", "json"});
  ASSERT_EQ(run.code, 0);
  const auto stack = nlohmann::json::parse(run.out);
  ASSERT_EQ(stack.size(), 3u);
  EXPECT_EQ(stack[0], (nlohmann::json{{"kind", "dense"}, {"count", 3}}));
  EXPECT_EQ(stack[1], (nlohmann::json{{"kind", "moe"}, {"count", 58}}));
  EXPECT_EQ(stack[2], (nlohmann::json{{"kind", "moe"}, {"count", 1}, {"mtp", true}}));
}

const std::string kRecipe = std::string(CENSUS_TEST_DATA) + "/recipes/qwen3_moe_train.yaml";

TEST(Cli, TrainYamlReplacesModules) {
  const CliRun plain = census({"layer", "qwen3-30b-a3b", "--seq-length", "256", "--format", "json"});
  const CliRun fused = census({"layer", "qwen3-30b-a3b", "--seq-length", "256", "--format", "json", "--train-yaml", kRecipe});
  ASSERT_EQ(fused.code, 0) << fused.err;
  EXPECT_LT(nlohmann::json::parse(fused.out).at("saved").get<int64_t>(), nlohmann::json::parse(plain.out).at("saved").get<int64_t>());
}

TEST(CliRefuses, TrainYamlEntriesTheCensusCannotInstall) {
  auto recipe = [](const std::string& entry) {
    return write_config("train.yaml", "plan_overrides:\n  - match: \"*.mlp\"\n    when: ep\n" + entry);
  };
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml",
                         recipe("  - match: \"*.self_attn\"\n    replace_module: some.factory\n")}),
                 "plan_overrides[1]: states replace_module without module_type");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml",
                         recipe("  - match: 3\n    module_type: a.B\n    replace_module: x.y\n")}),
                 "plan_overrides[1]");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml",
                         recipe("  - match: {a: 1}\n    module_type: a.B\n    replace_module: x.y\n")}),
                 "match must be a string or a list");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml",
                         recipe("  - match: \"*.self_attn\"\n    module_type: a.B\n    replace_module:\n"
                                "      _target_: my.own.replace_attention\n")}),
                 "is not known to the census");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml",
                         recipe("  - match: \"*.self_attn\"\n    module_type: a.B\n    replace_module: "
                                "hyper_parallel.models.deepseek_v32.adapter.conversion.module_replacement."
                                "replace_deepseek_v32_dsa_attention\n")}),
                 "native extension");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml", "/no/such/train.yaml"}), "cannot be read");
  expect_refused(census({"layer", "deepseek-v3", "--train-yaml", kRecipe}), "take no module replacements yet");
}

TEST(CliRefuses, UnknownKernelProfileAndNpuModulesUnderCuda) {
  expect_refused(census({"layer", "llama-3.1-8b", "--kernels", "tpu"}), "not a kernel profile");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--kernels", "cuda", "--train-yaml", kRecipe}), "use --kernels npu");
  EXPECT_EQ(census({"activations", "llama-3.1-8b", "--kernels", "cuda"}).code, 0);
}

TEST(CliRefuses, UnknownCommandAndFormat) {
  expect_refused(census({"memory", "llama-3.1-8b"}), "census --help");
  expect_refused(census({"layer", "llama-3.1-8b", "--format", "yaml"}), "--format: 'yaml' is not known; give table or json");
  expect_refused(census({"layer"}), "census --help");
}

TEST(CliRefuses, UnpricedActivation) {
  std::string gelu = kToyLlama;
  gelu.insert(1, "\"hidden_act\": \"gelu\", ");
  expect_refused(census({"layer", write_config("gelu.json", gelu)}), "hidden_act");
}

}  // namespace
}  // namespace census

namespace census {
namespace {

TEST(CliSelective, LayerAndExplainUnderThePolicy) {
  const CliRun run = census({"layer", write_config("toy.json", kToyLlama), "--seq-length", "128", "--selective",
                             "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("kept"), 475136);     // the oracle's selective_tp1 kept bytes
  EXPECT_FALSE(json.contains("saved"));   // what the policy keeps is not what a plain layer saves
  EXPECT_EQ(json.at("working"), 1556992);
  EXPECT_EQ(json.at("selective_attention_mm"), 0.5);
  const CliRun explain = census({"explain", write_config("toy.json", kToyLlama), "--seq-length", "128",
                                 "--selective", "--format", "json"});
  ASSERT_EQ(explain.code, 0) << explain.err;
  const auto rows = nlohmann::json::parse(explain.out);
  int64_t kept = 0;
  for (const auto& row : rows.at("storages")) kept += row.at("bytes").get<int64_t>();
  EXPECT_EQ(kept, rows.at("kept").get<int64_t>());
}

TEST(CliSelective, ActivationsWithAStackFileAndTheOutputLayer) {
  const std::string stack = write_config("stack.yaml", "- {kind: decoder, count: 2}\n- {kind: decoder, count: 1, mtp: true}\n");
  const CliRun run = census({"activations", write_config("toy.json", kToyLlama), "--seq-length", "128",
                             "--layers", stack, "--output", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("decoder").at("selective"), 1024.0);
  EXPECT_EQ(json.at("decoder").at("selective_tp"), 2688.0);
  EXPECT_EQ(json.at("output").at("saved_tp"), 16384.0);
  const std::string as_json = write_config("stack.json", R"({"layers": [{"kind": "decoder", "count": 2}]})");
  EXPECT_EQ(census({"activations", write_config("toy.json", kToyLlama), "--layers", as_json}).code, 0);
}

TEST(CliRefuses, StackFilesThatDoNotFitTheModel) {
  const std::string toy = write_config("toy.json", kToyLlama);
  expect_refused(census({"activations", toy, "--layers", write_config("s1.yaml", "- {kind: decoder, count: 3}\n")}),
                 "count 3 layers");
  expect_refused(census({"activations", toy, "--layers",
                         write_config("s2.yaml", "- {kind: decoder, count: 1, mtp: true}\n- {kind: decoder, count: 2}\n")}),
                 "MTP groups come last");
  expect_refused(census({"activations", toy, "--layers", write_config("s3.yaml", "- {kind: moe, count: 2}\n")}),
                 "not a layer kind");
  expect_refused(census({"activations", toy, "--layers", write_config("s4.yaml", "- {kind: decoder, count: -2}\n")}),
                 "positive integer");
  expect_refused(census({"activations", toy, "--layers", write_config("s5.yaml", "- {kind: decoder, count: 2, size: 1}\n")}),
                 "unknown key");
  expect_refused(census({"activations", toy, "--layers", write_config("s6.yaml", "[{kind: decoder, count: 2")}),
                 "not valid JSON or YAML");
  expect_refused(census({"activations", toy, "--layers", "/no/such/stack.yaml"}), "cannot be read");
  expect_refused(census({"output", toy, "--tp", "2"}), "vocabulary");
}

}  // namespace
}  // namespace census
