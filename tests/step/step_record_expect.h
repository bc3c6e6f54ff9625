// What the step oracle's and the parallel step oracle's records share, compared field by field: a split
// of the live bytes, a peak moment, and the parameter, gradient and optimizer-state totals.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "step/step_census.h"

namespace census::testing {

// FSDP2's parts of `other` are compared where the record lists them (the parallel oracle's always do).
inline void expect_split(const StepSplit& split, const nlohmann::json& expected, const std::string& where) {
  EXPECT_EQ(split.parameters(), expected.at("parameters").get<int64_t>()) << where;
  EXPECT_EQ(split.gradients(), expected.at("gradients").get<int64_t>()) << where;
  EXPECT_EQ(split.optimizer_states(), expected.at("optimizer_states").get<int64_t>()) << where;
  EXPECT_EQ(split.other(), expected.at("other").get<int64_t>()) << where;
  const auto& detail = expected.at("other_detail");
  for (const auto& [category, name] :
       {std::pair{StepCategory::kBuffers, "buffers"}, std::pair{StepCategory::kInputs, "inputs"},
        std::pair{StepCategory::kParamGradInflight, "param_grad_inflight"},
        std::pair{StepCategory::kActivations, "activations"}})
    EXPECT_EQ(split[category], detail.at(name).get<int64_t>()) << where << " " << name;
  for (const auto& [category, name] :
       {std::pair{StepCategory::kFsdpUnshardedParams, "fsdp_unsharded_params"},
        std::pair{StepCategory::kFsdpAllGatherBuffers, "fsdp_all_gather_buffers"},
        std::pair{StepCategory::kFsdpUnshardedGrads, "fsdp_unsharded_grads"},
        std::pair{StepCategory::kFsdpReduceScatterBuffers, "fsdp_reduce_scatter_buffers"}})
    if (detail.contains(name)) {
      EXPECT_EQ(split[category], detail.at(name).get<int64_t>()) << where << " " << name;
    }
}

// A phase-scoped peak (forward_peak, backward_peak, optimizer_step_peak): null where the step has none.
inline void expect_moment(const StepMoment& moment, const nlohmann::json& expected, const std::string& what) {
  if (expected.is_null()) {
    EXPECT_EQ(moment.bytes, -1) << what;
    return;
  }
  EXPECT_EQ(moment.bytes, expected.at("bytes").get<int64_t>()) << what;
  EXPECT_EQ(moment.phase, expected.at("phase").get<std::string>()) << what;
}

inline void expect_totals(const StepCensus& step, const nlohmann::json& oracle) {
  EXPECT_EQ(step.schedule, oracle.at("schedule").get<std::vector<std::string>>());
  const auto& params = oracle.at("parameters");
  EXPECT_EQ(step.parameter_count, params.at("count").get<int64_t>());
  EXPECT_EQ(step.parameter_tensors, params.at("tensors").get<int64_t>());
  EXPECT_EQ(step.parameter_bytes, params.at("bytes").get<int64_t>());
  EXPECT_EQ(step.buffer_bytes, params.at("buffers_bytes").get<int64_t>());
  const auto& grads = oracle.at("gradients");
  EXPECT_EQ(step.gradient_bytes_after_first_backward, grads.at("bytes_after_first_backward").get<int64_t>());
  EXPECT_EQ(step.gradient_bytes_after_last_backward, grads.at("bytes_after_last_backward").get<int64_t>());
  EXPECT_EQ(step.gradient_bytes_at_end, grads.at("bytes_live_at_end").get<int64_t>());
  if (!oracle.at("optimizer").is_null()) {
    EXPECT_EQ(step.optimizer_state_bytes, oracle.at("optimizer").at("state_bytes").get<int64_t>());
  }
}

// The phase-scoped peaks and every phase: its name, live bytes at its start and end, and its peak; the
// peak's op and split where the record lists them (the parallel oracle's do).
inline void expect_phases(const StepCensus& step, const nlohmann::json& oracle) {
  expect_moment(step.forward_peak, oracle.at("forward_peak"), "forward_peak");
  expect_moment(step.backward_peak, oracle.at("backward_peak"), "backward_peak");
  expect_moment(step.optimizer_step_peak, oracle.at("optimizer_step_peak"), "optimizer_step_peak");
  const std::vector<StepPhase>& ours = step.analysis.phases;
  const auto& phases = oracle.at("phases");
  ASSERT_EQ(ours.size(), phases.size());
  for (size_t i = 0; i < phases.size(); ++i) {
    const std::string name = phases[i].at("name");
    EXPECT_EQ(ours[i].name, name);
    EXPECT_EQ(ours[i].live_at_start, phases[i].at("live_at_start").get<int64_t>()) << name;
    EXPECT_EQ(ours[i].peak.bytes, phases[i].at("peak_bytes").get<int64_t>()) << name;
    if (phases[i].contains("peak_op")) {
      const auto& op = phases[i].at("peak_op");
      EXPECT_EQ(std::string(ours[i].peak.op), op.is_null() ? std::string() : op.get<std::string>()) << name;
    }
    if (phases[i].contains("split_at_peak")) expect_split(ours[i].peak.split, phases[i].at("split_at_peak"), name);
    EXPECT_EQ(ours[i].live_at_end, phases[i].at("live_at_end").get<int64_t>()) << name;
  }
}

// A step oracle's case whole: its totals, its peak (bytes, phase, op, split), its other_peak (bytes,
// phase, op) and its phases.
inline void expect_step_case(const StepCensus& step, const nlohmann::json& oracle) {
  const StepAnalysis& a = step.analysis;
  expect_totals(step, oracle);
  const auto& peak = oracle.at("peak");
  EXPECT_EQ(a.peak.bytes, peak.at("bytes").get<int64_t>());
  EXPECT_EQ(a.peak.phase, peak.at("phase").get<std::string>());
  EXPECT_EQ(a.peak.op, peak.at("op").get<std::string>());
  expect_split(a.peak.split, peak.at("split"), "peak");
  const auto& other = oracle.at("other_peak");
  EXPECT_EQ(a.other_peak.bytes, other.at("bytes").get<int64_t>());
  EXPECT_EQ(a.other_peak.phase, other.at("phase").get<std::string>());
  EXPECT_EQ(a.other_peak.op, other.at("op").get<std::string>());
  expect_phases(step, oracle);
  // The LoRA oracle's record: the Linears PEFT adapted, the adapters that train and the base it froze.
  if (oracle.contains("lora")) {
    const auto& lora = oracle.at("lora");
    EXPECT_EQ(step.adapted_linears, lora.at("adapted_linears").get<int64_t>());
    EXPECT_EQ(step.trainable_parameter_count, lora.at("trainable_parameters").at("count").get<int64_t>());
    EXPECT_EQ(step.trainable_parameter_bytes, lora.at("trainable_parameters").at("bytes").get<int64_t>());
    EXPECT_EQ(step.parameter_bytes - step.trainable_parameter_bytes, lora.at("frozen_parameters").at("bytes").get<int64_t>());
  }
  // The QLoRA oracle's record: the Linears bitsandbytes quantized, their packed weights and their state.
  if (oracle.contains("quantization")) {
    const auto& q = oracle.at("quantization");
    EXPECT_EQ(step.quantized_linears, q.at("quantized_linears").get<int64_t>());
    EXPECT_EQ(step.quantized_weight_bytes, q.at("packed_weight_bytes").get<int64_t>());
    EXPECT_EQ(step.quantization_state_bytes, q.at("quantization_state_bytes").get<int64_t>());
  }
  // The offloading oracle's record: the pinned host memory and what the packs did.
  if (oracle.contains("host")) {
    const auto& host = oracle.at("host");
    ASSERT_TRUE(step.host.has_value());
    EXPECT_EQ(step.host->peak_bytes, host.at("pinned_peak_bytes").get<int64_t>());
    EXPECT_EQ(step.host->offloaded_bytes, host.at("offloaded_bytes").get<int64_t>());
    EXPECT_EQ(step.host->brought_back_bytes, host.at("brought_back_bytes").get<int64_t>());
    const auto& saves = host.at("saves");
    EXPECT_EQ(step.offload.packs, saves.at("packed").get<int64_t>());
    EXPECT_EQ(step.offload.offloaded, saves.at("offloaded").get<int64_t>());
    EXPECT_EQ(step.offload.copied_before_offload, saves.at("copied_before_offload").get<int64_t>());
    EXPECT_EQ(step.offload.deduplicated, saves.at("kept_deduplicated").get<int64_t>());
    EXPECT_EQ(step.offload.kept_small, saves.at("kept_small").get<int64_t>());
    EXPECT_EQ(step.offload.kept_parameter, saves.at("kept_parameter").get<int64_t>());
    EXPECT_EQ(step.offload.brought_back, saves.at("brought_back").get<int64_t>());
  } else {
    EXPECT_FALSE(step.host.has_value());
  }
}

}  // namespace census::testing
