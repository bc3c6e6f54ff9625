// Two runs of one step compared field by field, for the tests that hold a faster way of running it
// to the plain one: the replayed step to the step run op by op (step_replay_test.cpp), the folded step
// to the step run chunk by chunk (step_folded_test.cpp). `same_events`: their event counts and each
// moment's event index too (a replay logs every event the op-by-op run does; a folded loop fewer).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "step/step_census.h"

namespace census::testing {

inline void expect_same_split(const StepSplit& a, const StepSplit& b, const std::string& where) {
  for (size_t c = 0; c < a.bytes.size(); ++c) EXPECT_EQ(a.bytes[c], b.bytes[c]) << where << " category " << c;
}

inline void expect_same_moment(const StepMoment& a, const StepMoment& b, const std::string& where, bool same_events) {
  EXPECT_EQ(a.bytes, b.bytes) << where;
  EXPECT_EQ(a.phase, b.phase) << where;
  EXPECT_EQ(a.op, b.op) << where;
  if (same_events) {
    EXPECT_EQ(a.event, b.event) << where;
  }
  expect_same_split(a.split, b.split, where);
}

inline void expect_same_analysis(const StepAnalysis& a, const StepAnalysis& b, const std::string& where, bool same_events) {
  if (same_events) {
    EXPECT_EQ(a.events, b.events) << where;
  }
  expect_same_moment(a.peak, b.peak, where + " peak", same_events);
  expect_same_moment(a.other_peak, b.other_peak, where + " other_peak", same_events);
  ASSERT_EQ(a.phases.size(), b.phases.size()) << where;
  for (size_t i = 0; i < a.phases.size(); ++i) {
    const std::string phase = where + " " + a.phases[i].name;
    EXPECT_EQ(a.phases[i].name, b.phases[i].name) << phase;
    if (same_events) {
      EXPECT_EQ(a.phases[i].events_from, b.phases[i].events_from) << phase;
    }
    EXPECT_EQ(a.phases[i].live_at_start, b.phases[i].live_at_start) << phase;
    EXPECT_EQ(a.phases[i].live_at_end, b.phases[i].live_at_end) << phase;
    expect_same_moment(a.phases[i].peak, b.phases[i].peak, phase, same_events);
    expect_same_split(a.phases[i].split_at_start, b.phases[i].split_at_start, phase + " start");
    expect_same_split(a.phases[i].split_at_end, b.phases[i].split_at_end, phase + " end");
  }
  ASSERT_EQ(a.peak_other_by_op.size(), b.peak_other_by_op.size()) << where;
  for (size_t i = 0; i < a.peak_other_by_op.size(); ++i) {
    EXPECT_EQ(a.peak_other_by_op[i].label, b.peak_other_by_op[i].label) << where;
    EXPECT_EQ(a.peak_other_by_op[i].bytes, b.peak_other_by_op[i].bytes) << where;
  }
}

// Every figure of two allocator simulations of a step.
inline void expect_same_allocator(const StepAllocatorCensus& a, const StepAllocatorCensus& b, const std::string& where) {
  EXPECT_EQ(a.reserved_peak, b.reserved_peak) << where;
  EXPECT_EQ(a.allocated_peak, b.allocated_peak) << where;
  EXPECT_EQ(a.requested_peak, b.requested_peak) << where;
  EXPECT_EQ(a.largest_inactive_split, b.largest_inactive_split) << where;
  EXPECT_EQ(a.num_alloc_retries, b.num_alloc_retries) << where;
  EXPECT_EQ(a.segments_peak, b.segments_peak) << where;
  EXPECT_EQ(a.device_allocs, b.device_allocs) << where;
  ASSERT_EQ(a.phases.size(), b.phases.size()) << where;
  for (size_t i = 0; i < a.phases.size(); ++i) {
    EXPECT_EQ(a.phases[i].name, b.phases[i].name) << where;
    EXPECT_EQ(a.phases[i].reserved_peak, b.phases[i].reserved_peak) << where << " " << a.phases[i].name;
    EXPECT_EQ(a.phases[i].allocated_peak, b.phases[i].allocated_peak) << where << " " << a.phases[i].name;
    EXPECT_EQ(a.phases[i].reserved_at_end, b.phases[i].reserved_at_end) << where << " " << a.phases[i].name;
  }
}

// Everything both steps report but the passes each replayed.
inline void expect_same_step_census(const StepCensus& a, const StepCensus& b, const std::string& where, bool same_events) {
  EXPECT_EQ(a.schedule, b.schedule) << where;
  EXPECT_EQ(a.parameter_count, b.parameter_count) << where;
  EXPECT_EQ(a.parameter_bytes, b.parameter_bytes) << where;
  EXPECT_EQ(a.buffer_bytes, b.buffer_bytes) << where;
  EXPECT_EQ(a.optimizer_state_bytes, b.optimizer_state_bytes) << where;
  EXPECT_EQ(a.gradient_bytes_after_first_backward, b.gradient_bytes_after_first_backward) << where;
  EXPECT_EQ(a.gradient_bytes_after_last_backward, b.gradient_bytes_after_last_backward) << where;
  EXPECT_EQ(a.gradient_bytes_at_end, b.gradient_bytes_at_end) << where;
  expect_same_moment(a.forward_peak, b.forward_peak, where + " forward_peak", same_events);
  expect_same_moment(a.backward_peak, b.backward_peak, where + " backward_peak", same_events);
  expect_same_moment(a.optimizer_step_peak, b.optimizer_step_peak, where + " optimizer_step_peak", same_events);
  expect_same_analysis(a.analysis, b.analysis, where, same_events);
  expect_same_analysis(a.composed, b.composed, where + " composed", same_events);
  expect_same_moment(a.composed_peak, b.composed_peak, where + " composed_peak", same_events);
}

}  // namespace census::testing
