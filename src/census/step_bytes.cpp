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

int32_t StepBytes::slot(int64_t storage_id) {
  if (storage_id >= static_cast<int64_t>(slot_of_.size())) slot_of_.resize(static_cast<size_t>(storage_id) + 256, 0);
  int32_t& entry = slot_of_[static_cast<size_t>(storage_id)];
  if (entry == 0) {
    storages_.emplace_back();
    entry = static_cast<int32_t>(storages_.size());
  }
  return entry - 1;
}

int32_t StepBytes::find_slot(int64_t storage_id) const {
  if (storage_id < 0 || storage_id >= static_cast<int64_t>(slot_of_.size())) return -1;
  return slot_of_[static_cast<size_t>(storage_id)] - 1;
}

void StepBytes::mark_phase(std::string name) { phases_.emplace_back(std::move(name), static_cast<int64_t>(events_.size())); }

void StepBytes::track(const Tensor& tensor, std::string_view op) {
  const Storage& storage = *tensor.storage();
  if (storage.nbytes == 0) return;
  const int32_t id = slot(storage.id);
  StorageInfo& s = storages_[static_cast<size_t>(id)];
  if (s.live_bytes != 0) return;
  s.live_bytes = storage.nbytes;
  s.op = op;
  s.phase = static_cast<int32_t>(phases_.size()) - 1;
  live_ += storage.nbytes;
  events_.push_back({id, storage.nbytes, op});
}

void StepBytes::note(const Tensor& tensor, StepCategory category) {
  StorageInfo& s = storages_[static_cast<size_t>(slot(tensor.storage_id()))];
  s.category = std::max(s.category, category);
}

bool StepBytes::is_live(const Tensor& tensor) const {
  const int32_t id = find_slot(tensor.storage_id());
  return id >= 0 && storages_[static_cast<size_t>(id)].live_bytes > 0;
}

void StepBytes::on_op(const OpCall& call) {
  for (const Tensor& out : call.outputs) track(out, call.def.name);
}

void StepBytes::on_free(const Storage& storage) {
  const int32_t id = find_slot(storage.id);
  if (id < 0) return;
  StorageInfo& s = storages_[static_cast<size_t>(id)];
  if (s.live_bytes == 0) return;
  events_.push_back({id, -s.live_bytes, "free"});
  live_ -= s.live_bytes;
  s.live_bytes = 0;
}

StepPassLog StepBytes::begin_pass() const {
  StepPassLog log;
  log.events_from = log.events_to = static_cast<int64_t>(events_.size());
  log.slots_from = log.slots_to = static_cast<int32_t>(storages_.size());
  return log;
}

void StepBytes::end_pass(StepPassLog& log) const {
  log.events_to = static_cast<int64_t>(events_.size());
  log.slots_to = static_cast<int32_t>(storages_.size());
}

bool StepBytes::replay(const StepPassLog& pass, const StepReplay* forward, StepReplay& made) {
  made.log = pass;
  made.instances.assign(static_cast<size_t>(pass.slots_to - pass.slots_from), -1);
  const int32_t phase = static_cast<int32_t>(phases_.size()) - 1;
  events_.reserve(events_.size() + static_cast<size_t>(pass.events_to - pass.events_from));
  for (int64_t i = pass.events_from; i < pass.events_to; ++i) {
    const Event e = events_[static_cast<size_t>(i)];
    if (e.delta_bytes > 0) {  // a birth: the recorded storage made anew
      if (e.slot < pass.slots_from || e.slot >= pass.slots_to) return false;
      StorageInfo instance;
      instance.live_bytes = e.delta_bytes;
      instance.op = e.op;
      instance.phase = phase;
      instance.recorded = e.slot;
      const int32_t id = static_cast<int32_t>(storages_.size());
      storages_.push_back(instance);
      made.instances[static_cast<size_t>(e.slot - pass.slots_from)] = id;
      live_ += e.delta_bytes;
      events_.push_back({id, e.delta_bytes, e.op});
      continue;
    }
    // A death: of a storage the pass made, or of one its forward made.
    int32_t id = -1;
    if (e.slot >= pass.slots_from && e.slot < pass.slots_to)
      id = made.instances[static_cast<size_t>(e.slot - pass.slots_from)];
    else if (forward != nullptr && e.slot >= forward->log.slots_from && e.slot < forward->log.slots_to)
      id = forward->instances[static_cast<size_t>(e.slot - forward->log.slots_from)];
    if (id < 0) return false;
    StorageInfo& s = storages_[static_cast<size_t>(id)];
    if (s.live_bytes != -e.delta_bytes) return false;
    live_ -= s.live_bytes;
    s.live_bytes = 0;
    events_.push_back({id, e.delta_bytes, e.op});
  }
  return true;
}

std::vector<StepCategory> StepBytes::categories() const {
  std::vector<StepCategory> out(storages_.size());
  for (size_t i = 0; i < storages_.size(); ++i) {
    const StorageInfo& s = storages_[i];
    out[i] = s.recorded >= 0 ? std::max(s.category, out[static_cast<size_t>(s.recorded)]) : s.category;
  }
  return out;
}

StepAnalysis StepBytes::analyse(const StepWeights& weights) const {
  StepAnalysis out;
  const std::vector<StepCategory> category = categories();
  out.events = static_cast<int64_t>(events_.size());
  StepSplit split;
  int64_t total = 0;
  out.peak.bytes = -1;
  out.other_peak.bytes = -1;
  // The bytes an event moves under `weights`: its storage's share; a storage's death moves what its
  // birth did.
  auto weighted = [&](const Event& e) {
    if (weights.identity()) return e.delta_bytes;
    const StorageInfo& s = storages_[static_cast<size_t>(e.slot)];
    const StepCategory c = category[static_cast<size_t>(e.slot)];
    const bool optimizer_temporary = c == StepCategory::kActivations && s.phase >= 0 &&
                                     phases_[static_cast<size_t>(s.phase)].first == "optimizer_step";
    const Share share = optimizer_temporary ? weights.optimizer_temporaries
                                            : weights.by_category[static_cast<size_t>(c)];
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
      split.bytes[static_cast<size_t>(category[static_cast<size_t>(e.slot)])] += delta;
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
    live[static_cast<size_t>(e.slot)] = e.delta_bytes > 0 ? e.delta_bytes : 0;
  }
  std::map<std::string, std::pair<StepCategory, int64_t>> by_op;
  for (size_t id = 0; id < live.size(); ++id) {
    if (live[id] == 0) continue;
    const StorageInfo& s = storages_[id];
    const StepCategory c = category[id];
    if (c >= StepCategory::kBuffers) continue;
    const std::string label = std::string(s.op) + "@" + (s.phase >= 0 ? phases_[static_cast<size_t>(s.phase)].first : "");
    auto& [held_category, bytes] = by_op[std::string(step_category_name(c)) + ":" + label];
    held_category = c;
    bytes += live[id];
  }
  for (const auto& [label, entry] : by_op) out.peak_other_by_op.push_back({label, entry.first, entry.second});
  std::stable_sort(out.peak_other_by_op.begin(), out.peak_other_by_op.end(),
                   [](const StepHolder& a, const StepHolder& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace census
