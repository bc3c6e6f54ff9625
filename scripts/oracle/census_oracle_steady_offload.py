#!/usr/bin/env python3
"""Census steady-state step oracle, OFFLOAD: the steady machinery with TRL's activation offloading.

This file imports ``census_oracle_steady_loss.py`` (beside it, which imports ``census_oracle_steady_ext.py``)
and edits nothing in either. Its kinds run through the loss oracle's ``run_steady_case_loss`` (and so the
extended oracle's ``run_steady_case_ext``: AdamW ``foreach=False``, two steps, step 2 recorded, the same JSON
layout), with TRL's ``OffloadActivations`` around each micro-batch as TRL's ``SFTTrainer`` puts it
(``with self.maybe_activation_offload_context: return super().training_step(...)``: one micro-batch's forward,
loss and backward; the optimizer step outside). The manager is made once per case, after the model is built
and before step 1, by TRL's ``get_act_offloading_ctx_manager(model)`` (so ``model.lm_head`` runs under its
``NoOpManager``); its state (``curr_autograd_node``, ``curr_graph_id``, ...) lives across micro-batches and
steps. It is entered after the oracle marks ``F<i>`` and left before the next mark after ``B<i>`` (``F<i+1>``
or ``optimizer_step``): ``S.Step.mark`` is rebound for that, ``S.Step.start`` to open each step's record.

TRL's source: huggingface/trl f2cd577, ``/opt/trl/trl/models/activation_offloading.py`` (``git archive f2cd577
trl/models/activation_offloading.py``). Its text is read, one expression edited (below), its top-level imports
dropped and the module executed in a namespace that names what they imported; ``OffloadActivations``,
``NoOpManager``, ``_get_unique_tensor_key`` and ``get_act_offloading_ctx_manager`` run as TRL writes them (the
1 KiB threshold, the Parameter and parameter-storage checks, the storage-key dedup, ``.contiguous()`` /
``.clone()`` of non-contiguous or offset views as real fake-tensor ops the tracker counts, the stride-0
branch, the forward stash of 5, ``torch._C._current_autograd_node()``, ``node.register_hook``,
``torch._C._storage_Use_Count``, ``torch._C._current_graph_task_id()`` and the engine's ``queue_callback``,
all real torch on CPU). Only what cannot run on CPU fake tensors is stood in for:

* imports: ``accelerate.logging.get_logger`` is ``logging.getLogger`` (accelerate is not installed);
  ``accelerate.utils.versions.is_torch_version`` compares ``torch.__version__`` with packaging; ``psutil``
  is an object whose ``virtual_memory().percent`` reads 0.0 (the 60 % warning never fires; nothing else
  reads it); ``transformers.is_torch_npu_available`` is ``lambda: False``. TRL's own guarded ``from
  torch.distributed.tensor import DTensor`` runs as written (it imports here; no fake tensor is a DTensor).
* ``torch`` as TRL's module sees it (:class:`_TorchForOffload`, every other name torch's own, as the loss
  oracle's ``_TorchWithWhere``): ``torch.accelerator.current_accelerator().type`` reads ``"cuda"`` (this
  torch reports no accelerator); ``torch.cuda.default_stream()`` / ``torch.cuda.Stream()`` are
  :class:`_Stream` stand-ins whose ``record_event``, ``wait_event``, ``wait_stream`` and ``synchronize`` do
  nothing (counted), ``torch.cuda.stream(s)`` is a null context: there are no streams, every op runs in
  program order, so memory is freed exactly when references drop (a CUDA run can hold a block longer,
  until its stream's work is done: that delay is not modelled).
* ``torch.empty_like(x, pin_memory=..., device="cpu")`` and ``torch.empty(n, dtype=..., pin_memory=...,
  device="cpu")`` (TRL's only two calls, both its pinned host copies) make a :class:`HostCopy`: a Python
  object with the shape, stride, dtype and byte count a host tensor would have, never a tensor, so the
  tracker does not count it as device bytes. Its ``copy_`` does nothing (notes the source's device); its
  ``.to("cuda", non_blocking=True)`` at unpack makes the device tensor with the recorded size and strides
  through ``aten._to_copy.default`` (a meta tensor of that layout, made with the dispatch modes off, copied
  to the fake device with them on: the op a real pinned-host to CUDA ``.to`` dispatches). A tally of live
  host bytes rises at each host copy and falls when the ``HostCopy`` is dropped (TRL drops its tracker entry
  at unpack), per step its peak and the total copied.
* ``tensor.record_stream(...)``: a no-op while a case runs (counted); fake tensors raise on it.
* the device check: TRL's ``activation.device.type not in ["cuda", "xpu", "npu"]`` is edited in the source text
  to ``_accelerator_type_of(activation) not in [...]``, which reads ``"cuda"`` for a fake tensor (the fakes
  are the accelerator's tensors; they sit on the cpu device) and the device type otherwise.
* storage addresses: a fake storage's ``data_ptr()`` is 0 (checked: a warning and 0), which would make
  every saved tensor at offset k and dtype d one key (all but the first deduplicated) and leave
  ``update_model_params`` empty (it keeps non-zero pointers). While a case runs, ``UntypedStorage.data_ptr``
  answers a fake (meta-backed) storage with an address of its own: each live storage, the first time it is
  asked, gets a block of its bytes rounded up to 512 from a bump allocator (never handed out again), so as on
  CUDA live storages' ``[data_ptr, data_ptr + nbytes)`` are disjoint, ``data_ptr + storage_offset`` is one key
  per (storage, offset) and parameters' storages are found; the address goes when the storage goes (its
  ``_cdata``, ``O._address``, may then be reused). Unlike CUDA's caching allocator, a freed address is never
  reused, so a stale key (an original whose clone is stashed, freed within the stash's window) cannot be matched
  by a new storage. Any other storage's ``data_ptr`` is torch's.

Kinds (``OFFLOAD_KINDS``): ``single_adamw_offload_steady``, ``single_b2_adamw_offload_steady``,
``accum_m4_adamw_offload_steady`` (each micro-batch its own enter / exit), ``single_adamw_offload_ac_full_steady``
and, without offloading, ``single_adamw_ac_full_steady`` (every decoder layer's ``gradient_checkpointing = True``
and ``_gradient_checkpointing_func = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)``,
as Transformers' ``gradient_checkpointing_enable`` sets it; the oracle's ``O._checkpoints_on("cpu")`` is already
around the steps), ``single_adamw_trl_chunked_nll_offload_steady`` (the loss oracle's TRL chunked loss, with
offloading), ``single_adamw_liger_flce_offload_steady`` (the loss oracle's Liger fused linear cross-entropy,
``loss="liger-flce"``, with offloading: TRL's manager puts every module whose *name* contains ``"liger"`` under its
NoOpManager, and none does here (the record's ``liger_noop_manager`` lists the matches and counts ``lm_head``'s
forward calls: 0, since Liger's ``lce_forward`` reads ``lm_head.weight`` and never calls the head, so the NoOpManager
hung on it never fires and the fused loss's saved tensors go through the offload hooks)),
``single_adamw_offload_sac_selective_steady`` and, without offloading, ``single_adamw_sac_selective_steady`` (every
decoder layer's ``gradient_checkpointing = True`` and ``_gradient_checkpointing_func`` the step oracle's
``checkpoint_function(True, sets, kernels, notes)``, as its kind ``sac_selective`` sets it: non-reentrant checkpoint
with HyperParallel's selective policy; ``sets`` and ``kernels`` are the worker's, handed to
``run_steady_case_offload`` and kept in ``OFF`` for ``build_model``, since the ext oracle drops them; the notes'
``checkpoint_calls``, ``policies_created`` and ``policy_forward_decisions`` are over both steps). Each result has ``offload``: step 2's counts (host peak and total bytes, packs, offloaded,
deduplicated, kept small / parameter, brought back, served from the forward stash, post-hooks, the ops the
pack and the unpack allocated on the device, the tracker left after each backward) and step 1's under
``step1``, with TRL's commit and settings. See README.md beside this file.

torchtune's variant (``TT_KINDS``, case field ``impl="torchtune"``): ``OffloadActivations``, ``NoOpManager`` and
``get_act_offloading_ctx_manager`` from pytorch/torchtune bd2a0fc, ``/opt/torchtune/torchtune/training/
_activation_offloading.py`` (``git archive bd2a0fc torchtune/training/_activation_offloading.py``), read, one
expression edited, top-level imports dropped and executed in a namespace as TRL's is. It runs as written (the
1 KiB threshold; only ``isinstance(activation, nn.Parameter)`` / ``nn.Buffer`` kept, no parameter-storage check, no
storage-key dedup, no ``.contiguous()`` / ``.clone()``, the forward stash of 5, the node post-hooks, the engine's
``queue_callback``). Stand-ins:

* imports: ``psutil`` as TRL's (``virtual_memory().percent`` 0.0); ``torchao`` a namespace with a
  ``__version__`` (read only if an ``empty_like`` raised NotImplementedError, which none does);
  ``torchao.quantization.NF4Tensor`` and ``torchtune.modules.TiedLinear`` dummy classes (no activation is an
  NF4Tensor; the head is an ``nn.Module``, so the TiedLinear branch is not reached); ``torchtune.utils.get_logger``
  is ``logging.getLogger("torchtune")``; ``contextlib``, ``Union``, ``warn``, ``nn``, ``saved_tensors_hooks`` are
  the real ones.
* ``torch`` as torchtune's module sees it (:class:`_TorchForTorchtune`, every other name torch's own):
  ``torch.accelerator.is_available()`` is True; ``torch.accelerator.current_stream()`` and ``torch.Stream()``
  are :class:`_TTStream` (TRL's :class:`_Stream` plus ``with stream:`` as a null context, counted);
  ``torch.accelerator.current_accelerator()`` reports type ``"cuda"``.
* the device check: ``activation.device.type == torch.accelerator.current_accelerator().type`` is edited in the
  source text to ``_accelerator_type_of(activation) == ...`` (the TRL variant's function: ``"cuda"`` for a fake
  tensor, which sits on the cpu device; the device type otherwise), so both variants treat the fakes alike.
* host copies: ``torch.empty_like(activation, pin_memory=..., device="cpu")`` is a :class:`HostCopy` with the
  size and the strides ``empty_like``'s preserve_format gives (ATen's answer for a meta tensor of the same size
  and strides: a dense non-overlapping view keeps its strides, another strided layout gets dense strides in its
  dimensions' order; numel elements); its ``.to(torch.accelerator.current_accelerator(), non_blocking=True)``
  makes the device tensor of those strides through ``aten._to_copy.default``, as for TRL. ``record_stream`` and
  ``data_ptr`` of fake storages as for TRL (torchtune reads neither address; ``data_ptr`` serves this file's
  detail counts).
* the head: torchtune's manager hangs its NoOpManager on ``model.output`` (its decoder's head). A Transformers
  model's head is ``lm_head``: ``model.output`` is set to that same module (in the instance's ``__dict__``, so the
  module tree and parameters are unchanged) before ``get_act_offloading_ctx_manager(model, True)``, made once per
  case. torchtune-chunked calls the head per chunk inside the model's forward (under the NoOpManager);
  torchtune-linear's loss calls ``model.lm_head`` itself, outside the context (the NoOpManager's push / pop then
  does nothing).
* placement: as torchtune's recipe ``_loss_step`` (recipes/full_finetune_single_device.py): ``with ctx: outputs
  = model(...)``; the loss outside the context; ``del outputs``; ``loss.backward()`` outside too (the oracle's
  backward); the class has no ``__enter__`` / ``__exit__`` of its own, so nothing is cleared at enter or exit
  (:func:`torchtune_recipe_forward` replaces the model's forward; ``S.Step.mark`` only notes the tracker after
  each backward). The plain kind runs the Transformers forward without labels in the context (its logits) and
  ``model.loss_function(logits=..., labels=..., vocab_size=...)`` (ForCausalLMLoss) outside, then drops them;
  loss / m where m > 1, as every kind.

torchtune's kinds: ``single_adamw_torchtune_chunked_offload_torchtune_steady``, ``single_adamw_torchtune_linear_
offload_torchtune_steady`` (llama, qwen3, qwen3_moe, mixtral, deepseek_v3), ``single_adamw_offload_torchtune_steady``
(the model's loss), ``single_adamw_torchtune_chunked_offload_torchtune_ac_full_steady`` and ``accum_m4_adamw_
torchtune_chunked_offload_torchtune_steady`` (llama, qwen3_moe). Their ``offload`` has the TRL record's keys
(``deduplicated``, ``offloaded_cloned``, ``offloaded_made_contiguous`` are 0: torchtune does none of them;
``kept_parameter`` counts its Parameter / Buffer check), ``implementation: "torchtune"``, ``torchtune_commit``, and
``torchtune_detail`` (step 2, step 1 under ``step1``): offloaded views of parameters' storages (a Linear's
``weight.t()``, which TRL keeps), offloaded tensors whose storage this micro-batch had already offloaded (what
TRL's storage key would share), non-contiguous / offset / re-strided host copies, and the tracker at each
forward exit.
"""
import ast
import contextlib
import functools
import logging
import os
import sys
import types
import weakref
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_oracle_steady_loss as L  # noqa: E402  pylint: disable=wrong-import-position

