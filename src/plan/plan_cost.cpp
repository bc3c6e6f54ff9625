#include "plan/plan_cost.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_set>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "graph/accumulate_grad.h"
#include "census/parts.h"
#include "models/causal_lm.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "ops/dispatch.h"
#include "ops/op_def.h"
#include "ops/autocast.h"
#include "ops/ops.h"
#include "nn/linear4bit.h"
#include "nn/lora.h"
#include "step/lora_choice.h"
#include "step/step_census.h"
#include "step/tensor_parallel.h"
#include "util/recycled.h"

namespace census {
namespace {

constexpr std::string_view kGroupedMm = "aten._grouped_mm.default";
constexpr int64_t kTileRows = 128;          // a grouped GEMM's tile: rows are computed 128 at a time
constexpr double kAttentionBackwardFlops = 2.5;  // the flash backward's five matmuls to the forward's two

// Whether an op that is not a view in ATen's schema returns its input's storage all the same, and so
// runs no kernel: _unsafe_view, which matmul and reshape end in (a compute op in the catalogue, each
// call a dispatch as PyTorch counts them).
bool aliases_its_input(const OpCall& call) {
  if (call.def.kind != OpKind::kCompute || call.outputs.empty()) return false;
  for (const Tensor& output : call.outputs) {
    bool aliased = false;
    for (const Tensor& input : call.inputs) aliased = aliased || output.storage() == input.storage();
    if (!aliased) return false;
  }
  return true;
}

// Records every op of a forward that is not a view (a view renames bytes its producer wrote: no kernel).
class OpRecorder final : public Observer {
 public:
  // The ops grow in a recycled buffer (Note [Recycled buffers]): a search records thousands of layers of
  // a thousand ops each, and each growing afresh paged in new memory at every doubling.
  explicit OpRecorder(bool recurrent) : Observer(kOnOp), ops(reused_vector<OpRecorder, OpRecord>()), recurrent_(recurrent) {}
  ~OpRecorder() override { recycle_vector<OpRecorder>(ops); }
  OpRecorder(const OpRecorder&) = delete;
  OpRecorder& operator=(const OpRecorder&) = delete;
  // The ops recorded, in a vector of their own size.
  std::vector<OpRecord> recorded() const { return {ops.begin(), ops.end()}; }
  void on_op(const OpCall& call) override {
    // A collective moves bytes between ranks, which the time model prices as communication of its own.
    if (call.def.is_view() || call.def.is_collective() || aliases_its_input(call)) return;
    OpRecord r;
    r.count = Session::current().op_weight();  // Note [Alike iterations]
    for (const Tensor& input : call.inputs) {
      r.bytes += input.nbytes();
      if (input.is_parameter()) r.parameter_bytes += input.nbytes();
    }
    for (const Tensor& output : call.outputs) r.bytes += output.nbytes();
    switch (call.def.flops_rule) {
      case FlopsRule::kScores:
        r.cls = OpClass::kAttention;
        r.flops = call.def.flops(call.inputs);
        r.rows = call.inputs[0].size(2);  // the queries (B, heads, S, D)
        break;
      case FlopsRule::kMatmul:
      case FlopsRule::kBiasedMatmul:
      case FlopsRule::kGemm4bit:
        r.cls = OpClass::kGemm;
        r.flops = call.def.flops(call.inputs);
        if (call.def.name == kGroupedMm) {
          r.groups = std::max<int64_t>(1, call.inputs[1].size(0));
          r.rows = call.inputs[0].size(0);
        }
        r.attention_part = part_of_op(call, Session::current().modules(), recurrent_) == "attention";
        r.backward_gemms = 0;
        for (const Tensor& input : call.inputs)
          if (input.dim() >= 2 && input.requires_grad()) r.backward_gemms = std::min<int64_t>(2, r.backward_gemms + 1);
        // Inside MatMul4Bit.forward (no_grad, as an autograd.Function's forward): its backward's one product.
        if (ops::inside_matmul_4bit()) r.backward_gemms = 1;
        break;
      case FlopsRule::kNone:
        break;
    }
    ops.push_back(r);
  }
  LargeVector<OpRecord> ops;

