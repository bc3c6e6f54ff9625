// RecordingObserver: logs what a census's observers see, to compare whole sequences in tests.
#pragma once

#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace census::testing {

class RecordingObserver final : public Observer {
 public:
  void on_op(const OpCall& call) override {
    std::string line = std::string(call.def.name);
    for (const Tensor& out : call.outputs) {
      line += ' ';
      line += out.describe();
    }
    ops.push_back(line);
    if (call.def.kind != OpKind::kView && call.def.kind != OpKind::kInPlace)
      for (const Tensor& out : call.outputs) allocated.push_back(out.storage()->nbytes);
  }
  void on_free(const Storage& storage) override { freed.push_back(storage.nbytes); }
  void on_save(const Tensor& tensor, const OpDef*) override { saved.push_back(tensor.describe()); }

  std::vector<std::string> ops;
  std::vector<int64_t> allocated;
  std::vector<int64_t> freed;
  std::vector<std::string> saved;
};

}  // namespace census::testing