E = L.E
S = L.S
O = E.O
torch = L.torch

TRL_SOURCE = "/opt/trl/trl/models/activation_offloading.py"
TRL_COMMIT = L.TRL_COMMIT  # f2cd577, the loss oracle's
DEVICE_CHECK = 'activation.device.type not in ["cuda", "xpu", "npu"]'
DEVICE_CHECK_EDIT = '_accelerator_type_of(activation) not in ["cuda", "xpu", "npu"]'
ALIGN = 512  # CUDA's caching allocator rounds requests up to 512 bytes

OFFLOAD_KINDS: Dict[str, Dict[str, Any]] = {
    "single_adamw_offload_steady": dict(m=1, batch=1, foreach=False, offload=True),
    "single_b2_adamw_offload_steady": dict(m=1, batch=S.B2, foreach=False, offload=True),
    "accum_m4_adamw_offload_steady": dict(m=S.ACCUM_M, batch=1, foreach=False, offload=True),
    "single_adamw_offload_ac_full_steady": dict(m=1, batch=1, foreach=False, offload=True, ac="full"),
    "single_adamw_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full"),
    "single_adamw_trl_chunked_nll_offload_steady": dict(m=1, batch=1, foreach=False, offload=True,
                                                        loss="trl-chunked-nll"),
    "single_adamw_liger_flce_offload_steady": dict(m=1, batch=1, foreach=False, offload=True, loss="liger-flce"),
    "single_adamw_offload_sac_selective_steady": dict(m=1, batch=1, foreach=False, offload=True, ac="selective"),
    "single_adamw_sac_selective_steady": dict(m=1, batch=1, foreach=False, ac="selective"),
}
OFFLOAD_FAMILIES = ("llama", "qwen3", "qwen3_moe", "gemma3", "mixtral", "gpt_oss", "deepseek_v3")

