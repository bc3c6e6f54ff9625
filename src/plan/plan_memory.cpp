#include "plan/plan_memory.h"

#include <algorithm>

#include "plan/plan_cost.h"

namespace census {

std::vector<int64_t> standing_stages(const ModelConfig& config, const Layout& l) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < l.pp; ++r) out.push_back(r);
  // FSDP2's units (step/fsdp.h) are the stage's own, unsharded and resharded by its passes in the
  // schedule's order: the Note's argument is made for composed shares, so every FSDP2 stage is simulated.
  if (l.fsdp || l.pp < 4 || l.schedule != PipelineSchedule::k1F1B || l.virtual_stages != 1 || l.micro_batches < l.pp + 1)
    return out;
  auto chunks = pipeline_chunks(config.num_hidden_layers, l.pp, 1, l.split);
  if (!chunks) return out;
  const std::vector<std::string> kinds = layer_kinds(config);
  auto same_kinds = [&](const LayerRange& a, const LayerRange& b) {
    if (a.size() != b.size()) return false;
    for (int64_t k = 0; k < a.size(); ++k)
      if (kinds[static_cast<size_t>(a.begin + k)] != kinds[static_cast<size_t>(b.begin + k)]) return false;
    return true;
  };
  for (int64_t r = 2; r < l.pp - 1; ++r)
    for (int64_t earlier = 1; earlier < r; ++earlier)
      if (out[static_cast<size_t>(earlier)] == earlier &&
          same_kinds((*chunks)[static_cast<size_t>(earlier)], (*chunks)[static_cast<size_t>(r)])) {
        out[static_cast<size_t>(r)] = earlier;
        break;
      }
  return out;
}

MemoryBound::MemoryBound(const ModelConfig& config, const RunShape& run, bool fp32_master_weights, bool fp32_gradients,
                         int64_t overheads)
    : c_(config), run_(run), fp32_master_weights_(fp32_master_weights), fp32_gradients_(fp32_gradients),
      overheads_(overheads), kinds_(layer_kinds(config)) {
  for (size_t i = 0; i < kinds_.size(); ++i)
    representative_.push_back(static_cast<int64_t>(std::find(kinds_.begin(), kinds_.end(), kinds_[i]) - kinds_.begin()));
  for (int64_t i = 0; i < config.num_hidden_layers && config.family->stack_only != nullptr; ++i)
    stacked_ = stacked_ || config.family->stack_only(config, i) != nullptr;
}

// Note [Experts' gradients in the states' bound]
// Which experts a token reaches is data; a census has shapes only. Where the experts run as
// Transformers' grouped_mm (nn/moe.h), every routed weight is one stacked parameter that each MoE
// layer's _grouped_mm reads whole, so its backward makes the whole weight's gradient whatever the
// routing, and AdamW gives it its states: the experts count in the gradients and the states like any
// parameter. Where they run as the eager loop over the experts hit, an expert no token reached has
// neither, and the bound counts them as parameters alone. tests/cli/plan_search_cli_test.cpp holds the
// bound to the simulated peak on every layout of whole searches of MoE models run both ways.
bool experts_always_trained(const ModelConfig& config) {
  return config.moe.num_experts > 0 && config.moe.experts_implementation == nn::ExpertsImplementation::kGroupedMm;
}

namespace {

// The parameters stage `r` of `pp` holds: its chunks' (chunk g is stage g % P's).
ChunkParameters held_by_stage(const std::vector<ChunkParameters>& chunks, int64_t pp, int64_t r) {
  ChunkParameters sum;
  for (size_t g = static_cast<size_t>(r); g < chunks.size(); g += static_cast<size_t>(pp))
    sum.all += chunks[g].all, sum.experts += chunks[g].experts, sum.untrained += chunks[g].untrained;
  return sum;
}

// Those of `held` a backward gives a gradient and AdamW states (Note [Experts' gradients in the states'
// bound], Note [Parameters no gradient reaches]).
int64_t trained(const ChunkParameters& held, bool experts_trained) {
  return held.all - (experts_trained ? 0 : held.experts) - held.untrained;
}

// Note [Other optimizers' states in the bounds]
// What the bounds count for a trained parameter's states (beside AdamW's own, which both bounds take
// exactly) is the least each optimizer keeps of it on the device (least_state_bytes, plan_layout.h),
// but nothing of a paged optimizer's, whose large states live in unified memory, outside the device's
// figures. Their blocks' maxima, the small parameters' wider states and each optimizer's own temporaries
// are left out, so both bounds stay below the step the layout simulates.
int64_t device_state_bytes(StepOptimizer optimizer) {
  return optimizer == StepOptimizer::kPagedAdamW8bit ? 0 : least_state_bytes(optimizer);
}

}  // namespace