 private:
  bool recurrent_;
};

double floor_of(const Rates& r) { return r.calibration.kernel_floor_us * 1e-6; }

}  // namespace

Rates Rates::of(const Device& d) { return {d.peak_tflops * 1e12, d.hbm_gbs * 1e9, d.calibration}; }

Network Network::of(const Device& d) { return {d.link_gbs * 1e9, d.nic_gbs * 1e9, d.calibration}; }

namespace {

// Note [Parameters no gradient reaches]
// A parameter the forward reads only on a path no gradient flows back along (DeepSeek-V3.2's, V4's and
// GLM-5's sparse-attention indexers, whose scores only pick the top-k keys by index) gets no .grad in the
// backward, and AdamW makes it no states: the step holds neither. The leaves a backward from the
// forward's output would reach are those its graph leads to, edge by edge, from the output's node; a
// parameter not among them is counted untrained (routed experts apart: which of them a token reaches
// is data, and the states' bound takes them as Note [Experts' gradients in the states' bound] says).
std::unordered_set<const TensorImpl*> leaves_reached(const Tensor& output) {
  std::unordered_set<const TensorImpl*> leaves;
  std::unordered_set<const Node*> seen;
  seen.reserve(4096);  // a few layers' nodes: grown once, not rehashed step by step
  std::vector<const Node*> stack;
  if (output.defined() && output.impl()->grad_fn) stack.push_back(output.impl()->grad_fn.get());
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (node->is_accumulate_grad()) leaves.insert(&static_cast<const AccumulateGrad*>(node)->variable());
    for (const Edge& edge : node->next_edges())
      if (edge.valid()) stack.push_back(edge.fn.get());
  }
  return leaves;
}

// A layer's recorded forward as the time model reads it: its ops, shares and parameters, the rank's (an
// expert-parallel rank's layer holds its num_experts / EP experts; tests/step/
// step_expert_parallel_families_test.cpp); `reached`, the leaves a backward from the forward's output
// reaches.
LayerOps layer_ops(std::vector<OpRecord> ops, const DecoderLayer& layer, const RecomputeShares& shares,
                   const std::unordered_set<const TensorImpl*>& reached) {
  LayerOps out;
  out.ops = std::move(ops);
  out.shares = shares;
  for (const OpRecord& op : out.ops) out.attention_kernel = out.attention_kernel || op.cls == OpClass::kAttention;
  for (const Tensor& parameter : layer.parameters()) {
    out.parameters += parameter.numel();
    if (parameter_part(parameter.name()) == "routed") {
      out.expert_parameters += parameter.numel();
    } else if (!reached.count(parameter.impl())) {  // Note [Parameters no gradient reaches]
      out.untrained_parameters += parameter.numel();
    }
  }
  return out;
}

// Each decoder layer of the model's loop run plainly, its ops recorded apart.
class RecordedLayers final : public LayerRunner {
 public:
  RecordedLayers(const CausalLM& model, std::vector<std::vector<OpRecord>>& ops) : model_(model), ops_(ops) {}
  Tensor run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const override {
    OpRecorder recorder(model_.layers()[static_cast<size_t>(index - model_.chunk().begin)]->has_recurrence());
    Session::current().add_observer(&recorder);
    Tensor out = forward(hidden_states);
    Session::current().remove_observer(&recorder);
    ops_[static_cast<size_t>(index)] = recorder.recorded();
    return out;
  }

 private:
  const CausalLM& model_;
  std::vector<std::vector<OpRecord>>& ops_;
};

// DTensor's plan with sequence parallelism over `sequence_shards` ranks as the step runs it on sequences
// of `tokens` tokens (none where it is 1). The whole vocabulary: a layer reads none of it.
std::optional<DTensorStyles> sequence_parallel_styles(const ModelConfig& rank_config, int64_t tokens,
                                                      int64_t sequence_shards) {
  if (sequence_shards <= 1) return std::nullopt;
  return DTensorStyles(TensorParallelPlan{sequence_shards, /*sequence_parallel=*/true, /*loss_parallel=*/true,
                                          rank_config.vocab_size, tokens});
}

}  // namespace

namespace {

// Note [A fine-tuned layer's record]
// Under fine-tuning (StepOptions' lora, quantize and autocast) the time model records a layer as census
// step builds and runs it: the session as set_fine_tuned_session sets it (the base frozen under adapters,
// fp32 where loaded so), the adapters and the 4-bit Linears built under their scopes with PEFT's targets
// (resolved_lora), the forward under the Trainer's autocast, the residual stream in the dtype the model
// carries it. Their ops are then the record's: the adapters' casts and products, the dequantization, the
// casts autocast adds. A GEMM's backward runs one GEMM per matrix operand that requires grad
// (OpRecord::backward_gemms): a frozen base weight's, its input's gradient alone. The layer's input is
// taken to require grad, as every layer's but the first does once a gradient flows through the residual
// stream. A frozen base is a parameter no gradient reaches (Note [Parameters no gradient reaches]):
// the optimizer's step and the reductions leave it out.
class FineTunedRecord {
 public:
  FineTunedRecord(Session& session, const ModelConfig& config, const StepOptions& o)
      : lora_(o.lora ? std::optional(resolved_lora(config, *o.lora)) : std::nullopt),
        lora_scope_(lora_ ? &*lora_ : nullptr, o.recompute != Recompute::kNone),
        quantized_(o.quantize ? &*o.quantize : nullptr),
        hidden_dtype_(o.fp32_weights() ? DType::kFloat32 : DType::kBFloat16) {
    set_fine_tuned_session(session, o);
    if (o.autocast) autocast_.emplace(/*enabled=*/true);
  }
  // The residual stream's dtype: fp32 in a model loaded in fp32, else bf16.
  DType hidden_dtype() const { return hidden_dtype_; }

