#!/usr/bin/env python3
"""Census steady-state step oracle, LOSSES: the extended steady oracle's two-step machinery with TRL's loss.

This file imports ``census_oracle_steady_ext.py`` (beside it) and edits nothing in it. Each kind here runs through
its ``run_steady_case_ext`` (AdamW, ``foreach=False``, as the steady oracle's) with the model's forward replaced
as the kind's trainer replaces it, and records the same JSON layout, with ``loss`` naming what ran:

* ``trl-chunked-nll``: TRL's SFT default loss (``SFTConfig.loss_type`` unset), from its sources at
  huggingface/trl f2cd577 (``/opt/trl/trl/trainer/sft_trainer.py``, ``git archive f2cd577
  trl/trainer/sft_trainer.py trl/trainer/utils.py``): ``_patch_chunked_ce_lm_head(model, 256)`` patches the
  model's forward, which runs the backbone (``model.base_model``) and ``_chunked_cross_entropy_loss`` on its last
  hidden state, the head's weight and the labels. The functions run as TRL writes them (their definitions are
  read from the file and executed, not copied), with two answers the fake tensors cannot give themselves:
  ``if n_valid_tensor == 0`` reads 0 (every label is a token), and ``range(0, n_padded, chunk_size)`` reads its
  tensor bound as the valid count rounded up to a whole chunk (every label valid: ``B * (S - 1)``), through the
  step oracle's scalar-read answer, so both reads are counted as any other.
* ``liger-flce``: Liger's fused linear cross-entropy as its model patch runs it (linkedin/Liger-Kernel ead96b6,
  ``/opt/liger/src/liger_kernel``, ``git archive ead96b6 src/liger_kernel``): the model's forward is Liger's
  ``lce_forward`` on its training path (the backbone, ``hidden_states[:, slice(-0, None), :]``,
  ``lce_maybe_trainable_lm_head``), and ``LigerForCausalLMLoss``, ``fixed_fused_linear_cross_entropy``,
  ``liger_fused_linear_cross_entropy``, ``LigerFusedLinearCrossEntropyFunction`` and its forward and backward
  run from their source files. Triton does not run here: its two kernels are stood in for by calls that keep
  their contract (``liger_cross_entropy_kernel`` writes the loss slice and the logits' gradient in place,
  ``element_mul_kernel`` scales in place; neither allocates), ``triton.cdiv`` and ``triton.next_power_of_2``
  are the integer functions they are, ``total_n_non_ignore``'s ``.item()`` is a counted scalar read, and the
  backward's ``torch.equal(grad_output, torch.tensor(1.0))`` makes its 0-d tensor as written and is answered
  without a kernel (true for one micro-batch, false for more: the loss's gradient is 1 or 1 / M).
* ``torchtune-chunked`` and ``torchtune-linear``: torchtune's two SFT losses (pytorch/torchtune bd2a0fc,
  ``/opt/torchtune/torchtune/modules/loss``, ``git archive bd2a0fc torchtune/modules/loss``), their classes
  executed from their source files, on the Transformers model as torchtune's recipe drives its own decoder
  (``recipes/full_finetune_single_device.py``'s ``_loss_step``: the model's output goes to the loss, then
  ``del outputs``). The labels are torchtune's, already shifted by its dataset (``_sft.py``: the last of each
  row is ``ignore_index``), so ``B * (S - 1)`` of them are tokens.
  * ``CEWithChunkedOutputLoss`` (8 chunks): the model's forward ends as ``TransformerDecoder.chunked_output``
    does, ``[self.output(chunk) for chunk in h.tensor_split(8, dim=1)]`` with the head for ``self.output``;
    the normed hidden state goes as the forward returns, and the list lives through the loss.
    ``@deprecated`` (a warning on construction) is stood in for by the class itself.
  * ``LinearCrossEntropyLoss`` (8 chunks, ``mask_ignored_tokens=True``): ``set_model_output`` skips the head
    and hands it to the loss; the model's output is the normed hidden state. ``torch.where(cond)`` has a
    data-dependent size the fake tensors cannot give: it is stood in for by what ATen's ``nonzero_numpy``
    makes, an ``(n, cond.dim())`` int64 tensor unbound along dim 1, with ``n`` the token count above.
"""
import ast
import contextlib
import dataclasses
import inspect
import math
import operator
import os
import sys
import types
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_oracle_steady_ext as E  # noqa: E402  pylint: disable=wrong-import-position

