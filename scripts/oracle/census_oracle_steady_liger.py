#!/usr/bin/env python3
"""Census steady-state step oracle, LIGER'S KERNELS: the offloading oracle's machinery with Liger's patch applied.

This file imports ``census_oracle_steady_offload.py`` (beside it, which imports the loss and extended oracles) and
edits nothing in it. Each kind here builds the model as those do, then applies Liger's patch to the model instance
as Transformers' Trainer and TRL do for ``use_liger_kernel=True``, from Liger's sources, through
``census_oracle_liger_patch.py`` (beside it), whose docstring says what runs and what is stood in for. The fused
loss is the loss oracle's ``liger-flce`` (its ``lce_forward`` training path), run where the kind names it
(``_liger_`` kinds without ``_hf``); ``_liger_hf`` kinds keep Transformers' loss, as ``--liger --loss hf`` does.
``_ac_full_reentrant`` kinds checkpoint every layer with ``use_reentrant=True``.
"""
import functools
import os
import sys
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_oracle_steady_offload as OFFL  # noqa: E402  pylint: disable=wrong-import-position
import census_oracle_liger_patch as P  # noqa: E402  pylint: disable=wrong-import-position

E = OFFL.E
S = OFFL.S
torch = E.torch

LIGER_FAMILIES = P.LIGER_FAMILIES

_BASE = dict(foreach=False, liger=True)
LIGER_KINDS: Dict[str, Dict[str, Any]] = {
    # --liger: the kernels and the fused loss
    "single_adamw_liger_steady": dict(_BASE, m=1, batch=1, loss="liger-flce"),
    "single_b2_adamw_liger_steady": dict(_BASE, m=1, batch=S.B2, loss="liger-flce"),
    "accum_m4_adamw_liger_steady": dict(_BASE, m=S.ACCUM_M, batch=1, loss="liger-flce"),
    # --liger --loss hf: the kernels alone
    "single_adamw_liger_hf_steady": dict(_BASE, m=1, batch=1),
    # --liger --recompute full (non-reentrant), and with TRL's activation offloading
    "single_adamw_liger_ac_full_steady": dict(_BASE, m=1, batch=1, loss="liger-flce", ac="full"),
    "single_adamw_liger_ac_full_reentrant_steady": dict(_BASE, m=1, batch=1, loss="liger-flce", ac="full_reentrant"),
    "single_adamw_liger_offload_steady": dict(_BASE, m=1, batch=1, loss="liger-flce", offload=True),
    # --liger --recompute selective: HyperParallel's policy, as the offloading oracle's sac_selective kinds run it
    "single_adamw_liger_sac_selective_steady": dict(_BASE, m=1, batch=1, loss="liger-flce", ac="selective"),
    # --liger --pp 2: the two stages of the extended oracle's 1F1B pipeline, four micro-batches
    "pp2_m4_r0_adamw_liger_steady": dict(_BASE, m=4, batch=1, p=2, r=0, loss="liger-flce"),
    "pp2_m4_r1_adamw_liger_steady": dict(_BASE, m=4, batch=1, p=2, r=1, loss="liger-flce"),
}
CURRENT: Dict[str, Any] = {}


_build_model = S.build_model


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _build_model(family, config_kwargs, device)
    if CURRENT.get("ac") == "full_reentrant":  # the offloading oracle's full checkpointing, reentrant
        for layer in S.backbone(model).layers:
            layer.gradient_checkpointing = True
            layer._gradient_checkpointing_func = functools.partial(  # pylint: disable=protected-access
                torch.utils.checkpoint.checkpoint, use_reentrant=True)
        notes["activation_checkpointing"] = (
            "every decoder layer: gradient_checkpointing = True, _gradient_checkpointing_func = "
            "functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=True)")
    if CURRENT.get("liger"):
        notes["liger_kernels"] = P.apply(model, family) + "; " + (
            "the fused loss: the loss oracle's liger-flce" if CURRENT.get("loss") == "liger-flce" else "Transformers' own loss")
    return model, config, notes


S.build_model = build_model
_run_offload = E.run_steady_case_ext


def run_steady_case_liger(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    CURRENT.clear()
    CURRENT.update(case)
    with P.case():
        result = _run_offload(group, case, sets, kernels)
        result["liger"] = dict(P.record(), kernels=["rms_norm", "swiglu", "rope"],
                               fused_linear_cross_entropy=case.get("loss") == "liger-flce")
        result["liger"]["kernel_launches_both_steps"] = result["liger"].pop("kernel_launches")
    CURRENT.clear()
    return result


E.run_steady_case_ext = run_steady_case_liger
E.KINDS_EXT = LIGER_KINDS
E.KINDS = dict(E.KINDS, **LIGER_KINDS)
E.EXT_FAMILIES = {k: LIGER_FAMILIES for k in LIGER_KINDS}
for _k in ("single_b2_adamw_liger_steady", "accum_m4_adamw_liger_steady", "single_adamw_liger_ac_full_steady",
           "single_adamw_liger_ac_full_reentrant_steady", "single_adamw_liger_offload_steady",
           "single_adamw_liger_sac_selective_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3", "gemma2")
for _k in ("pp2_m4_r0_adamw_liger_steady", "pp2_m4_r1_adamw_liger_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_liger"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(LIGER_KINDS)]
    sys.exit(E.main(argv))
