// The option rules (cli/options.h): each kind of value read one way, whatever the option. Each rule
// meets the hostile values every option meets: 0, -1, empty, 2^31, 2^63, 2^64, NaN and a wrong type,
// and those that broke an option once (a fraction of a byte, 1e30, 1e400, 1e-300, hex).
#include "cli/options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace census::cli {
namespace {

constexpr IntegerRule kRule{"--pp", 1, 1 << 20, "the most ranks a run has"};
constexpr NumberRule kFigure{"--hbm-gbs", 1e-3, 1e6, "GB/s"};

std::string refusal_of(const Status& status) { return status ? "" : status.refusal().message(); }
template <class T>
std::string refusal_of(const Result<T>& result) {
  return result ? "" : result.refusal().message();
}

TEST(IntegerRule, ReadsDecimalDigitsWithinTheRange) {
  EXPECT_EQ(*parse_integer(kRule, "1"), 1);
  EXPECT_EQ(*parse_integer(kRule, "1048576"), 1 << 20);
  EXPECT_EQ(*parse_integer(kRule, "0008"), 8);  // decimal, never octal
  EXPECT_EQ(*parse_integer({"--stage", -5, 5, "the last stage"}, "-5"), -5);
}

TEST(IntegerRule, RefusesEachHostileValueInOneLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"0", "--pp: '0' is less than 1; give an integer from 1 to 1048576"},
      {"-1", "--pp: '-1' is less than 1; give an integer from 1 to 1048576"},
      {"", "--pp: is empty; give an integer from 1 to 1048576, or leave the option out"},
      {"2147483648", "--pp: '2147483648' is more than 1048576, the most ranks a run has; give an integer from 1 to 1048576"},
      {"9223372036854775808", "--pp: '9223372036854775808' is more than 1048576"},     // 2^63: past int64, not saturated
      {"18446744073709551616", "--pp: '18446744073709551616' is more than 1048576"},   // 2^64: not wrapped
      {"-9223372036854775809", "--pp: '-9223372036854775809' is less than 1"},
      {"nan", "--pp: 'nan' is not an integer"},
      {"abc", "--pp: 'abc' is not an integer"},
      {"1e30", "--pp: '1e30' is not an integer"},
      {"1.5", "--pp: '1.5' is not an integer"},
      {"2.0", "--pp: '2.0' is not an integer"},
      {"0x10", "--pp: '0x10' is not an integer"},
      {"+2", "--pp: '+2' is not an integer"},
      {" 2", "--pp: ' 2' is not an integer"},
      {"2 ", "--pp: '2 ' is not an integer"},
      {"-", "--pp: '-' is not an integer"},
      {"2\n3", "--pp: '2\\n3' is not an integer"},
  };
  for (const auto& [text, message] : cases) {
    const std::string refusal = refusal_of(parse_integer(kRule, text));
    EXPECT_EQ(refusal.rfind(message, 0), 0u) << "'" << text << "': " << refusal;
    EXPECT_EQ(refusal.find('\n'), std::string::npos) << refusal;
  }
}

TEST(IntegerRule, ValuesFromPythonMeetTheSameRange) {
  EXPECT_TRUE(check_integer(kRule, 1));
  EXPECT_EQ(refusal_of(check_integer(kRule, 0)), "--pp: 0 is less than 1; give an integer from 1 to 1048576");
  EXPECT_EQ(refusal_of(check_integer(kRule, INT64_MAX)).rfind("--pp: 9223372036854775807 is more than 1048576", 0), 0u);
}

TEST(BytesRule, ReadsWholeBytesWithOrWithoutAUnit) {
  const std::pair<const char*, int64_t> cases[] = {
      {"0", 0},        {"1024", 1024},   {"1024B", 1024},       {"80GiB", int64_t{80} << 30},  {"141GB", 141000000000},
      {"80 GiB", int64_t{80} << 30},     {"1.5GiB", int64_t{3} << 29},  {"0.5KiB", 512},  {"2.5KB", 2500},
      {".5MiB", 1 << 19},                {"1.000KiB", 1024},  {"1TiB", int64_t{1} << 40},
      {"1152921504606846976", int64_t{1} << 60},  // 2^60, the largest
      {"1048576TiB", int64_t{1} << 60},
  };
  for (const auto& [text, bytes] : cases) {
    const Result<int64_t> parsed = parse_bytes("--gpu-memory", text);
    ASSERT_TRUE(parsed) << text << ": " << parsed.refusal().message();
    EXPECT_EQ(*parsed, bytes) << text;
  }
}