 private:
  std::optional<nn::LoraConfig> lora_;
  nn::LoraScope lora_scope_;
  nn::Bnb4bitScope quantized_;
  DType hidden_dtype_;
  std::optional<AutocastScope> autocast_;
};

// A leaf of `sizes` that requires grad: a layer's input as the model hands it on.
Tensor differentiable_input(Dims sizes, DType dtype) {
  Tensor input = make_tensor(std::move(sizes), dtype);
  input.impl()->requires_grad = true;
  return input;
}

}  // namespace

LayerOps record_layer(const ModelConfig& rank_config, int64_t layer_index, int64_t tokens, const RecomputeShares& shares,
                      int64_t sequence_shards, const StepOptions& tuned) {
  Session session;
  session.set_fold_alike_iterations(true);  // each op weighs its folded loop's count
  const FineTunedRecord tuning(session, rank_config, tuned);
  std::unique_ptr<DecoderLayer> layer = rank_config.family->build_layer(rank_config, layer_index);
  // The positions are the whole sequence's (the model's, once for all layers); under sequence
  // parallelism the layer's input is the rank's S / T tokens of the residual stream.
  const DType dtype = tuning.hidden_dtype();
  const Tensor sequence = differentiable_input(Dims{1, tokens, rank_config.hidden_size}, dtype);
  const nn::PositionEmbeddings positions = layer->embed_positions(sequence);
  const Tensor hidden = sequence_shards > 1
                            ? differentiable_input(Dims{1, tokens / sequence_shards, rank_config.hidden_size}, dtype)
                            : sequence;
  const std::optional<DTensorStyles> styles = sequence_parallel_styles(rank_config, tokens, sequence_shards);
  OpRecorder recorder(layer->has_recurrence());
  session.add_observer(&recorder);
  Tensor out;
  {
    const nn::ParallelStylesScope scope(styles ? &*styles : nullptr);
    out = layer->forward(hidden, positions);
  }
  session.remove_observer(&recorder);
  return layer_ops(recorder.recorded(), *layer, shares, leaves_reached(out));
}

std::vector<LayerOps> record_stack(const ModelConfig& config, const ModelConfig& rank_config, int64_t tokens,
                                   const std::vector<RecomputeShares>& shares, bool whole, int64_t sequence_shards,
                                   const StepOptions& tuned) {
  // Each layer's record is that of the layer it is read as (itself, or its kind's first).
  const std::vector<int64_t> read_as = layers_read_as(config, whole);
  std::vector<LayerOps> out = record_stack_as_read(config, rank_config, tokens, shares, read_as, sequence_shards, tuned);
  for (size_t i = 0; i < read_as.size(); ++i) {
    const size_t as = static_cast<size_t>(read_as[i]);
    if (as == i) continue;
    const RecomputeShares own = out[i].shares;
    out[i] = out[as];
    out[i].shares = own;
  }
  return out;
}

std::vector<LayerOps> record_stack_as_read(const ModelConfig& config, const ModelConfig& rank_config, int64_t tokens,
                                           const std::vector<RecomputeShares>& shares, const std::vector<int64_t>& read_as,
                                           int64_t sequence_shards, const StepOptions& tuned) {
  const ModelChunk chunk = layers_read_through(read_as);
  Session session;
  session.set_fold_alike_iterations(true);
  const FineTunedRecord tuning(session, rank_config, tuned);
  const std::unique_ptr<CausalLM> model = build_causal_lm(config, rank_config, chunk);
  std::vector<std::vector<OpRecord>> ops(static_cast<size_t>(chunk.end));
  std::unordered_set<const TensorImpl*> reached;
  const std::optional<DTensorStyles> styles = sequence_parallel_styles(rank_config, tokens, sequence_shards);
  {
    const nn::ParallelStylesScope scope(styles ? &*styles : nullptr);
    const Tensor input_ids = make_tensor(Dims{1, tokens}, DType::kInt64);
    Tensor out = model->model_forward(input_ids, Tensor(), RecordedLayers(*model, ops));
    reached = leaves_reached(out);
  }
  std::vector<LayerOps> out;
  for (size_t i = 0; i < read_as.size(); ++i) {
    const size_t as = static_cast<size_t>(read_as[i]);
    if (as == i) {
      out.push_back(layer_ops(std::move(ops[i]), *model->layers()[i], shares[i], reached));
    } else {  // the earlier layer's ops and parameters stand for its own
      LayerOps own;
      own.shares = shares[i];
      out.push_back(std::move(own));
    }
  }
  return out;
}

