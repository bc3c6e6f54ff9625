// File: dispatch.h
// Dispatch: every op call passes through the current Session, which tells its observers, as PyTorch's
// TorchDispatchMode stack is told. The measurements are observers; ops and modules never know who is
// watching.
//
// A Session is one census's world: its storage ids, its autograd sequence numbers, its grad mode, the
// modules running now and the observers listening. Constructing one makes it current for the thread;
// destroying it restores the previous one. Ids restart with each Session, so a census gives the same
// bytes whatever ran before.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op_def.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace census {

class CheckpointFrame;

// What kind of module is running, as the saved-op attribution reads a module's class: a norm's saves
// are normOp, an activation function's ffAct. kDeltaRule is no module but a linear attention's gated
// delta rule while it runs, under its attention's path: its saves are linrec.
enum class ModuleKind : uint8_t { kOther, kNorm, kActivation, kDeltaRule };

struct ModuleFrame {
  std::string_view path;  // "self_attn.q_proj"; empty for the decoder layer itself
  ModuleKind kind;
};

struct OpCall {
  const OpDef& def;
  std::span<const Tensor> inputs;   // the tensor arguments, in schema order
  std::span<const Tensor> outputs;  // the returned tensors
};

// Observer: every hook is a no-op by default; a measurement overrides what it needs and names those
// hooks, so that the Session calls only them (a census dispatches hundreds of ops).
class Observer {
 public:
  enum Hook : uint32_t {
    kOnOp = 1, kOnFree = 2, kOnSave = 4, kOnParameterGrad = 8, kOnModule = 16, kAllHooks = 31,
  };
  explicit Observer(uint32_t hooks = kAllHooks) : hooks_(hooks) {}
  virtual ~Observer() = default;
  bool listens(Hook hook) const { return (hooks_ & hook) != 0; }
  virtual void on_op(const OpCall& /*call*/) {}
  virtual void on_free(const Storage& /*storage*/) {}
  // A tensor autograd saves (the saved-tensor pack hook). `by_op` is the op dispatched last.
  virtual void on_save(const Tensor& /*tensor*/, const OpDef* /*by_op*/) {}
  // A gradient handed to a parameter's AccumulateGrad (the parameter's tensor hook).
  virtual void on_parameter_grad(const Tensor& /*grad*/) {}
  virtual void on_module_enter(const ModuleFrame& /*frame*/) {}
  virtual void on_module_leave() {}

 private:
  uint32_t hooks_;
};

class Session : public StorageListener {
 public:
  Session();
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  static Session& current();

  void add_observer(Observer* observer);
  void remove_observer(Observer* observer);

  // A new storage of `nbytes`, freed (and observers told) when its last tensor goes.
  Ref<Storage> new_storage(int64_t nbytes, bool is_parameter = false);
  uint64_t next_sequence_nr() { return next_sequence_nr_++; }

  bool grad_enabled() const { return grad_enabled_; }
  void set_grad_enabled(bool enabled) { grad_enabled_ = enabled; }

  const std::vector<ModuleFrame>& modules() const { return modules_; }

  // The checkpointed region running now (its forward or its recompute), if any.
  CheckpointFrame* checkpoint() const { return checkpoint_; }
  const Ref<CheckpointFrame>& checkpoint_owner() const { return checkpoint_owner_; }
  void set_checkpoint(CheckpointFrame* frame, Ref<CheckpointFrame> owner = {}) {
    checkpoint_ = frame;
    checkpoint_owner_ = std::move(owner);
  }
  const OpDef* last_op() const { return last_op_; }

  // Called by ops and modules.
  void dispatch(const OpCall& call);
  void notify_save(const Tensor& tensor);
  void notify_parameter_grad(const Tensor& grad);
  void enter_module(ModuleFrame frame);
  void leave_module();

  void on_free(const Storage& storage) override;

 private:
  std::vector<Observer*> observers_;  // all, in the order added
  std::vector<Observer*> op_observers_;
  std::vector<Observer*> free_observers_;
  std::vector<Observer*> save_observers_;
  std::vector<ModuleFrame> modules_;
  const OpDef* last_op_ = nullptr;
  int64_t next_storage_id_ = 0;
  uint64_t next_sequence_nr_ = 0;
  bool grad_enabled_ = true;
  Session* previous_ = nullptr;
  CheckpointFrame* checkpoint_ = nullptr;
  Ref<CheckpointFrame> checkpoint_owner_;
  Arena arena_;  // the census's tensors, storages and nodes live here (tensor/arena.h)
};

// Grad mode off for a scope, as torch.no_grad() (and as the engine runs every backward formula).
class NoGradGuard {
 public:
  NoGradGuard() : session_(Session::current()), was_(session_.grad_enabled()) { session_.set_grad_enabled(false); }
  ~NoGradGuard() { session_.set_grad_enabled(was_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  Session& session_;
  bool was_;
};

// A module's forward, for its duration: observers see it enter and leave, as forward pre-hooks and
// forward hooks see a Transformers module.
class ModuleScope {
 public:
  ModuleScope(std::string_view path, ModuleKind kind) { Session::current().enter_module({path, kind}); }
  ~ModuleScope() { Session::current().leave_module(); }
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
};

// Factories for tensors with no producer op: inputs and parameters made before a measurement, which
// observers see only when an op hands them on.
Tensor make_tensor(const Dims& sizes, DType dtype, bool requires_grad = false);
Tensor make_parameter(const Dims& sizes, std::string name, DType dtype = DType::kBFloat16);

}  // namespace census