torch = E.torch
SD = E.SD
S = E.S

TRL_SOURCE = "/opt/trl/trl/trainer"
TRL_COMMIT = "f2cd577"
CHUNK = 256  # _CHUNKED_LM_HEAD_CHUNK_SIZE

LIGER_SOURCE = "/opt/liger/src/liger_kernel"
LIGER_COMMIT = "ead96b6"

TORCHTUNE_SOURCE = "/opt/torchtune/torchtune/modules/loss"
TORCHTUNE_COMMIT = "bd2a0fc"

# Each loss's three kinds: one sequence, two, and four micro-batches of one; AdamW as the steady oracle's.
LOSS_KINDS: Dict[str, Dict[str, Any]] = {
    f"{shape}_adamw_{loss.replace('-', '_')}_steady": dict(m=m, batch=batch, foreach=False, loss=loss)
    for loss in ("torchtune-chunked", "torchtune-linear", "liger-flce", "trl-chunked-nll")
    for shape, m, batch in (("single", 1, 1), ("single_b2", 1, S.B2), ("accum_m4", S.ACCUM_M, 1))
}
CURRENT: Dict[str, Any] = {}


def _definitions(path: str, names: set) -> Dict[str, ast.stmt]:
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    found: Dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            found[node.name] = node
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets):
            found[node.targets[0].id] = node
    missing = names - set(found)
    if missing:
        raise RuntimeError(f"{path}: no definition of {sorted(missing)}")
    return found


def _trl_range(*bounds: Any) -> range:
    """range() as TRL's loop calls it: a tensor bound is read as a scalar (answered with the padded count)."""
    live = CURRENT["step"].live
    ints = []
    for bound in bounds:
        if isinstance(bound, torch.Tensor):
            live.scalar_value = CURRENT["n_padded"]
            try:
                ints.append(operator.index(bound))
            finally:
                live.scalar_value = 0
        else:
            ints.append(bound)
    return range(*ints)


def load_trl() -> Dict[str, Any]:
    """TRL's chunked loss and its forward patch, executed from its source file."""
    import transformers  # pylint: disable=import-outside-toplevel
    from packaging.version import Version  # pylint: disable=import-outside-toplevel
    from transformers.modeling_outputs import (  # pylint: disable=import-outside-toplevel
        BaseModelOutputWithPast, CausalLMOutputWithPast)
    namespace: Dict[str, Any] = {
        "torch": torch, "F": torch.nn.functional, "transformers": transformers, "Version": Version,
        "inspect": inspect, "types": types, "dataclass": dataclasses.dataclass, "nullcontext": contextlib.nullcontext,
        "BaseModelOutputWithPast": BaseModelOutputWithPast, "CausalLMOutputWithPast": CausalLMOutputWithPast,
        "range": _trl_range, "__name__": "trl.trainer.sft_trainer"}
    utils = _definitions(os.path.join(TRL_SOURCE, "utils.py"), {"maybe_gather_lm_head_ctx"})
    sft = _definitions(os.path.join(TRL_SOURCE, "sft_trainer.py"),
                       {"_CHUNKED_LM_HEAD_CHUNK_SIZE", "_ChunkedCELMHeadOutput", "_chunk",
                        "_chunked_cross_entropy_loss", "_patch_chunked_ce_lm_head"})
    body = [utils["maybe_gather_lm_head_ctx"]] + [sft[n] for n in (
        "_CHUNKED_LM_HEAD_CHUNK_SIZE", "_ChunkedCELMHeadOutput", "_chunk", "_chunked_cross_entropy_loss",
        "_patch_chunked_ce_lm_head")]
    exec(compile(ast.Module(body=body, type_ignores=[]), os.path.join(TRL_SOURCE, "sft_trainer.py"), "exec"),
         namespace)  # pylint: disable=exec-used
    if namespace["_CHUNKED_LM_HEAD_CHUNK_SIZE"] != CHUNK:
        raise RuntimeError("TRL's chunk size changed")
    loss_fn = namespace["_chunked_cross_entropy_loss"]

    def chunked_cross_entropy_loss(hidden_states: Any, lm_head_weight: Any, chunk_size: int, **kwargs: Any) -> Any:
        labels = kwargs.get("labels")
        valid = labels[..., 1:].numel()  # every label a token: the valid count is B * (S - 1)
        CURRENT["n_padded"] = math.ceil(valid / chunk_size) * chunk_size
        CURRENT["chunks"] = math.ceil(valid / chunk_size)
        return loss_fn(hidden_states, lm_head_weight, chunk_size, **kwargs)

    namespace["_chunked_cross_entropy_loss"] = chunked_cross_entropy_loss
    return namespace