namespace {

// The storages ops make while it listens that are still live, parameters left out, each under the tag
// it was made under first (a decoder layer's index; -1 for none). A storage made before it listened
// (ids below `first_storage`) is no op's: a view of it an op hands out (a lone layer's unsqueeze of the
// model's cos and sin) does not make it the layer's.
class KeptBytes final : public Observer {
 public:
  explicit KeptBytes(int64_t first_storage) : Observer(kOnOp | kOnFree | kOnResize), first_storage_(first_storage) {}
  void on_op(const OpCall& call) override {
    for (const Tensor& out : call.outputs) {
      const Storage& storage = *out.storage();
      if (storage.is_parameter || storage.nbytes == 0 || storage.id < first_storage_ || live_.count(storage.id))
        continue;
      live_[storage.id] = {tag, storage.nbytes};
    }
  }
  void on_free(const Storage& storage) override { live_.erase(storage.id); }
  void on_resize(const Storage& storage, int64_t /*old_nbytes*/) override {
    auto found = live_.find(storage.id);
    if (found != live_.end()) found->second.second = storage.nbytes;
  }
  int64_t bytes_of(const Storage& storage) const {
    auto found = live_.find(storage.id);
    return found == live_.end() ? 0 : found->second.second;
  }
  // The live bytes by tag, tags 0 to `tags` - 1.
  std::vector<int64_t> by_tag(int64_t tags) const {
    std::vector<int64_t> out(static_cast<size_t>(tags), 0);
    for (const auto& [id, made] : live_)
      if (made.first >= 0 && made.first < tags) out[static_cast<size_t>(made.first)] += made.second;
    return out;
  }
  int64_t tag = 0;

 private:
  int64_t first_storage_;
  std::map<int64_t, std::pair<int64_t, int64_t>> live_;  // storage id: (tag, bytes)
};

// Each decoder layer of the model's loop (or a lone layer, index 0) as the step's recompute mode wraps
// it, the storages its ops make counted toward it.
class KeptLayers final : public LayerRunner {
 public:
  KeptLayers(KeptBytes& kept, Recompute recompute) : kept_(kept), recompute_(recompute) {}
  Tensor run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const override {
    kept_.tag = index;
    Tensor out = checkpointed(recompute_, forward, hidden_states);
    kept_.tag = -1;
    return out;
  }

 private:
  KeptBytes& kept_;
  Recompute recompute_;
};

// A lone layer of the rank's model on `batch` sequences of `tokens`, in a census of its own that folds
// alike iterations, with its input and the model's positions, made before any observer listens.
// Under DTensor's plan with sequence parallelism (`sequence_shards` > 1, the TP degree), the layer runs
// under the plan's styles, as the step's model runs it: its input the rank's S / T tokens of the
// residual stream, its positions the whole sequence's (CausalLM::model_forward), its norms on the shard
// and its attention and MLP on the all-gathered sequence.
struct LoneLayer {
  LoneLayer(const ModelConfig& rank_config, int64_t layer_index, int64_t tokens, int64_t batch, int64_t sequence_shards = 1)
      : layer(rank_config.family->build_layer(rank_config, layer_index)),
        hidden(make_tensor(Dims{batch, tokens / sequence_shards, rank_config.hidden_size}, DType::kBFloat16,
                           /*requires_grad=*/true)),
        positions(layer->embed_positions(
            sequence_shards > 1 ? make_tensor(Dims{batch, tokens, rank_config.hidden_size}, DType::kBFloat16) : hidden)),
        styles(sequence_parallel_styles(rank_config, tokens, sequence_shards)) {
    session.set_fold_alike_iterations(true);
  }
  // The layer's forward as the model's loop calls it, under the plan's styles where it has them.
  LayerForward forward() const {
    return [this](const Tensor& h) {
      const nn::ParallelStylesScope scope(styles ? &*styles : nullptr);
      return layer->forward(h, positions);
    };
  }

  Session session;  // first: made before, and gone after, every object below
  std::unique_ptr<DecoderLayer> layer;
  Tensor hidden;
  nn::PositionEmbeddings positions;
  std::optional<DTensorStyles> styles;
};

}  // namespace

namespace {

// Whether one storage is freed while it listens.
class FreeOf final : public Observer {
 public:
  explicit FreeOf(int64_t id) : Observer(kOnFree), id_(id) {}
  void on_free(const Storage& storage) override { freed = freed || storage.id == id_; }
  bool freed = false;

 private:
  int64_t id_;
};

}  // namespace

