// File: measurement.h
// Measurement: one census's world and its observers, and the reference's measuring rule, shared by
// the layer, selective and output censuses.
//
//   Measurement m;                        // a Session, with the heap and the pack hook listening
//   ... build the modules, make the input ...
//   m.track(input);                       // counted from the start
//   Measured r = m.run([&] { return forward(input); }, parameters, grad);
//
// `run` counts what the forward saves and keeps, then runs the backward from its output and finds
// the backward's peak (Note [Backward peak] in layer_census.h).
#pragma once

#include <functional>
#include <vector>

#include "census/live_bytes.h"
#include "census/saved_tensors.h"
#include "nn/module.h"
#include "ops/dispatch.h"

namespace census {

struct Measured {
  int64_t saved_bytes = 0;  // saved storages still live once the forward returned
  int64_t kept_bytes = 0;   // every storage live then, the output and the shared tensors left out
  int64_t working_bytes = 0;
  std::vector<const SavedStorage*> saved;  // those storages, in the order first saved
};

class Measurement {
 public:
  // Observers listen from construction, or from attach() where `attached` is false (for what the
  // model computes once, before a layer's census starts).
  explicit Measurement(bool attached = true);
  ~Measurement();
  Measurement(const Measurement&) = delete;
  Measurement& operator=(const Measurement&) = delete;

  void attach();
  // Let loops of alike iterations fold (Note [Alike iterations]): every observer here weighs them.
  void fold_alike_iterations() { session_.set_fold_alike_iterations(true); }
  void track(const Tensor& input) { live_.track(input); }
  void add_observer(Observer* observer) { session_.add_observer(observer); }
  void remove_observer(Observer* observer) { session_.remove_observer(observer); }
  const LiveBytes& live() const { return live_; }
  const SavedTensors& saved() const { return saved_; }

  // Run the forward, then the backward from its output with `grad` (ones_like(output) where
  // undefined, as loss.backward() makes it; else tracked as the backward starts). `shared` tensors
  // are left out of kept_bytes.
  Measured run(const std::function<Tensor()>& forward, const nn::ParameterList& parameters, Tensor grad,
               const std::vector<Tensor>& shared = {});
  // The forward's half of run: saved_bytes, kept_bytes and saved, with no backward (working_bytes
  // stays 0). For a caller that needs only what the forward keeps: the backward is most of the work.
  Measured run_forward(const std::function<Tensor()>& forward, const std::vector<Tensor>& shared = {});

 private:
  Session session_;  // first: every tensor of the census dies before it
  LiveBytes live_;
  SavedTensors saved_;
  ParameterGrads parameter_grads_;
  bool attached_ = false;
  // Of the last forward: its output and the heap's event count when it returned.
  Tensor out_;
  size_t forward_end_ = 0;
};

}  // namespace census
