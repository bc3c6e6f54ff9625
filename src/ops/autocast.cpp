// File: autocast.cpp
#include "ops/autocast.h"

#include <unordered_map>

#include "ops/ops.h"

namespace census {
namespace {

struct AutocastState {
  bool enabled = false;
  bool excluded = false;  // an autocast op is running: the ops inside it see none
  int nesting = 0;
  // By the fp32 leaf's TensorImpl: its bf16 cast. The leaf outlives the region (a parameter).
  std::unordered_map<const TensorImpl*, Tensor> cache;
};

thread_local AutocastState g_autocast;

// cached_cast: `arg` in `to`, where it is a floating tensor of another dtype.
Tensor cached_cast(DType to, const Tensor& arg) {
  if (!arg.defined() || !is_floating(arg.dtype()) || arg.dtype() == DType::kFloat64 || arg.dtype() == to) return arg;
  // A parameter is a leaf and no view; the region's casts of it are shared.
  const bool can_cache = to == DType::kBFloat16 && arg.dtype() == DType::kFloat32 && arg.impl()->requires_grad &&
                         arg.is_leaf();
  if (can_cache) {
    if (const auto hit = g_autocast.cache.find(arg.impl()); hit != g_autocast.cache.end()) return hit->second;
  }
  Tensor cast = ops::to(arg, to);
  if (can_cache) g_autocast.cache.emplace(arg.impl(), cast);
  return cast;
}

}  // namespace

AutocastScope::AutocastScope(bool enabled) : previous_enabled_(g_autocast.enabled) {
  g_autocast.enabled = enabled;
  ++g_autocast.nesting;
}

AutocastScope::~AutocastScope() {
  g_autocast.enabled = previous_enabled_;
  if (--g_autocast.nesting == 0) {
    // Moved out first: freeing a cast tells the session's observers, which may run ops of their own.
    std::unordered_map<const TensorImpl*, Tensor> cache = std::move(g_autocast.cache);
    g_autocast.cache.clear();
  }
}

namespace autocast {

bool is_enabled() { return g_autocast.enabled; }

Wrap::Wrap() : active_(g_autocast.enabled && !g_autocast.excluded) {
  if (active_) g_autocast.excluded = true;
}

Wrap::~Wrap() {
  if (active_) g_autocast.excluded = false;
}

Tensor Wrap::lower(const Tensor& t) const { return cached_cast(DType::kBFloat16, t); }
Tensor Wrap::fp32(const Tensor& t) const { return cached_cast(DType::kFloat32, t); }

DType Wrap::opt_dtype(const Tensor& first) const {
  return is_floating(first.dtype()) ? DType::kFloat32 : first.dtype();
}

}  // namespace autocast
}  // namespace census