TEST(BytesRule, RefusesFractionsOfAByteAndSizesPast2To60) {
  const std::pair<const char*, const char*> cases[] = {
      {"1.5", "'1.5' is not a whole number of bytes"},
      {"0.3KiB", "'0.3KiB' is not a whole number of bytes"},  // 307.2 bytes
      {"0.0001KB", "'0.0001KB' is not a whole number of bytes"},
      {"-1", "'-1' is not a size"},
      {"", "is empty"},
      {"1152921504606846977", "is more than a size Census prices (2^60 bytes)"},
      {"2147483648TiB", "is more than a size Census prices"},
      {"9223372036854775808", "is more than a size Census prices"},   // 2^63
      {"18446744073709551616", "is more than a size Census prices"},  // 2^64
      {"99999999999999999999999999", "is more than a size Census prices"},
      {"nan", "'nan' is not a size"},
      {"inf", "'inf' is not a size"},
      {"1e30", "'1e30' has an unknown unit"},
      {"80GIB", "'80GIB' has an unknown unit"},
      {"0x10", "'0x10' has an unknown unit"},
      {"1.0000000000000000001KiB", "has more decimals than a size needs"},
      {"abc", "'abc' is not a size"},
      {".", "'.' is not a size"},
  };
  for (const auto& [text, message] : cases) {
    const std::string refusal = refusal_of(parse_bytes("--gpu-memory", text));
    EXPECT_EQ(refusal.rfind("--gpu-memory: ", 0), 0u) << text << ": " << refusal;
    EXPECT_NE(refusal.find(message), std::string::npos) << text << ": " << refusal;
  }
  EXPECT_TRUE(check_bytes("cuda_context", int64_t{1} << 60));
  EXPECT_FALSE(check_bytes("cuda_context", (int64_t{1} << 60) + 1));
  EXPECT_FALSE(check_bytes("cuda_context", -1));
}

TEST(NumberRule, ReadsFiniteDecimalsWithinTheRange) {
  EXPECT_EQ(*parse_number(kFigure, "3350"), 3350.0);
  EXPECT_EQ(*parse_number(kFigure, "0.001"), 1e-3);
  EXPECT_EQ(*parse_number(kFigure, "1e6"), 1e6);
  EXPECT_EQ(*parse_number(kFigure, "2.5E+2"), 250.0);
  EXPECT_EQ(*parse_number(kFigure, ".5"), 0.5);
}

