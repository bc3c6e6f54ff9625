// Fuzzing the reader of torchtitan's job config: any bytes as a job.toml give a run within the step's
// bounds, every field read or listed as ignored, or a one-line refusal.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "run/torchtitan_toml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace census;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto file = read_torchtitan_toml(text, "job.toml", {8, false});
  if (!file) {
    fuzz::expect_one_line(file.refusal());
    return 0;
  }
  const Run& r = file->run;
  if (r.seq_length < 1 || r.seq_length > kLargestSeqLength || r.micro_batch_size < 1 ||
      r.micro_batch_size > kLargestMicroBatchSize || r.micro_batches < 1 || r.micro_batches > kLargestMicroBatches ||
      r.dp < 1 || r.dp > kLargestDegree || r.tp < 1 || r.tp > kLargestDegree || r.model.empty())
    __builtin_trap();
  if (step_flags(r).front() != r.model) __builtin_trap();
  return 0;
}
