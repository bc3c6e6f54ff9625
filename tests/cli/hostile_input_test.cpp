// Hostile input on the command line: whatever a config, an option, a stack file or a recipe holds,
// the census answers with its numbers or refuses in one line on stderr with exit code 2. It never
// crashes, never hangs, never reads a device or a FIFO, and never prints a count that wrapped.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_run.h"
#include "models/registry.h"

namespace census {
namespace {

using testing::CliRun;
using testing::census;

std::string write_file(const std::string& name, const std::string& text) {
  return testing::write_test_file("hostile_" + name, text);
}

std::string write_json(const std::string& name, const nlohmann::json& json) { return write_file(name, json.dump()); }

// One line on stderr, exit code 2, nothing on stdout, naming `mentions`; no raw control character.
void expect_refused(const CliRun& run, const std::string& mentions) {
  EXPECT_EQ(run.code, 2) << run.out;
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  ASSERT_FALSE(run.err.empty());
  EXPECT_EQ(run.err.back(), '\n');
  for (size_t i = 0; i + 1 < run.err.size(); ++i) {
    const auto byte = static_cast<unsigned char>(run.err[i]);
    EXPECT_TRUE(byte >= 0x20 && byte != 0x7f) << "control character " << int(byte) << " in: " << run.err;
  }
  EXPECT_NE(run.err.find(mentions), std::string::npos) << run.err;
}

const nlohmann::json kToyLlama = {{"model_type", "llama"}, {"hidden_size", 256}, {"num_attention_heads", 8},
                                  {"num_key_value_heads", 2}, {"head_dim", 32}, {"intermediate_size", 512},
                                  {"num_hidden_layers", 2}, {"vocab_size", 4096}};

std::vector<std::string> model_types() {
  std::vector<std::string> out;
  for (const Family* family : families()) out.emplace_back(family->model_type);
  return out;
}

// 1. User text is echoed escaped: a refusal stays one line.
TEST(HostileEcho, ModelTypeWithNewlineCrOrNul) {
  for (const std::string& type : {std::string("llama\nfalcon"), std::string("llama\rfalcon"), std::string("lla\0ma", 6),
                                 std::string("\x1b[31mred")}) {
    expect_refused(census({"layer", write_json("type.json", {{"model_type", type}})}), "model_type");
  }
  const CliRun run = census({"layer", write_json("type.json", {{"model_type", "llama\nfalcon"}})});
  EXPECT_NE(run.err.find("'llama\\nfalcon'"), std::string::npos) << run.err;
}

TEST(HostileEcho, LongValuesAreCut) {
  const CliRun run = census({"layer", write_json("long.json", {{"model_type", std::string(100000, 'x')}})});
  expect_refused(run, "model_type");
  EXPECT_LT(run.err.size(), 1000u);
}

TEST(HostileEcho, TextFieldsOfEveryFamily) {
  for (const std::string& type : model_types()) {
    for (const char* field : {"hidden_act", "hidden_activation", "_experts_implementation"}) {
      const CliRun run = census({"layer", write_json("act.json", {{"model_type", type}, {field, "silu\nevil"}})});
      if (run.code == 0) continue;  // a field this family does not read
      expect_refused(run, "");
    }
    // Every family reads its activation under one of these names (Nemotron-H: mlp_ and mamba_hidden_act).
    expect_refused(census({"layer", write_json("act.json", {{"model_type", type}, {"hidden_act", "silu\nevil"},
                                                            {"hidden_activation", "silu\nevil"},
                                                            {"mlp_hidden_act", "silu\nevil"},
                                                            {"mamba_hidden_act", "silu\nevil"}})}),
                   "must be a name");
  }
}

TEST(HostileEcho, OptionsPathsAndFileContents) {
  const std::string toy = write_json("toy.json", kToyLlama);
  expect_refused(census({"layer", toy, "--kernels", "npu\ncuda"}), "--kernels");
  expect_refused(census({"layer", write_json("moe.json", {{"model_type", "qwen3_moe"}}), "--experts-implementation",
                         "eager\r\nx"}),
                 "--experts-implementation");
  expect_refused(census({"layer", "/no/such\ndir/config.json"}), "cannot be read");
  expect_refused(census({"layer", toy, "--format", "json\nx"}), "--format: 'json\\nx' is not known; give table or json");
  expect_refused(census({"activations", toy, "--layers", write_file("k.yaml", "- {\"ki\\nnd\": decoder, count: 2}\n")}),
                 "unknown key");
  expect_refused(census({"activations", toy, "--layers", write_file("k.yaml", "- {kind: \"deco\\nder\", count: 2}\n")}),
                 "not a layer kind");
  expect_refused(census({"activations", toy, "--layers", write_file("k.yaml", "- {kind: decoder, count: \"2\\n3\"}\n")}),
                 "count");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml",
                         write_file("t.yaml", "plan_overrides:\n  - match: \"*.mlp\"\n    module_type: a.B\n"
                                              "    replace_module: \"evil\\nfactory\"\n")}),
                 "is not known");
}

