#include "census/timeline.h"

#include <algorithm>
#include <numeric>

#include "autograd/checkpoint.h"
#include "census/measurement.h"

namespace census {

std::string_view band_name(size_t band) {
  if (band < kSavedOpCount) return saved_op_name(static_cast<SavedOp>(band));
  if (band == kForwardBand) return "forward";
  if (band == kBackwardBand) return "backward";
  return "parameter grads";
}

int64_t Bands::total() const { return std::accumulate(bytes.begin(), bytes.end(), int64_t{0}); }

int64_t Bands::saved() const { return std::accumulate(bytes.begin(), bytes.begin() + kSavedOpCount, int64_t{0}); }

namespace {

// Listens beside a Measurement's own heap, with the same counting rule (a LiveBytes of its own), and
// notes which op column each birth and death falls in and what each storage was born as. What holds
// a storage (its band) is known only once the backward has run: autograd saves a tensor after the op
// that made it, and a gradient is a parameter's only once handed to it. Hence two passes: record, then
// replay the events by band.
class TimelineRecorder final : public Observer {
 public:
  TimelineRecorder() : Observer(kOnOp | kOnFree | kOnSave | kOnParameterGrad) {}

  void track(const Tensor& tensor, std::string_view made_by) {
    const size_t before = live_.event_count();
    live_.track(tensor);
    note_births(before, {&tensor, 1}, made_by);
  }
  void on_op(const OpCall& call) override {
    ++ops_;
    const size_t before = live_.event_count();
    live_.on_op(call);
    note_births(before, call.outputs, call.def.name);
  }
  void on_free(const Storage& storage) override {
    const size_t before = live_.event_count();
    live_.on_free(storage);
    if (live_.event_count() > before) event_column_.push_back(column());
  }
  void on_save(const Tensor& tensor, const OpDef* by_op) override { saved_.on_save(tensor, by_op); }
  void on_parameter_grad(const Tensor& grad) override { grads_.on_parameter_grad(grad); }

  // The forward has returned `out`; the backward starts from `grad`, counted from now as the
  // Measurement counts it.
  void end_forward(const Tensor& out, const Tensor& grad, const std::vector<Tensor>& shared) {
    output_id_ = out.storage_id();
    for (const Tensor& tensor : shared) shared_.insert(tensor.storage_id());
    forward_ops_ = ops_;
    forward_end_event_ = live_.event_count();
    in_backward_ = true;
    track(grad, "grad of the output");
  }

  Timeline finish(const nn::ParameterList& parameters);

 private:
  struct Birth {
    std::string_view module;
    std::string_view made_by;
    Dims shape;
    DType dtype = DType::kBFloat16;
    bool in_backward = false;
  };

  // The column of an event now: the last op dispatched (a backward event before the backward's first
  // op belongs to that op's column, so that no column mixes the forward and the backward).
  int64_t column() const {
    const int64_t last = static_cast<int64_t>(ops_) - 1;
    return in_backward_ ? std::max(static_cast<int64_t>(forward_ops_), last) : std::max<int64_t>(0, last);
  }

  void note_births(size_t first_event, std::span<const Tensor> tensors, std::string_view made_by) {
    const auto& events = live_.events();
    const auto& modules = Session::current().modules();
    // In the backward a module is running only where the checkpoint re-runs the forward.
    const std::string_view module = modules.empty() ? (in_backward_ ? std::string_view("(backward)") : std::string_view())
                                                    : modules.back().path;
    for (size_t i = first_event; i < events.size(); ++i) {
      event_column_.push_back(column());
      const int64_t id = events[i].storage_id;
      if (id >= static_cast<int64_t>(births_.size())) births_.resize(id + 64);
      for (const Tensor& t : tensors)
        if (t.storage_id() == id) births_[id] = Birth{module, made_by, t.sizes(), t.dtype(), in_backward_};
    }
  }