// Note [AdamW's temporaries in the states' bound]
// AdamW's update (nn/adamw.h) makes every state before it updates any parameter (or finds them made, in
// the steady state), so every parameter, gradient and state is live while it runs. Its temporaries by
// form:
//   for-loop  each parameter's denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt) holds two
//             temporaries of that parameter's size at once. The first stage's first parameter is the
//             embedding's V x H table and the last stage's last the head's (or the tied table), each
//             V / T rows under DTensor's vocabulary-parallel plan: that moment adds 2 x the table's
//             elements;
//   foreach   _foreach_sqrt makes one temporary of every trained parameter's size at once, on every
//             stage;
//   fused     none;
// each element at 2 B (4 B in fp32 under fp32 master weights), on the rank's shard under ZeRO-1 and
// more, as the step composes its optimizer temporaries (step/step_compose.cpp). Llama-3.1-70B on 16 GPUs
// at 30 GiB, where nothing fits: its layouts' peaks are at that moment, and the term lets the search
// reject them unsimulated.
// Note [No bound under fine-tuning]
// Both bounds take every parameter trained in bf16 and each layer as it runs untouched. Under adapters the
// base has neither gradient nor state, a frozen Linear keeps no input for its weight's gradient, and
// autocast and a 4-bit base save other tensors: either bound could pass the step's own peak. Fine-tuning
// is priced on one device (check_plan_options), a search of micro-batch sizes and two recompute modes, so
// every layout is simulated instead: both bounds are 0.
int64_t MemoryBound::states(const Layout& l, const std::vector<ChunkParameters>& chunk_params) const {
  if (run_.fine_tuning()) return 0;  // Note [No bound under fine-tuning]
  const int64_t dp_cp = l.dp * l.cp, zero = l.fsdp ? 3 : l.zero;
  const bool adamw = run_.optimizer == StepOptimizer::kAdamW;
  // Note [Other optimizers' states in the bounds]
  const int64_t grad_size = fp32_gradients_ ? 4 : 2;
  const int64_t state_size = adamw ? (fp32_master_weights_ ? 12 : 4) : device_state_bytes(run_.optimizer);
  auto share = [&](int64_t bytes, bool sharded) { return sharded ? bytes / dp_cp : bytes; };
  constexpr int64_t kMargin = 1 << 20;  // each storage's share is rounded down on its own
  // Note [Experts' gradients in the states' bound]
  const bool experts_trained = experts_always_trained(c_);
  // Note [AdamW's temporaries in the states' bound]
  const int64_t vocab = l.sp ? c_.vocab_size / l.tp : c_.vocab_size;
  const int64_t temporary_size = fp32_master_weights_ ? 4 : 2;
  const int64_t table_temporaries = 2 * share(vocab * c_.hidden_size * temporary_size, zero >= 1);
  int64_t most = 0;
  for (int64_t r = 0; r < l.pp; ++r) {
    const ChunkParameters held = held_by_stage(chunk_params, l.pp, r);
    const int64_t with_grads = trained(held, experts_trained);
    const bool holds_table = r == 0 || r == l.pp - 1;  // the embedding's stage, the head's
    int64_t temporaries = 0;
    // Another optimizer's temporaries are left out (Note [Other optimizers' states in the bounds]).
    switch (adamw ? run_.optimizer_impl : nn::OptimizerImpl::kFused) {
      case nn::OptimizerImpl::kForLoop: temporaries = holds_table ? table_temporaries : 0; break;
      case nn::OptimizerImpl::kForEach: temporaries = share(temporary_size * with_grads, zero >= 1); break;
      case nn::OptimizerImpl::kFused: break;
    }
    most = std::max(most, share(2 * held.all, zero >= 3) + share(grad_size * with_grads, zero >= 2) +
                              share(state_size * with_grads, zero >= 1) + temporaries);
  }
  return std::max<int64_t>(0, most - kMargin) + overheads_;
}

