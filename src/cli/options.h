// File: options.h
// The rules every option of the command line follows, one for each kind of value. An option is
// checked as the others of its kind are by choosing its kind; nothing reads an option's text another
// way.
//
//   integer  decimal digits after an optional '-' ("4096", "-1"); never empty, never a fraction, an
//            exponent, hex, a '+' or a space; within the option's [min, max], a number past 64 bits
//            refused as past max, not wrapped or saturated.
//   bytes    a whole number of bytes: a decimal number and an optional unit, B; KB, MB, GB, TB
//            (powers of 1000); KiB, MiB, GiB, TiB (powers of 1024): "80GiB", "141GB", "1.5GiB", "1024".
//            A fraction of a byte ("1.5", "0.3KiB") is refused, and so is a size past kLargestBytes
//            (2^60), so that a sum of a few sizes and a step's peak stays exact in 64 bits.
//   number   a finite decimal number (no nan, inf, hex, or a number past a double's range, such as
//            1e400) within the option's [min, max]: a positive figure has a positive min, so that no
//            tiny figure (1e-300 TFLOPS) turns into an absurd answer.
//   text     any text but the empty one: an empty value is refused, never read as the option left out.
//   choice   one of the option's words ("1f1b", "gpipe", "interleaved"), exactly: an empty one or
//            another word is refused, naming the words to give.
//
// Each rule is a parser of an option's text (parse_*), for the command line; values that arrive as
// numbers (Python's arguments) meet the same bounds where the command checks them (the bounds are the
// census's: step/step_census.h, step/step_compose.h). add_*_option binds a CLI11 option to a
// variable through its parser: a value that breaks the rule stops the parse with OptionRefused, which
// run_cli prints as the one-line refusal, exit code 2.
//
//   add_integer_option(*sub, {"--micro-batches", 1, kLargestMicroBatches, "micro-batches a step accumulates"},
//                      args.micro_batches, "micro-batches accumulated per step (default 1)");
//   add_bytes_option(*sub, "--cuda-context", args.cuda_context, "bytes of the CUDA context (default 0)");
//   add_number_option(*sub, {"--peak-tflops", 1e-3, 1e6, "TFLOPS"}, args.peak_tflops, "dense bf16 TFLOPS");
//   add_text_option(*sub, "--device", args.device, "a preset: h100, h200, ...", "give a preset, or leave the option out");
//   add_choice_option(*sub, "--format", args.format, {"table", "json"}, "table or json (default table)");
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "step/step_census.h"
#include "models/config_reader.h"
#include "util/result.h"

namespace census::cli {

// An integer option: its name, its range, and what its max is (a refusal says "2147483648 is more
// than 65536, the most micro-batches a step accumulates").
struct IntegerRule {
  const char* flag;
  int64_t min;
  int64_t max;
  const char* max_is;
};

// A number option: its name, its range, and its unit ("TFLOPS"; empty for a share).
struct NumberRule {
  const char* flag;
  double min;
  double max;
  const char* unit;
};

// The rules of options several commands share. Tokens of a sequence are at most 2^32, as a config's
// sizes are; the census refuses fewer where a model's counts would pass 64 bits (cli/request.h).
inline constexpr IntegerRule kSeqLengthRule{"--seq-length", 1, kLargestSeqLength, "the most tokens a census prices"};
inline constexpr IntegerRule kLayerIndexRule{"--layer-index", 0, kLargestLayerCount - 1,
                                             "the last layer of the largest config (2^20 layers)"};
// A parallel degree (--tp, --dp, --pp, ...): 1 to 2^20 ranks.
constexpr IntegerRule degree_rule(const char* flag) { return {flag, 1, kLargestDegree, "the most ranks a run has"}; }
inline constexpr IntegerRule kTensorParallelRule = degree_rule("--tp");
// Sequences of a micro-batch: its B x S tokens are held to a config's counts as S tokens are
// (cli/request.h); B at most 2^16 and S 2^32, so the product fits.
inline constexpr IntegerRule kMicroBatchSizeRule{"--micro-batch-size", 1, kLargestMicroBatchSize,
                                                 "the most sequences a micro-batch holds"};

// The shortest text of a number as a refusal or an answer names it: "0.001", "1e+06".
std::string figure(double value);

Result<int64_t> parse_integer(const IntegerRule& rule, std::string_view text);
Result<int64_t> parse_bytes(const std::string& flag, std::string_view text);
Result<double> parse_number(const NumberRule& rule, std::string_view text);
Result<std::string> parse_choice(const std::string& flag, const std::vector<std::string>& choices, std::string_view text);
// A value that arrives as a number (from Python), held to the rule's range.
Status check_integer(const IntegerRule& rule, int64_t value);
Status check_bytes(const std::string& flag, int64_t value);
Status check_number(const NumberRule& rule, double value);

// An option's value that breaks its rule, thrown from the option's callback while CLI11 parses (only
// an exception stops its parse); run_cli prints what() as the refusal.
class OptionRefused : public CLI::ParseError {
 public:
  explicit OptionRefused(const Refusal& refusal) : CLI::ParseError("OptionRefused", refusal.message(), 2) {}
};

// An option whose text `read` reads (and stores), a refusal of it thrown as OptionRefused.
CLI::Option* add_read_option(CLI::App& app, const std::string& flag, const std::string& help,
                             std::function<Status(std::string_view)> read);

// Each adder stores into an int64_t (a double for a number), or into a std::optional of one where the
// option's absence means something of its own (--stage left out: every stage).
template <class Into>
CLI::Option* add_integer_option(CLI::App& app, const IntegerRule& rule, Into& into, const std::string& help) {
  return add_read_option(app, rule.flag, help, [rule, &into](std::string_view text) -> Status {
    CENSUS_ASSIGN(into, parse_integer(rule, text));
    return {};
  });
}
template <class Into>
CLI::Option* add_bytes_option(CLI::App& app, const std::string& flag, Into& into, const std::string& help) {
  return add_read_option(app, flag, help, [flag, &into](std::string_view text) -> Status {
    CENSUS_ASSIGN(into, parse_bytes(flag, text));
    return {};
  });
}
template <class Into>
CLI::Option* add_number_option(CLI::App& app, const NumberRule& rule, Into& into, const std::string& help) {
  return add_read_option(app, rule.flag, help, [rule, &into](std::string_view text) -> Status {
    CENSUS_ASSIGN(into, parse_number(rule, text));
    return {};
  });
}
// One of `choices`; the help shows them as CLI11 shows a set ("TEXT:{table,json}").
CLI::Option* add_choice_option(CLI::App& app, const std::string& flag, std::string& into,
                               const std::vector<std::string>& choices, const std::string& help);
// `advice` says what to give where the text is empty ("give npu or cuda, or leave the option out").
CLI::Option* add_text_option(CLI::App& app, const std::string& flag, std::string& into, const std::string& help,
                             const std::string& advice = "give a value, or leave the option out");

}  // namespace census::cli