// 2. A deeply nested value is refused; formatting it for the refusal does not recurse into it.
TEST(HostileNesting, DeepValueInAReadFieldOfEveryFamily) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& type : model_types()) {
    for (const char* field : {"hidden_size", "hidden_act", "layer_types", "rope_parameters", "mlp_only_layers"}) {
      const std::string text = R"({"model_type": ")" + type + R"(", ")" + field + R"(": )" + deep + "}";
      const CliRun run = census({"layer", write_file("deep.json", text)});
      if (run.code == 0) continue;  // a field this family does not read
      expect_refused(run, "");
    }
  }
  const std::string text = R"({"model_type": "llama", "hidden_size": )" + deep + "}";
  expect_refused(census({"layer", write_file("deep.json", text)}), "hidden_size");
}

// 3. A layer count no census could build is refused before any per-layer data is built.
TEST(HostileLayers, HugeLayerCountsOfEveryFamily) {
  for (const std::string& type : model_types())
    for (const int64_t layers : {int64_t{1} << 21, int64_t{1} << 32, (int64_t{1} << 32) + 1})
      expect_refused(census({"layers", write_json("layers.json", {{"model_type", type}, {"num_hidden_layers", layers}})}),
                     "num_hidden_layers");
}

TEST(HostileLayers, ManyLayersAndMlpOnlyLayersStayFast) {
  nlohmann::json config = {{"model_type", "qwen3_moe"}, {"num_hidden_layers", 1 << 17}};
  nlohmann::json dense = nlohmann::json::array();
  for (int i = 0; i < (1 << 17); i += 2) dense.push_back(i);
  config["mlp_only_layers"] = dense;
  const CliRun run = census({"layers", write_json("many.json", config), "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto stack = nlohmann::json::parse(run.out);
  ASSERT_EQ(stack.size(), size_t{1} << 17);  // dense, moe, dense, moe, ...
  EXPECT_EQ(stack[0], (nlohmann::json{{"kind", "dense"}, {"count", 1}}));
  EXPECT_EQ(stack[1], (nlohmann::json{{"kind", "moe"}, {"count", 1}}));
}

// 4. Products past 2^63 are weighed, never printed wrapped.
TEST(HostileProducts, DeepseekV3WithHugeHeadDims) {
  for (const char* field : {"v_head_dim", "qk_nope_head_dim", "qk_rope_head_dim", "kv_lora_rank", "q_lora_rank"}) {
    const CliRun run = census({"flops", "deepseek-v3", "--format", "json"});
    ASSERT_EQ(run.code, 0);
    nlohmann::json config = {{"model_type", "deepseek_v3"}, {field, int64_t{1} << 32}};
    expect_refused(census({"flops", write_json("mla.json", config), "--layer-index", "5"}), "overflow");
  }
}

TEST(HostileProducts, LinearAttentionExpertsAndHeads) {
  const std::pair<const char*, nlohmann::json> cases[] = {
      {"qwen3_next", {{"linear_num_value_heads", 1 << 30}, {"linear_value_head_dim", 1 << 30}}},
      {"qwen3_next", {{"linear_key_head_dim", int64_t{1} << 32}, {"linear_num_key_heads", 1 << 16},
                      {"linear_num_value_heads", 1 << 16}}},
      {"qwen3_moe", {{"num_experts", int64_t{1} << 32}, {"num_experts_per_tok", 1 << 30}}},
      {"qwen3_moe", {{"moe_intermediate_size", int64_t{1} << 32}, {"num_experts", 1 << 20}, {"num_experts_per_tok", 1 << 16}}},
      {"llama", {{"num_attention_heads", int64_t{1} << 32}, {"num_key_value_heads", 1}, {"head_dim", int64_t{1} << 32}}},
      {"mixtral", {{"num_local_experts", int64_t{1} << 32}, {"intermediate_size", int64_t{1} << 32}}},
  };
  for (const auto& [type, fields] : cases) {
    nlohmann::json config = fields;
    config["model_type"] = type;
    for (const char* command : {"flops", "layer", "parameters", "traffic"}) {
      const CliRun run = census({command, write_json("wide.json", config), "--seq-length", "1"});
      expect_refused(run, "overflow");
    }
  }
}

TEST(HostileProducts, NoPrintedCountIsNegative) {
  for (const char* command : {"flops", "traffic", "parameters"}) {
    const CliRun run = census({command, "deepseek-v3", "--layer-index", "5", "--format", "json"});
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_EQ(run.out.find('-'), std::string::npos) << run.out;
  }
}

// 5, 6, 9. Stack files: sums that wrap, keys that are not names, keys twice, groups out of model order.
TEST(HostileStack, CountsWhoseSumWraps) {
  const std::string toy = write_json("toy.json", kToyLlama);
  const std::string wraps = "- {kind: decoder, count: 9223372036854775807}\n- {kind: decoder, count: 3}\n";
  expect_refused(census({"activations", toy, "--layers", write_file("wrap.yaml", wraps)}), "count more than 2^63");
  expect_refused(census({"activations", toy, "--layers", write_file("big.yaml", "- {kind: decoder, count: 99999999999999999999}\n")}),
                 "count must be a positive integer");
}

TEST(HostileStack, KeysThatAreSequencesOrMappings) {
  const std::string toy = write_json("toy.json", kToyLlama);
  expect_refused(census({"activations", toy, "--layers", write_file("seq.yaml", "- {[a, b]: decoder, count: 2}\n")}),
                 "key that is a list or mapping");
  expect_refused(census({"activations", toy, "--layers", write_file("map.yaml", "- {{a: 1}: decoder, count: 2}\n")}),
                 "key that is a list or mapping");
  expect_refused(census({"activations", toy, "--layers", write_file("val.yaml", "- {kind: [decoder], count: 2}\n")}),
                 "lacks its kind");
  expect_refused(census({"activations", toy, "--layers", write_file("mtp.yaml", "- {kind: decoder, count: 2, mtp: [1]}\n")}),
                 "mtp must be true or false");
}

TEST(HostileStack, CountStatedTwice) {
  const std::string toy = write_json("toy.json", kToyLlama);
  expect_refused(census({"activations", toy, "--layers", write_file("twice.yaml", "- {kind: decoder, count: 1, count: 2}\n")}),
                 "states a key twice");
  expect_refused(census({"activations", toy, "--layers",
                         write_file("twice.json", R"([{"kind": "decoder", "kind": "decoder", "count": 2}])")}),
                 "states a key twice");
}

TEST(HostileStack, GroupsMustFollowTheModelsLayerOrder) {
  expect_refused(census({"activations", "deepseek-v3", "--layers",
                         write_file("order.yaml", "- {kind: moe, count: 3}\n- {kind: dense, count: 58}\n")}),
                 "at layer 0, where this deepseek_v3 model has dense");
  expect_refused(census({"activations", "deepseek-v3", "--layers",
                         write_file("cross.yaml", "- {kind: dense, count: 4}\n- {kind: moe, count: 57}\n")}),
                 "at layer 3");
  // A group may split one of the model's runs.
  const CliRun split = census({"activations", "deepseek-v3", "--seq-length", "64", "--layers",
                               write_file("split.yaml", "- {kind: dense, count: 1}\n- {kind: dense, count: 2}\n"
                                                        "- {kind: moe, count: 58}\n- {kind: moe, count: 1, mtp: true}\n")});
  EXPECT_EQ(split.code, 0) << split.err;
}

// 7, 8. Directories and special files are refused unread; a FIFO without a writer does not block.
TEST(HostileFiles, DirectoriesAsConfigStackAndRecipe) {
  const std::string dir = ::testing::TempDir();
  expect_refused(census({"layer", dir}), "is a directory");
  expect_refused(census({"activations", "llama-3.1-8b", "--layers", dir}), "is a directory");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml", dir}), "is a directory");
}

TEST(HostileFiles, DevicesAndFifos) {
  const std::string fifo = ::testing::TempDir() + "/hostile_fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : std::vector<std::string>{"/dev/zero", "/dev/urandom", "/dev/null", fifo}) {
    expect_refused(census({"layer", path}), "not a regular file");
    expect_refused(census({"activations", "llama-3.1-8b", "--layers", path}), "not a regular file");
    expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml", path}), "not a regular file");
  }
  ::unlink(fifo.c_str());
}

// 10. An empty enum value is refused, not read as the default.
TEST(HostileOptions, EmptyValues) {
  const std::string toy = write_json("toy.json", kToyLlama);
  expect_refused(census({"layer", toy, "--kernels", ""}), "--kernels: is empty");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--experts-implementation", ""}), "--experts-implementation: is empty");
  expect_refused(census({"layer", toy, "--train-yaml", ""}), "--train-yaml: is empty");
  expect_refused(census({"activations", toy, "--layers", ""}), "--layers: is empty");
  expect_refused(census({"layer", toy, "--format", ""}), "--format: is empty; give table or json, or leave the option out");
  expect_refused(census({"layer", toy, "--gdn-backend", ""}), "--gdn-backend: is empty; give eager, triton or kernel");
  for (const char* option : {"--schedule", "--recompute", "--optimizer", "--master-weights", "--grad-dtype", "--format",
                             "--reshard-after-forward"})
    expect_refused(census({"step", toy, option, ""}), std::string(option) + ": is empty; give ");
  for (const char* option : {"--master-weights", "--grad-dtype", "--format"})
    expect_refused(census({"plan", toy, "--gpus", "2", "--device", "h100", option, ""}), std::string(option) + ": is empty; give ");
  expect_refused(census({"layer", ""}), "cannot be read");
}

// 11. A value that is present and wrong is refused, not read as absent.
TEST(HostilePresentButWrong, RopeParametersAndTextConfig) {
  for (const char* type : {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"}) {
    for (const nlohmann::json& rope : {nlohmann::json{{"partial_rotary_factor", "0.25"}},
                                       nlohmann::json{{"partial_rotary_factor", {0.25}}},
                                       nlohmann::json{{"partial_rotary_factor", nullptr}, {"x", 1}}}) {
      const CliRun run = census({"layer", write_json("rope.json", {{"model_type", type}, {"rope_parameters", rope}})});
      if (rope.at("partial_rotary_factor").is_null()) {
        EXPECT_EQ(run.code, 0) << run.err;  // null is absent: the default
      } else {
        expect_refused(run, "rope_parameters.partial_rotary_factor");
      }
    }
    expect_refused(census({"layer", write_json("rope.json", {{"model_type", type}, {"rope_parameters", "linear"}})}),
                   "rope_parameters: must be an object");
    expect_refused(census({"layer", write_json("rope.json", {{"model_type", type}, {"rope_parameters", {1, 2}}})}),
                   "rope_parameters: must be an object");
  }
  expect_refused(census({"layer", write_json("text.json", {{"model_type", "llama"}, {"text_config", "qwen3"}})}),
                 "text_config: must be an object");
  expect_refused(census({"layer", write_json("type.json", {{"model_type", 5}})}), "model_type: must be a string");
}

// A share of head_dim past 1 is refused before head_dim * factor is cast to an integer (1e45 would not fit 64
// bits), by each reader of partial_rotary_factor: the top level's, rope_parameters', per layer type, per rope.
TEST(HostilePresentButWrong, PartialRotaryFactorsPastOne) {
  for (const double factor : {1e45, -1e45, 1.5}) {
    const nlohmann::json huge = factor;
    expect_refused(census({"layer", write_json("phi.json", {{"model_type", "phi3"}, {"partial_rotary_factor", huge}})}),
                   "partial_rotary_factor");
    expect_refused(census({"layer", write_json("phi.json", {{"model_type", "phi3"},
                                                            {"rope_parameters", {{"partial_rotary_factor", huge}}}})}),
                   "partial_rotary_factor");
    expect_refused(census({"layer", write_json("mimo.json", {{"model_type", "mimo_v2_flash"},
                                                             {"partial_rotary_factor", huge}})}),
                   "partial_rotary_factor");
    expect_refused(census({"layer", write_json("gptneox.json", {{"model_type", "qwen3_next"},
                                                                {"partial_rotary_factor", huge}})}),
                   "partial_rotary_factor");
    const nlohmann::json rope = {{"main", {{"rope_theta", 10000}, {"partial_rotary_factor", huge}}},
                                 {"compress", {{"rope_theta", 160000}, {"partial_rotary_factor", huge}}}};
    expect_refused(census({"layer", write_json("v4.json", {{"model_type", "deepseek_v4"}, {"rope_parameters", rope}})}),
                   "partial_rotary_factor");
  }
}

TEST(HostilePresentButWrong, UnclosedQuoteInARecipe) {
  const std::string recipe = write_file("quote.yaml", "plan_overrides:\n  - match: \"*.mlp\n    module_type: a.B\n"
                                                      "    replace_module: x.y\n");
  expect_refused(census({"layer", "qwen3-30b-a3b", "--train-yaml", recipe}), "is not valid YAML");
  expect_refused(census({"activations", "llama-3.1-8b", "--layers", write_file("quote2.yaml", "- {kind: \"decoder, count: 32}\n")}),
                 "is not valid JSON or YAML");
}

TEST(HostilePresentButWrong, NonFiniteAndFractionalNumbers) {
  for (const char* text : {R"({"model_type": "llama", "hidden_size": 1e400})", R"({"model_type": "llama", "hidden_size": -1e400})",
                           R"({"model_type": "llama", "hidden_size": 1e300})", R"({"model_type": "llama", "hidden_size": 9.3e18})",
                           R"({"model_type": "llama", "num_hidden_layers": 18446744073709551615})",
                           R"({"model_type": "llama", "rms_norm_eps": 1e400})"}) {
    const CliRun run = census({"layer", write_file("inf.json", text)});
    expect_refused(run, "");
  }
}

// 12. Counts that would make the step allocate or loop: refused at the step's bounds before any
// schedule or stage list is built, whatever the schedule.
TEST(HostileStep, HugeMicroBatchCountsAreRefusedNotAllocated) {
  expect_refused(census({"step", "llama-3.1-8b", "--micro-batches", "2147483648"}),
                 "--micro-batches: '2147483648' is more than 4096, the most micro-batches a step accumulates");
  for (const char* schedule : {"gpipe", "1f1b"})
    expect_refused(census({"step", "llama-3.1-8b", "--pp", "2", "--schedule", schedule, "--micro-batches",
                           "4611686018427387904"}),
                   "--micro-batches");
  // Interleaved: each micro-batch runs through every model chunk, so M x V is what is bounded.
  expect_refused(census({"step", "llama-3.1-8b", "--pp", "2", "--schedule", "interleaved", "--virtual-stages", "2",
                         "--micro-batches", "4611686018427387904"}),
                 "--micro-batches");
  expect_refused(census({"step", "llama-3.1-8b", "--pp", "2", "--schedule", "interleaved", "--virtual-stages", "16",
                         "--micro-batches", "512"}),
                 "--micro-batches x --virtual-stages: 512 x 16 is more micro-batches than a step accumulates");
}

TEST(HostileStep, HugePipelineDegreesAreRefusedBeforeAnyStageRuns) {
  for (const char* pp : {"2147483648", "9223372036854775807", "9223372036854775808", "18446744073709551616"})
    expect_refused(census({"step", "llama-3.1-8b", "--pp", pp}), "--pp: '" + std::string(pp) + "' is more than 1048576");
  expect_refused(census({"step", "llama-3.1-8b", "--pp", "1e30"}), "--pp: '1e30' is not an integer");
  // Within the degrees' bound, a pipeline deeper than the layers is refused by the layers it must
  // divide, before a stage list is made.
  expect_refused(census({"step", "llama-3.1-8b", "--pp", "1048576"}), "must divide num_hidden_layers (32)");
}

// 13. Overheads past 2^60 bytes are refused, so that their sum, and a peak with them, cannot wrap.
TEST(HostileOverflow, OverheadsPastTheLargestSizeAreRefused) {
  for (const char* flag : {"--cuda-context", "--nccl-buffers", "--fragmentation"}) {
    expect_refused(census({"step", "llama-3.1-8b", flag, "9223372036854775808"}),
                   std::string(flag) + ": '9223372036854775808' is more than a size Census prices (2^60 bytes)");
    expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", flag, "4611686018427387904"}),
                   flag);
  }
  // Three overheads of 2^60 each sum exactly and leave nothing of the device.
  expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", "--cuda-context", "1152921504606846976",
                         "--nccl-buffers", "1152921504606846976", "--fragmentation", "1152921504606846976"}),
                 "--gpu-memory: 85899345920 bytes leave nothing after the overheads (3458764513820540928 bytes)");
  // The largest a step takes is added exactly: 2^60 bytes on top of the simulated peak.
  const CliRun run = census({"step", "llama-3.1-8b", "--seq-length", "64", "--cuda-context", "1152921504606846976",
                             "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["total_bytes"].get<int64_t>(),
            json["peak"]["bytes"].get<int64_t>() + (int64_t{1} << 60));
}