  LiveBytes live_;
  SavedTensors saved_;
  ParameterGrads grads_;
  std::vector<int64_t> event_column_;  // by event index
  std::vector<Birth> births_;          // by storage id
  size_t ops_ = 0;
  size_t forward_ops_ = 0;
  size_t forward_end_event_ = 0;
  int64_t output_id_ = -1;
  StorageSet shared_;  // the positions a checkpointed layer shares with the others: not kept
  bool in_backward_ = false;
};

Timeline TimelineRecorder::finish(const nn::ParameterList& parameters) {
  // As Measurement::run: a gradient the engine accumulated into .grad is a parameter's too.
  for (const Tensor& parameter : parameters)
    if (parameter.impl()->grad) grads_.ids.insert(parameter.impl()->grad->storage->id);
  StorageSet excluded;
  excluded.insert(output_id_);
  const LiveBytes::Peak peak = live_.peak_from(forward_end_event_, excluded, grads_.ids);

  // What holds each storage.
  std::vector<size_t> band(births_.size(), kForwardBand);
  for (size_t id = 0; id < births_.size(); ++id)
    if (births_[id].in_backward) band[id] = kBackwardBand;
  std::vector<const SavedStorage*> saved_by_id(births_.size(), nullptr);
  for (const SavedStorage& s : saved_.storages()) {
    if (s.storage_id >= static_cast<int64_t>(births_.size())) continue;  // never tracked: not counted
    band[s.storage_id] = static_cast<size_t>(s.op);
    saved_by_id[s.storage_id] = &s;
  }
  for (size_t id = 0; id < births_.size(); ++id)
    if (grads_.ids.contains(static_cast<int64_t>(id))) band[id] = kParameterGradBand;

  Timeline timeline;
  timeline.forward_ops = static_cast<int64_t>(forward_ops_);
  timeline.backward_ops = static_cast<int64_t>(ops_ - forward_ops_);
  const size_t column_count = std::max<size_t>(ops_, forward_ops_ + 1);
  timeline.columns.resize(column_count);
  for (size_t c = 0; c < column_count; ++c) timeline.columns[c].first_op = timeline.columns[c].last_op = c;

  Bands now;
  std::vector<uint8_t> alive(births_.size(), 0);
  std::vector<uint8_t> alive_at_forward_end, alive_at_peak;
  int64_t filled = -1;  // columns up to here hold a moment already
  const auto& events = live_.events();
  auto snapshot = [&](size_t next_event) {
    if (next_event == forward_end_event_) {
      timeline.forward_end = now;
      alive_at_forward_end = alive;
    }
    // peak.event_index is the event that reached the peak, or forward_end_event_ - 1 if none did.
    if (next_event == peak.event_index + 1) {
      timeline.at_peak = now;
      alive_at_peak = alive;
    }
  };
  for (size_t i = 0; i < events.size(); ++i) {
    snapshot(i);
    const auto& e = events[i];
    const int64_t column = event_column_[i];
    // A column no event reached (a view's op) holds the moment carried into it.
    while (filled < column) timeline.columns[++filled].at_max = now;
    if (excluded.contains(e.storage_id)) continue;
    now.bytes[band[e.storage_id]] += e.delta_bytes;
    alive[e.storage_id] = e.delta_bytes > 0;
    TimelineColumn& col = timeline.columns[column];
    if (now.total() > col.at_max.total()) col.at_max = now;
  }
  snapshot(events.size());
  while (filled + 1 < static_cast<int64_t>(column_count)) timeline.columns[++filled].at_max = now;

  // The bytes of each storage: its birth event's.
  std::vector<int64_t> storage_bytes(births_.size(), 0);
  for (const auto& e : events)
    if (e.delta_bytes > 0) storage_bytes[e.storage_id] = e.delta_bytes;
  timeline.saved_bytes = timeline.forward_end.saved();
  timeline.kept_bytes = timeline.forward_end.total();
  for (size_t id = 0; id < alive_at_forward_end.size(); ++id)
    if (alive_at_forward_end[id] && shared_.contains(static_cast<int64_t>(id))) timeline.kept_bytes -= storage_bytes[id];
  timeline.working_bytes = peak.bytes;
  timeline.peak_op = peak.event_index + 1 == forward_end_event_ ? timeline.forward_ops
                                                                 : event_column_[peak.event_index];

  for (size_t id = 0; id < alive_at_peak.size(); ++id) {
    if (!alive_at_peak[id]) continue;
    const Birth& b = births_[id];
    const SavedStorage* s = saved_by_id[id];  // a saved storage is listed as first saved
    std::string module(s != nullptr ? s->module : b.module);
    if (b.in_backward && !b.module.empty() && b.module != "(backward)") module += " (recomputed)";
    timeline.live_at_peak.push_back(LiveStorage{module,
                                                std::string(s != nullptr ? s->by_op : b.made_by),
                                                s != nullptr ? s->shape : b.shape,
                                                std::string(dtype_name(s != nullptr ? s->dtype : b.dtype)),
                                                storage_bytes[id], std::string(band_name(band[id]))});
  }
  std::stable_sort(timeline.live_at_peak.begin(), timeline.live_at_peak.end(),
                   [](const LiveStorage& a, const LiveStorage& b) { return a.bytes > b.bytes; });

  for (const SavedStorage& s : saved_.storages()) {
    if (s.storage_id >= static_cast<int64_t>(alive_at_forward_end.size()) || !alive_at_forward_end[s.storage_id])
      continue;
    const std::string module = s.module.empty() ? "(layer)" : std::string(s.module);
    auto it = std::find_if(timeline.saved_by_module.begin(), timeline.saved_by_module.end(),
                           [&](const auto& entry) { return entry.first == module; });
    if (it == timeline.saved_by_module.end()) timeline.saved_by_module.emplace_back(module, s.bytes);
    else it->second += s.bytes;
  }
  return timeline;
}

}  // namespace

Timeline census_timeline(const ModelConfig& config, int64_t layer_index, int64_t seq_length, bool selective) {
  Measurement measurement(/*attached=*/false);
  TimelineRecorder recorder;
  auto listen = [&] {
    measurement.attach();
    measurement.add_observer(&recorder);
  };
  if (!selective) listen();  // as census_layer: from before the layer is built
  std::unique_ptr<DecoderLayer> layer = config.family->build_layer(config, layer_index);
  const Dims shape{config.micro_batch_size, seq_length, config.hidden_size};
  Tensor hidden = make_tensor(shape, DType::kBFloat16, /*requires_grad=*/true);
  // Under checkpointing the model embeds the positions once for all layers, before the layer's census
  // starts (as census_selective runs it); plain, inside the measured forward (as census_layer).
  nn::PositionEmbeddings positions;
  if (selective) {
    positions = layer->embed_positions(hidden);
    listen();
  }
  measurement.track(hidden);
  recorder.track(hidden, "input");
  // As census_layer: the layer's buffers (Gemma 4's layer_scalar) are tracked, and count where saved.
  if (!selective)
    for (const Tensor& buffer : layer->buffers()) {
      measurement.track(buffer);
      recorder.track(buffer, "buffer");
    }
  Tensor grad = make_tensor(shape, DType::kBFloat16);
  std::vector<Tensor> shared;
  if (selective) shared = {positions.position_ids, positions.cos, positions.sin};
  // A checkpointed call's other arguments, made before it and kept for its recompute (census_selective).
  LayerCarry arguments;
  if (selective) arguments = layer->lone_arguments(hidden);
  auto forward = [&] {
    Tensor out = selective ? checkpoint([&](const Tensor& input) { return layer->forward_alone(input, positions, arguments); },
                                        hidden, nullptr)
                           : layer->forward(hidden, layer->embed_positions(hidden));
    recorder.end_forward(out, grad, shared);
    return out;
  };
  measurement.run(forward, layer->parameters(), grad, shared);
  Timeline timeline = recorder.finish(layer->parameters());
  timeline.selective = selective;
  measurement.remove_observer(&recorder);
  return timeline;
}

std::vector<TimelineColumn> bucket_columns(const std::vector<TimelineColumn>& columns, size_t width) {
  if (width == 0 || columns.size() <= width) return columns;
  std::vector<TimelineColumn> buckets;
  buckets.reserve(width);
  for (size_t b = 0; b < width; ++b) {
    const size_t first = b * columns.size() / width, end = (b + 1) * columns.size() / width;
    if (first == end) continue;
    size_t highest = first;
    for (size_t c = first + 1; c < end; ++c)
      if (columns[c].at_max.total() > columns[highest].at_max.total()) highest = c;
    buckets.push_back({columns[first].first_op, columns[end - 1].last_op, columns[highest].at_max});
  }
  return buckets;
}

}  // namespace census
