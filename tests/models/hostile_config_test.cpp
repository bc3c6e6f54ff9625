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

}  // namespace
}  // namespace census