// 14. Integers out of range are refused, never saturated (strtoll's 2^63 - 1) or wrapped.
TEST(HostileOptions, OutOfRangeIntegersAreRefused) {
  expect_refused(census({"step", "llama-3.1-8b", "--dp", "18446744073709551616"}), "--dp: '18446744073709551616' is more than");
  expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", "--gpus-per-node", "9223372036854775808"}),
                 "--gpus-per-node");
  expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", "--top", "9223372036854775808"}),
                 "--top: '9223372036854775808' is more than 100000, the most layouts a plan shows");
  expect_refused(census({"layer", "llama-3.1-8b", "--layer-index", "18446744073709551615"}), "--layer-index");
  expect_refused(census({"layer", "llama-3.1-8b", "--tp", "0x2"}), "--tp: '0x2' is not an integer");
  expect_refused(census({"step", "llama-3.1-8b", "--world", "18446744073709551616"}), "--world: '18446744073709551616' is more than");
  expect_refused(census({"step", "llama-3.1-8b", "--world", "0"}), "--world: '0' is less than 1");
  // A mesh of four degrees of 2^20 each would pass 64 bits: it is more ranks than a run has, not a wrapped product.
  expect_refused(census({"step", "llama-3.1-8b", "--dp", "1048576", "--tp", "1048576", "--pp", "1048576", "--cp",
                         "1048576", "--world", "8"}),
                 "--world 8: the mesh --dp 1048576 x --tp 1048576 x --pp 1048576 x --cp 1048576 is more than 2^20 ranks");
}

