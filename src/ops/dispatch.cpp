#include "ops/dispatch.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace census {
namespace {
thread_local bool g_step_by_step = false;
}  // namespace

StepByStepGuard::StepByStepGuard() : was_(g_step_by_step) { g_step_by_step = true; }
StepByStepGuard::~StepByStepGuard() { g_step_by_step = was_; }

constinit thread_local Session* Session::g_current = nullptr;

void Session::set_fold_alike_iterations(bool fold) { fold_alike_ = fold && !g_step_by_step; }

Session::Session() : previous_(g_current) {
  g_current = this;
  Arena::set_current(&arena_);
}

Session::~Session() {
  assert(g_current == this);
  // The observers have stopped listening: what the cycles free now is no measurement's.
  observers_.clear();
  op_observers_.clear();
  free_observers_.clear();
  save_observers_.clear();
  resize_observers_.clear();
  release_cycles();
  g_current = previous_;
  Arena::set_current(previous_ != nullptr ? &previous_->arena_ : nullptr);
}

void Session::add_observer(Observer* observer) {
  observers_.push_back(observer);
  if (observer->listens(Observer::kOnOp)) op_observers_.push_back(observer);
  if (observer->listens(Observer::kOnFree)) free_observers_.push_back(observer);
  if (observer->listens(Observer::kOnSave)) save_observers_.push_back(observer);
  if (observer->listens(Observer::kOnResize)) resize_observers_.push_back(observer);
}

void Session::remove_observer(Observer* observer) {
  for (std::vector<Observer*>* list : {&observers_, &op_observers_, &free_observers_, &save_observers_, &resize_observers_})
    list->erase(std::remove(list->begin(), list->end(), observer), list->end());
}

Ref<Storage> Session::new_storage(int64_t nbytes, bool is_parameter) {
  Ref<Storage> storage = arena_shared<Storage>(next_storage_id_++, nbytes, is_parameter, this);
  if (op_weight_ != 1) born_in_repeat_.push_back(storage.get());
  return storage;
}

void Session::begin_repeat(int64_t times) {
  assert(op_weight_ == 1 && "repeat scopes do not nest");
  op_weight_ = times;
  born_in_repeat_.clear();
}

void Session::repeat_carries_in(const Tensor& value) {
  carried_in_ = value.defined() ? value.storage().get() : nullptr;
  carried_in_freed_ = false;
}

void Session::repeat_carries_out(const Tensor& value) { carried_out_.emplace_back(value.impl(), value.storage().get()); }

void Session::repeat_leaves(const Tensor& value) { left_.emplace_back(value.impl(), value.storage().get()); }

void Session::end_repeat() {
  const int64_t times = op_weight_;
  op_weight_ = 1;
  // Note [Carried values of alike iterations]: the loop's own values that one at a time stands for.
  std::vector<const Storage*> one_at_a_time;
  if (carried_in_freed_)
    for (const auto& [impl, storage] : carried_out_) one_at_a_time.push_back(storage);
  for (const auto& [impl, storage] : left_)
    if (census::ref_count(impl) == 1 && census::ref_count(storage) == 1) one_at_a_time.push_back(storage);
  carried_in_ = nullptr;
  carried_in_freed_ = false;
  carried_out_.clear();
  left_.clear();
  for (Storage* storage : born_in_repeat_) {
    if (std::find(one_at_a_time.begin(), one_at_a_time.end(), storage) != one_at_a_time.end()) continue;
    const int64_t old_nbytes = storage->nbytes;
    storage->nbytes = old_nbytes * times;
    for (Observer* observer : resize_observers_) observer->on_resize(*storage, old_nbytes);
  }
  born_in_repeat_.clear();
}

void Session::dispatch(const OpCall& call) {
  if (muted_) return;
  last_op_ = &call.def;
  for (Observer* observer : op_observers_) observer->on_op(call);
  if (mode_ != nullptr) mode_->ran(call);
}

SavedTensorHooks::Packed Session::pack(const Tensor& tensor, Ref<SavedTensorHooks>& /*owner*/, int64_t& /*slot*/) {
  notify_save(tensor);
  return Packed::kKept;
}

void Session::notify_save(const Tensor& tensor) {
  for (Observer* observer : save_observers_) observer->on_save(tensor, last_op_);
}

void Session::notify_parameter_grad(const Tensor& grad) {
  for (Observer* observer : observers_) observer->on_parameter_grad(grad);
}

void Session::enter_module(ModuleFrame frame) {
  modules_.push_back(frame);
  for (Observer* observer : observers_) observer->on_module_enter(frame);
}

void Session::leave_module() {
  modules_.pop_back();
  for (Observer* observer : observers_) observer->on_module_leave();
}

void Session::forget_cycle(CycleHolder* holder) {
  // From the back: holders mostly go in the reverse of the order they came (a backward's order).
  const auto found = std::find(cycle_holders_.rbegin(), cycle_holders_.rend(), holder);
  if (found != cycle_holders_.rend()) cycle_holders_.erase(std::next(found).base());
}

void Session::release_cycles() {
  // One at a time: a holder letting go can free others, which forget themselves as they go.
  while (!cycle_holders_.empty()) {
    CycleHolder* holder = cycle_holders_.back();
    cycle_holders_.pop_back();
    holder->release_cycle();
  }
}

void Session::on_free(const Storage& storage) {
  if (&storage == carried_in_) {
    carried_in_ = nullptr;
    carried_in_freed_ = true;
  }
  if (op_weight_ != 1) {
    const auto born = std::find(born_in_repeat_.begin(), born_in_repeat_.end(), &storage);
    if (born != born_in_repeat_.end()) born_in_repeat_.erase(born);
  }
  for (Observer* observer : free_observers_) observer->on_free(storage);
}

Tensor make_tensor(const Dims& sizes, DType dtype, bool requires_grad) {
  auto impl = arena_shared<TensorImpl>();
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->storage = Session::current().new_storage(sizes.product() * element_size(dtype));
  impl->requires_grad = requires_grad;
  return Tensor(std::move(impl));
}

Tensor make_parameter(const Dims& sizes, std::string name, DType dtype) {
  if (const std::optional<DType> uniform = Session::current().parameter_dtype()) dtype = *uniform;
  if (const std::optional<DType> widened = Session::current().bf16_parameter_dtype(); widened && dtype == DType::kBFloat16)
    dtype = *widened;
  auto impl = arena_shared<TensorImpl>();
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->storage = Session::current().new_storage(sizes.product() * element_size(dtype), /*is_parameter=*/true);
  impl->requires_grad = Session::current().parameters_require_grad();
  impl->name = std::move(name);
  return Tensor(std::move(impl));
}

}  // namespace census
