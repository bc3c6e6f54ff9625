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

#include <cassert>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
    kOnOp = 1, kOnFree = 2, kOnSave = 4, kOnParameterGrad = 8, kOnModule = 16, kOnResize = 32, kAllHooks = 63,
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
  // A live storage now stands for `storage.nbytes` bytes, `old_nbytes` before (Note [Alike iterations]).
  virtual void on_resize(const Storage& /*storage*/, int64_t /*old_nbytes*/) {}
  virtual void on_module_enter(const ModuleFrame& /*frame*/) {}
  virtual void on_module_leave() {}

 private:
  uint32_t hooks_;
};

// Note [Alike iterations] A loop whose iterations are alike (the gated delta rule's chunk loop: the
// same ops on the same shapes, one state carried to the next) need not run every iteration. Where the
// census folds them (fold_alike_iterations, set by the measurements whose observers count weights),
// the loop runs its first iteration, one iteration standing for the `times` alike ones after it (a
// RepeatScope), then its last iterations as they are. Within the scope each op counts `times` over
// (op_weight: FLOPs, bytes moved, launches); when it ends, every storage born inside it and still
// live is resized to `times` its bytes (observers' on_resize), as the alike iterations would have
// left that many. What the backward then holds is the step-by-step run's at every moment up to the
// standing iteration's backward, and no more after it: the backward runs alike iterations from the
// last, each holding less than the one before, so its peak is met among the iterations that run as
// they are (the real iterations between the standing one and the last keep it so, its resized
// storages being freed at once). Tests compare both runs at lengths where both run.
// Something a census object holds that can close a cycle of references, such as a checkpoint's
// recompute closure holding the model's carry, whose tensors' graph holds the checkpoint
// (Note [Cycles no backward breaks]).
class CycleHolder {
 public:
  // Let go of what closes the cycle, and forget the session: no backward will ask for it.
  virtual void release_cycle() = 0;

 protected:
  ~CycleHolder() = default;
};

class Session : public StorageListener, public SavedTensorHooks {
 public:
  Session();
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  static Session& current() {
    assert(g_current != nullptr && "no census Session is running");
    return *g_current;
  }

  void add_observer(Observer* observer);
  void remove_observer(Observer* observer);

  // A new storage of `nbytes`, freed (and observers told) when its last tensor goes.
  Ref<Storage> new_storage(int64_t nbytes, bool is_parameter = false);
  // How many storages the census has made: the id the next one gets (ids only grow).
  int64_t storages_made() const { return next_storage_id_; }

  const std::vector<ModuleFrame>& modules() const { return modules_; }

  // The dispatch mode in force, if any; setting one returns the one it replaces.
  DispatchMode* mode() const { return mode_; }
  DispatchMode* set_mode(DispatchMode* mode) {
    DispatchMode* previous = mode_;
    mode_ = mode;
    return previous;
  }
  const OpDef* last_op() const { return last_op_; }
  // While muted (a recompute past its early stop, autograd/checkpoint.h) calls are dispatched to no
  // observer and no mode, and the storages they make are no observer's.
  void set_muted(bool muted) { muted_ = muted; }

  // Whether loops of alike iterations may be folded (Note [Alike iterations]); off unless a
  // measurement that counts weights asks.
  // A StepByStepGuard of the thread keeps them all unfolded (the oracle of the folded run).
  bool folds_alike_iterations() const { return fold_alike_; }
  void set_fold_alike_iterations(bool fold);
  // The dtype every parameter is made in, where one is set: under FSDP2's MixedPrecisionPolicy every
  // parameter a layer reads is all-gathered in param_dtype, whatever dtype its module declares (ERNIE's
  // and Hunyuan's fp32 routers run in bf16 on such a rank). Unset, each parameter keeps its own.
  std::optional<DType> parameter_dtype() const { return parameter_dtype_; }
  void set_parameter_dtype(std::optional<DType> dtype) { parameter_dtype_ = dtype; }
  // Whether a parameter made now requires grad: true, but while an adapted model's frozen base is built
  // (PEFT's _mark_only_adapters_as_trainable sets requires_grad=False on every parameter but the adapters').
  bool parameters_require_grad() const { return parameters_require_grad_; }
  void set_parameters_require_grad(bool require) { parameters_require_grad_ = require; }
  // The dtype a bf16 parameter made now takes instead: fp32 where PEFT's prepare_model_for_kbit_training
  // casts every floating parameter of a quantized model but the packed weights (nn/linear4bit.h).
  std::optional<DType> bf16_parameter_dtype() const { return bf16_parameter_dtype_; }
  void set_bf16_parameter_dtype(std::optional<DType> dtype) { bf16_parameter_dtype_ = dtype; }
  // The dtype the model is built in (torch.get_default_dtype() while its modules are made): a buffer a
  // module makes without naming a dtype takes it. bf16, the model's; fp32 where torchtitan builds the
  // model in fp32 for FSDP2's mixed precision.
  DType default_dtype() const { return default_dtype_; }
  void set_default_dtype(DType dtype) { default_dtype_ = dtype; }
  // How many alike iterations the op running now stands for: 1 outside a RepeatScope.
  int64_t op_weight() const { return op_weight_; }

