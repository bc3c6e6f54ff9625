// Hostile configs read directly: the reader refuses in one line, formats no value deeper than it
// shows, reads no present-but-wrong value as absent, and builds nothing per layer past its limit.
#include <gtest/gtest.h>


#include "models/registry.h"
#include "util/checked.h"
#include "util/escape.h"

namespace census {
namespace {

std::string refusal(const nlohmann::json& json) {
  auto config = read_config(json);
  if (config) return "";
  return config.refusal().message();
}

TEST(HostileEscape, ControlCharactersAreShownEscaped) {
  EXPECT_EQ(escaped(std::string("a\nb\rc\td\0e\x1b\x7f", 11)), "a\\nb\\rc\\td\\0e\\x1b\\x7f");
  EXPECT_EQ(escaped("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 kept
  EXPECT_EQ(echoed("llama\nfalcon"), "'llama\\nfalcon'");
  EXPECT_EQ(echoed(std::string(100, 'x')), std::string("'") + std::string(kShownLength, 'x') + "...'");
}

TEST(HostileEscape, BytesThatAreNotUtf8AreShownEscaped) {
  EXPECT_EQ(escaped("\xff a \xc3"), "\\xff a \\xc3");
  // Cut at a character's start, never inside it.
  EXPECT_EQ(echoed(std::string(63, 'x') + "\xc3\xa9yz"), std::string("'") + std::string(63, 'x') + "...'");
  EXPECT_EQ(shown(std::string(39, 'x') + "\xc3\xa9\xc3\xa9"), std::string("\"") + std::string(36, 'x') + "...");
  const std::string message = refusal({{"model_type", "llama"}, {"hidden_act", "\xff\xfe"}});
  EXPECT_NE(message.find("'\\xff\\xfe' is not priced"), std::string::npos) << message;
}

TEST(HostileEscape, EveryRefusalMessageIsOneLine) {
  const Refusal refusal{"a\nb", "c\rd"};
  EXPECT_EQ(refusal.message(), "a\\nb: c\\rd");
}

TEST(HostileChecked, ProductsThatWrapAreSeen) {
  EXPECT_FALSE((Checked{1 << 30} * (1 << 30)).overflows());
  EXPECT_TRUE((Checked{int64_t{1} << 32} * (int64_t{1} << 32)).overflows());
  EXPECT_TRUE((Checked{INT64_MAX} + 1).overflows());
  EXPECT_TRUE((Checked{int64_t{1} << 40} * (int64_t{1} << 40) * 0).overflows());  // a wrap is never undone
  EXPECT_TRUE((Checked{1000} * 1000).overflows(999999));
  EXPECT_EQ((Checked{3} * 4 + 5).value(), 17);
  EXPECT_TRUE(max(Checked{1}, Checked{INT64_MAX} * 2).overflows());
}

TEST(HostileShown, DeepValuesAreShownTwoLevelsDeep) {
  nlohmann::json deep = 1;
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
  EXPECT_EQ(shown(deep), "[[[...]]]");
  EXPECT_EQ(shown(nlohmann::json{{"a", {{"b", {{"c", 1}}}}}}), R"({"a":{"b":{...}}})");
  EXPECT_EQ(shown(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(shown(-std::numeric_limits<double>::infinity()), "-Infinity");
  EXPECT_EQ(shown("a\nb"), "\"a\\nb\"");
  EXPECT_LE(shown(std::string(100000, 'x')).size(), 40u);
  const std::string message = refusal({{"model_type", "llama"}, {"hidden_size", std::move(deep)}});
  EXPECT_NE(message.find("hidden_size: nests values more than 64 levels deep"), std::string::npos) << message;
}

TEST(HostileNumbers, NanAndInfinityAreRefusedForEveryFamily) {
  for (const Family* family : families()) {
    const std::string type = family->model_type;
    // NemotronHConfig names its norms' epsilon layer_norm_epsilon.
    const char* eps = type == "nemotron_h" ? "layer_norm_epsilon" : "rms_norm_eps";
    for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
      EXPECT_NE(refusal({{"model_type", type}, {eps, bad}}).find(eps), std::string::npos) << type;
      EXPECT_NE(refusal({{"model_type", type}, {"hidden_size", bad}}).find("hidden_size"), std::string::npos) << type;
    }
    EXPECT_NE(refusal({{"model_type", type}, {"hidden_size", 1e300}}).find("hidden_size"), std::string::npos) << type;
    EXPECT_NE(refusal({{"model_type", type}, {"hidden_size", uint64_t{1} << 63}}).find("too large"), std::string::npos);
  }
  for (const char* type : {"qwen3_next", "qwen3_5_text"})
    EXPECT_NE(refusal({{"model_type", type}, {"rope_parameters", {{"partial_rotary_factor", NAN}}}})
                  .find("rope_parameters.partial_rotary_factor"),
              std::string::npos);
}

TEST(HostileLayers, LayerCountIsCappedBeforeAnyFamilyBuildsPerLayerData) {
  for (const Family* family : families()) {
    const std::string type = family->model_type;
    EXPECT_NE(refusal({{"model_type", type}, {"num_hidden_layers", kLargestLayerCount + 1}}).find("at most 2^20"),
              std::string::npos) << type;
    EXPECT_NE(refusal({{"model_type", type}, {"num_hidden_layers", int64_t{1} << 32}}).find("num_hidden_layers"),
              std::string::npos) << type;
  }
  auto largest = read_config({{"model_type", "llama"}, {"num_hidden_layers", kLargestLayerCount}});
  ASSERT_TRUE(largest) << largest.refusal().message();
  EXPECT_EQ(layer_stack(*largest).front().count, kLargestLayerCount);
}

TEST(HostileLayers, MlpOnlyLayersAreReadSortedAndOnce) {
  auto config = read_config({{"model_type", "qwen3_moe"}, {"num_hidden_layers", 6}, {"mlp_only_layers", {4, 1, 4, 0}}});
  ASSERT_TRUE(config) << config.refusal().message();
  EXPECT_EQ(config->moe.mlp_only_layers, (std::vector<int64_t>{0, 1, 4}));
  EXPECT_EQ(layer_kinds(*config), (std::vector<std::string>{"dense", "dense", "moe", "moe", "dense", "moe"}));
}

TEST(HostilePresentButWrong, TextFieldsAndSections) {
  EXPECT_NE(refusal({{"model_type", "llama"}, {"hidden_act", "silu\n"}}).find("hidden_act: must be a name"), std::string::npos);
  EXPECT_NE(refusal({{"model_type", "llama"}, {"hidden_act", std::string(300, 's')}}).find("must be a name"), std::string::npos);
  EXPECT_NE(refusal({{"model_type", "qwen3_moe"}, {"_experts_implementation", std::string("eager\0", 6)}})
                .find("_experts_implementation: must be a name"),
            std::string::npos);
  EXPECT_NE(refusal({{"model_type", "qwen3_next"}, {"rope_parameters", 0.25}}).find("rope_parameters: must be an object"),
            std::string::npos);
  EXPECT_NE(refusal({{"model_type", "qwen3_next"}, {"rope_parameters", {{"partial_rotary_factor", "0.5"}}}})
                .find("rope_parameters.partial_rotary_factor"),
            std::string::npos);
  // Stated in rope_parameters, it is the one read, over the top level's.
  auto config = read_config({{"model_type", "qwen3_next"}, {"partial_rotary_factor", 0.5},
                             {"rope_parameters", {{"partial_rotary_factor", 1.0}}}});
  ASSERT_TRUE(config) << config.refusal().message();
  EXPECT_EQ(config->rotary_dim, config->head_dim);
  for (const double factor : {1e300, 1.5})
    EXPECT_NE(refusal({{"model_type", "qwen3_next"}, {"partial_rotary_factor", factor}}).find("must be at most 1"),
              std::string::npos);
  EXPECT_NE(refusal({{"model_type", "qwen3"}, {"text_config", 3}}).find("text_config: must be an object"), std::string::npos);
}

// 10. One check of every per-layer list against the layer count: a list a family used to ignore is
// read, and one of the wrong length refused, except where the config class itself cuts or derives.
TEST(HostilePerLayer, LayerTypesOfTheSparseAttentionFamiliesAndSmolLM3AreChecked) {
  const std::pair<const char*, const char*> families[] = {
      {"deepseek_v32", "deepseek_sparse_attention"}, {"glm_moe_dsa", "deepseek_sparse_attention"},
      {"smollm3", "full_attention"}};
  for (const auto& [type, kind] : families) {
    const nlohmann::json base = {{"model_type", type}, {"num_hidden_layers", 4}};
    nlohmann::json config = base;
    config["layer_types"] = std::vector<std::string>(4, kind);
    EXPECT_EQ(refusal(config), "") << type;
    config["layer_types"] = std::vector<std::string>(5, kind);
    EXPECT_NE(refusal(config).find("layer_types: states 5 layers, but num_hidden_layers is 4"), std::string::npos) << type;
    config["layer_types"] = std::vector<std::string>(3, kind);
    EXPECT_NE(refusal(config).find("layer_types: states 3 layers"), std::string::npos) << type;
    // A kind the model builds no mask for (its forward would fail looking it up).
    config["layer_types"] = std::vector<std::string>(4, "chunked_attention");
    EXPECT_NE(refusal(config).find("layer_types: has \"chunked_attention\" at layer 0; known kinds"), std::string::npos) << type;
    config["layer_types"] = "full_attention";
    EXPECT_NE(refusal(config).find("layer_types: must be a list of layer kinds"), std::string::npos) << type;
  }
}

// DeepseekV4Config cuts layer_types and mlp_layer_types to num_hidden_layers (Transformers runs a
// longer list, as the checkpoints' compress_ratios list the MTP layer too): priced as cut; a shorter
// one is refused, as its validate_layer_type refuses it.
TEST(HostilePerLayer, DeepseekV4CutsLongerListsAsItsConfigClassDoes) {
  const nlohmann::json base = {{"model_type", "deepseek_v4"}, {"num_hidden_layers", 4}};
  const std::vector<std::string> attention = {"sliding_attention", "compressed_sparse_attention",
                                              "heavily_compressed_attention", "sliding_attention"};
  const std::vector<std::string> mlp = {"hash_moe", "moe", "moe", "moe"};
  nlohmann::json exact = base;
  exact["layer_types"] = attention;
  exact["mlp_layer_types"] = mlp;
  auto priced = read_config(exact);
  ASSERT_TRUE(priced) << priced.refusal().message();
  nlohmann::json longer = exact;
  longer["layer_types"].push_back("heavily_compressed_attention");
  longer["mlp_layer_types"].push_back("hash_moe");
  auto cut = read_config(longer);
  ASSERT_TRUE(cut) << cut.refusal().message();
  EXPECT_EQ(layer_kinds(*cut), layer_kinds(*priced));
  for (const char* field : {"layer_types", "mlp_layer_types"}) {
    nlohmann::json shorter = exact;
    shorter[field].erase(shorter[field].size() - 1);
    EXPECT_NE(refusal(shorter).find(std::string(field) + ": states 3 layers, but num_hidden_layers is 4 (a longer list is cut to it)"),
              std::string::npos);
  }
  // compress_ratios, the legacy form: cut alike; a ratio of 0 is sliding attention, as its map reads it.
  nlohmann::json ratios = base;
  ratios["compress_ratios"] = {0, 4, 128, 0, 4};
  ratios["mlp_layer_types"] = mlp;
  auto from_ratios = read_config(ratios);
  ASSERT_TRUE(from_ratios) << from_ratios.refusal().message();
  EXPECT_EQ(layer_kinds(*from_ratios), layer_kinds(*priced));
  ratios["compress_ratios"] = {0, 4, 128};
  EXPECT_NE(refusal(ratios).find("compress_ratios: states 3 layers"), std::string::npos);
  ratios["compress_ratios"] = {0, 4, 64, 0};
  EXPECT_NE(refusal(ratios).find("compress_ratios: has 64"), std::string::npos);
}

// NemotronHConfig takes its layer count from its pattern (a num_hidden_layers that differs is only
// warned about, and Transformers builds the pattern's layers): priced so, one entry short or long.
TEST(HostilePerLayer, NemotronHPatternStatesTheLayerCount) {
  for (const char* pattern : {"M-M*", "M-M*E", "M-M*E-"}) {
    auto config = read_config({{"model_type", "nemotron_h"}, {"num_hidden_layers", 5}, {"hybrid_override_pattern", pattern}});
    ASSERT_TRUE(config) << config.refusal().message();
    EXPECT_EQ(config->num_hidden_layers, static_cast<int64_t>(std::string(pattern).size()));
  }
  EXPECT_NE(refusal({{"model_type", "nemotron_h"}, {"hybrid_override_pattern", ""}}).find("hybrid_override_pattern: is empty"),
            std::string::npos);
  EXPECT_NE(refusal({{"model_type", "nemotron_h"}, {"hybrid_override_pattern", std::string(kLargestLayerCount + 1, 'M')}})
                .find("hybrid_override_pattern: states 1048577 layers, more than a census prices"),
            std::string::npos);
  EXPECT_NE(refusal({{"model_type", "nemotron_h"}, {"layers_block_type", {"mamba", "moe", "router"}}})
                .find("layers_block_type: has \"router\" at layer 2"),
            std::string::npos);
  EXPECT_NE(refusal({{"model_type", "nemotron_h"}, {"hybrid_override_pattern", 5}}).find("must be a string"),
            std::string::npos);
}

// MiMo-V2-Flash's checkpoint states its layers twice: hybrid_layer_pattern and moe_layer_freq (which
// MiMoV2FlashConfig drops, its conversion mapping them to layer_types and mlp_layer_types). Each is
// checked as a per-layer list and must agree with what is priced.
TEST(HostilePerLayer, MiMoPatternsAreCheckedAndMustAgree) {
  const nlohmann::json base = {{"model_type", "mimo_v2_flash"}, {"num_hidden_layers", 6}};
  nlohmann::json config = base;
  config["hybrid_layer_pattern"] = {0, 1, 1, 1, 1, 0};  // the default layer_types: full at 0 and 5
  config["moe_layer_freq"] = {0, 1, 1, 1, 1, 1};        // the default: the first layer dense
  EXPECT_EQ(refusal(config), "");
  for (const char* field : {"hybrid_layer_pattern", "moe_layer_freq"}) {
    nlohmann::json wrong = config;
    wrong[field].erase(5);
    EXPECT_NE(refusal(wrong).find(std::string(field) + ": states 5 layers, but num_hidden_layers is 6"), std::string::npos);
    wrong = config;
    wrong[field][2] = 2;
    EXPECT_NE(refusal(wrong).find(std::string(field) + ": has 2 at layer 2; each entry is 0 or 1"), std::string::npos);
    wrong = config;
    wrong[field] = 1;
    EXPECT_NE(refusal(wrong).find(std::string(field) + ": must be a list of 0 and 1"), std::string::npos);
  }
  config["hybrid_layer_pattern"][1] = 0;
  EXPECT_NE(refusal(config).find("hybrid_layer_pattern: makes layer 1 full, where layer_types makes it sliding_attention"),
            std::string::npos);
  config["layer_types"] = {"full_attention", "full_attention", "sliding_attention", "sliding_attention",
                           "sliding_attention", "full_attention"};
  EXPECT_EQ(refusal(config), "");  // stated alike
}

// 11. Family fields that size a layer are checked where the family reads them.
TEST(HostileFamilyFields, DeepseekV4RopeHeadDimIsAWidthWhateverElseIsStated) {
  for (const nlohmann::json& width : {nlohmann::json("abc"), nlohmann::json(-1), nlohmann::json(0),
                                      nlohmann::json(uint64_t{1} << 63), nlohmann::json(std::numeric_limits<double>::infinity()),
                                      nlohmann::json({64})}) {
    for (const bool with_factor : {false, true}) {
      nlohmann::json config = {{"model_type", "deepseek_v4"}, {"qk_rope_head_dim", width}};
      if (with_factor) config["partial_rotary_factor"] = 0.125;
      EXPECT_NE(refusal(config).find("qk_rope_head_dim"), std::string::npos) << width << " " << with_factor;
    }
  }
  // Both stated and legal: DeepseekV4Config reads partial_rotary_factor, as the census does.
  auto both = read_config({{"model_type", "deepseek_v4"}, {"qk_rope_head_dim", 128}, {"partial_rotary_factor", 0.125}});
  auto factor = read_config({{"model_type", "deepseek_v4"}, {"partial_rotary_factor", 0.125}});
  ASSERT_TRUE(both && factor);
  EXPECT_EQ(both->deepseek_v4->main_rope_dim, factor->deepseek_v4->main_rope_dim);
}

// Gemma4TextConfig reads num_global_key_value_heads only where attention_k_eq_v is set (else its full
// layers keep num_key_value_heads): refused there when the heads do not split into it, priced as
// Transformers runs it (the field unread) otherwise.
TEST(HostileFamilyFields, Gemma4GlobalKeyValueHeads) {
  EXPECT_NE(refusal({{"model_type", "gemma4_text"}, {"attention_k_eq_v", true}, {"num_global_key_value_heads", 3}})
                .find("num_global_key_value_heads: gives the full_attention layers 3 key/value heads, which do not divide "
                      "num_attention_heads 8"),
            std::string::npos);
  auto unread = read_config({{"model_type", "gemma4_text"}, {"num_global_key_value_heads", 3}});
  ASSERT_TRUE(unread) << unread.refusal().message();
  EXPECT_EQ(unread->gemma4.num_global_key_value_heads, unread->num_key_value_heads);
  for (const nlohmann::json& heads : {nlohmann::json("abc"), nlohmann::json(0), nlohmann::json(-1)})
    EXPECT_NE(refusal({{"model_type", "gemma4_text"}, {"attention_k_eq_v", true}, {"num_global_key_value_heads", heads}})
                  .find("num_global_key_value_heads"),
              std::string::npos);
}

TEST(HostileFamilyFields, MiMoSlidingLayersHeads) {
  const nlohmann::json base = {{"model_type", "mimo_v2_flash"}, {"num_hidden_layers", 6}, {"num_attention_heads", 64},
                               {"num_key_value_heads", 4}};
  nlohmann::json config = base;
  config["swa_num_attention_heads"] = 64;
  config["swa_num_key_value_heads"] = 8;
  EXPECT_EQ(refusal(config), "");
  config["swa_num_attention_heads"] = 0;
  EXPECT_NE(refusal(config).find("swa_num_attention_heads: must be a positive integer, not 0"), std::string::npos);
  config["swa_num_attention_heads"] = 64;
  config["swa_num_key_value_heads"] = 5;
  EXPECT_NE(refusal(config).find("swa_num_key_value_heads: 5 is not twice num_key_value_heads (8)"), std::string::npos);
}

// 12. Fields that move no memory are still typed: a string or a list there is a broken config.
TEST(HostileFamilyFields, FieldsThatMoveNoMemoryAreTypeChecked) {
  for (const Family* family : families()) {
    const std::string type = family->model_type;
    for (const char* field : {"sliding_window", "attention_chunk_size", "max_position_embeddings",
                              "original_max_position_embeddings"}) {
      for (const nlohmann::json& wrong : {nlohmann::json("4096"), nlohmann::json({4096}), nlohmann::json(-1),
                                          nlohmann::json(uint64_t{1} << 63), nlohmann::json(0.5)})
        EXPECT_NE(refusal({{"model_type", type}, {field, wrong}}).find(field), std::string::npos) << type << " " << field;
    }
    EXPECT_NE(refusal({{"model_type", type}, {"rope_scaling", {{"original_max_position_embeddings", "x"}}}})
                  .find("rope_scaling.original_max_position_embeddings"),
              std::string::npos)
        << type;
  }
  EXPECT_NE(refusal({{"model_type", "mimo_v2_flash"},
                     {"rope_parameters", {{"full_attention", {{"original_max_position_embeddings", {1}}}}}}})
                .find("rope_parameters.full_attention.original_max_position_embeddings"),
            std::string::npos);
  EXPECT_EQ(refusal({{"model_type", "llama"}, {"sliding_window", nullptr}, {"max_position_embeddings", 131072}}), "");
}

// 13. Loop counts a config sets are bounded, so that a census stays bounded in time and memory.
TEST(HostileLoops, SinkhornRoundsAreBounded) {
  EXPECT_EQ(refusal({{"model_type", "deepseek_v4"}, {"hc_sinkhorn_iters", 64}}), "");
  for (const int64_t rounds : {int64_t{65}, int64_t{1} << 31})
    EXPECT_NE(refusal({{"model_type", "deepseek_v4"}, {"hc_sinkhorn_iters", rounds}})
                  .find("rounds are more than a census runs (at most 64; DeepSeek-V4's checkpoints run 20)"),
              std::string::npos);
}

TEST(HostileLoops, ManyKeyValueSharedLayersAreReadInOnePass) {
  // A quarter of the largest config's layers, half of them sharing: read once over the layers, not once
  // per pair of them (2^34 comparisons, which did not end in minutes).
  auto config = read_config({{"model_type", "gemma4_text"}, {"num_hidden_layers", kLargestLayerCount / 4},
                             {"num_kv_shared_layers", kLargestLayerCount / 8}});
  ASSERT_TRUE(config) << config.refusal().message();
  EXPECT_EQ(layer_kinds(*config).back(), "full_attention+kv_shared");
}

}  // namespace
}  // namespace census