int64_t layer_kept_bytes(const ModelConfig& rank_config, int64_t layer_index, int64_t tokens, int64_t batch,
                         Recompute recompute, int64_t* input_kept, int64_t sequence_shards) {
  LoneLayer lone(rank_config, layer_index, tokens, batch, sequence_shards);
  // The layer's input as the model hands it, an earlier op's output (a leaf is held by its gradient's
  // accumulator whatever the layer keeps).
  Tensor input = ops::clone(lone.hidden);
  KeptBytes kept(lone.session.storages_made());  // the input and the positions are the model's
  lone.session.add_observer(&kept);
  const Tensor out = KeptLayers(kept, recompute).run(0, input, lone.forward());
  const int64_t bytes = kept.by_tag(1)[0] - kept.bytes_of(*out.storage());
  lone.session.remove_observer(&kept);
  if (input_kept != nullptr) {  // the caller's reference to the input dropped: does the layer's graph hold it?
    const int64_t input_bytes = input.storage()->nbytes;
    FreeOf freed(input.storage()->id);
    lone.session.add_observer(&freed);
    input = Tensor();
    lone.session.remove_observer(&freed);
    *input_kept = freed.freed ? 0 : input_bytes;
  }
  return bytes;
}


std::vector<int64_t> stack_kept_bytes(const ModelConfig& config, const ModelConfig& rank_config, int64_t tokens,
                                      int64_t batch, Recompute recompute, bool whole) {
  // A storage the layers share is counted to the first to make it, the model's first layer: where the
  // layers are alike by kind, every other layer is read as the first of its kind after it.
  std::vector<int64_t> read_as = layers_read_as(config, /*whole=*/true);
  if (!whole && config.family->stack_layers_alike_by_kind) {
    const std::vector<std::string> kinds = layer_kinds(config);
    for (size_t i = 1; i < kinds.size(); ++i)
      read_as[i] = std::find(kinds.begin() + 1, kinds.begin() + static_cast<int64_t>(i), kinds[i]) - kinds.begin();
  }
  const ModelChunk chunk = layers_read_through(read_as);
  Session session;
  session.set_fold_alike_iterations(true);
  KeptBytes kept(session.storages_made());  // from before the model is built: what building makes is no layer's
  kept.tag = -1;
  session.add_observer(&kept);
  const std::unique_ptr<CausalLM> model = build_causal_lm(config, rank_config, chunk);
  // The model's output holds the graph, and with it what each layer saved, until its backward.
  const Tensor out = model->model_forward(make_tensor(Dims{batch, tokens}, DType::kInt64), Tensor(),
                                          KeptLayers(kept, recompute));
  const std::vector<int64_t> read = kept.by_tag(chunk.end);
  session.remove_observer(&kept);
  std::vector<int64_t> bytes;
  for (int64_t as : read_as) bytes.push_back(read[static_cast<size_t>(as)]);
  return bytes;
}

namespace {

// The bytes of the storages ops make (parameters left out), live from the forward on, each op's made
// and freed ones logged from the backward's start, and the storages handed to a parameter as its
// gradient: replayed without those, the most the backward's ops hold at once. A storage made before it
// listened (ids below `first_storage`), or one it is told to forget, is no op's it counts.
class BackwardBytes final : public Observer {
 public:
  explicit BackwardBytes(int64_t first_storage = 0)
      : Observer(kOnOp | kOnFree | kOnResize | kOnParameterGrad), first_storage_(first_storage) {}
  void start_backward() {
    backward_ = true;
    at_start_ = live_;
  }
  void forget(const Storage& storage) {
    live_.erase(storage.id);
    forgotten_.insert(storage.id);
  }
  void on_op(const OpCall& call) override {
    for (const Tensor& out : call.outputs) {
      const Storage& storage = *out.storage();
      if (storage.is_parameter || storage.nbytes == 0 || storage.id < first_storage_ || live_.count(storage.id) ||
          forgotten_.count(storage.id))
        continue;
      live_[storage.id] = storage.nbytes;
      if (backward_) events_.push_back({storage.id, storage.nbytes});
    }
    if (backward_) events_.push_back({kMoment, 0});  // the op's outputs and its inputs, live at once
  }
  void on_free(const Storage& storage) override {
    auto found = live_.find(storage.id);
    if (found == live_.end()) return;
    if (backward_) events_.push_back({storage.id, -found->second});
    live_.erase(found);
  }
  void on_resize(const Storage& storage, int64_t old_nbytes) override {
    auto found = live_.find(storage.id);
    if (found == live_.end()) return;
    if (backward_) events_.push_back({storage.id, storage.nbytes - old_nbytes});
    found->second = storage.nbytes;
  }
  void on_parameter_grad(const Tensor& grad) override { gradients_.insert(grad.storage()->id); }
  int64_t most() const {
    int64_t bytes = 0, most = 0;
    for (const auto& [id, nbytes] : at_start_)
      if (!gradients_.count(id)) bytes += nbytes;
    for (const auto& [id, delta] : events_) {
      if (id == kMoment) {
        most = std::max(most, bytes);
      } else if (!gradients_.count(id)) {
        bytes += delta;
      }
    }
    return most;
  }