// Note [Sequence parallelism in the activations' bound]
// Under DTensor's plan with sequence parallelism a layer runs on the layer config census step builds
// (rank_config of the layout's step), its norms and residual stream on the rank's S / T tokens, the
// normed stream all-gathered to S tokens before the attention and the MLP. The lone layer is measured
// the same way, under the plan's styles on the rank's S / T tokens (layer_kept_bytes' sequence_shards):
// the ops the step's layer runs, on the same shapes, so what it keeps is the step's layer's. (It was
// once measured plainly on all S tokens and taken at 1 / T, which is a bound too but far below: the
// all-gathered inputs the attention's and the MLP's projections save are whole. Qwen3-32B at TP 4 with
// SP, 4 sequences a micro-batch, no recompute: 66.3 GB against a 147.5 GB peak, simulated in vain.)
// The vocabulary-parallel head is taken at 1 / T of the whole head's: every storage the whole head
// keeps has one the sharded head keeps of at least 1 / T its bytes. tests/cli/plan_search_cli_test.cpp
// holds the bound to the simulated peak on whole searches with SP layouts.
//
// Note [A layer's input in the memory bound]
// What a layer keeps from its forward (layer_kept_bytes) is what its own ops made, its output left out;
// its input is the earlier layer's output (or the stage's embedding or received activations), which no
// layer's own count holds. A layer whose graph keeps its input (a checkpoint saves it, selective or
// full) holds it until its backward: measured as the lone layer's input, an earlier op's output, still
// live once the caller lets it go. It is counted with the layer that keeps it, one storage a layer, never
// also in another's, and so at every moment the bound takes before that layer's backward. A layer
// that keeps its input no longer once its backward has run has it counted among the later layers'
// kept bytes the layer-backward term takes away (a looser bound there, never a larger one).
// Qwen3.5-122B-A10B on 16,384 GPUs, CP 8, EP 8, PP 2 x 8 virtual stages, micro-batches of 8 under
// selective recompute: a layer's input, 8 x 512 x 3,072 x 2 B = 25.2 MB, kept by every layer the first
// stage's forwards in flight ran, raises the bound from 85.67 to 86.85 GB, past the 80 GiB the search
// rejects at unsimulated; its peak is 87.43 GB.
int64_t MemoryBound::kept(const Layout& l, int64_t layer, Recompute mode) {
  const int64_t rep = representative_[static_cast<size_t>(layer)];
  const int64_t tokens = run_.seq_length / l.cp;
  const int64_t etp = l.sp ? -1 : l.etp;  // -1: DTensor's plan's layers
  const int64_t shards = l.sp ? l.tp : 1;
  auto [rank, new_rank] = ranks_.try_emplace({l.tp, l.ep, etp});
  if (new_rank) {
    Layout alone;
    alone.tp = l.tp, alone.ep = l.ep, alone.etp = l.etp, alone.sp = l.sp;
    rank->second = rank_config(c_, layout_step_options(alone, run_, 0));
  }
  // Every storage a layer keeps is a micro-batch's (its sequences' tokens, b times one's) or not the
  // micro-batch's at all: measured at one sequence and at two, b sequences keep one's and b - 1 times
  // the difference.
  if (stacked_ && l.pp == 1) {
    // A model with a layer that cannot run alone (Family::stack_only), unpipelined: every layer's from
    // the model's forward, the step's own (one measure for all its layers: no storage counted twice).
    auto [it, made] = stack_kept_.try_emplace({l.tp, l.ep, etp, tokens, static_cast<int>(mode)});
    if (made) {
      const std::vector<int64_t> one = stack_kept_bytes(c_, rank->second, tokens, 1, mode);
      const std::vector<int64_t> two = stack_kept_bytes(c_, rank->second, tokens, 2, mode);
      for (size_t i = 0; i < one.size(); ++i) it->second.emplace_back(one[i], two[i] - one[i]);
    }
    const auto [one, more] = it->second[static_cast<size_t>(layer)];
    return (one + (l.micro_batch_size - 1) * more) / shards;
  }
  // Pipelined, a stage runs a chunk of the model, whose forward is not the whole model's: a layer that
  // cannot run alone is bounded by nothing kept (a looser bound; the simulated step prices it exactly).
  if (c_.family->stack_only != nullptr && c_.family->stack_only(c_, rep) != nullptr) return 0;
  auto [it, made] = kept_.try_emplace({rep, l.tp, l.ep, etp, tokens, static_cast<int>(mode)}, std::pair<int64_t, int64_t>{});
  if (made) {  // Note [A layer's input in the memory bound]
    int64_t input_one = 0, input_two = 0;
    const int64_t one = layer_kept_bytes(rank->second, rep, tokens, 1, mode, &input_one, shards) + input_one;
    const int64_t two = layer_kept_bytes(rank->second, rep, tokens, 2, mode, &input_two, shards) + input_two;
    it->second = {one, two - one};
  }
  return it->second.first + (l.micro_batch_size - 1) * it->second.second;  // Note [Sequence parallelism ...]
}

