#include "nn/attention_kernel.h"

#include <array>

#include "ops/ops.h"

namespace census::nn {
namespace {

constexpr std::array<KernelProfileFacts, 2> kKernelProfiles = {{
    {KernelProfile::kNpu, "npu", "nd_census.flash_attention.default", ops::kFlashStats, 0, false, true},
    {KernelProfile::kCuda, "cuda", "nd_census.cuda_flash_attention.default", 1, 2, true, false},
}};

}  // namespace

const KernelProfileFacts& kernel_profile(KernelProfile profile) { return kKernelProfiles[static_cast<size_t>(profile)]; }

std::optional<KernelProfile> parse_kernel_profile(std::string_view name) {
  for (const KernelProfileFacts& facts : kKernelProfiles)
    if (facts.name == name) return facts.profile;
  return std::nullopt;
}

Tensor flash_attention_forward(const Tensor& query, const Tensor& key, const Tensor& value, KernelProfile kernels) {
  const Tensor out = kernels == KernelProfile::kCuda ? ops::cuda_flash_attention(query, key, value)
                                                     : ops::flash_attention(query, key, value).out;
  return ops::contiguous(ops::transpose(out, 1, 2));
}

}  // namespace census::nn