 private:
  static constexpr int64_t kMoment = -1;
  int64_t first_storage_;
  std::set<int64_t> forgotten_;
  bool backward_ = false;
  std::map<int64_t, int64_t> live_, at_start_;  // storage id: bytes
  std::vector<std::pair<int64_t, int64_t>> events_;  // (storage id, bytes made or freed), or a moment
  std::set<int64_t> gradients_;
};

}  // namespace

// Note [The loss's backward in the memory bound]
// While the last stage runs its first backward's head, the head's own storages are live: the step's
// ops on the step's shapes (the model's own final norm, head and loss, measured as a chunk that holds
// no decoder layer and is handed the last hidden states). Only the backward's moments count (the
// forwards in flight are all made by then), and no parameter's gradient (ZeRO shards those): a moment
// of the step, so at most its peak. For a large vocabulary and micro-batch the loss's fp32
// log-probabilities, their gradient and the gradient they make (3 x b S V x 4 B) are most of that peak.
// The layers' kept bytes are storages their own ops made, the head's its own: both live at that moment,
// the bound adds them (tests/plan/plan_stack_cost_test.cpp holds a lone layer's to the model's).
int64_t head_backward_bytes(const ModelConfig& config, int64_t tokens, int64_t batch) {
  Session session;
  const int64_t layers = config.num_hidden_layers;
  const std::unique_ptr<CausalLM> model = build_causal_lm(config, config, ModelChunk{layers, layers, false, true});
  BackwardBytes bytes;
  session.add_observer(&bytes);
  {
    const Tensor received = make_tensor(Dims{batch, tokens, config.hidden_size}, DType::kBFloat16, /*requires_grad=*/true);
    const Tensor labels = make_tensor(Dims{batch, tokens}, DType::kInt64);
    Tensor loss;
    {
      CausalLM::Output out = model->causal_lm_output(model->model_forward(Tensor(), received, PlainLayers()), labels);
      loss = std::move(out.loss);
    }
    bytes.start_backward();
    const Tensor ones = ops::ones_like(loss);
    run_backward(loss, ones);
  }
  session.remove_observer(&bytes);
  return bytes.most();
}

// Note [A layer's backward in the memory bound]
// A stage's first backward runs one of its chunks' layers last to first on one micro-batch: while layer j
// runs its backward, the layers before it in that pass still keep what their forwards kept, every other
// pass in flight keeps all of its layers', and layer j holds what its own backward's ops hold at that
// moment. The lone layer's first backward, under the recompute mode the step wraps it in, is the same
// ops on the same shapes (the rank's layer, its tokens): the most its ops hold at once of the storages
// the layer's forward and backward made, parameters and the gradients handed to them left out (ZeRO
// shares those), and so are its input, its output and the gradient handed to its output (storages
// another layer made, or the stage's). Each is a moment of the step, so at most its peak; the layers'
// other terms are storages their own forwards made, live at that moment, and the bound adds them
// (MemoryBound::activations). tests/cli/plan_search_cli_test.cpp holds the bound to the simulated peak
// on every layout of whole searches, the hybrid Nemotron-H toy among them.
int64_t layer_backward_bytes(const ModelConfig& rank_config, int64_t layer_index, int64_t tokens, int64_t batch,
                             Recompute recompute) {
  LoneLayer lone(rank_config, layer_index, tokens, batch);
  const Tensor grad = make_tensor(Dims{batch, tokens, rank_config.hidden_size}, DType::kBFloat16);
  const LayerForward forward = lone.forward();
  BackwardBytes bytes(lone.session.storages_made());
  lone.session.add_observer(&bytes);
  {
    Tensor out = checkpointed(recompute, forward, lone.hidden);
    bytes.forget(*out.storage());
    bytes.start_backward();
    run_backward(out, grad);
  }
  lone.session.remove_observer(&bytes);
  return bytes.most();
}