int64_t MemoryBound::head_backward(const Layout& l) {
  // The head is measured as a chunk of its own, cut after the last layer: a model its family cannot cut
  // there (its head or its layers need what the model computes from the input ids), or with a layer that
  // cannot run alone, has its head bounded by nothing.
  const int64_t layers = c_.num_hidden_layers;
  if (stacked_ || (c_.family->pipeline_refusal != nullptr && c_.family->pipeline_refusal(c_, layers) != nullptr)) return 0;
  // TRL's and Liger's losses hold less than the whole logits' and are not measured here: bounded by
  // nothing, which stays a lower bound.
  if (run_.loss != nn::CausalLMLoss::kForCausalLM) return 0;
  const int64_t tokens = run_.seq_length / l.cp;
  auto [it, made] = head_backward_.try_emplace({tokens, l.micro_batch_size}, 0);
  if (made) it->second = head_backward_bytes(c_, tokens, l.micro_batch_size);
  return l.sp ? it->second / l.tp : it->second;  // Note [Sequence parallelism in the activations' bound]
}

int64_t MemoryBound::backward(const Layout& l, int64_t layer, Recompute mode) {
  const int64_t rep = representative_[static_cast<size_t>(layer)];
  const int64_t tokens = run_.seq_length / l.cp;
  auto [it, made] = backward_.try_emplace({rep, l.tp, l.ep, l.etp, tokens, static_cast<int>(mode), l.micro_batch_size}, 0);
  if (made) {
    auto [rank, new_rank] = ranks_.try_emplace({l.tp, l.ep, l.etp});
    if (new_rank) {
      Layout alone;
      alone.tp = l.tp, alone.ep = l.ep, alone.etp = l.etp;
      rank->second = rank_config(c_, layout_step_options(alone, run_, 0));
    }
    // Measured at the micro-batch itself: the moment its most falls at may move with its size.
    if (!stacked_) {
      it->second = layer_backward_bytes(rank->second, rep, tokens, l.micro_batch_size, mode);
    } else {  // every kind's at once, inside the model's forward (Note [A layer's backward inside the model])
      const std::vector<int64_t> by_layer = stack_layer_backward_bytes(c_, rank->second, tokens, l.micro_batch_size, mode);
      for (size_t i = 0; i < by_layer.size(); ++i)
        if (representative_[i] == static_cast<int64_t>(i))
          backward_[{static_cast<int64_t>(i), l.tp, l.ep, l.etp, tokens, static_cast<int>(mode), l.micro_batch_size}] =
              by_layer[i];
    }
  }
  return it->second;
}

const MemoryBound::Passes& MemoryBound::passes(const Layout& l) {
  const int64_t p = l.pp, v = l.virtual_stages;
  // Past 2P micro-batches 1F1B's and the interleaved schedule's passes repeat their steady state; a walk
  // of 2P holds at each backward at most what the step's does (its cool-down starts sooner: fewer
  // forwards in flight, the same gradients made), so it bounds the longer one.
  const int64_t m = l.schedule == PipelineSchedule::kGPipe ? l.micro_batches : std::min(l.micro_batches, 2 * p);
  auto [it, made] = passes_.try_emplace({static_cast<int>(l.schedule), p, v, m});
  if (!made) return it->second;
  for (int64_t r = 0; r < p; ++r) {
    std::vector<int32_t>& order = it->second.by_stage.emplace_back();
    for (const StepPass& pass : pipeline_order(l.schedule, p, r, m, v))
      order.push_back(pass.pass == 'B' ? -static_cast<int32_t>(pass.chunk + 1) : static_cast<int32_t>(pass.chunk + 1));
  }
  return it->second;
}

