// Reading config.json as Python's json module writes it: Infinity, -Infinity and NaN outside strings
// are the doubles they stand for; inside strings they stay text; a size field holding one is refused.
#include <gtest/gtest.h>

#include <cmath>

#include "models/python_json.h"
#include "models/registry.h"

namespace census {
namespace {

TEST(PythonJson, ReadsTheBareWordsAsPythonDoes) {
  const nlohmann::json json = parse_python_json(
      R"({"time_step_limit": [0.0, Infinity], "low": -Infinity, "nan": NaN, "text": "Infinity, NaN", "n": 3})");
  ASSERT_FALSE(json.is_discarded());
  EXPECT_EQ(json.at("time_step_limit").at(0).get<double>(), 0.0);
  EXPECT_TRUE(std::isinf(json.at("time_step_limit").at(1).get<double>()));
  EXPECT_GT(json.at("time_step_limit").at(1).get<double>(), 0.0);
  EXPECT_TRUE(std::isinf(json.at("low").get<double>()));
  EXPECT_LT(json.at("low").get<double>(), 0.0);
  EXPECT_TRUE(std::isnan(json.at("nan").get<double>()));
  EXPECT_EQ(json.at("text").get<std::string>(), "Infinity, NaN");
  EXPECT_EQ(json.at("n").get<int64_t>(), 3);
}

TEST(PythonJson, RefusesWhatIsNotJsonAndWordsInsideOtherNames) {
  EXPECT_TRUE(parse_python_json(R"({"a": Infinityx})").is_discarded());
  EXPECT_TRUE(parse_python_json(R"({"a": inf})").is_discarded());
  EXPECT_TRUE(parse_python_json(R"({"a": [1, 2)").is_discarded());
}

// Transformers' NemotronHConfig writes time_step_limit [0.0, Infinity]: the config reads; a size
// holding Infinity is refused in one line naming the field and the value as Python wrote it.
TEST(PythonJson, ANemotronHConfigReadsAndAnInfiniteSizeIsRefused) {
  auto config = read_config(parse_python_json(R"({"model_type": "nemotron_h", "time_step_limit": [0.0, Infinity]})"));
  ASSERT_TRUE(config) << config.refusal().message();
  EXPECT_EQ(config->hidden_size, 4096);
  auto refused = read_config(parse_python_json(R"({"model_type": "nemotron_h", "hidden_size": Infinity})"));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.refusal().message().find("hidden_size"), std::string::npos);
  EXPECT_NE(refused.refusal().message().find("Infinity"), std::string::npos);
  EXPECT_EQ(refused.refusal().message().find('\n'), std::string::npos);
  auto nan_size = read_config(parse_python_json(R"({"model_type": "nemotron_h", "ssm_state_size": NaN})"));
  ASSERT_FALSE(nan_size);
  EXPECT_NE(nan_size.refusal().message().find("NaN"), std::string::npos);
}

}  // namespace
}  // namespace census
