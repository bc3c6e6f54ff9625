// Fuzzing the readers of trainers' files: any bytes, as torchtitan's job.toml, as torchtune's recipe YAML and
// as TRL's trl sft YAML, give a run within the step's bounds, or a one-line refusal.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "run/torchtitan_toml.h"
#include "run/torchtune_yaml.h"
#include "run/trl_yaml.h"

namespace {

void check(const census::Result<census::TrainerFile>& file) {
  using namespace census;
  if (!file) {
    fuzz::expect_one_line(file.refusal());
    return;
  }
  const Run& r = file->run;
  if (r.seq_length < 1 || r.seq_length > kLargestSeqLength || r.micro_batch_size < 1 ||
      r.micro_batch_size > kLargestMicroBatchSize || r.micro_batches < 1 || r.micro_batches > kLargestMicroBatches ||
      r.dp < 1 || r.dp > kLargestDegree || r.tp < 1 || r.tp > kLargestDegree || r.model.empty())
    __builtin_trap();
  if (step_flags(r).front() != r.model) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check(census::read_torchtitan_toml(text, "job.toml", {8, false, 0}));
  check(census::read_torchtune_yaml(text, "recipe.yaml", {8, false, 2048}));
  check(census::read_trl_yaml(text, "sft.yaml", {0, false, 0}));
  return 0;
}
