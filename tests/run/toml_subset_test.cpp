// The TOML subset torchtitan's job files are written in: what it reads, to the value, and each form it
// refuses, one line naming the file and the line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "run/toml_subset.h"

namespace census {
namespace {

TomlDocument parsed(const std::string& text) {
  auto doc = parse_toml_subset(text, "job.toml");
  EXPECT_TRUE(doc.ok()) << (doc.ok() ? "" : doc.refusal().message());
  return doc.ok() ? doc.take() : TomlDocument{};
}

void expect_refused(const std::string& text, const std::string& named) {
  auto doc = parse_toml_subset(text, "job.toml");
  ASSERT_FALSE(doc.ok()) << text;
  EXPECT_NE(doc.refusal().message().find(named), std::string::npos) << doc.refusal().message();
  EXPECT_EQ(doc.refusal().message().find('\n'), std::string::npos);
}

TEST(TomlSubset, ReadsTheFormsJobFilesUse) {
  const TomlDocument doc = parsed(
      "# NOTE: a preset\n"
      "top = 1\n"
      "[job]\r\n"
      "description = \"Llama 3 \\\"8B\\\" \\u00e9\"  # a comment\n"
      "folder = './out' \n"
      "[ quantize . linear.float8 ]\n"
      "filter_fqns = [\"output\",\n"
      "  'layers.0', # one\n"
      "]\n"
      "[training]\n"
      "seq_len = 8_192\n"
      "lr = 3e-4\n"
      "neg = -2\n"
      "max_norm = 1.0\n"
      "big = inf\n"
      "compile = false\n"
      "model.name = \"llama3\"\n"
      "parts = [[\"a\"], [\"b\", \"c\"], []]\n");
  ASSERT_EQ(doc.tables.size(), 3u);
  EXPECT_EQ(doc.tables[1].path, "quantize.linear.float8");
  EXPECT_EQ(doc.tables[1].line, 6);
  ASSERT_EQ(doc.entries.size(), 12u);
  EXPECT_EQ(doc.entries[0].path, "top");
  EXPECT_EQ(doc.entries[1].path, "job.description");
  EXPECT_EQ(doc.entries[1].value.string(), "Llama 3 \"8B\" \xc3\xa9");
  EXPECT_EQ(doc.entries[2].value.string(), "./out");
  EXPECT_EQ(doc.entries[3].path, "quantize.linear.float8.filter_fqns");
  ASSERT_EQ(doc.entries[3].value.array().size(), 2u);
  EXPECT_EQ(doc.entries[3].value.array()[1].string(), "layers.0");
  EXPECT_EQ(doc.entries[4].value.integer(), 8192);
  EXPECT_EQ(doc.entries[4].line, 11);
  EXPECT_DOUBLE_EQ(std::get<double>(doc.entries[5].value.value), 3e-4);
  EXPECT_EQ(doc.entries[6].value.integer(), -2);
  EXPECT_TRUE(doc.entries[7].value.is_float());
  EXPECT_TRUE(std::isinf(std::get<double>(doc.entries[8].value.value)));
  EXPECT_FALSE(doc.entries[9].value.boolean());
  EXPECT_EQ(doc.entries[10].path, "training.model.name");
  EXPECT_EQ(doc.entries[11].value.array()[1].array()[1].string(), "c");
}

TEST(TomlSubset, RefusesWhatItDoesNotRead) {
  expect_refused("[[layers]]\n", "job.toml:1: is not TOML Census reads (arrays of tables are not read)");
  expect_refused("a = {b = 1}\n", "inline tables");
  expect_refused("a = \"\"\"x\"\"\"\n", "multi-line strings");
  expect_refused("\"a\" = 1\n", "quoted keys");
  expect_refused("a = 1979-05-27\n", "job.toml:1");
  expect_refused("a = 0x10\n", "'0x10'");
  expect_refused("a = 010\n", "'010'");
  expect_refused("a = 1.\n", "digits after its point");
  expect_refused("a = 1e\n", "digits in its exponent");
  expect_refused("a = 9223372036854775808\n", "past 64 bits");
  expect_refused("a = \"open\n", "not closed");
  expect_refused("a = \"\\q\"\n", "unknown escape");
  expect_refused("a = \"\\ud800\"\n", "no character");
  expect_refused("a = 1 2\n", "unexpected text");
  expect_refused("a = [1 2]\n", "',' or ']'");
  expect_refused("a = [[[[[[[[[1]]]]]]]]]\n", "nest deeper");
  expect_refused("a = 1\na = 2\n", "job.toml:2: is not TOML Census reads ('a' is defined twice)");
  expect_refused("[t]\n[t]\n", "defined twice");
  expect_refused("[t\n", "not closed");
  expect_refused("= 1\n", "a key is expected");
  expect_refused("a 1\n", "'=' is expected");
  expect_refused("\xcb\x80sa\n", "a key is expected");  // a fuzzed input that sent a TOML library's parser astray
  expect_refused("[activation_checkpoint]\nmode = \"full\"\n\n[\n[validation]\n", "job.toml:4");  // another
}

}  // namespace
}  // namespace census
