#include "census/stack_census.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string_view>

#include "autograd/engine.h"
#include "graph/context.h"
#include "graph/node.h"
#include "census/live_bytes.h"
#include "models/causal_lm.h"
#include "ops/embedding.h"
#include "ops/ops.h"

namespace census {
namespace {

// The storages autograd saves first while a decoder layer's forward runs, and that layer: the pack
// hook of the stack. A storage saved first outside every layer (the embedding's indices) is claimed
// by the first layer that saves it too, if any. A saved storage no op handed out (a module's buffer,
// such as Gemma 4's layer_scalar) is counted on the heap from that save on, as the reference's pack
// hook brings it into its tracker (the hook's detach is an op its tracker sees).
class LayerSaves final : public Observer {
 public:
  explicit LayerSaves(LiveBytes& live) : Observer(kOnSave), live_(live) {}
  void on_save(const Tensor& tensor, const OpDef* /*by_op*/) override {
    const Storage& storage = *tensor.storage();
    if (!storage.is_parameter && !live_.is_live(storage.id)) live_.track(tensor);
    if (running < 0 || storage.is_parameter || ids.contains(storage.id)) return;
    ids.insert(storage.id);
    saves.push_back({storage.id, storage.nbytes, running});
  }
  struct Save {
    int64_t storage_id;
    int64_t bytes;
    int64_t layer;
  };
  int64_t running = -1;  // the layer whose forward runs, or -1
  std::vector<Save> saves;
  StorageSet ids;

 private:
  LiveBytes& live_;
};

// Note [Stack windows] A layer's backward runs between two hooks on its boundary, as a module's full
// backward pre-hook and backward hook see it: the forward wraps the layer's input and output in an
// identity node each (BackwardHookFunction). The output's node, once its gradient is ready, opens the
// layer's window and holds that gradient (the hook's grad_outputs) until the input's node has run,
// which closes the window and lets the gradient go. A window spans the heap's events from its
// opening to its closing.
struct Windows {
  const LiveBytes* clock;
  std::vector<std::pair<size_t, size_t>> spans;  // by layer: [first event, end)
  std::vector<bool> opened;
  std::vector<Tensor> grad_outputs;  // by layer, while its window is open
};

class BackwardHookNode final : public Node {
 public:
  enum class Side : uint8_t { kInput, kOutput };
  BackwardHookNode(uint64_t seq, Windows& windows, int64_t layer, Side side)
      : Node("BackwardHookFunctionBackward", seq), windows_(windows), layer_(static_cast<size_t>(layer)), side_(side) {}
  GradList apply(GradList& grads) override {
    const size_t now = windows_.clock->event_count();
    if (side_ == Side::kOutput) {
      if (!windows_.opened[layer_]) windows_.spans[layer_] = {now, now};
      windows_.opened[layer_] = true;
      windows_.grad_outputs[layer_] = grads[0];
      return {grads[0]};
    }
    GradList out{grads[0]};
    windows_.spans[layer_].second = now;
    windows_.grad_outputs[layer_] = Tensor();
    return out;
  }

 private:
  Windows& windows_;
  size_t layer_;
  Side side_;
};

// The tensor a hooked module sees or gives: `tensor`'s storage behind an identity node.
Tensor hook(const Tensor& tensor, Windows& windows, int64_t layer, BackwardHookNode::Side side) {
  if (!tensor.requires_grad()) return tensor;
  auto node = arena_shared<BackwardHookNode>(GraphContext::current().next_sequence_nr(), windows, layer, side);
  node->next_edges().push_back(gradient_edge(tensor));
  Tensor out = tensor.detach();
  set_history(out, node);
  return out;
}

std::pair<double, double> split(double one, double two, int64_t seq_length) {
  const double s = static_cast<double>(seq_length);
  return {std::max(0.0, 2.0 * two - one) / s, std::max(0.0, 2.0 * (one - two)) / s};
}

// Between the hooks of layer `index`'s boundary, its saves counted toward it (Note [Stack windows]).
class HookedLayers final : public LayerRunner {
 public:
  HookedLayers(Windows& windows, LayerSaves& saves) : windows_(windows), saves_(saves) {}
  Tensor run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const override {
    const Tensor input = hook(hidden_states, windows_, index, BackwardHookNode::Side::kInput);
    saves_.running = index;
    const Tensor output = forward(input);
    saves_.running = -1;
    return hook(output, windows_, index, BackwardHookNode::Side::kOutput);
  }