TT_SOURCE = "/opt/torchtune/torchtune/training/_activation_offloading.py"
TT_COMMIT = "bd2a0fc"  # pytorch/torchtune, the loss oracle's
TT_DEVICE_CHECK = "activation.device.type == torch.accelerator.current_accelerator().type"
TT_DEVICE_CHECK_EDIT = "_accelerator_type_of(activation) == torch.accelerator.current_accelerator().type"
TT = dict(foreach=False, offload=True, impl="torchtune")
TT_KINDS: Dict[str, Dict[str, Any]] = {
    "single_adamw_torchtune_chunked_offload_torchtune_steady": dict(TT, m=1, batch=1, loss="torchtune-chunked"),
    "single_adamw_torchtune_linear_offload_torchtune_steady": dict(TT, m=1, batch=1, loss="torchtune-linear"),
    "single_adamw_offload_torchtune_steady": dict(TT, m=1, batch=1),
    "single_adamw_torchtune_chunked_offload_torchtune_ac_full_steady": dict(TT, m=1, batch=1, ac="full",
                                                                            loss="torchtune-chunked"),
    "accum_m4_adamw_torchtune_chunked_offload_torchtune_steady": dict(TT, m=S.ACCUM_M, batch=1,
                                                                      loss="torchtune-chunked"),
}
TT_FAMILIES = ("llama", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3")
OFF: Dict[str, Any] = {}  # the running case: its manager, TRL's namespace, the step records


# ---------------------------------------------------------------------------
# Stand-ins
# ---------------------------------------------------------------------------

def _counts() -> Dict[str, int]:
    return OFF.setdefault("record", {}).setdefault("calls", {})


def _count(name: str) -> None:
    if "record" in OFF:
        calls = _counts()
        calls[name] = calls.get(name, 0) + 1


class _Event:
    """A CUDA event stand-in: nothing to wait for."""

    def synchronize(self) -> None:
        _count("event.synchronize")


class _Stream:
    """A CUDA stream stand-in: every op runs in program order, so there is nothing to order or wait for."""

    def __init__(self, name: str) -> None:
        self.name = name

    def record_event(self, event: Any = None) -> Any:
        _count(f"{self.name}.record_event")
        return event if event is not None else _Event()

    def wait_event(self, event: Any) -> None:
        del event
        _count(f"{self.name}.wait_event")

    def wait_stream(self, stream: Any) -> None:
        del stream
        _count(f"{self.name}.wait_stream")

    def synchronize(self) -> None:
        _count(f"{self.name}.synchronize")


class _Cuda:
    """torch.cuda as TRL's module reads it: its streams (stand-ins); any other name is torch.cuda's."""

    @staticmethod
    def default_stream(device: Any = None) -> _Stream:
        del device
        return _Stream("s0")

    @staticmethod
    def Stream(*args: Any, **kwargs: Any) -> _Stream:  # pylint: disable=invalid-name
        del args, kwargs
        return _Stream("s1")

    @staticmethod
    def stream(stream: Any) -> Any:
        del stream
        return contextlib.nullcontext()

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cuda, name)


class _Accelerator:
    """torch.accelerator: TRL reads current_accelerator().type for its bookkeeping."""

    @staticmethod
    def current_accelerator(*args: Any, **kwargs: Any) -> Any:
        del args, kwargs
        return types.SimpleNamespace(type="cuda")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.accelerator, name)


