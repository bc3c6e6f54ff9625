// The family registry: every model_type once, in order, each read from its config class's defaults
// alone and building its layers; an unknown model_type refused, never read as another family's.
#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "models/registry.h"
#include "ops/dispatch.h"

namespace census {
namespace {

TEST(Registry, EveryModelTypeOnceAndSorted) {
  std::set<std::string_view> seen;
  std::string_view previous;
  for (const Family* family : families()) {
    const std::string_view type = family->model_type;
    EXPECT_TRUE(seen.insert(type).second) << type << " is registered twice";
    EXPECT_LT(previous, type);
    previous = type;
    EXPECT_NE(family->read, nullptr) << type;
    EXPECT_NE(family->build_layer, nullptr) << type;
    EXPECT_NE(family->build_final_norm, nullptr) << type;
  }
  EXPECT_GE(seen.size(), 16u);
}

TEST(Registry, EachFamilyReadsItsDefaultsAndBuildsEveryKind) {
  for (const Family* family : families()) {
    auto config = read_config(nlohmann::json{{"model_type", family->model_type}});
    ASSERT_TRUE(config.ok()) << family->model_type << ": " << config.refusal().message();
    EXPECT_EQ(config->family, family);
    EXPECT_EQ(config->model_type, family->model_type);
    // The first layer of each group of the stack: every kind the defaults make.
    int64_t first = 0;
    for (const LayerGroup& group : layer_stack(*config)) {
      if (group.mtp) continue;
      Session session;
      const auto layer = family->build_layer(*config, first);
      EXPECT_FALSE(layer->parameters().empty()) << family->model_type << " layer " << first;
      first += group.count;
    }
    EXPECT_EQ(first, config->num_hidden_layers) << family->model_type;
  }
}

TEST(Registry, AnUnknownModelTypeIsRefusedNamingTheKnownOnes) {
  auto config = read_config(nlohmann::json{{"model_type", "gpt2"}, {"hidden_size", 768}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.refusal().field, "model_type");
  for (const Family* family : families())
    EXPECT_NE(config.refusal().advice.find(family->model_type), std::string::npos) << family->model_type;
}

}  // namespace
}  // namespace census
