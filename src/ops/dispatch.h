// File: dispatch.h
// Dispatch: every op call passes through the current Session, which tells its observers, as PyTorch's
// TorchDispatchMode stack is told. The measurements are observers; ops and modules never know who is
// watching.
//
// A Session is one census's world: its storage ids, the modules running now, the observers listening,
// the dispatch mode (if any) and the arena its objects live in; it gives the census its own graph
// context (graph/context.h), whose saved-tensor hooks at the base are the Session's: observers see each
// save. Constructing one makes it current for the thread; destroying it restores the previous one. Ids
// restart with each Session, so a census gives the same bytes whatever ran before.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/context.h"
#include "graph/saved_variable.h"
#include "ops/op_def.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace census {

// What kind of module is running, as the saved-op attribution reads a module's class: a norm's saves
// are normOp, an activation function's ffAct. kDeltaRule is no module but a linear attention's gated
// delta rule while it runs, under its attention's path: its saves are linrec.
enum class ModuleKind : uint8_t { kOther, kNorm, kActivation, kDeltaRule };

struct ModuleFrame {
  std::string_view path;  // "self_attn.q_proj"; empty for the decoder layer itself
  ModuleKind kind;
};

// What the dispatch mode made of an op call: PyTorch's CheckpointPolicy, as a selective checkpoint's
// mode decides it for each op of its region.
enum class ModeDecision : uint8_t {
  kNone,       // no mode, or a call the mode was not asked about (internal::dispatch)
  kSave,       // a region's forward keeps the outputs for the backward
  kRecompute,  // a region's forward leaves the op to the backward to run again
  kRerun,      // the backward's recompute runs the op again
  kAnswered,   // the mode answered the outputs (from its cache): the op does not run
};

struct OpCall {
  const OpDef& def;
  std::span<const Tensor> inputs;   // the tensor arguments, in schema order
  std::span<const Tensor> outputs;  // the returned tensors
  ModeDecision decision = ModeDecision::kNone;
};

// A dispatch mode, as PyTorch's TorchDispatchMode sees each op before it runs: it may answer the op's
// outputs instead of running it. A selective checkpoint's region is one (autograd/checkpoint.h).
class DispatchMode {
 public:
  virtual ~DispatchMode() = default;
  // Asked before an op with outputs runs (internal::run_op): kAnswered once it has filled `outputs`
  // (then nothing runs: no allocation, no dispatch), else the decision the call carries.
  virtual ModeDecision decide(const OpDef& def, std::span<const Tensor> inputs, std::span<Tensor> outputs) = 0;
  // Told of every call that ran, after the observers.
  virtual void ran(const OpCall& call) = 0;
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

class Session : public StorageListener, public SavedTensorHooks {
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

  const std::vector<ModuleFrame>& modules() const { return modules_; }

  // The dispatch mode in force, if any; setting one returns the one it replaces.
  DispatchMode* mode() const { return mode_; }
  DispatchMode* set_mode(DispatchMode* mode) {
    DispatchMode* previous = mode_;
    mode_ = mode;
    return previous;
  }
  const OpDef* last_op() const { return last_op_; }

  // Called by ops and modules.
  void dispatch(const OpCall& call);
  void notify_save(const Tensor& tensor);
  void notify_parameter_grad(const Tensor& grad);
  void enter_module(ModuleFrame frame);
  void leave_module();

  void on_free(const Storage& storage) override;
  // The base saved-tensor hook: observers see the save, the variable keeps the tensor.
  Packed pack(const Tensor& tensor, Ref<SavedTensorHooks>& owner, int64_t& slot) override;

 private:
  std::vector<Observer*> observers_;  // all, in the order added
  std::vector<Observer*> op_observers_;
  std::vector<Observer*> free_observers_;
  std::vector<Observer*> save_observers_;
  std::vector<ModuleFrame> modules_;
  const OpDef* last_op_ = nullptr;
  int64_t next_storage_id_ = 0;
  DispatchMode* mode_ = nullptr;
  Session* previous_ = nullptr;
  Arena arena_;  // the census's tensors, storages and nodes live here (tensor/arena.h)
  GraphScope graph_{this};
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