namespace {

// Each kind's first layer of a model whose layers are alike by kind, run inside the model's forward on
// an input of its own and then through its first backward at once, the layers between left out (the
// model's hidden states handed on as they came): what layer_backward_bytes measures of a lone layer.
class LayerBackwardsInModel final : public LayerRunner {
 public:
  LayerBackwardsInModel(const std::vector<int64_t>& read_as, Recompute recompute, std::vector<int64_t>& most)
      : read_as_(read_as), recompute_(recompute), most_(most) {}
  Tensor run(int64_t index, const Tensor& hidden_states, const LayerForward& forward) const override {
    if (read_as_[static_cast<size_t>(index)] != index) return hidden_states;
    // A decoder layer's output has its input's sizes: the gradient handed to it is made beforehand.
    const Tensor input = make_tensor(hidden_states.sizes(), hidden_states.dtype(), /*requires_grad=*/true);
    const Tensor grad = make_tensor(hidden_states.sizes(), hidden_states.dtype());
    Session& session = Session::current();
    BackwardBytes bytes(session.storages_made());  // the model's positions and input ids are no op's of the layer
    session.add_observer(&bytes);
    {
      Tensor out = checkpointed(recompute_, forward, input);
      bytes.forget(*out.storage());
      bytes.start_backward();
      run_backward(out, grad);
    }
    session.remove_observer(&bytes);
    most_[static_cast<size_t>(index)] = bytes.most();
    return hidden_states;
  }

 private:
  const std::vector<int64_t>& read_as_;
  Recompute recompute_;
  std::vector<int64_t>& most_;
};

}  // namespace

// Note [A layer's backward inside the model]
// A layer that cannot run alone takes what its model hands it (DeepSeek-V4's: the hc_mult residual
// streams, the positions and the input ids). Where the layers are alike by kind, a layer's ops read only
// those, never what an earlier layer made, so each kind's first layer, run inside the model's forward on
// an input of its own, runs the ops any layer of its kind runs in the step: its first backward holds
// what layer_backward_bytes measures of a lone layer, and Note [A layer's backward in the memory bound]
// holds for it. tests/cli/plan_search_cli_test.cpp holds the bound to the simulated peak on every layout
// of the DeepSeek-V4 toy's searches and on DeepSeek-V4-Pro's layouts.
std::vector<int64_t> stack_layer_backward_bytes(const ModelConfig& config, const ModelConfig& rank_config,
                                                int64_t tokens, int64_t batch, Recompute recompute) {
  const std::vector<int64_t> read_as = layers_read_as(config, /*whole=*/false);
  Session session;
  session.set_fold_alike_iterations(true);
  const std::unique_ptr<CausalLM> model = build_causal_lm(config, rank_config, layers_read_through(read_as));
  std::vector<int64_t> most(read_as.size(), 0);
  {
    const Tensor input_ids = make_tensor(Dims{batch, tokens}, DType::kInt64);
    Tensor out = model->model_forward(input_ids, Tensor(), LayerBackwardsInModel(read_as, recompute, most));
  }
  std::vector<int64_t> bytes;
  for (int64_t as : read_as) bytes.push_back(most[static_cast<size_t>(as)]);
  return bytes;
}

LayerOps record_output(const ModelConfig& config, int64_t tokens, const StepOptions& tuned) {
  Session session;
  const FineTunedRecord tuning(session, config, tuned);
  nn::ParameterList parameters;
  std::unique_ptr<nn::Norm> norm = config.family->build_final_norm(config, parameters);
  nn::Linear lm_head("lm_head", config.hidden_size, config.vocab_size, /*bias=*/false, parameters);
  // What the model hands its end: the last hidden states, or DeepSeek-V4's residual streams.
  const Tensor hidden = differentiable_input(norm->input_sizes(1, tokens, config.hidden_size), tuning.hidden_dtype());
  const Tensor labels = make_tensor(Dims{1, tokens}, DType::kInt64);
  OpRecorder recorder(/*recurrent=*/false);
  session.add_observer(&recorder);
  { Tensor loss = nn::for_causal_lm_loss(lm_head.forward(norm->forward(hidden)), labels, config.vocab_size); }
  session.remove_observer(&recorder);
  LayerOps out;
  out.ops = recorder.recorded();
  for (const Tensor& parameter : parameters) out.parameters += parameter.numel();
  return out;
}

LayerOps record_embedding(const ModelConfig& config, int64_t tokens, const StepOptions& tuned) {
  // The lookup reads a row of the table a token and writes it (bf16, or fp32 in a model loaded so).
  LayerOps out;
  OpRecord lookup;
  lookup.bytes = 2 * tokens * config.hidden_size * element_size(tuned.fp32_weights() ? DType::kFloat32 : DType::kBFloat16);
  // Under adapters the table is frozen, no gradient to scatter into, but where modules_to_save trains its copy.
  lookup.backward = !tuned.lora || tuned.lora->saves("embed_tokens");
  out.ops.push_back(lookup);
  out.parameters = config.vocab_size * config.hidden_size;
  return out;
}