class _KernelStandIn:
    """A Triton kernel launched as kernel[grid](...): writes in place, allocates nothing."""

    def __getitem__(self, grid: Any) -> Any:
        del grid
        return lambda *args, **kwargs: None


class _Triton:
    """What the FLCE file reads of triton: two integer helpers."""

    @staticmethod
    def cdiv(a: int, b: int) -> int:
        return (a + b - 1) // b

    @staticmethod
    def next_power_of_2(n: int) -> int:
        return 1 << (n - 1).bit_length() if n > 0 else 1


def _equal(a: Any, b: Any) -> bool:
    """torch.equal on the fakes, answered without a kernel: the loss's gradient is 1 for one micro-batch,
    1 / M for more (CUDA's equal compares on the device and reads one bool; nothing of it is tracked)."""
    del a, b
    return CURRENT.get("m", 1) == 1


class _TorchWithEqual:
    """torch, as Liger's FLCE backward sees it, with torch.equal stood in for."""

    def __getattr__(self, name: str) -> Any:
        return _equal if name == "equal" else getattr(torch, name)


def _source_without_imports(path: str, keep: set) -> Any:
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    body = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))
            and (not keep or getattr(n, "name", None) in keep
                 or (isinstance(n, ast.Assign) and any(getattr(t, "id", None) in keep for t in n.targets)))]
    return compile(ast.Module(body=body, type_ignores=[]), path, "exec")


def load_liger() -> Dict[str, Any]:
    """Liger's FLCE path, executed from its source files with the stand-ins above."""
    import typing  # pylint: disable=import-outside-toplevel
    from packaging.version import Version  # pylint: disable=import-outside-toplevel
    ns: Dict[str, Any] = {
        "torch": torch, "nn": torch.nn, "triton": _Triton, "Version": Version, "inspect": inspect,
        "dataclass": dataclasses.dataclass, "Optional": typing.Optional, "Tuple": typing.Tuple,
        "liger_cross_entropy_kernel": _KernelStandIn(), "element_mul_kernel": _KernelStandIn(),
        "amp_custom_fwd": lambda fn: fn, "amp_custom_bwd": lambda fn: fn, "is_hip": lambda: False,
        "infer_device": lambda: "cuda", "PEFT_AVAILABLE": False, "FullyShardedDataParallel": type("NoFsdp", (), {}),
        "__name__": "liger_kernel_stand_in"}
    flce = dict(ns, torch=_TorchWithEqual())  # the backward's torch.equal; every other name is torch's
    exec(_source_without_imports(os.path.join(LIGER_SOURCE, "ops/fused_linear_cross_entropy.py"), set()), flce)  # pylint: disable=exec-used
    ns["LigerFusedLinearCrossEntropyFunction"] = flce["LigerFusedLinearCrossEntropyFunction"]
    functional = types.SimpleNamespace()
    exec(_source_without_imports(os.path.join(LIGER_SOURCE, "transformers/functional.py"),  # pylint: disable=exec-used
                                 {"CrossEntropyOutput", "liger_fused_linear_cross_entropy"}), ns)
    functional.liger_fused_linear_cross_entropy = ns["liger_fused_linear_cross_entropy"]
    ns["F"] = functional
    exec(_source_without_imports(os.path.join(LIGER_SOURCE, "transformers/model/loss_utils.py"),  # pylint: disable=exec-used
                                 {"unpack_cross_entropy_result", "fixed_fused_linear_cross_entropy",
                                  "LigerForCausalLMLoss"}), ns)
    exec(_source_without_imports(os.path.join(LIGER_SOURCE, "transformers/model/llama.py"),  # pylint: disable=exec-used
                                 {"lce_maybe_trainable_lm_head", "_liger_for_causal_lm_loss"}), ns)
    return ns