// Note [Every backward in the memory bound]
// A stage's first backward starts with no gradient made; each later one with the gradients of every
// trained parameter of the chunks the backwards before it ran (an eager expert no token reached and a
// parameter no gradient reaches have none), at the composed share (2 B, 4 B in fp32; over DP x CP under
// ZeRO-2, 3 and FSDP2), beside what the forwards then in flight keep: the stage's passes walked in the
// order the step runs them (pipeline_order), a forward adding its chunk's kept bytes and a backward
// freeing them. Each moment the bound takes at a backward (its start, the head's backward where it runs
// the last chunk, each layer's) is taken at every one. Nemotron-H 56B on 8 GPUs (CP 8, ZeRO-3, full
// recompute, 8 micro-batches) peaks at 66.66 GB inside a Mamba-2 layer's second backward, beside 14.08 GB
// of gradients the first backward's moment lacks: the bound rises from 56.86 to 66.62 GB, and the search
// for the smallest peak, where nothing fits 24 GiB, simulates a few dozen layouts, not 9,288. Qwen3.5-27B
// on 16,384 GPUs under interleaved 1F1B (PP 4 x 4 virtual stages, CP 8, 2 sequences a micro-batch, no
// recompute) peaks at the first chunk's backward of the second micro-batch, 98.09 GB, with three chunks'
// gradients made: 82.86 GB from the first backward, 97.58 GB now. Of the 80 searches of the shipped
// configs on 256 and 16,384 GPUs, 4 layouts are now simulated in vain, where 92 were.
int64_t MemoryBound::activations(const Layout& l, const std::vector<ChunkParameters>& chunk_params,
                                 const std::vector<int64_t>& largest_layer, int64_t enough, bool* whole) {
  if (run_.fine_tuning()) {  // Note [No bound under fine-tuning]
    if (whole != nullptr) *whole = true;
    return 0;
  }
  const PipelineSplit& sp = l.split;
  auto [chunks_it, made] = chunks_.try_emplace(
      {l.pp, l.virtual_stages, sp.first_stage_layers, sp.last_stage_layers, sp.embedding_as_layer, sp.loss_as_layer});
  if (made) {
    auto chunks = pipeline_chunks(c_.num_hidden_layers, l.pp, l.virtual_stages, l.split);
    if (chunks) chunks_it->second = chunks.take();
  }
  const std::vector<LayerRange>& chunks = chunks_it->second;
  const Passes& order = passes(l);
  const int64_t dp_cp = l.dp * l.cp;
  const bool sharded = l.fsdp || l.zero >= 3;
  // Within one layout a layer's kept bytes and backward are its kind's (its representative's, its kind's
  // recompute mode), but where they come from the model's forward layer by layer: each asked once.
  const bool by_kind = !(stacked_ && l.pp == 1);
  kept_by_layer_.assign(kinds_.size(), -1);
  backward_by_layer_.assign(kinds_.size(), -1);
  auto kept_of = [&](int64_t i) {
    int64_t& known = kept_by_layer_[static_cast<size_t>(by_kind ? representative_[static_cast<size_t>(i)] : i)];
    if (known < 0) known = kept(l, i, l.recompute.of_kind(kinds_[static_cast<size_t>(i)]));
    return known;
  };
  auto backward_of = [&](int64_t i) {
    int64_t& known = backward_by_layer_[static_cast<size_t>(representative_[static_cast<size_t>(i)])];
    if (known < 0) known = backward(l, i, l.recompute.of_kind(kinds_[static_cast<size_t>(i)]));
    return known;
  };
  constexpr int64_t kMargin = 1 << 20;  // the ZeRO-3 share is rounded down storage by storage
  auto bound_of = [&](int64_t most) { return std::max<int64_t>(0, most - (sharded ? kMargin : 0)) + overheads_; };
  // By chunk: what a forward keeps of each of its layers, and the gradients its backward makes (Note
  // [Every backward in the memory bound]).
  const bool experts_trained = experts_always_trained(c_);
  const bool grads_sharded = l.fsdp || l.zero >= 2;
  chunk_kept_.assign(chunks.size(), 0);
  chunk_grads_.assign(chunks.size(), 0);
  chunk_layers_backward_.assign(chunks.size(), -1);
  for (size_t g = 0; g < chunks.size(); ++g) {
    for (int64_t i = chunks[g].begin; i < chunks[g].end; ++i) chunk_kept_[g] += kept_of(i);
    chunk_grads_[g] = (fp32_gradients_ ? 4 : 2) * trained(chunk_params[g], experts_trained) / (grads_sharded ? dp_cp : 1);
  }
  // Note [A layer's backward in the memory bound]: each layer of the chunk a backward runs, last to first,
  // holds its backward's most in place of its and the later layers' kept bytes: the most of that over the
  // chunk's layers, beyond the chunk's kept bytes. A DTensor plan's layer runs other ops than the lone
  // one. A model with a layer that cannot run alone has its layers' backwards measured inside the
  // model's forward where its layers are alike by kind (Note [A layer's backward inside the model]),
  // unpipelined, the kept bytes then the model's own.
  const bool measured = !l.sp && (!stacked_ || (l.pp == 1 && c_.family->stack_layers_alike_by_kind));
  auto layers_backward = [&](size_t g) {
    int64_t& known = chunk_layers_backward_[g];
    if (known >= 0) return known;
    known = 0;
    int64_t later = 0;  // the kept bytes of layer i and those after it
    for (int64_t i = chunks[g].end - 1; i >= chunks[g].begin; --i) {
      later += kept_of(i);
      known = std::max(known, backward_of(i) - later);
    }
    return known;
  };
  // The walk of each stage's passes: at every backward's start, the stage's parameters, what each forward
  // still in flight keeps, and the gradients the backwards before made; on the last stage, the head's
  // backward where the pass runs the last chunk; with `layers`, each layer's backward inside it.
  // Note [The optimizer's states in the activations' bound]: in the steady state (every step from the
  // second on) AdamW's states are live through every pass, at their ZeRO-1 share: 4 B a trained parameter
  // (bf16 moments), 12 B with fp32 master weights composed, 8 B under FSDP2's mixed precision (fp32
  // moments of the fp32 shards, which the walk counts at 2 B a parameter). Each storage's share is rounded
  // down on its own, hence the margin where they are sharded.
  const bool states_sharded = l.fsdp || l.zero >= 1;
  // Note [Other optimizers' states in the bounds]
  const int64_t steady_state_size = run_.optimizer != StepOptimizer::kAdamW ? device_state_bytes(run_.optimizer)
                                    : l.fsdp                                ? (fp32_master_weights_ ? 8 : 4)
                                                                            : (fp32_master_weights_ ? 12 : 4);
  auto states_of = [&](int64_t r) -> int64_t {
    if (run_.first_step) return 0;
    const int64_t bytes = steady_state_size * trained(held_by_stage(chunk_params, l.pp, r), experts_trained);
    return states_sharded ? std::max<int64_t>(0, bytes / dp_cp - kMargin) : bytes;
  };
  auto walk = [&](bool layers) {
    int64_t most = 0;
    for (int64_t r = 0; r < l.pp; ++r) {
      const int64_t params = held_by_stage(chunk_params, l.pp, r).all;
      int64_t live = (sharded ? 2 * params / dp_cp : 2 * params) + states_of(r);
      // ZeRO-3's gathered layer and the one prefetched, composed during every pass (step/step_compose.h):
      // each parameter at least a bf16's 2 B. Not FSDP2's: its units are unsharded and resharded by the
      // step's own hooks, and at the last stage's first backward it holds the root's (the embedding and
      // head), not a layer's, which can be fewer (tests/cli/plan_search_cli_test.cpp: FSDP2 layouts of
      // the MoE toys).
      if (l.zero >= 3 && !l.fsdp) live += 2 * 2 * largest_layer[static_cast<size_t>(r)];
      int64_t grads = 0;
      std::vector<char>& graded = chunk_graded_;  // by the stage's chunk: its gradients made
      graded.assign(static_cast<size_t>(l.virtual_stages), 0);
      for (const int32_t pass : order.by_stage[static_cast<size_t>(r)]) {
        const int64_t c = (pass > 0 ? pass : -pass) - 1;
        const size_t g = static_cast<size_t>(c * l.pp + r);
        if (pass > 0) {
          live += chunk_kept_[g];
          continue;
        }
        const int64_t moment = live + std::max<int64_t>(0, grads - (grads_sharded && grads > 0 ? kMargin : 0));
        // Note [The loss's backward in the memory bound]: the head's backward runs before the last chunk's.
        const bool head = r == l.pp - 1 && c == l.virtual_stages - 1;
        most = std::max(most, moment + (head ? head_backward(l) : 0));
        if (layers && measured) most = std::max(most, moment + layers_backward(g));
        live -= chunk_kept_[g];
        if (!graded[static_cast<size_t>(c)]) grads += chunk_grads_[g];
        graded[static_cast<size_t>(c)] = 1;
      }
    }
    return most;
  };
  const int64_t starts = walk(/*layers=*/false);
  const bool rejected_without_layers = bound_of(starts) > enough;
  if (whole != nullptr) *whole = !rejected_without_layers;
  if (rejected_without_layers || !measured) return bound_of(starts);
  return bound_of(std::max(starts, walk(/*layers=*/true)));
}

}  // namespace census