PassTime pass_time(const LayerOps& layer, int64_t batch, const Rates& r, int64_t ring) {
  const Calibration& c = r.calibration;
  const double b = static_cast<double>(batch);
  const double floor = floor_of(r);
  const double gemm_rate = r.flops_per_s * c.gemm_efficiency;
  const double half = c.gemm_half_gflop * 1e9;
  const double hbm = r.hbm_bytes_per_s * c.memory_efficiency;
  PassTime t;
  for (const OpRecord& op : layer.ops) {
    const double n = static_cast<double>(op.count);
    const double bytes = b * static_cast<double>(op.bytes - op.parameter_bytes) + static_cast<double>(op.parameter_bytes);
    const double memory = bytes / hbm;
    switch (op.cls) {
      case OpClass::kGemm: {
        double fill = 1;
        if (op.groups > 1) {
          const double rows = b * static_cast<double>(op.rows) / static_cast<double>(op.groups);
          fill = rows / (std::ceil(rows / kTileRows) * kTileRows);
        }
        const double flops = b * static_cast<double>(op.flops);
        const double forward = std::max({(flops / std::max(fill, 1e-9) + half) / gemm_rate, memory, floor});
        t.forward += n * forward;
        t.gemm_forward += n * forward;
        const auto gemms = static_cast<double>(op.backward_gemms);
        t.backward += gemms * n * forward;
        t.gemm_backward += gemms * n * forward;
        t.selective_recompute += n * forward * (op.attention_part ? layer.shares.attention_mm : layer.shares.ffn_mm);
        break;
      }
      case OpClass::kAttention: {
        // Under the causal mask the kernel runs (S + 1) / 2S of the pairs the shapes span; a ring rank's
        // S/C queries meet S²/2C of them, C times its own shard's.
        const double queries = static_cast<double>(std::max<int64_t>(op.rows, 1));
        const double causal = (static_cast<double>(ring) * queries + 1) / (2 * queries);
        const double flops = b * static_cast<double>(op.flops) * causal;
        const double forward = std::max({flops / (r.flops_per_s * c.attention_forward_efficiency), memory, floor});
        const double backward = std::max(
            {kAttentionBackwardFlops * flops / (r.flops_per_s * c.attention_backward_efficiency), 2 * memory, floor});
        t.forward += n * forward;
        t.backward += n * backward;
        t.attention_forward += n * forward;
        t.attention_backward += n * backward;
        break;  // the selective policy saves the kernel's outputs: not run again
      }
      case OpClass::kMemory: {
        const double forward = std::max(memory, floor);
        t.forward += n * forward;
        if (op.backward) t.backward += n * std::max(2 * memory, floor);
        t.selective_recompute += n * forward;  // weightless: the selective policy runs it again
        break;
      }
    }
  }
  return t;
}

namespace {

struct LinkFigures {
  double bytes_per_s, latency_s;
};

LinkFigures figures(bool inside_node, const Network& net) {
  const Calibration& c = net.calibration;
  return inside_node ? LinkFigures{net.link_bytes_per_s * c.link_efficiency, c.link_latency_us * 1e-6}
                     : LinkFigures{net.nic_bytes_per_s * c.nic_efficiency, c.nic_latency_us * 1e-6};
}

}  // namespace

double all_reduce_seconds(int64_t bytes, const Group& g, const Network& net) {
  if (g.ranks <= 1 || bytes <= 0) return 0;
  const LinkFigures f = figures(g.inside_node(), net);
  const double n = static_cast<double>(g.ranks);
  const double ring = 2 * (n - 1) * f.latency_s, tree = 2 * std::ceil(std::log2(n)) * f.latency_s;
  return std::min(ring, tree) + 2 * (n - 1) / n * static_cast<double>(bytes) / f.bytes_per_s;
}

double all_gather_seconds(int64_t bytes, const Group& g, const Network& net) {
  if (g.ranks <= 1 || bytes <= 0) return 0;
  const LinkFigures f = figures(g.inside_node(), net);
  const double n = static_cast<double>(g.ranks);
  return (n - 1) * f.latency_s + (n - 1) / n * static_cast<double>(bytes) / f.bytes_per_s;
}

double all_to_all_seconds(int64_t bytes, const Group& g, const Network& net) {
  if (g.ranks <= 1 || bytes <= 0) return 0;
  const double n = static_cast<double>(g.ranks);
  const double local = static_cast<double>(std::min(g.ranks_per_node, g.ranks));
  const LinkFigures link = figures(true, net), nic = figures(false, net);
  const double inside = static_cast<double>(bytes) * (local - 1) / n / link.bytes_per_s;
  const double across = static_cast<double>(bytes) * (n - local) / n / nic.bytes_per_s;
  return (g.inside_node() ? link.latency_s : nic.latency_s) + std::max(inside, across);
}

double send_seconds(int64_t bytes, bool inside_node, const Network& net) {
  if (bytes <= 0) return 0;
  const LinkFigures f = figures(inside_node, net);
  return f.latency_s + static_cast<double>(bytes) / f.bytes_per_s;
}

}  // namespace census