// 15. An empty value is refused, not read as the option left out: every kind of option alike.
TEST(HostileOptions, EmptyValuesOfNumbersSizesAndPaths) {
  for (const char* flag : {"--stage", "--zero", "--cuda-context", "--nccl-buffers", "--fragmentation", "--micro-batches",
                           "--seq-length", "--experts-implementation", "--world"})
    expect_refused(census({"step", "llama-3.1-8b", flag, ""}), std::string(flag) + ": is empty");
  for (const char* flag : {"--global-batch", "--gpu-memory", "--peak-tflops", "--top", "--cuda-context"})
    expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", flag, ""}),
                   std::string(flag) + ": is empty");
  expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", ""}), "--device: is empty");
  for (const char* flag : {"--svg", "--output", "--layer-index", "--kernels", "--train-yaml", "--experts-implementation"})
    expect_refused(census({"report", "llama-3.1-8b", flag, ""}), std::string(flag) + ": is empty");
}

// 16. A stage is 0 or more: -1 is not "every stage" (that is the option left out).
TEST(HostileOptions, NegativeStageIsRefused) {
  expect_refused(census({"step", "llama-3.1-8b", "--pp", "2", "--stage", "-1"}), "--stage: '-1' is less than 0");
  const CliRun every = census({"step", "llama-3.1-8b", "--seq-length", "64", "--pp", "2", "--format", "json"});
  ASSERT_EQ(every.code, 0) << every.err;
  EXPECT_EQ(nlohmann::json::parse(every.out)["stages"].size(), 2u);
}