class HostCopy:
    """A pinned host tensor stand-in: its layout and bytes; no tensor, so no device bytes are tracked."""

    def __init__(self, shape: Any, stride: Any, dtype: Any, device: Any = None) -> None:
        self.shape = tuple(shape)
        self._stride = tuple(stride)
        self.dtype = dtype
        self.source_device = device
        numel = 1
        for n in self.shape:
            numel *= n
        self.nbytes = numel * dtype.itemsize  # no tensor made: nothing dispatched, nothing tracked
        record = OFF.get("record")
        self._record = record
        if record is not None:
            record["host_copies"] += 1
            record["offloaded_bytes"] += self.nbytes
            OFF["host_live"] = OFF.get("host_live", 0) + self.nbytes
            record["host_peak_bytes"] = max(record["host_peak_bytes"], OFF["host_live"])
            self._counted = True
        else:
            self._counted = False

    def __del__(self) -> None:
        if getattr(self, "_counted", False):
            OFF["host_live"] = OFF.get("host_live", 0) - self.nbytes

    def size(self) -> Any:
        return torch.Size(self.shape)

    def stride(self) -> Any:
        return self._stride

    def copy_(self, src: Any, non_blocking: bool = False) -> "HostCopy":
        del non_blocking
        self.source_device = src.device
        return self

    def to(self, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        """Back to the accelerator: the fake device tensor, through aten._to_copy.default."""
        del device, kwargs
        with torch.utils._python_dispatch._disable_current_modes():  # pylint: disable=protected-access
            template = torch.empty_strided(self.shape, self._stride, dtype=self.dtype, device="meta")
        record = OFF.get("record")
        if record is not None:
            record["brought_back"] += 1
            record["brought_back_bytes"] += self.nbytes
        return template.to(self.source_device or torch.device("cpu"), non_blocking=non_blocking)


def _host(device: Any) -> bool:
    return device is not None and torch.device(device).type == "cpu"


class _TorchForOffload:
    """torch, as TRL's activation_offloading module sees it: streams, accelerator and host copies stood in for."""

    accelerator = _Accelerator()
    cuda = _Cuda()

    @staticmethod
    def empty_like(tensor: Any, *args: Any, device: Any = None, pin_memory: bool = False, **kwargs: Any) -> Any:
        if _host(device) and not args and not kwargs.get("memory_format") and kwargs.get("dtype") is None:
            _count("empty_like(host)")
            return HostCopy(tensor.shape, tensor.stride(), tensor.dtype, tensor.device)
        return torch.empty_like(tensor, *args, device=device, pin_memory=pin_memory, **kwargs)

    @staticmethod
    def empty(*size: Any, dtype: Any = None, device: Any = None, pin_memory: bool = False, **kwargs: Any) -> Any:
        if _host(device) and not kwargs:
            shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
            _count("empty(host)")
            strides, acc = [], 1
            for n in reversed(shape):
                strides.append(acc)
                acc *= n
            return HostCopy(shape, tuple(reversed(strides)), dtype or torch.get_default_dtype())
        return torch.empty(*size, dtype=dtype, device=device, pin_memory=pin_memory, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


def _accelerator_type_of(tensor: Any) -> str:
    """The edited device check: a fake tensor is the accelerator's (it sits on the cpu device)."""
    return "cuda" if O._is_fake(tensor) else tensor.device.type  # pylint: disable=protected-access


class _Psutil:
    """psutil as TRL reads it: virtual_memory().percent (0.0: the 60 % warning does not fire)."""

    @staticmethod
    def virtual_memory() -> Any:
        return types.SimpleNamespace(percent=0.0)


def _is_torch_version(operation: str, version: str) -> bool:
    import operator  # pylint: disable=import-outside-toplevel
    from packaging.version import Version  # pylint: disable=import-outside-toplevel
    ops = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq,
           "!=": operator.ne}
    return ops[operation](Version(Version(torch.__version__).base_version), Version(version))


# -- torchtune's module: its torch.accelerator / torch.Stream API and its host copies -------------------

class _TTStream(_Stream):
    """torch.Stream as torchtune uses it: ``with stream:`` a null context (counted), record_event /
    wait_event / wait_stream no-ops (counted, as _Stream's)."""

    def __enter__(self) -> "_TTStream":
        _count(f"{self.name}.enter")
        return self

    def __exit__(self, *exc: Any) -> bool:
        del exc
        return False


class _TTAccelerator:
    """torch.accelerator as torchtune's module reads it: available, a current stream, current_accelerator()
    whose type is ``"cuda"`` (compared with :func:`_accelerator_type_of` in the edited device check)."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def current_stream(*args: Any, **kwargs: Any) -> _TTStream:
        del args, kwargs
        return _TTStream("s0")

    @staticmethod
    def current_accelerator(*args: Any, **kwargs: Any) -> Any:
        del args, kwargs
        return types.SimpleNamespace(type="cuda")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.accelerator, name)


def _empty_like_strides(tensor: Any) -> Any:
    """The strides ``torch.empty_like(tensor)`` (preserve_format) gives: ATen's own answer, asked of a meta tensor
    of the same size and strides (a dense non-overlapping layout is kept; any other strided one gets dense
    strides in its dimensions' order, ``infer_dense_strides``; always numel elements)."""
    with torch.utils._python_dispatch._disable_current_modes():  # pylint: disable=protected-access
        template = torch.empty_strided(tuple(tensor.shape), tuple(tensor.stride()), dtype=tensor.dtype,
                                       device="meta")
        return tuple(torch.empty_like(template).stride())


class _TorchForTorchtune:
    """torch, as torchtune's _activation_offloading module sees it: accelerator, Stream and host copies stood in."""

    accelerator = _TTAccelerator()

    @staticmethod
    def Stream(*args: Any, **kwargs: Any) -> _TTStream:  # pylint: disable=invalid-name
        del args, kwargs
        return _TTStream("s1")

    @staticmethod
    def empty_like(tensor: Any, *args: Any, device: Any = None, pin_memory: bool = False, **kwargs: Any) -> Any:
        if _host(device) and not args and not kwargs.get("memory_format") and kwargs.get("dtype") is None:
            _count("empty_like(host)")
            strides = _empty_like_strides(tensor)
            detail = OFF.get("detail")
            if detail is not None and strides != tuple(tensor.stride()):
                detail["host_copies_restrided"] += 1  # not dense and non-overlapping (an expand, a strided slice)
            return HostCopy(tensor.shape, strides, tensor.dtype, tensor.device)
        return torch.empty_like(tensor, *args, device=device, pin_memory=pin_memory, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


class NF4Tensor:  # pylint: disable=too-few-public-methods
    """torchao.quantization.NF4Tensor stand-in: no activation here is one (torchao is not installed)."""


class TiedLinear:  # pylint: disable=too-few-public-methods
    """torchtune.modules.TiedLinear stand-in: a Transformers head is an nn.Module, so that branch is not reached."""


# -- storage addresses ------------------------------------------------------

_DATA_PTR = torch.UntypedStorage.data_ptr
_RECORD_STREAM = torch.Tensor.record_stream
ADDRESSES: Dict[int, int] = {}
_NEXT = [0x7F0000000000]


def _forget(cdata: int) -> None:
    ADDRESSES.pop(cdata, None)


def _data_ptr(self: Any) -> int:
    """A fake storage's address: one block per live storage, as a CUDA allocation; any other storage: torch's."""
    if self.device.type != "meta":
        return _DATA_PTR(self)
    cdata = self._cdata  # pylint: disable=protected-access
    address = ADDRESSES.get(cdata)
    if address is None:
        address = ADDRESSES[cdata] = _NEXT[0]
        _NEXT[0] += max(ALIGN, -(-self.nbytes() // ALIGN) * ALIGN)
        weakref.finalize(self, _forget, cdata)
        _count("data_ptr(fake storage)")
    return address


def _record_stream(self: Any, stream: Any) -> None:
    del self, stream
    _count("record_stream")


@contextlib.contextmanager
def _stand_ins() -> Any:
    """data_ptr of fake storages and record_stream, while a case runs."""
    torch.UntypedStorage.data_ptr = _data_ptr
    torch.Tensor.record_stream = _record_stream
    try:
        yield
    finally:
        torch.UntypedStorage.data_ptr = _DATA_PTR
        torch.Tensor.record_stream = _RECORD_STREAM
        ADDRESSES.clear()


# ---------------------------------------------------------------------------
# TRL's module, executed from its source
# ---------------------------------------------------------------------------

def _run_source(path: str, check: str, edit: str, names: Dict[str, Any]) -> Dict[str, Any]:
    """Execute the module at *path*: its one *check* expression edited to *edit*, its top-level imports dropped
    (listed under ``__dropped_imports__``) and the names they imported given by *names*; the rest as written."""
    text = open(path, encoding="utf-8").read()
    if text.count(check) != 1:
        raise RuntimeError(f"{path}: expected one {check!r}")
    tree = ast.parse(text.replace(check, edit), filename=path)
    dropped = [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    body = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    namespace = dict(names, _accelerator_type_of=_accelerator_type_of)
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), namespace)  # pylint: disable=exec-used
    namespace["__dropped_imports__"] = dropped
    return namespace


def load_offloading() -> Dict[str, Any]:
    """TRL's activation_offloading.py: the device check edited, top-level imports named, the rest run as written."""
    import transformers  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    from torch.autograd.graph import saved_tensors_hooks  # pylint: disable=import-outside-toplevel
    return _run_source(TRL_SOURCE, DEVICE_CHECK, DEVICE_CHECK_EDIT, {
        "sys": sys, "psutil": _Psutil(), "torch": _TorchForOffload(), "get_logger": logging.getLogger,
        "is_torch_version": _is_torch_version, "nn": torch.nn, "saved_tensors_hooks": saved_tensors_hooks,
        "is_torch_npu_available": lambda: False, "__name__": "trl.models.activation_offloading"})


def load_torchtune_offloading() -> Dict[str, Any]:
    """torchtune's _activation_offloading.py: the device check edited, top-level imports named, the rest run as
    written (OffloadActivations, NoOpManager, get_act_offloading_ctx_manager)."""
    from torch.autograd.graph import saved_tensors_hooks  # pylint: disable=import-outside-toplevel
    import warnings  # pylint: disable=import-outside-toplevel
    return _run_source(TT_SOURCE, TT_DEVICE_CHECK, TT_DEVICE_CHECK_EDIT, {
        "contextlib": contextlib, "Union": __import__("typing").Union, "warn": warnings.warn, "psutil": _Psutil(),
        "torch": _TorchForTorchtune(), "torchao": types.SimpleNamespace(__version__="0.0.0+stand-in"),
        "nn": torch.nn, "saved_tensors_hooks": saved_tensors_hooks, "NF4Tensor": NF4Tensor,
        "TiedLinear": TiedLinear, "get_logger": lambda level=None: logging.getLogger("torchtune"),
        "__name__": "torchtune.training._activation_offloading"})


def _detail_record() -> Dict[str, Any]:
    """torchtune's variant only: what it offloads that TRL's keeps or shares (beside the step record)."""
    return {"offloaded_parameter_views": 0, "offloaded_parameter_view_bytes": 0, "offloaded_parameter_views_by": {},
            "offloaded_storage_again": 0, "offloaded_storage_again_bytes": 0, "offloaded_at_offset": 0,
            "offloaded_not_contiguous": 0, "host_copies_restrided": 0, "kept_buffer": 0, "kept_other": 0,
            "offloaded_outside_layers": 0, "offloaded_outside_layers_bytes": 0, "exits": []}


def _step_record() -> Dict[str, Any]:
    return {"packs": 0, "offloaded": 0, "deduplicated": 0, "kept_small": 0, "kept_parameter": 0,
            "kept_not_accelerator": 0, "kept_fp8": 0, "offloaded_broadcast": 0, "offloaded_cloned": 0,
            "offloaded_made_contiguous": 0, "host_copies": 0, "offloaded_bytes": 0,
            "host_peak_bytes": OFF.get("host_live", 0),
            "host_bytes_at_start": OFF.get("host_live", 0), "unpacks": 0, "unpacks_offloaded": 0,
            "brought_back": 0, "brought_back_bytes": 0, "served_from_fwd_stash": 0, "post_hooks_registered": 0,
            "post_hooks_fired": 0, "pack_allocations_by_op": {}, "unpack_allocations_by_op": {},
            "deduplicated_by_layer": {}, "tracker_left_after_backward": [], "calls": {}}


def _allocations(step: Any, since: int, into: Dict[str, List[int]]) -> None:
    live = step.live
    for (_, delta), name in zip(live.events[since:], live.names[since:]):
        if delta > 0:
            slot = into.setdefault(name, [0, 0])
            slot[0] += 1
            slot[1] += delta


def make_manager(model: Any) -> Any:
    """TRL's get_act_offloading_ctx_manager(model), its pack / unpack observed (counted), not changed."""
    trl = OFF["trl"]
    ctx = trl["get_act_offloading_ctx_manager"](model)
    OFF["settings"] = {"use_pin_memory": ctx.use_pin_memory, "use_streams": ctx.use_streams,
                       "min_offload_size": ctx.min_tensor_size_bytes, "max_fwd_stash_size": ctx.max_fwd_stash_size,
                       "accelerator_type": ctx.accelerator_type, "param_storages": len(ctx.param_storages),
                       "model_parameters": len(list(model.parameters()))}
    pack, unpack = ctx.pack_hook, ctx.unpack_hook
    for index, layer in enumerate(S.backbone(model).layers):
        layer.register_forward_pre_hook(lambda *_, i=index: OFF.__setitem__("layer", i))
        layer.register_forward_hook(lambda *_: OFF.__setitem__("layer", None))

    def observed_pack(activation: Any) -> Any:
        record, step = OFF["record"], OFF["step"]
        record["packs"] += 1
        num_bytes = activation.element_size() * activation.nelement()
        broadcast = 0 in activation.stride()
        clone = activation.storage_offset() != 0
        contiguous = not activation.is_contiguous()
        events = len(step.live.events)
        tensor_id = pack(activation)
        _allocations(step, events, record["pack_allocations_by_op"])
        entry = ctx.tracker[tensor_id]
        # TRL tracks a storage key for an offloaded tensor (while stashed) and for a deduplicated one, no other
        deduplicated = not entry[1] and tensor_id in ctx._storage_key_by_tensor_id  # pylint: disable=W0212
        if entry[1]:
            record["offloaded"] += 1
            if broadcast:
                record["offloaded_broadcast"] += 1
            elif clone:
                record["offloaded_cloned"] += 1
            elif contiguous:
                record["offloaded_made_contiguous"] += 1
        elif deduplicated:
            record["deduplicated"] += 1
            where = "outside_layers" if OFF.get("layer") is None else f"layer_{OFF['layer']}"
            record["deduplicated_by_layer"][where] = record["deduplicated_by_layer"].get(where, 0) + 1
        elif _accelerator_type_of(activation) not in ("cuda", "xpu", "npu"):
            record["kept_not_accelerator"] += 1
        elif num_bytes < ctx.min_tensor_size_bytes:
            record["kept_small"] += 1
        elif type(activation).__name__ in ("Float8TrainingTensor", "ScaledMMConfig", "LinearMMConfig"):
            record["kept_fp8"] += 1
        else:
            record["kept_parameter"] += 1
        return tensor_id

    ctx.pack_hook, ctx.unpack_hook = observed_pack, _observed_unpack(ctx, unpack)
    return ctx


def _observed_unpack(ctx: Any, unpack: Any) -> Any:
    """The manager's unpack, observed (counted), not changed: TRL's and torchtune's keep the same state names."""

    def observed_unpack(tensor_id: int) -> Any:
        record, step = OFF["record"], OFF["step"]
        record["unpacks"] += 1
        modified = tensor_id in ctx.tracker and ctx.tracker[tensor_id][1]
        in_stash = ctx.use_streams and tensor_id in ctx.fwd_stash
        events = len(step.live.events)
        node = torch._C._current_autograd_node()  # pylint: disable=protected-access
        out = unpack(tensor_id)
        _allocations(step, events, record["unpack_allocations_by_op"])
        if modified:
            record["unpacks_offloaded"] += 1
            record["post_hooks_registered"] += 1
            if in_stash:
                record["served_from_fwd_stash"] += 1
            if node is not None:
                node.register_hook(_fired)
        return out

    return observed_unpack


def make_manager_torchtune(model: Any) -> Any:
    """torchtune's get_act_offloading_ctx_manager(model, True), its pack / unpack observed (counted), not changed.
    ``model.output`` is the head (``model.lm_head``, the same module, put in the instance's __dict__ so the module
    tree and its parameters are unchanged): torchtune's decoder calls its head ``output``, and the manager hangs
    its NoOpManager on it."""
    tt = OFF["tt"]
    object.__setattr__(model, "output", model.lm_head)
    ctx = tt["get_act_offloading_ctx_manager"](model, True)
    OFF["settings"] = {"use_pin_memory": ctx.use_pin_memory, "use_streams": ctx.use_streams,
                       "min_offload_size": ctx.min_tensor_size_bytes, "max_fwd_stash_size": ctx.max_fwd_stash_size,
                       "accelerator_type": "cuda (current_accelerator() stand-in)", "param_storages": None,
                       "model_parameters": len(list(model.parameters())),
                       "output_head": "model.output = model.lm_head (NoOpManager on its forward pre / post hooks)",
                       "output_head_hooks": [len(model.lm_head._forward_pre_hooks),  # pylint: disable=W0212
                                             len(model.lm_head._forward_hooks)]}  # pylint: disable=W0212
    pack, unpack = ctx.pack_hook, ctx.unpack_hook
    named = {}
    for name, q in model.named_parameters():
        named.setdefault(q.untyped_storage().data_ptr(), name)
    OFF["param_ptrs"] = named
    for index, layer in enumerate(S.backbone(model).layers):
        layer.register_forward_pre_hook(lambda *_, i=index: OFF.__setitem__("layer", i))
        layer.register_forward_hook(lambda *_: OFF.__setitem__("layer", None))

    def observed_pack(activation: Any) -> Any:
        record, step, detail = OFF["record"], OFF["step"], OFF["detail"]
        record["packs"] += 1
        num_bytes = activation.element_size() * activation.nelement()
        events = len(step.live.events)
        tensor_id = pack(activation)
        _allocations(step, events, record["pack_allocations_by_op"])
        if ctx.tracker[tensor_id][1]:
            record["offloaded"] += 1
            if 0 in activation.stride():
                record["offloaded_broadcast"] += 1
            ptr = activation.untyped_storage().data_ptr()
            if activation.storage_offset() != 0:
                detail["offloaded_at_offset"] += 1
            if not activation.is_contiguous():
                detail["offloaded_not_contiguous"] += 1
            if ptr in OFF["param_ptrs"]:  # a view of a parameter (a Linear's weight.t()): not a Parameter instance
                detail["offloaded_parameter_views"] += 1
                detail["offloaded_parameter_view_bytes"] += num_bytes
                kind = OFF["param_ptrs"][ptr].split(".")[-2] if "." in OFF["param_ptrs"][ptr] else "?"
                detail["offloaded_parameter_views_by"][kind] = detail["offloaded_parameter_views_by"].get(kind, 0) + 1
            seen = OFF.setdefault("offloaded_storages", set())
            if ptr in seen:  # a storage this micro-batch already offloaded (TRL's storage key would share it)
                detail["offloaded_storage_again"] += 1
                detail["offloaded_storage_again_bytes"] += num_bytes
            seen.add(ptr)
            if OFF.get("layer") is None:
                detail["offloaded_outside_layers"] += 1
                detail["offloaded_outside_layers_bytes"] += num_bytes
        elif _accelerator_type_of(activation) != "cuda":
            record["kept_not_accelerator"] += 1
        elif num_bytes < ctx.min_tensor_size_bytes:
            record["kept_small"] += 1
        elif isinstance(activation, torch.nn.Parameter):
            record["kept_parameter"] += 1
        elif hasattr(torch.nn, "Buffer") and isinstance(activation, torch.nn.Buffer):
            record["kept_parameter"] += 1
            detail["kept_buffer"] += 1
        else:
            detail["kept_other"] += 1
        return tensor_id

    ctx.pack_hook, ctx.unpack_hook = observed_pack, _observed_unpack(ctx, unpack)
    return ctx


def _tracker_state(ctx: Any) -> Dict[str, Any]:
    return {"micro_batch": OFF.get("micro_batch"), "tracker": len(ctx.tracker),
            "offloaded_entries": sum(1 for v in ctx.tracker.values() if v[1]),
            "fwd_stash": len(ctx.fwd_stash), "bwd_tensor_stash": len(ctx.bwd_tensor_stash),
            "bwd_ev_stash": len(ctx.bwd_ev_stash), "storage_keys": len(getattr(ctx, "storage_to_tensor_id", {})),
            "host_live_bytes": OFF.get("host_live", 0),
            "left": [{"shape": list(v[0].shape), "dtype": str(v[0].dtype).replace("torch.", ""), "offloaded": v[1]}
                     for v in list(ctx.tracker.values())[:8]]}


def torchtune_recipe_forward(self: Any, input_ids: Any = None, labels: Any = None, **kwargs: Any) -> Any:
    """torchtune's recipe ``_loss_step`` on the Transformers model: ``with self.activations_handling_ctx: outputs =
    self._model(**batch)``, the loss outside the context, ``del outputs`` (the backward, later, is outside too).
    The model's output as the loss oracle's torchtune kinds make it (the head's 8 chunks; the normed hidden state
    where the loss holds the head); for the plain kind the Transformers forward without labels (its logits), and
    outside the context ``self.loss_function(logits=..., labels=..., vocab_size=...)`` (ForCausalLMLoss) as the
    forward would call it with labels."""
    ctx = OFF["ctx"]
    loss_name = L.CURRENT.get("loss")
    OFF["offloaded_storages"] = set()
    with ctx:
        OFF["inside"] = True
        if loss_name == "torchtune-chunked":
            hidden = self.model(input_ids=input_ids, **kwargs)[0]
            n = L.CURRENT["torchtune_loss"].num_output_chunks
            outputs = [self.lm_head(chunk) for chunk in hidden.tensor_split(n, dim=1)]  # TransformerDecoder.chunked_output
            del hidden
        elif loss_name == "torchtune-linear":
            outputs = self.model(input_ids=input_ids, **kwargs)[0]  # set_model_output: the head is the loss's
        else:
            outputs = type(self).forward(self, input_ids=input_ids, **kwargs)  # no labels: the logits
    OFF["inside"] = False
    OFF["detail"]["exits"].append(dict(_tracker_state(ctx), where="forward exit"))
    if loss_name in ("torchtune-chunked", "torchtune-linear"):
        L.CURRENT["tokens"] = labels.shape[0] * (labels.shape[1] - 1)
        loss = L.CURRENT["torchtune_loss"](outputs, labels)
    else:
        loss = self.loss_function(logits=outputs.logits, labels=labels, vocab_size=self.config.vocab_size)
        if getattr(outputs, "aux_loss", None) is not None:  # output_router_logits (off in these configs)
            loss = loss + self.router_aux_loss_coef * outputs.aux_loss.to(loss.device)
    del outputs
    return types.SimpleNamespace(loss=loss, logits=None)


def _fired(outputs: Any, inputs: Any) -> None:
    """Registered after TRL's own post-hook on the same node: counts that the node's post-hooks ran."""
    del outputs, inputs
    if "record" in OFF:
        OFF["record"]["post_hooks_fired"] += 1


# ---------------------------------------------------------------------------
# Hooks rebound on the oracle (nothing in it edited)
# ---------------------------------------------------------------------------

_build_model = S.build_model  # the loss oracle's (TRL's chunked loss where the kind asks)


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _build_model(family, config_kwargs, device)
    case = OFF.get("case") or {}
    if case.get("ac") in ("full", "selective"):
        from transformers.modeling_layers import GradientCheckpointingLayer  # pylint: disable=C0415
        layers = S.backbone(model).layers
        plain = [type(layer).__name__ for layer in layers if not isinstance(layer, GradientCheckpointingLayer)]
        if plain:
            raise TypeError(f"decoder layers {plain} are not GradientCheckpointingLayer: no checkpoint hook")
        if case["ac"] == "full":
            fn = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)
        else:  # the step oracle's sac_selective: its checkpoint_function, HyperParallel's policy on its op sets
            OFF["sac_notes"] = {}
            fn = S.checkpoint_function(True, OFF["sets"], OFF["kernels"], OFF["sac_notes"])
        for layer in layers:
            layer.gradient_checkpointing = True
            layer._gradient_checkpointing_func = fn  # pylint: disable=protected-access
        if case["ac"] == "full":
            notes["activation_checkpointing"] = (
                f"every decoder layer ({len(layers)}): gradient_checkpointing = True, _gradient_checkpointing_func = "
                "functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)")
        else:
            notes["activation_checkpointing"] = (
                f"every decoder layer ({len(layers)}): gradient_checkpointing = True, _gradient_checkpointing_func = "
                "the step oracle's checkpoint_function(True, sets, kernels, notes) (kind sac_selective: "
                "torch.utils.checkpoint.checkpoint(use_reentrant=False, context_fn=create_selective_checkpoint_"
                "contexts(O.HyperParallelPolicy(sets, kernels)))), sets and kernels the worker's setup's")
    if case.get("offload") and case.get("impl") == "torchtune":
        OFF["ctx"] = make_manager_torchtune(model)
        model.forward = types.MethodType(torchtune_recipe_forward, model)
        notes["activation_offloading"] = (
            f"torchtune {TT_COMMIT} get_act_offloading_ctx_manager(model, True) (OffloadActivations(use_pin_memory="
            "True, use_streams=True, max_fwd_stash_size=5, min_offload_size=1024), made once per case; model.output "
            "= model.lm_head, so the head runs under its NoOpManager), entered as torchtune's recipe _loss_step "
            "does: around the model's forward only; the loss, del outputs and the backward outside it")
    elif case.get("offload"):
        OFF["ctx"] = make_manager(model)
        notes["activation_offloading"] = (
            f"trl {TRL_COMMIT} get_act_offloading_ctx_manager(model) (OffloadActivations(use_pin_memory=True, "
            "use_streams=True, min_offload_size=1024, max_fwd_stash_size=5), lm_head under NoOpManager), "
            "entered around each micro-batch's forward + loss + backward")
        if case.get("loss") == "liger-flce":
            # TRL hangs NoOpManager on every module whose *name* contains "liger", and on lm_head's forward;
            # Liger's lce_forward reads lm_head.weight and never calls lm_head as a module
            names = [name for name, _ in model.named_modules() if "liger" in name.lower()]
            OFF["liger_noop"] = {"module_names_containing_liger": names, "lm_head_forward_calls": 0}
            model.lm_head.register_forward_pre_hook(
                lambda *_: OFF["liger_noop"].__setitem__("lm_head_forward_calls",
                                                         OFF["liger_noop"]["lm_head_forward_calls"] + 1))
    return model, config, notes


S.build_model = build_model
_step_start = S.Step.start  # the loss oracle's
_step_mark = S.Step.mark


def step_start(self: Any) -> None:
    if "ctx" in OFF:
        OFF["step"] = self
        OFF["record"] = _step_record()
        OFF.setdefault("steps", []).append(OFF["record"])
        OFF["detail"] = _detail_record()
        OFF.setdefault("details", []).append(OFF["detail"])
    _step_start(self)


def _leave(step: Any) -> None:
    """The end of a micro-batch's training_step: what TRL's tracker still holds, then __exit__."""
    ctx = OFF["ctx"]
    record = OFF["record"]
    record["tracker_left_after_backward"].append(_tracker_state(ctx))
    events = len(step.live.events)
    ctx.__exit__(None, None, None)
    _allocations(step, events, record.setdefault("exit_allocations_by_op", {}))
    OFF["inside"] = False


def step_mark(self: Any, name: str) -> None:
    """Enter TRL's manager after F<i> is marked; leave it before the mark that follows B<i>."""
    if "ctx" not in OFF:
        _step_mark(self, name)
        return
    if OFF.get("impl") == "torchtune":  # the forward enters and leaves it (torchtune_recipe_forward)
        if OFF.get("backward_done"):
            OFF["record"]["tracker_left_after_backward"].append(_tracker_state(OFF["ctx"]))
        _step_mark(self, name)
        OFF["backward_done"] = name.startswith("B")
        if name.startswith("F"):
            OFF["micro_batch"] = name
        return
    if OFF.get("inside") and OFF.get("backward_done"):
        _leave(self)
    _step_mark(self, name)
    OFF["backward_done"] = name.startswith("B")
    if name.startswith("F"):
        if OFF.get("inside"):
            raise RuntimeError(f"{name}: the offload context is still entered")
        OFF["micro_batch"] = name
        OFF["ctx"].__enter__()
        OFF["inside"] = True


S.Step.start = step_start
S.Step.mark = step_mark
_run_loss = E.run_steady_case_ext  # the loss oracle's run_steady_case_loss


def run_steady_case_offload(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    OFF.clear()
    OFF["case"] = case
    OFF["sets"], OFF["kernels"] = sets, kernels  # the worker's SAC op sets (the ext oracle itself drops them)
    torchtune = case.get("impl") == "torchtune"
    try:
        if case.get("offload") and torchtune:
            OFF["impl"] = "torchtune"
            OFF["tt"] = load_torchtune_offloading()
        elif case.get("offload"):
            OFF["trl"] = load_offloading()
        with _stand_ins():
            result = _run_loss(group, case, sets, kernels)
        if not case.get("loss"):
            result.pop("loss", None)  # the model's own loss (Transformers' ForCausalLMLoss), as the steady oracle's
        steps = OFF.get("steps") or []
        if case.get("offload") and torchtune:
            details = OFF.get("details") or []
            record: Dict[str, Any] = {"enabled": True, "implementation": "torchtune", "torchtune_commit": TT_COMMIT,
                      "source": "torchtune/training/_activation_offloading.py",
                      "settings": OFF.get("settings"),
                      "dropped_imports": OFF["tt"].get("__dropped_imports__"),
                      "device_check_edit": [TT_DEVICE_CHECK, TT_DEVICE_CHECK_EDIT],
                      "host_copy_to_device_op": "aten._to_copy.default",
                      "placement": ("recipes/full_finetune_single_device.py _loss_step: with "
                                    "activations_handling_ctx: outputs = model(...); loss outside; del outputs; "
                                    "loss.backward() outside; nothing cleared at enter or exit"),
                      "recorded_step": 2}
            if len(steps) >= 2:
                record.update(steps[1])
                record["step1"] = steps[0]
            elif steps:
                record["step1"] = steps[0]
            if len(details) >= 2:
                record["torchtune_detail"] = dict(details[1], step1=details[0])
            elif details:
                record["torchtune_detail"] = {"step1": details[0]}
            record["host_live_bytes_after_case"] = OFF.get("host_live", 0)
        elif case.get("offload"):
            record = {"enabled": True, "implementation": "trl", "trl_commit": TRL_COMMIT,
                                      "source": "trl/models/activation_offloading.py",
                                      "settings": OFF.get("settings"),
                                      "dropped_imports": OFF["trl"].get("__dropped_imports__"),
                                      "device_check_edit": [DEVICE_CHECK, DEVICE_CHECK_EDIT],
                                      "host_copy_to_device_op": "aten._to_copy.default",
                                      "recorded_step": 2}
            if len(steps) >= 2:
                record.update(steps[1])
                record["step1"] = steps[0]
            elif steps:
                record["step1"] = steps[0]
            record["host_live_bytes_after_case"] = OFF.get("host_live", 0)
        else:
            record = {"enabled": False}
        if case.get("ac"):
            record["activation_checkpointing"] = case["ac"]
        if "liger_noop" in OFF:
            liger = dict(OFF["liger_noop"], note=(
                "TRL's get_act_offloading_ctx_manager puts modules whose name contains 'liger' under its "
                "NoOpManager (none here) and lm_head (a forward hook: Liger's lce_forward never calls lm_head, it "
                "reads lm_head.weight, so the fused loss's saved tensors go through the offload hooks); calls are "
                "over both steps"))
            record["liger_noop_manager"] = liger
        if "sac_notes" in OFF:  # as the step oracle's sac_selective notes them (over both steps here)
            result["notes"].update(OFF["sac_notes"])
            result["notes"]["checkpoint_counts_are_over_both_steps"] = True
        result["offload"] = record
        return result
    except AssertionError as exc:
        # torchtune's "backward pass should have cleared tracker": what its tracker held after each backward, on
        # lines after the first (the error's first line is torchtune's message)
        left = [dict(state, step=number) for number, step_record in enumerate(OFF.get("steps") or [], 1)
                for state in step_record.get("tracker_left_after_backward", [])]
        if not torchtune or not left:
            raise
        raise AssertionError(f"{exc}\ntracker after each backward before it: {left}") from exc
    finally:
        if OFF.get("inside") and not torchtune:  # an error inside a micro-batch: pop TRL's hooks all the same
            OFF["ctx"].__exit__(None, None, None)
        OFF.clear()


E.run_steady_case_ext = run_steady_case_offload
E.KINDS_EXT = dict(OFFLOAD_KINDS, **TT_KINDS)
E.KINDS = dict(E.KINDS, **OFFLOAD_KINDS, **TT_KINDS)
E.EXT_FAMILIES = {k: OFFLOAD_FAMILIES for k in OFFLOAD_KINDS}
E.EXT_FAMILIES.update({k: TT_FAMILIES for k in TT_KINDS})
for _k in ("single_adamw_offload_torchtune_steady", "single_adamw_torchtune_chunked_offload_torchtune_ac_full_steady",
           "accum_m4_adamw_torchtune_chunked_offload_torchtune_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3_moe")
for _k in ("single_b2_adamw_offload_steady", "accum_m4_adamw_offload_steady",
           "single_adamw_trl_chunked_nll_offload_steady", "single_adamw_offload_sac_selective_steady",
           "single_adamw_sac_selective_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3_moe")
E.EXT_FAMILIES["single_adamw_liger_flce_offload_steady"] = ("llama", "qwen3", "qwen3_moe", "mixtral")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_offload"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(E.KINDS_EXT)]
    sys.exit(E.main(argv))