 private:
  Windows& windows_;
  LayerSaves& saves_;
};

}  // namespace

Status check_stack_depth(const ModelConfig& config) {
  if (config.num_hidden_layers > kLargestStackLayers)
    return refuse("num_hidden_layers", std::to_string(config.num_hidden_layers) +
                                           " layers are more than a whole-model census runs (at most 2^10 = " +
                                           std::to_string(kLargestStackLayers) +
                                           "); census layer prices one layer of the model");
  return {};
}

std::vector<StackLayerCensus> census_stack(const ModelConfig& config, int64_t seq_length) {
  Session session;  // first: every tensor of the census dies before it
  LiveBytes live;   // then the observers: they see every tensor die
  LayerSaves saves(live);
  ParameterGrads parameter_grads;
  // Built before anything watches: what building runs (the rotary's probe for its buffers) is not the
  // model's forward.
  const std::unique_ptr<CausalLM> model = build_causal_lm(config, config, whole_model(config));
  session.add_observer(&live);
  session.add_observer(&saves);
  session.add_observer(&parameter_grads);

  const int64_t count = config.num_hidden_layers;
  Windows windows{&live, std::vector<std::pair<size_t, size_t>>(count), std::vector<bool>(count, false),
                  std::vector<Tensor>(count)};
  Tensor out;
  {
    Tensor input_ids = make_tensor(Dims{config.micro_batch_size, seq_length}, DType::kInt64);
    live.track(input_ids);
    out = model->model_forward(input_ids, Tensor(), HookedLayers(windows, saves));
  }

  std::vector<StackLayerCensus> result(static_cast<size_t>(count));
  StorageSet excluded = saves.ids;
  for (const LayerSaves::Save& save : saves.saves)
    if (live.is_live(save.storage_id)) result[static_cast<size_t>(save.layer)].kept += save.bytes;

  {
    const Tensor total = ops::sum(out);
    run_backward(total, ops::ones_like(total));
  }
  for (const Tensor& parameter : model->parameters())
    if (parameter.impl()->grad) parameter_grads.ids.insert(parameter.impl()->grad->storage->id);

  // What the heap holds beyond every layer's saves, the parameters and their gradients, after each event.
  std::vector<int64_t> beyond;
  beyond.reserve(live.events().size());
  int64_t running = 0;
  for (const LiveBytes::Event& event : live.events()) {
    if (!excluded.contains(event.storage_id) && !parameter_grads.ids.contains(event.storage_id))
      running += event.delta_bytes;
    beyond.push_back(running);
  }
  for (int64_t i = 0; i < count; ++i) {
    const auto [begin, end] = windows.spans[static_cast<size_t>(i)];
    int64_t most = 0;
    if (begin < end) most = *std::max_element(beyond.begin() + static_cast<std::ptrdiff_t>(begin),
                                              beyond.begin() + static_cast<std::ptrdiff_t>(end));
    result[static_cast<size_t>(i)].held = result[static_cast<size_t>(i)].kept + most;
  }
  return result;
}

std::vector<std::pair<std::string, KindActivations>> stack_activations(const ModelConfig& config,
                                                                       int64_t seq_length) {
  const std::vector<StackLayerCensus> one = census_stack(config, seq_length);
  const std::vector<StackLayerCensus> two = census_stack(tp_config(config, 2), seq_length);
  const std::vector<std::string> kinds = layer_kinds(config);
  std::vector<std::pair<std::string, KindActivations>> out;
  for (size_t first = 0; first < kinds.size(); ++first) {
    const std::string& kind = kinds[first];
    if (std::any_of(out.begin(), out.end(), [&](const auto& seen) { return seen.first == kind; })) continue;
    double kept_1 = 0, kept_2 = 0, held_1 = 0, held_2 = 0;
    int64_t members = 0;
    for (size_t i = first; i < kinds.size(); ++i) {
      if (kinds[i] != kind) continue;
      kept_1 += static_cast<double>(one[i].kept);
      kept_2 += static_cast<double>(two[i].kept);
      held_1 += static_cast<double>(one[i].held);
      held_2 += static_cast<double>(two[i].held);
      ++members;
    }
    const double n = static_cast<double>(members);
    KindActivations record;
    record.seq_length = seq_length;
    const int64_t tokens = seq_length * config.micro_batch_size;
    std::tie(record.saved, record.saved_tp) = split(kept_1 / n, kept_2 / n, tokens);
    std::tie(record.working, record.working_tp) = split(held_1 / n, held_2 / n, tokens);
    out.emplace_back(kind, std::move(record));
  }
  return out;
}

}  // namespace census
