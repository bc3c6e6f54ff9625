#include "nn/tensor_parallel.h"

namespace census::nn {
namespace {

thread_local const ParallelStyles* g_styles = nullptr;

}  // namespace

const ParallelStyles* parallel_styles() { return g_styles; }

ParallelStylesScope::ParallelStylesScope(const ParallelStyles* styles) : previous_(g_styles) { g_styles = styles; }

ParallelStylesScope::~ParallelStylesScope() { g_styles = previous_; }

}  // namespace census::nn