def liger_forward(self: Any, input_ids: Any = None, labels: Any = None, **kwargs: Any) -> Any:
    """lce_forward's training path (skip_logits: training with labels), its tensor ops as Liger writes them."""
    liger = CURRENT["liger"]
    outputs = self.model(input_ids=input_ids, **kwargs)
    hidden_states = outputs[0]
    slice_indices = slice(-0, None)
    kept_hidden_states = hidden_states[:, slice_indices, :]
    result = liger["lce_maybe_trainable_lm_head"](self, hidden_states=kept_hidden_states,
                                                  hidden_size=self.config.hidden_size, labels=labels,
                                                  shift_labels=None)
    loss, _, _, _ = liger["unpack_cross_entropy_result"](result)
    return types.SimpleNamespace(loss=loss, logits=None)


class _TorchWithWhere:
    """torch, as torchtune's LinearCrossEntropyLoss sees it, with the one-argument torch.where stood in for."""

    def __getattr__(self, name: str) -> Any:
        return _where if name == "where" else getattr(torch, name)


def _where(condition: Any, *rest: Any) -> Any:
    """torch.where(condition): ATen's nonzero_numpy, nonzero() unbound along dim 1, with the told count."""
    if rest:
        return torch.where(condition, *rest)
    found = torch.empty((CURRENT["tokens"], condition.dim()), dtype=torch.int64, device=condition.device)
    return found.unbind(1)


def load_torchtune() -> Dict[str, Any]:
    """torchtune's SFTLoss and its two SFT losses, executed from their source files."""
    import abc  # pylint: disable=import-outside-toplevel
    import logging  # pylint: disable=import-outside-toplevel
    import typing  # pylint: disable=import-outside-toplevel
    from torch.distributed.tensor import DTensor, Shard  # pylint: disable=import-outside-toplevel
    from torch.distributed.tensor.parallel import ColwiseParallel  # pylint: disable=import-outside-toplevel
    ns: Dict[str, Any] = {
        "torch": torch, "nn": torch.nn, "F": torch.nn.functional, "ABC": abc.ABC, "abstractmethod": abc.abstractmethod,
        "Any": typing.Any, "Optional": typing.Optional, "DTensor": DTensor, "Shard": Shard,
        "ColwiseParallel": ColwiseParallel, "deprecated": lambda msg="": (lambda cls: cls),
        "log": logging.getLogger("torchtune"), "__name__": "torchtune_stand_in"}
    exec(_source_without_imports(os.path.join(TORCHTUNE_SOURCE, "loss_types.py"), {"SFTLoss"}), ns)  # pylint: disable=exec-used
    exec(_source_without_imports(os.path.join(TORCHTUNE_SOURCE, "ce_chunked_output_loss.py"),  # pylint: disable=exec-used
                                 {"CEWithChunkedOutputLoss"}), ns)
    linear = dict(ns, torch=_TorchWithWhere())
    exec(_source_without_imports(os.path.join(TORCHTUNE_SOURCE, "cross_entropy_loss.py"),  # pylint: disable=exec-used
                                 {"LinearCrossEntropyLoss"}), linear)
    ns["LinearCrossEntropyLoss"] = linear["LinearCrossEntropyLoss"]
    return ns


def torchtune_forward(self: Any, input_ids: Any = None, labels: Any = None, **kwargs: Any) -> Any:
    """The recipe's _loss_step on the Transformers model: its output (the head's chunks, or the normed hidden
    state where the loss holds the head), the loss, then ``del outputs``."""
    loss_fn = CURRENT["torchtune_loss"]
    hidden = self.model(input_ids=input_ids, **kwargs)[0]
    if CURRENT["loss"] == "torchtune-chunked":
        # TransformerDecoder.chunked_output; h is the forward's local, gone as it returns
        outputs = [self.lm_head(chunk) for chunk in hidden.tensor_split(loss_fn.num_output_chunks, dim=1)]
        del hidden
    else:
        outputs = hidden
        del hidden
    CURRENT["tokens"] = labels.shape[0] * (labels.shape[1] - 1)
    loss = loss_fn(outputs, labels)
    del outputs
    return types.SimpleNamespace(loss=loss, logits=None)


