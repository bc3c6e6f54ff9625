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

LOSS_KINDS: Dict[str, Dict[str, Any]] = {
    "single_adamw_trl_chunked_nll_steady": dict(m=1, batch=1, foreach=False, loss="trl-chunked-nll"),
    "single_b2_adamw_trl_chunked_nll_steady": dict(m=1, batch=S.B2, foreach=False, loss="trl-chunked-nll"),
    "accum_m4_adamw_trl_chunked_nll_steady": dict(m=S.ACCUM_M, batch=1, foreach=False, loss="trl-chunked-nll"),
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


_build_model = S.build_model


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _build_model(family, config_kwargs, device)
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
    result["loss"] = {"name": case.get("loss"), "trl_commit": TRL_COMMIT, "chunk_size": CHUNK,
                      "chunks": CURRENT.get("chunks"), "n_padded": CURRENT.get("n_padded")}
    return result


E.run_steady_case_ext = run_steady_case_loss
E.KINDS_EXT = LOSS_KINDS
E.KINDS = dict(SD.KINDS, **LOSS_KINDS)
E.EXT_FAMILIES = {k: E.FAMILIES for k in LOSS_KINDS}
E.EXT_FAMILIES["single_b2_adamw_trl_chunked_nll_steady"] = ("llama", "qwen3_moe")
E.EXT_FAMILIES["accum_m4_adamw_trl_chunked_nll_steady"] = ("llama", "qwen3_moe")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_loss"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(LOSS_KINDS)]
    sys.exit(E.main(argv))
