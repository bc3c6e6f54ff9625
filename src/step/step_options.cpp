#include "step/step_options.h"

namespace census {

const char* sharding_flag(const StepOptions& o) {
  return o.tensor_parallel > 1     ? "--tp"
         : o.pipeline_stages > 1   ? "--pp"
         : o.context_parallel > 1  ? "--cp"
         : o.expert_parallel > 1   ? "--ep"
         : o.composition.zero > 0  ? "--zero"
                                   : nullptr;
}

const char* layout_flag(const StepOptions& o) {
  if (const char* flag = sharding_flag(o)) return flag;
  return o.fsdp.shards > 1 ? "--fsdp" : o.composition.data_parallel > 1 ? "--dp" : nullptr;
}

}  // namespace census