TEST(NumberRule, RefusesNonFiniteTinyAndHugeFigures) {
  const std::pair<const char*, const char*> cases[] = {
      {"nan", "'nan' is not a finite decimal number"},
      {"NaN", "'NaN' is not a finite decimal number"},
      {"inf", "'inf' is not a finite decimal number"},
      {"-inf", "'-inf' is not a finite decimal number"},
      {"infinity", "'infinity' is not a finite decimal number"},
      {"0x1p3", "'0x1p3' is not a finite decimal number"},
      {"", "is empty"},
      {"abc", "'abc' is not a finite decimal number"},
      {"1e", "'1e' is not a finite decimal number"},
      {"1e400", "'1e400' is more than 1e+06"},   // past a double: infinity, refused as past the range
      {"-1e400", "'-1e400' is less than 0.001"},
      {"1e-300", "'1e-300' is less than 0.001"},  // positive, but an absurd figure
      {"1e-400", "'1e-400' is less than 0.001"},
      {"0", "'0' is less than 0.001"},
      {"-1", "'-1' is less than 0.001"},
      {"2147483648", "'2147483648' is more than 1e+06"},
      {"9223372036854775808", "is more than 1e+06"},
      {"18446744073709551616", "is more than 1e+06"},
  };
  for (const auto& [text, message] : cases) {
    const std::string refusal = refusal_of(parse_number(kFigure, text));
    EXPECT_EQ(refusal.rfind("--hbm-gbs: ", 0), 0u) << text << ": " << refusal;
    EXPECT_NE(refusal.find(message), std::string::npos) << text << ": " << refusal;
    EXPECT_NE(refusal.find("give a number from 0.001 to 1e+06 GB/s"), std::string::npos) << refusal;
  }
  EXPECT_FALSE(check_number(kFigure, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(check_number(kFigure, std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(check_number(kFigure, 1e-300));
  EXPECT_TRUE(check_number(kFigure, 3350));
}

// A choice is one of its words exactly: no empty text (never the default), no case or space changed.
TEST(ChoiceRule, ReadsOneOfItsWordsExactly) {
  const std::vector<std::string> schedules = {"1f1b", "gpipe", "interleaved"};
  EXPECT_EQ(*parse_choice("--schedule", schedules, "gpipe"), "gpipe");
  const std::pair<const char*, const char*> refused[] = {
      {"", "--schedule: is empty; give 1f1b, gpipe or interleaved, or leave the option out"},
      {"GPipe", "--schedule: 'GPipe' is not known; give 1f1b, gpipe or interleaved"},
      {"gpipe ", "--schedule: 'gpipe ' is not known; give 1f1b, gpipe or interleaved"},
      {"1f1b\ngpipe", "--schedule: '1f1b\\ngpipe' is not known; give 1f1b, gpipe or interleaved"},
  };
  for (const auto& [text, message] : refused) {
    auto read = parse_choice("--schedule", schedules, text);
    ASSERT_FALSE(read) << text;
    EXPECT_EQ(read.refusal().message(), message);
  }
  EXPECT_EQ(parse_choice("--format", {"table", "json"}, "yaml").refusal().message(),
            "--format: 'yaml' is not known; give table or json");
}

// `args` parsed as a command line's arguments after the program's name.
void parse(CLI::App& app, std::vector<std::string> args) {
  args.insert(args.begin(), "census");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

// The adders: an option's text meets its rule as CLI11 parses it, an empty value included, and a
// refusal stops the parse as OptionRefused.
TEST(OptionAdders, ARuleBreakStopsTheParse) {
  CLI::App app;
  int64_t pp = 1;
  std::optional<int64_t> stage;
  int64_t cuda_context = 0;
  std::optional<double> hbm;
  std::string device;
  std::string schedule = "1f1b";
  add_integer_option(app, kRule, pp, "");
  add_integer_option(app, {"--stage", 0, 7, "the last stage"}, stage, "");
  add_bytes_option(app, "--cuda-context", cuda_context, "");
  add_number_option(app, kFigure, hbm, "");
  add_text_option(app, "--device", device, "", "name a preset, or leave the option out");
  add_choice_option(app, "--schedule", schedule, {"1f1b", "gpipe"}, "");
  parse(app, {"--device", "h100", "--hbm-gbs", "3350", "--cuda-context", "2GiB", "--stage", "3", "--pp", "4",
              "--schedule", "gpipe"});
  EXPECT_EQ(pp, 4);
  EXPECT_EQ(stage, 3);
  EXPECT_EQ(cuda_context, int64_t{2} << 30);
  EXPECT_EQ(hbm, 3350.0);
  EXPECT_EQ(device, "h100");
  EXPECT_EQ(schedule, "gpipe");
  const std::pair<std::vector<std::string>, const char*> refused[] = {
      {{"--pp", ""}, "--pp: is empty"},
      {{"--stage", ""}, "--stage: is empty"},
      {{"--stage", "-1"}, "--stage: '-1' is less than 0"},
      {{"--cuda-context", ""}, "--cuda-context: is empty"},
      {{"--hbm-gbs", "nan"}, "--hbm-gbs: 'nan' is not a finite decimal number"},
      {{"--device", ""}, "--device: is empty; name a preset, or leave the option out"},
      {{"--schedule", ""}, "--schedule: is empty; give 1f1b or gpipe, or leave the option out"},
      {{"--schedule", "zb"}, "--schedule: 'zb' is not known; give 1f1b or gpipe"},
  };
  for (const auto& [args, message] : refused) {
    CLI::App again;
    add_integer_option(again, kRule, pp, "");
    add_integer_option(again, {"--stage", 0, 7, "the last stage"}, stage, "");
    add_bytes_option(again, "--cuda-context", cuda_context, "");
    add_number_option(again, kFigure, hbm, "");
    add_text_option(again, "--device", device, "", "name a preset, or leave the option out");
    add_choice_option(again, "--schedule", schedule, {"1f1b", "gpipe"}, "");
    try {
      parse(again, args);
      ADD_FAILURE() << args[0] << " was not refused";
    } catch (const OptionRefused& e) {
      EXPECT_EQ(std::string(e.what()).rfind(message, 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace census::cli
