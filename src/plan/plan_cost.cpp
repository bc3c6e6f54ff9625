#include "plan/plan_cost.h"

#include <algorithm>
#include <map>

#include "census/parts.h"
#include "census/selective_census.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "ops/dispatch.h"
#include "ops/op_def.h"

namespace census {
namespace {

PartTime part_time(std::string part, int64_t flops, int64_t bytes, const Throughput& d) {
  const double compute = d.flops_per_s > 0 ? static_cast<double>(flops) / d.flops_per_s : 0;
  const double memory = d.hbm_bytes_per_s > 0 ? static_cast<double>(bytes) / d.hbm_bytes_per_s : 0;
  return {std::move(part), flops, bytes, std::max(compute, memory), compute >= memory && flops > 0};
}

// The output layer's forward by part, as the census counts a layer's: FLOPs by the catalogue's rule,
// bytes read and written by every op that is not a view. The final norm's ops are "final_norm", the
// head's matmul "lm_head", the loss's (the fp32 logits, log-softmax, the gather) "loss".
class OutputCounter final : public Observer {
 public:
  OutputCounter() : Observer(kOnOp) {}
  void on_op(const OpCall& call) override {
    if (call.def.is_view()) return;
    const auto& modules = Session::current().modules();
    std::string part = "loss";
    if (!modules.empty() && modules.back().path == "lm_head") part = "lm_head";
    else if (!modules.empty() && modules.back().kind == ModuleKind::kNorm) part = "final_norm";
    int64_t moved = 0;
    for (const Tensor& input : call.inputs) moved += input.nbytes();
    for (const Tensor& output : call.outputs) moved += output.nbytes();
    bytes[part] += moved;
    if (call.def.flops_rule != FlopsRule::kNone) flops[part] += call.def.flops(call.inputs);
  }
  std::map<std::string, int64_t> flops, bytes;
};

}  // namespace

ForwardTime layer_forward_time(const ModelConfig& rank_config, int64_t layer_index, int64_t seq_length,
                               const Throughput& device, int64_t context_parallel) {
  const PartCounts flops = census_flops(rank_config, layer_index, seq_length);
  const LayerTraffic traffic = census_traffic(rank_config, layer_index, seq_length);
  const RecomputeShares shares = census_recomputed(rank_config, layer_index, seq_length);
  ForwardTime t;
  for (const auto& [part, moved] : traffic.moved) {
    const auto f = flops.find(part);
    const int64_t ring = part == "scores" ? context_parallel : 1;  // the kernel C times over a ring
    PartTime p = part_time(part, (f == flops.end() ? 0 : f->second) * ring, moved * ring, device);
    t.seconds += p.seconds;
    // The selective policy saves the attention kernel's outputs; of a part with matmuls it re-runs the
    // census's recomputed share; a weightless part's ops run again whole.
    if (part == "scores") {
    } else if (p.flops == 0) {
      t.selective_recompute_seconds += p.seconds;
    } else {
      t.selective_recompute_seconds += p.seconds * (part == "attention" ? shares.attention_mm : shares.ffn_mm);
    }
    t.parts.push_back(std::move(p));
  }
  return t;
}

ForwardTime output_forward_time(const ModelConfig& config, int64_t seq_length, const Throughput& device) {
  Session session;
  nn::ParameterList parameters;
  std::unique_ptr<nn::Norm> norm = config.family->build_final_norm(config, parameters);
  nn::Linear lm_head("lm_head", config.hidden_size, config.vocab_size, /*bias=*/false, parameters);
  const Tensor hidden = make_tensor(Dims{1, seq_length, config.hidden_size}, DType::kBFloat16);
  const Tensor labels = make_tensor(Dims{1, seq_length}, DType::kInt64);
  OutputCounter counter;
  session.add_observer(&counter);
  // As the layer census's traffic, the forward as training runs it.
  const Tensor loss = nn::for_causal_lm_loss(lm_head.forward(norm->forward(hidden)), labels, config.vocab_size);
  session.remove_observer(&counter);
  ForwardTime t;
  for (const auto& [part, moved] : counter.bytes) {
    const auto f = counter.flops.find(part);
    PartTime p = part_time(part, f == counter.flops.end() ? 0 : f->second, moved, device);
    t.seconds += p.seconds;
    t.parts.push_back(std::move(p));
  }
  return t;
}

double all_reduce_seconds(int64_t bytes, int64_t ranks, double bytes_per_s) {
  if (ranks <= 1 || bytes_per_s <= 0) return 0;
  return 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * static_cast<double>(bytes) / bytes_per_s;
}

double all_gather_seconds(int64_t bytes, int64_t ranks, double bytes_per_s) {
  if (ranks <= 1 || bytes_per_s <= 0) return 0;
  return static_cast<double>(ranks - 1) / static_cast<double>(ranks) * static_cast<double>(bytes) / bytes_per_s;
}

double all_to_all_seconds(int64_t bytes, int64_t ranks, double bytes_per_s) {
  return all_gather_seconds(bytes, ranks, bytes_per_s);  // the same (n-1)/n share crosses the links
}

}  // namespace census
