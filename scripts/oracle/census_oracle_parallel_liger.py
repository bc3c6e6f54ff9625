#!/usr/bin/env python3
"""Census parallel oracle, LIGER'S KERNELS: one rank of an FSDP2 step with Liger's patch on the model.

This file imports the parallel oracle (``census_oracle_parallel.py`` of the shared oracle's ``step/parallel``, with
its ``census_oracle_step.py`` and ``census_oracle_torch2.py``, from the folder named by ``CENSUS_PARALLEL_ORACLE``,
``/opt/work/parallel`` by default) and ``census_oracle_liger_patch.py`` (beside this file), and edits nothing in
either. Its layouts are the parallel oracle's FSDP2 ones, ``fsdp4`` (fp32 shards under MixedPrecisionPolicy(bf16,
fp32)) and ``fsdp4_bf16``, with Liger's patch applied to the model as Transformers' Trainer and TRL apply it (the
kernels; the loss Transformers' own, as ``--liger --loss hf``), after the model is built and before
``fully_shard``, as the Trainer patches the model it then hands to accelerate. Each step is the parallel oracle's:
one micro-batch without an optimizer, and four with AdamW's first step. Each result's ``liger`` records the patch.
"""
import os
import sys
from typing import Any, Dict, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("CENSUS_PARALLEL_ORACLE", "/opt/work/parallel"))
import census_oracle_parallel as PAR  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, HERE)
import census_oracle_liger_patch as P  # noqa: E402  pylint: disable=wrong-import-position

S = PAR.S

PAR.LAYOUTS = {
    f"{name}_liger": dict(PAR.LAYOUTS[name], liger=True, note=PAR.LAYOUTS[name]["note"] + "; Liger's patch on the model")
    for name in ("fsdp4", "fsdp4_bf16")}
PAR.STEPS = {name: PAR.STEPS[name[:-len("_liger")]] for name in PAR.LAYOUTS}
PAR.FAMILIES = ("llama", "qwen3", "gemma2")

_build_model = S.build_model


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _build_model(family, config_kwargs, device)
    notes["liger_kernels"] = P.apply(model, family) + "; Transformers' own loss"
    return model, config, notes


S.build_model = build_model
_run_case = PAR.run_case


def run_case(case: Dict[str, Any], reference_dirs: Sequence[str]) -> Dict[str, Any]:
    with P.case():
        result = _run_case(case, reference_dirs)
        result["liger"] = dict(P.record(), kernels=["rms_norm", "swiglu", "rope"], fused_linear_cross_entropy=False)
        return result


PAR.run_case = run_case
PAR.ORACLE = "census_oracle_parallel_liger"
PAR.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    sys.exit(PAR.main())
