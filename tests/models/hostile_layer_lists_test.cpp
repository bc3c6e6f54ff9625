// Every per-layer list field of every family that reads one, at each hostile value: the whole field
// as 0, -1, empty, 2^31, 2^63, 2^64, NaN and a wrong type ("abc"), and a list of the right length
// holding each of them at one layer. Each is refused in one line naming the field, or read where the
// value is a legal one (stated below, with why). The length rules themselves (a list cut or the count
// derived, as the config class does) are tested in hostile_config_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "models/python_json.h"
#include "models/registry.h"

namespace census {
namespace {

// The hostile values as a config.json states them (NaN as Python's json writes it).
const char* const kHostile[] = {"0", "-1", "[]", "2147483648", "9223372036854775808", "18446744073709551616", "NaN",
                                "\"abc\""};

struct ListField {
  const char* model_type;
  const char* field;
  nlohmann::json legal;  // a legal value for a model of 4 layers
  // Hostile values the config class reads as legal: as the whole field, and as one layer's entry.
  std::set<std::string> legal_whole = {};
  std::set<std::string> legal_entry = {};
};

std::vector<ListField> list_fields() {
  const nlohmann::json full = {"full_attention", "full_attention", "full_attention", "full_attention"};
  const nlohmann::json linear = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
  const nlohmann::json sparse = {"dense", "sparse", "sparse", "sparse"};
  std::vector<ListField> fields = {
      {"deepseek_v32", "layer_types", nlohmann::json(std::vector<std::string>(4, "deepseek_sparse_attention"))},
      {"deepseek_v32", "mlp_layer_types", sparse},
      {"glm_moe_dsa", "layer_types", nlohmann::json(std::vector<std::string>(4, "deepseek_sparse_attention"))},
      {"glm_moe_dsa", "mlp_layer_types", sparse},
      {"glm_moe_dsa", "indexer_types", {"full", "shared", "full", "shared"}},
      {"glm_moe_dsa", "index_topk_pattern", "FSFS"},
      {"glm4_moe_lite", "mlp_layer_types", sparse},
      {"deepseek_v4", "layer_types",
       {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"}},
      {"deepseek_v4", "mlp_layer_types", {"hash_moe", "moe", "moe", "moe"}},
      // A ratio of 0 is a sliding layer (DeepseekV4Config's map reads it so).
      {"deepseek_v4", "compress_ratios", {0, 4, 128, 0}, {}, {"0"}},
      {"qwen3_next", "layer_types", linear},
      {"qwen3_5_text", "layer_types", linear},
      {"qwen3_5_moe_text", "layer_types", linear},
      {"granitemoehybrid", "layer_types", {"mamba", "attention", "mamba", "attention"}},
      {"granitemoehybrid", "layers_block_type", {"mamba", "attention", "mamba", "attention"}},
      {"llama4_text", "layer_types", {"chunked_attention", "chunked_attention", "chunked_attention", "full_attention"}},
      // An empty no_rope_layers is read as absent (Llama4TextConfig: `if self.no_rope_layers else`); a
      // 0 is a layer without rotary.
      {"llama4_text", "no_rope_layers", {1, 1, 1, 0}, {"[]"}, {"0"}},
      // Layer indices: none is a legal list, and 0 a legal index.
      {"llama4_text", "moe_layers", {1, 3}, {"[]"}, {"0"}},
      {"mimo_v2_flash", "layer_types", {"full_attention", "sliding_attention", "sliding_attention", "full_attention"}},
      {"mimo_v2_flash", "mlp_layer_types", sparse},
      // 1 sliding, 0 full; 1 sparse, 0 dense: each must say what layer_types and mlp_layer_types do (by
      // default layer 0 full and dense, the rest sliding and sparse), so a 0 at layer 1 is refused too.
      {"mimo_v2_flash", "hybrid_layer_pattern", {0, 1, 1, 1}},
      {"mimo_v2_flash", "moe_layer_freq", {0, 1, 1, 1}},
      {"nemotron_h", "layers_block_type", {"mamba", "moe", "attention", "mlp"}},
      {"nemotron_h", "layer_types", {"mamba", "moe", "attention", "mlp"}},
      {"nemotron_h", "hybrid_override_pattern", "ME*-"},
      {"smollm3", "layer_types", full},
      {"smollm3", "no_rope_layers", {1, 1, 1, 0}, {}, {"0"}},
      // Hunyuan's per-layer sizes: one value for every layer, a list of them alike.
      // One integer is a size (2^31 experts: the commands refuse the counts it makes, cli/request.h).
      {"hunyuan_v1_moe", "num_experts", {8, 8, 8, 8}, {"2147483648"}},
      {"hunyuan_v1_moe", "moe_topk", {1, 1, 1, 1}},
  };
  for (const char* type : {"gemma2", "gemma3_text", "gemma4_text", "gpt_oss", "olmo3", "qwen2", "qwen3", "qwen2_moe",
                           "qwen3_moe"})
    fields.push_back({type, "layer_types", full});
  for (const char* type : {"qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_vl_moe_text"})
    fields.push_back({type, "mlp_only_layers", {0, 2}, {"[]"}, {"0"}});
  return fields;
}

std::string refusal(const nlohmann::json& config) {
  auto read = read_config(config);
  return read ? "" : read.refusal().message();
}

void expect(const ListField& f, const nlohmann::json& value, bool legal, const std::string& what) {
  nlohmann::json config = {{"model_type", f.model_type}, {"num_hidden_layers", 4}, {f.field, value}};
  // Nemotron-H's list is the layers; MiMo's patterns are checked beside the layer types they must match.
  if (std::string(f.model_type) == "nemotron_h") config.erase("num_hidden_layers");
  const std::string message = refusal(config);
  const std::string where = std::string(f.model_type) + "." + f.field + " " + what;
  if (legal) {
    EXPECT_EQ(message, "") << where;
    return;
  }
  EXPECT_NE(message, "") << where << " was read";
  EXPECT_NE(message.find(f.field), std::string::npos) << where << ": " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << where << ": " << message;
}

TEST(HostileLayerLists, TheLegalListOfEachFieldIsRead) {
  for (const ListField& f : list_fields()) expect(f, f.legal, true, "legal");
}

TEST(HostileLayerLists, EachHostileValueAsTheWholeField) {
  for (const ListField& f : list_fields())
    for (const char* text : kHostile) expect(f, parse_python_json(text), f.legal_whole.contains(text), std::string("= ") + text);
}

TEST(HostileLayerLists, EachHostileValueAtOneLayer) {
  for (const ListField& f : list_fields()) {
    for (const char* text : kHostile) {
      nlohmann::json value = f.legal;
      const nlohmann::json entry = parse_python_json(text);
      if (value.is_string()) {
        // A pattern: a letter it does not know, or one string too many.
        if (entry.is_string()) value = value.get<std::string>().substr(0, 1) + "x" + value.get<std::string>().substr(2);
        else continue;
      } else {
        value[1] = entry;
      }
      expect(f, value, f.legal_entry.contains(text), std::string("[1] = ") + text);
    }
  }
}

// Every family that reads a per-layer list is in the table above: a family's reader that starts
// reading one is listed here too (or this fails).
TEST(HostileLayerLists, TheTableCoversEveryFamilysLists) {
  std::set<std::pair<std::string, std::string>> listed;
  for (const ListField& f : list_fields()) listed.insert({f.model_type, f.field});
  for (const Family* family : families()) {
    for (const char* field : {"layer_types", "mlp_layer_types", "no_rope_layers", "indexer_types", "index_topk_pattern",
                              "compress_ratios", "hybrid_layer_pattern", "moe_layer_freq", "layers_block_type",
                              "hybrid_override_pattern", "mlp_only_layers", "moe_layers"}) {
      const std::string message = refusal({{"model_type", family->model_type}, {"num_hidden_layers", 4}, {field, "abc"}});
      if (message.find(field) != std::string::npos)
        EXPECT_TRUE(listed.contains({family->model_type, field})) << family->model_type << " reads " << field;
    }
  }
}

}  // namespace
}  // namespace census
