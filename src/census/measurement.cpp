#include "census/measurement.h"

#include "autograd/engine.h"
#include "ops/ops.h"

namespace census {

Measurement::Measurement(bool attached) {
  if (attached) attach();
}

Measurement::~Measurement() = default;

void Measurement::attach() {
  if (attached_) return;
  session_.add_observer(&live_);
  session_.add_observer(&saved_);
  session_.add_observer(&parameter_grads_);
  attached_ = true;
}

Measured Measurement::run_forward(const std::function<Tensor()>& forward, const std::vector<Tensor>& shared) {
  out_ = forward();
  forward_end_ = live_.event_count();
  StorageSet not_kept;
  not_kept.insert(out_.storage_id());
  // A model without rotary (Nemotron-H) shares no positions: undefined tensors.
  for (const Tensor& tensor : shared)
    if (tensor.defined()) not_kept.insert(tensor.storage_id());

  Measured result;
  result.kept_bytes = live_.live_bytes(not_kept);
  for (const SavedStorage& storage : saved_.storages()) {
    if (!live_.is_live(storage.storage_id)) continue;  // a graph the forward dropped is no backward's
    result.saved_bytes += storage.bytes;
    result.saved.push_back(&storage);
  }
  return result;
}

Measured Measurement::run(const std::function<Tensor()>& forward, const nn::ParameterList& parameters, Tensor grad,
                          const std::vector<Tensor>& shared) {
  Measured result = run_forward(forward, shared);
  const Tensor out = std::move(out_);
  StorageSet excluded;
  excluded.insert(out.storage_id());
  if (grad.defined()) live_.track(grad);
  else grad = ops::ones_like(out);
  run_backward(out, grad);
  for (const Tensor& parameter : parameters)
    if (parameter.impl()->grad) parameter_grads_.ids.insert(parameter.impl()->grad->storage->id);
  result.working_bytes = live_.peak_from(forward_end_, excluded, parameter_grads_.ids).bytes;
  return result;
}

}  // namespace census
