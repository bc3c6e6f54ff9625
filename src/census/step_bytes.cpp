#include "census/step_bytes.h"

#include <algorithm>
#include <map>

namespace census {

std::string_view step_category_name(StepCategory category) {
  switch (category) {
    case StepCategory::kActivations: return "activations";
    case StepCategory::kParamGradInflight: return "param_grad_inflight";
    case StepCategory::kInputs: return "inputs";
    case StepCategory::kBuffers: return "buffers";
    case StepCategory::kOptimizerStates: return "optimizer_states";
    case StepCategory::kGradients: return "gradients";
    case StepCategory::kParameters: return "parameters";
    case StepCategory::kCount: break;
  }
  return "?";
}

StepBytes::StorageInfo& StepBytes::info(int64_t id) {
  if (id >= static_cast<int64_t>(storages_.size())) storages_.resize(static_cast<size_t>(id) + 256);
  return storages_[static_cast<size_t>(id)];
}

void StepBytes::mark_phase(std::string name) { phases_.emplace_back(std::move(name), static_cast<int64_t>(events_.size())); }

void StepBytes::track(const Tensor& tensor, std::string_view op) {
  const Storage& storage = *tensor.storage();
  StorageInfo& s = info(storage.id);
  if (s.live_bytes != 0 || storage.nbytes == 0) return;
  s.live_bytes = storage.nbytes;
  s.op = op;
  s.phase = static_cast<int32_t>(phases_.size()) - 1;
  live_ += storage.nbytes;
  events_.push_back({storage.id, storage.nbytes, op});
}

void StepBytes::note(const Tensor& tensor, StepCategory category) {
  StorageInfo& s = info(tensor.storage_id());
  s.category = std::max(s.category, category);
}

bool StepBytes::is_live(const Tensor& tensor) const {
  const int64_t id = tensor.storage_id();
  return id < static_cast<int64_t>(storages_.size()) && storages_[static_cast<size_t>(id)].live_bytes > 0;
}

void StepBytes::on_op(const OpCall& call) {
  for (const Tensor& out : call.outputs) track(out, call.def.name);
}

void StepBytes::on_free(const Storage& storage) {
  if (storage.id >= static_cast<int64_t>(storages_.size())) return;
  StorageInfo& s = storages_[static_cast<size_t>(storage.id)];
  if (s.live_bytes == 0) return;
  events_.push_back({storage.id, -s.live_bytes, "free"});
  live_ -= s.live_bytes;
  s.live_bytes = 0;
}

StepAnalysis StepBytes::analyse(const StepWeights& weights) const {
  StepAnalysis out;
  out.events = static_cast<int64_t>(events_.size());
  StepSplit split;
  int64_t total = 0;
  out.peak.bytes = -1;
  out.other_peak.bytes = -1;
  // The bytes an event moves under `weights`: its storage's share; a storage's death moves what its
  // birth did.
  auto weighted = [&](const Event& e) {
    if (weights.identity()) return e.delta_bytes;
    const StorageInfo& s = storages_[static_cast<size_t>(e.storage_id)];
    const bool optimizer_temporary = s.category == StepCategory::kActivations && s.phase >= 0 &&
                                     phases_[static_cast<size_t>(s.phase)].first == "optimizer_step";
    const Share share = optimizer_temporary ? weights.optimizer_temporaries
                                            : weights.by_category[static_cast<size_t>(s.category)];
    const int64_t bytes = share.of(e.delta_bytes > 0 ? e.delta_bytes : -e.delta_bytes);
    return e.delta_bytes > 0 ? bytes : -bytes;
  };
  for (size_t p = 0; p < phases_.size(); ++p) {
    StepPhase phase;
    phase.name = phases_[p].first;
    // Bytes present through a forward or backward pass only (composed), at its start and its end.
    const bool pass = phase.name.size() > 1 && (phase.name[0] == 'F' || phase.name[0] == 'B') &&
                      phase.name[1] >= '0' && phase.name[1] <= '9';
    const int64_t extra = pass ? weights.during_passes : 0;
    split.bytes[static_cast<size_t>(StepCategory::kActivations)] += extra;
    total += extra;
    phase.events_from = phases_[p].second;
    phase.events_to = p + 1 < phases_.size() ? phases_[p + 1].second : out.events;
    phase.live_at_start = total;
    phase.split_at_start = split;
    phase.peak = StepMoment{total, phase.name, {}, phase.events_from - 1, split};
    for (int64_t i = phase.events_from; i < phase.events_to; ++i) {
      const Event& e = events_[static_cast<size_t>(i)];
      const int64_t delta = weighted(e);
      split.bytes[static_cast<size_t>(storages_[static_cast<size_t>(e.storage_id)].category)] += delta;
      total += delta;
      if (total > phase.peak.bytes) phase.peak = StepMoment{total, phase.name, e.op, i, split};
      if (total > out.peak.bytes) out.peak = StepMoment{total, phase.name, e.op, i, split};
      if (split.other() > out.other_peak.bytes) out.other_peak = StepMoment{split.other(), phase.name, e.op, i, split};
    }
    phase.live_at_end = total;
    phase.split_at_end = split;
    split.bytes[static_cast<size_t>(StepCategory::kActivations)] -= extra;
    total -= extra;
    out.phases.push_back(std::move(phase));
  }
  // What else is live at the peak, by allocating op and phase.
  std::vector<int64_t> live(storages_.size(), 0);
  for (int64_t i = 0; i <= out.peak.event && i < out.events; ++i) {
    const Event& e = events_[static_cast<size_t>(i)];
    live[static_cast<size_t>(e.storage_id)] = e.delta_bytes > 0 ? e.delta_bytes : 0;
  }
  std::map<std::string, std::pair<StepCategory, int64_t>> by_op;
  for (size_t id = 0; id < live.size(); ++id) {
    if (live[id] == 0) continue;
    const StorageInfo& s = storages_[id];
    if (s.category >= StepCategory::kBuffers) continue;
    const std::string label = std::string(s.op) + "@" + (s.phase >= 0 ? phases_[static_cast<size_t>(s.phase)].first : "");
    auto& [category, bytes] = by_op[std::string(step_category_name(s.category)) + ":" + label];
    category = s.category;
    bytes += live[id];
  }
  for (const auto& [label, entry] : by_op) out.peak_other_by_op.push_back({label, entry.first, entry.second});
  std::stable_sort(out.peak_other_by_op.begin(), out.peak_other_by_op.end(),
                   [](const StepHolder& a, const StepHolder& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace census