_build_model = S.build_model


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _build_model(family, config_kwargs, device)
    if CURRENT.get("loss") == "liger-flce":
        CURRENT["liger"] = load_liger()
        model.forward = types.MethodType(liger_forward, model)
        notes["loss"] = f"liger {LIGER_COMMIT} lce_forward's training path and its fused linear cross-entropy"
    if CURRENT.get("loss") in ("torchtune-chunked", "torchtune-linear"):
        tt = load_torchtune()
        if CURRENT["loss"] == "torchtune-chunked":
            CURRENT["torchtune_loss"] = tt["CEWithChunkedOutputLoss"]()
        else:
            CURRENT["torchtune_loss"] = tt["LinearCrossEntropyLoss"]()
            CURRENT["torchtune_loss"].linear_projection = model.lm_head  # set_model_output: model.output
        model.forward = types.MethodType(torchtune_forward, model)
        notes["loss"] = (f"torchtune {TORCHTUNE_COMMIT} {type(CURRENT['torchtune_loss']).__name__}"
                         f"(num_output_chunks={CURRENT['torchtune_loss'].num_output_chunks}) as its recipe's "
                         "_loss_step runs it")
    if CURRENT.get("loss") == "trl-chunked-nll":
        load_trl()["_patch_chunked_ce_lm_head"](model, CHUNK)
        notes["loss"] = (f"trl {TRL_COMMIT} _patch_chunked_ce_lm_head(model, {CHUNK}): the backbone, then "
                         "_chunked_cross_entropy_loss over the last hidden state")
    return model, config, notes


S.build_model = build_model
_step_start = S.Step.start


def step_start(self: Any) -> None:
    _step_start(self)
    CURRENT["step"] = self


S.Step.start = step_start
_run_ext = E.run_steady_case_ext


def run_steady_case_loss(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    CURRENT.clear()
    CURRENT.update(case)
    result = _run_ext(group, case, sets, kernels)
    if case.get("loss") == "liger-flce":
        result["loss"] = {"name": case.get("loss"), "liger_commit": LIGER_COMMIT}
    elif case.get("loss", "").startswith("torchtune"):
        result["loss"] = {"name": case.get("loss"), "torchtune_commit": TORCHTUNE_COMMIT, "num_output_chunks": 8,
                          "tokens": CURRENT.get("tokens")}
    else:
        result["loss"] = {"name": case.get("loss"), "trl_commit": TRL_COMMIT, "chunk_size": CHUNK,
                          "chunks": CURRENT.get("chunks"), "n_padded": CURRENT.get("n_padded")}
    return result


E.run_steady_case_ext = run_steady_case_loss
E.KINDS_EXT = LOSS_KINDS
E.KINDS = dict(SD.KINDS, **LOSS_KINDS)
E.EXT_FAMILIES = {k: E.FAMILIES for k in LOSS_KINDS}
E.EXT_FAMILIES["single_b2_adamw_trl_chunked_nll_steady"] = ("llama", "qwen3_moe")
E.EXT_FAMILIES["accum_m4_adamw_trl_chunked_nll_steady"] = ("llama", "qwen3_moe")
E.EXT_FAMILIES["single_adamw_liger_flce_steady"] = ("llama", "qwen3", "qwen3_moe", "mixtral", "gemma3", "gpt_oss", "qwen3_next")
E.EXT_FAMILIES["single_b2_adamw_liger_flce_steady"] = ("llama", "qwen3_moe")
E.EXT_FAMILIES["accum_m4_adamw_liger_flce_steady"] = ("llama", "qwen3_moe")
for _k in LOSS_KINDS:
    if "torchtune" in _k and "single_adamw" not in _k:
        E.EXT_FAMILIES[_k] = ("llama", "qwen3_moe")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_loss"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(LOSS_KINDS)]
    sys.exit(E.main(argv))
