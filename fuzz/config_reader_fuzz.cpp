// Fuzzing the config reader: any bytes as a config.json are read into a ModelConfig or refused in one
// line; a config read is then grouped into its layer stack and weighed by the request's checks, which
// must refuse whatever could overflow rather than overflow themselves.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "cli/request.h"
#include "fuzz_check.h"
#include "models/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace census;
  const nlohmann::json json =
      nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  auto config = read_config(json);
  if (!config) {
    fuzz::expect_one_line(config.refusal());
    return 0;
  }
  int64_t layers = 0;
  for (const LayerGroup& group : layer_stack(*config)) layers += group.mtp ? 0 : group.count;
  if (layers != config->num_hidden_layers) __builtin_trap();
  cli::Request request;
  request.config = config.take();
  for (const int64_t seq_length : {int64_t{1}, int64_t{4096}, int64_t{1} << 40}) {
    request.seq_length = seq_length;
    for (const int64_t tp : {int64_t{1}, int64_t{2}, int64_t{3}}) {
      request.tp = tp;
      if (Status status = cli::check_request(request); !status) fuzz::expect_one_line(status.refusal());
    }
  }
  return 0;
}