// 17. Device figures are finite and within a device's range: no NaN, infinity or absurd figure.
TEST(HostileOptions, DeviceFiguresAreFiniteAndInRange) {
  for (const char* flag : {"--peak-tflops", "--hbm-gbs", "--link-gbs", "--nic-gbs"}) {
    for (const char* figure : {"nan", "inf", "-inf", "1e400"})
      expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", flag, figure}), flag);
    expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", flag, "1e-300"}),
                   std::string(flag) + ": '1e-300' is less than 0.001");
  }
  expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", "--compute-efficiency", "1.5"}),
                 "--compute-efficiency: '1.5' is more than 1");
  // At the least figure the estimate is long, and still a number of a few digits.
  const CliRun slow = census({"plan", "llama-3.1-8b", "--gpus", "8", "--device", "h100", "--peak-tflops", "0.001",
                              "--seq-length", "512", "--format", "json"});
  ASSERT_EQ(slow.code, 0) << slow.err;
  const nlohmann::json plan = nlohmann::json::parse(slow.out);  // held: a loop over a temporary's member outlives it
  for (const auto& layout : plan["layouts"])
    EXPECT_LT(layout["step_seconds_estimate"].get<double>(), 1e9);
}

// 18. A size is whole bytes: a fraction of a byte is refused, a fraction of a unit that makes whole
// bytes is read exactly.
TEST(HostileOptions, FractionalBytesAreRefused) {
  for (const char* size : {"1.5", "0.3KiB", "0.1B"})
    expect_refused(census({"plan", "llama-3.1-8b", "--gpus", "8", "--gpu-memory", size, "--device", "h100"}),
                   "--gpu-memory: '" + std::string(size) + "' is not a whole number of bytes");
  expect_refused(census({"step", "llama-3.1-8b", "--cuda-context", "0.5"}), "--cuda-context: '0.5' is not a whole number");
  const CliRun run = census({"plan", "llama-3.1-8b", "--gpus", "8", "--gpu-memory", "1.5TiB", "--device", "h100",
                             "--seq-length", "512", "--top", "1", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["gpu_memory_bytes"], int64_t{3} << 39);
}

// 20. Sums over the whole model: a step whose live bytes pass 2^59 (one layer of 2^28-wide projections,
// 7 x 2^56 parameters, 1.75 x 2^59 bytes in bf16) is refused, where it printed wrapped, negative totals.
TEST(HostileOverflow, AStepPastTheLargestStepBytesIsRefused) {
  const std::string wide = write_json("wide.json", {{"model_type", "llama"}, {"hidden_size", 1 << 28},
                                                    {"intermediate_size", 1 << 28}, {"num_attention_heads", 8},
                                                    {"num_key_value_heads", 8}, {"num_hidden_layers", 1},
                                                    {"vocab_size", 512}});
  expect_refused(census({"step", wide, "--seq-length", "1"}), "config: one rank's step holds more than 2^59 bytes");
  // A quarter as wide is priced, its AdamW step within 2^59: 7 x 2^52 parameters in the layer's seven
  // 2^26 x 2^26 projections, 2 x 512 x 2^26 in the embedding and the LM head, 3 x 2^26 in the two norms
  // and the final one; 2 bytes each in bf16.
  const std::string narrower = write_json("narrower.json", {{"model_type", "llama"}, {"hidden_size", 1 << 26},
                                                            {"intermediate_size", 1 << 26}, {"num_attention_heads", 8},
                                                            {"num_key_value_heads", 8}, {"num_hidden_layers", 1},
                                                            {"vocab_size", 512}});
  const CliRun run = census({"step", narrower, "--seq-length", "1", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const int64_t parameters = (int64_t{7} << 52) + 2 * 512 * (int64_t{1} << 26) + 3 * (int64_t{1} << 26);
  EXPECT_EQ(nlohmann::json::parse(run.out)["parameters"]["bytes"], 2 * parameters) << run.out.substr(0, 400);
}

// Mamba-2's torch scan takes every pair of a chunk's tokens: a chunk of 2^31 tokens passes 64 bits
// however few tokens run (they are padded to the chunk), and is refused; one of 2^16, which
// Transformers runs too, is priced.
TEST(HostileOverflow, MambaChunksWhoseScanPasses64BitsAreRefused) {
  for (const char* type : {"falcon_h1", "granitemoehybrid", "nemotron_h"}) {
    const std::string huge = write_json("chunk.json", {{"model_type", type}, {"mamba_chunk_size", int64_t{1} << 31}});
    for (const char* command : {"layer", "stack", "activations"})
      expect_refused(census({command, huge, "--seq-length", "64"}), "tokens in Mamba-2 chunks of 2147483648");
    const std::string long_chunk = write_json("chunk.json", {{"model_type", type}, {"mamba_chunk_size", 1 << 16}});
    const CliRun run = census({"layer", long_chunk, "--seq-length", "64", "--format", "json"});
    ASSERT_EQ(run.code, 0) << type << ": " << run.err;
    EXPECT_GT(nlohmann::json::parse(run.out)["working"].get<int64_t>(), int64_t{1} << 32) << type;
  }
}

// 19. The report's files: a destination that is a device, FIFO or socket (a rename would replace it
// rather than write to it), a directory or a read-only file is refused unwritten; a write that fails (a
// full disk, a file-size limit) is refused and leaves nothing. A FIFO of the test's own stands for the
// device, so that a lost refusal replaces nothing of the machine's.
TEST(HostileReport, DevicesDirectoriesAndReadOnlyFilesAreNotReplaced) {
  const std::string fifo = write_file("device", "");
  ASSERT_EQ(std::remove(fifo.c_str()), 0);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  expect_refused(census({"report", "llama-3.1-8b", "--seq-length", "512", "--output", fifo}),
                 "(it is not a regular file but a device, FIFO or socket)");
  struct stat after {};
  ASSERT_EQ(::stat(fifo.c_str(), &after), 0);
  EXPECT_TRUE(S_ISFIFO(after.st_mode));
  std::remove(fifo.c_str());
  expect_refused(census({"report", "llama-3.1-8b", "--seq-length", "512", "--output", ::testing::TempDir()}),
                 "(it is a directory)");
  const std::string read_only = write_file("read_only.html", "kept\n");
  ASSERT_EQ(::chmod(read_only.c_str(), 0444), 0);
  expect_refused(census({"report", "llama-3.1-8b", "--seq-length", "512", "--output", read_only}), "(it is read-only)");
  std::ifstream kept(read_only);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "kept\n");
  ::chmod(read_only.c_str(), 0644);
}

TEST(HostileReport, AFailedWriteIsRefusedAndLeavesNothing) {
  // A file-size limit makes write() fail (EFBIG) as a full disk does (ENOSPC): the same path refuses it.
  const std::string dir = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_hostile_fsize";
  ::mkdir(dir.c_str(), 0755);
  struct rlimit limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &limit), 0);
  const struct rlimit small = {4096, limit.rlim_max};
  void (*previous)(int) = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const CliRun run = census({"report", "llama-3.1-8b", "--seq-length", "512", "--output", dir + "/r.html"});
  ::setrlimit(RLIMIT_FSIZE, &limit);
  ::signal(SIGXFSZ, previous);
  expect_refused(run, "--output: cannot write");
  EXPECT_NE(run.err.find("File too large"), std::string::npos) << run.err;
  size_t entries = 0;
  for (DIR* listing = ::opendir(dir.c_str()); listing != nullptr;) {
    const dirent* entry = ::readdir(listing);
    if (entry == nullptr) {
      ::closedir(listing);
      break;
    }
    entries += std::string(entry->d_name) != "." && std::string(entry->d_name) != "..";
  }
  EXPECT_EQ(entries, 0u) << "the temporary file is removed";
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace census