  // Called by ops and modules.
  void dispatch(const OpCall& call);
  void notify_save(const Tensor& tensor);
  void notify_parameter_grad(const Tensor& grad);
  // A hook every parameter's .grad runs once accumulated (register_post_accumulate_grad_hook on each,
  // autograd/accumulate.h), inside the backward; empty: none.
  using PostAccumulateGradHook = std::function<void(const TensorImpl& parameter)>;
  void set_post_accumulate_grad_hook(PostAccumulateGradHook hook) { post_accumulate_grad_hook_ = std::move(hook); }
  const PostAccumulateGradHook& post_accumulate_grad_hook() const { return post_accumulate_grad_hook_; }
  void enter_module(ModuleFrame frame);
  void leave_module();

  // Note [Cycles no backward breaks] A graph's backward breaks the cycles its checkpoints close: each
  // node it runs drops its saves. A forward that no backward follows leaves them standing. The plan's
  // measurements run such forwards, and so does any census once it ends. In Python the garbage
  // collector frees those cycles; here the holders register with the session, which tells them to let
  // go when it ends, or earlier when a measurement calls release_cycles() and knows no backward will
  // run.
  void hold_cycle(CycleHolder* holder) { cycle_holders_.push_back(holder); }
  void forget_cycle(CycleHolder* holder);
  void release_cycles();

  void on_free(const Storage& storage) override;
  void begin_repeat(int64_t times);
  void end_repeat();
  // The standing iteration's loop variables (RepeatScope's): watched, never held.
  void repeat_carries_in(const Tensor& value);
  void repeat_carries_out(const Tensor& value);
  void repeat_leaves(const Tensor& value);
  // The base saved-tensor hook: observers see the save, the variable keeps the tensor.
  Packed pack(const Tensor& tensor, Ref<SavedTensorHooks>& owner, int64_t& slot) override;

 private:
  static constinit thread_local Session* g_current;  // inline current(): every op asks
  std::vector<Observer*> observers_;  // all, in the order added
  PostAccumulateGradHook post_accumulate_grad_hook_;
  std::vector<Observer*> op_observers_;
  std::vector<Observer*> free_observers_;
  std::vector<Observer*> save_observers_;
  std::vector<Observer*> resize_observers_;
  std::vector<ModuleFrame> modules_;
  const OpDef* last_op_ = nullptr;
  int64_t next_storage_id_ = 0;
  bool fold_alike_ = false;
  std::optional<DType> parameter_dtype_;
  bool parameters_require_grad_ = true;
  std::optional<DType> bf16_parameter_dtype_;
  DType default_dtype_ = DType::kBFloat16;
  bool muted_ = false;
  int64_t op_weight_ = 1;
  std::vector<Storage*> born_in_repeat_;  // live storages born in the RepeatScope running now
  // Note [Carried values of alike iterations]
  const Storage* carried_in_ = nullptr;  // until it is freed
  bool carried_in_freed_ = false;
  std::vector<std::pair<const TensorImpl*, const Storage*>> carried_out_, left_;
  DispatchMode* mode_ = nullptr;
  std::vector<CycleHolder*> cycle_holders_;  // in the order they were made
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

// Note [Carried values of alike iterations]
// A storage born in the standing iteration and live when it ends is resized to the alike iterations'
// bytes: each of them would have left one, kept by the graph's saves or a checkpoint's cache. A value
// the loop keeps in a variable of its own is the exception: the alike iterations leave `times` of them
// only where each was kept by more than that variable. Where nothing saves (no_grad) or a checkpoint's
// forward keeps holders in place of saves, one at a time lives. So the loop names its variables:
//   carries_in(v)    at the iteration's start, the value it carries in (made by the iteration before):
//                    watched, not held
//   carries_out(v)   its new value, carried to the next: resized only where the value carried in is
//                    still live at the end (this iteration's ops kept it: each alike one's successor
//                    keeps it too)
//   leaves(v)        a value a variable outside the loop holds, made anew each iteration: resized only
//                    where something beyond that variable holds it
// tests/census/alike_iterations_test.cpp and tests/step/step_folded_test.cpp hold the folded runs to
// the iteration-by-iteration ones, with the graph kept and in checkpointed layers (the selective
// census, every step recompute mode).
//
// One iteration standing for `times` alike ones (Note [Alike iterations]), for its duration.
class RepeatScope {
 public:
  explicit RepeatScope(int64_t times) : times_(times) {
    if (times_ != 1) Session::current().begin_repeat(times_);
  }
  ~RepeatScope() {
    if (times_ != 1) Session::current().end_repeat();
  }
  void carries_in(const Tensor& value) {
    if (times_ != 1) Session::current().repeat_carries_in(value);
  }
  void carries_out(const Tensor& value) {
    if (times_ != 1) Session::current().repeat_carries_out(value);
  }
  void leaves(const Tensor& value) {
    if (times_ != 1) Session::current().repeat_leaves(value);
  }
  RepeatScope(const RepeatScope&) = delete;
  RepeatScope& operator=(const RepeatScope&) = delete;

 private:
  int64_t times_;
};

// While one lives, no Session of the thread folds alike iterations: every one runs as it is, the
// oracle the folded runs are tested against.
class StepByStepGuard {
 public:
  StepByStepGuard();
  ~StepByStepGuard();
  StepByStepGuard(const StepByStepGuard&) = delete;
  StepByStepGuard& operator=(const StepByStepGuard&) = delete;

 private:
  bool was_;
};

// Factories for tensors with no producer op: inputs and parameters made before a measurement, which
// observers see only when an op hands them on.
Tensor make_tensor(const Dims& sizes, DType dtype, bool requires_grad = false);
Tensor make_parameter(const Dims& sizes, std::string name, DType dtype = DType::kBFloat16);

}  // namespace census
