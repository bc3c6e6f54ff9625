// PYTORCH_CUDA_ALLOC_CONF read as PyTorch reads it: the values the simulator takes, and the refusals
// (one line each) of what PyTorch refuses or Census does not simulate.
#include <gtest/gtest.h>

#include "alloc/alloc_conf.h"

namespace census::alloc {
namespace {

TEST(AllocConf, DefaultsWhenEmpty) {
  auto conf = parse_alloc_conf("");
  ASSERT_TRUE(conf);
  EXPECT_EQ(conf->max_split_size, kNoSplitLimit);
  EXPECT_EQ(conf->max_non_split_rounding_size, 20 * kMiB);
  EXPECT_FALSE(conf->expandable_segments);
  for (int64_t d : conf->roundup_power2_divisions) EXPECT_EQ(d, 0);
}

TEST(AllocConf, TheKeysTheSimulatorReads) {
  auto conf = parse_alloc_conf("expandable_segments:True, max_split_size_mb:128,max_non_split_rounding_mb:64");
  ASSERT_TRUE(conf) << conf.refusal().message();
  EXPECT_TRUE(conf->expandable_segments);
  EXPECT_EQ(conf->max_split_size, 128 * kMiB);
  EXPECT_EQ(conf->max_non_split_rounding_size, 64 * kMiB);
  EXPECT_EQ(conf->text, "expandable_segments:True, max_split_size_mb:128,max_non_split_rounding_mb:64");
  // a later key overrides an earlier one; a trailing comma is allowed, as PyTorch's tokenizer allows it
  auto twice = parse_alloc_conf("expandable_segments:True,expandable_segments:False,");
  ASSERT_TRUE(twice);
  EXPECT_FALSE(twice->expandable_segments);
  // the floor itself is allowed
  ASSERT_TRUE(parse_alloc_conf("max_split_size_mb:20"));
}

// roundup_power2_divisions: one value for every interval, or a list by boundary (MiB): the first
// boundary's value also below it, ">" every interval after the last boundary. PyTorch's own test
// (c10/test/core/AllocatorConfig_test.cpp) reads [64:8,128:2,256:4,512:2,1024:4,>:1] as 8 at 32 and 64
// MiB, 2 at 128, 4 at 256, 2 at 512, 4 at 1024, 1 at 2048 and above.
TEST(AllocConf, RoundupPower2Divisions) {
  auto one = parse_alloc_conf("roundup_power2_divisions:4");
  ASSERT_TRUE(one);
  for (int64_t d : one->roundup_power2_divisions) EXPECT_EQ(d, 4);
  auto listed = parse_alloc_conf("roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]");
  ASSERT_TRUE(listed) << listed.refusal().message();
  const std::pair<int64_t, int64_t> expected[] = {{32, 8}, {64, 8}, {128, 2}, {256, 4}, {512, 2}, {1024, 4}, {2048, 1}, {4096, 1}, {8192, 1}};
  for (const auto& [mb, divisions] : expected) EXPECT_EQ(listed->divisions_for(mb * kMiB), divisions) << mb << " MiB";
}

TEST(AllocConf, AcceptedWithoutEffectOnTheDevicePool) {
  ASSERT_TRUE(parse_alloc_conf("garbage_collection_threshold:0.6,backend:native,release_lock_on_cudamalloc:True,"
                               "pinned_use_cuda_host_register:False,pinned_num_register_threads:8,"
                               "pinned_use_background_threads:True,pinned_reserve_segment_size_mb:64,"
                               "graph_capture_record_stream_reuse:False"));
}

TEST(AllocConf, RefusalsAreOneLineNamingTheKey) {
  const std::pair<const char*, const char*> refused[] = {
      {"expandable_segment:True", "'expandable_segment' is not a key of PyTorch's caching allocator"},
      {"max_split_size_mb:-5", "max_split_size_mb:'-5' is negative"},
      {"max_split_size_mb:16", "max_split_size_mb:16 is below PyTorch's floor of 20 (MiB)"},
      {"max_non_split_rounding_mb:10", "max_non_split_rounding_mb:10 is below PyTorch's floor of 20 (MiB)"},
      {"max_split_size_mb:12.5", "max_split_size_mb:'12.5' is not a whole number"},
      {"max_split_size_mb", "expected ':' after max_split_size_mb, found the end"},
      {"max_split_size_mb:", "max_split_size_mb has no value"},
      {"expandable_segments:true", "expandable_segments:'true': give True or False"},
      {"roundup_power2_divisions:3", "roundup_power2_divisions:3: the divisions must be a power of 2"},
      {"roundup_power2_divisions:[100:4]", "the boundary 100 (MiB) must be a power of 2"},
      {"roundup_power2_divisions:[64:4", "the list has no closing ']'"},
      {"garbage_collection_threshold:1.5", "give a number between 0 and 1"},
      {"backend:cudaMallocAsync", "Census simulates the native caching allocator"},
      {"expandable_segments:True;max_split_size_mb:128", "expandable_segments:'True;max_split_size_mb': give True or False"},
      {"expandable_segments:True max_split_size_mb:128", "give True or False"},
      {"max_split_size_mb:99999999999999999999", "is too large"},
  };
  for (const auto& [text, reason] : refused) {
    auto conf = parse_alloc_conf(text);
    ASSERT_FALSE(conf) << text;
    const std::string line = conf.refusal().message();
    EXPECT_EQ(line.rfind("--alloc-conf: ", 0), 0u) << line;
    EXPECT_NE(line.find(reason), std::string::npos) << text << " -> " << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace census::alloc
