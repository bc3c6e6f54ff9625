#!/usr/bin/env python3
"""Census parallel oracle, FP8: one rank's step with torchao's Float8Linear, as torchtitan converts a model.

This file imports the parallel oracle (``census_oracle_parallel.py`` of the shared oracle's ``step/parallel``, from
the folder named by ``CENSUS_PARALLEL_ORACLE``, ``/opt/work/parallel`` by default) and edits nothing in it. Its
tracker wraps the FakeTensorMode's own dispatch, so it sees the ops torchao's ``Float8TrainingTensor`` runs on its
fp8 data and scales (the casts, the ``contiguous`` copies, ``_scaled_mm``), which a dispatch mode above the
subclass would not.

torchao is read from its sources (``/opt/torchao``: ``git archive 36027d82d torchao`` of pytorch/ao; it imports
without its compiled extension, and ``torch._scaled_mm`` has a meta kernel). After the model is built, and before
any parallelism, ``convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe),
module_filter_fn=...)`` swaps each ``nn.Linear`` for a ``Float8Linear``, with torchtitan's filter (pytorch/torchtitan
``cca3be50f``, ``components/quantization/utils.py module_filter_fn``, its ``filter_fqns`` empty by default): a Linear
whose weight's dimensions are both multiples of 16. Recipes: ``tensorwise``, ``rowwise``, ``rowwise_with_gw_hp``.

Layouts: the parallel oracle's ``control`` (world 1, bf16 parameters) and ``fsdp4`` (FSDP2 over 4 ranks, fp32 shards
under MixedPrecisionPolicy(bf16, fp32), the all-gather bf16), each with a recipe (``control_fp8_rowwise``, ...).
Each with every decoder layer checkpointed too (``_ac_full``: Transformers' gradient checkpointing, non-reentrant,
as ``census step --recompute full``), and (``_skip_head``) with ``filter_fqns=["lm_head"]``, as torchtitan's Llama 3 405B
config skips its head (``["output"]``), ``census step --fp8-skip-head``. Each result's ``fp8`` records the recipe, the converted modules and the Linears
the filter left in bf16.
"""
import functools
import os
import sys
from typing import Any, Dict, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("CENSUS_PARALLEL_ORACLE", "/opt/work/parallel"))
import census_oracle_parallel as PAR  # noqa: E402  pylint: disable=wrong-import-position

S = PAR.S
torch = PAR.torch

RECIPES = {"tensorwise": "tensorwise", "rowwise": "rowwise", "rowwise_gw_hp": "rowwise_with_gw_hp"}
BASE = dict(PAR.LAYOUTS)
PAR.LAYOUTS = {
    f"{base}_fp8_{short}{ac}": dict(BASE[base], fp8=recipe, ac_full=bool(ac),
                                    note=BASE[base]["note"] + f"; torchao Float8Linear, recipe {recipe}" +
                                    ("; every decoder layer checkpointed (use_reentrant=False)" if ac else ""))
    for base in ("control", "fsdp4") for short, recipe in RECIPES.items() for ac in ("", "_ac_full")}
# torchtitan's Llama 3 405B config sets filter_fqns = ["output"], its name for the head: Transformers' lm_head
PAR.LAYOUTS.update({
    f"{base}_fp8_{short}_skip_head": dict(BASE[base], fp8=recipe, ac_full=False, filter_fqns=["lm_head"],
                                         note=BASE[base]["note"] + f"; torchao Float8Linear, recipe {recipe}, "
                                         "filter_fqns=['lm_head']")
    for base in ("control", "fsdp4") for short, recipe in RECIPES.items()})
PAR.STEPS = {name: PAR.STEPS[name.split("_fp8_")[0]] for name in PAR.LAYOUTS}
PAR.FAMILIES = ("llama", "qwen3")
CURRENT: Dict[str, Any] = {}


def module_filter_fn(mod: Any, fqn: str) -> bool:
    """torchtitan's: an nn.Linear whose weight's dimensions are both multiples of 16, and whose name contains none
    of the case's filter_fqns (empty by default)."""
    if not isinstance(mod, torch.nn.Linear):
        return False
    dims_multiples_of_16 = mod.weight.shape[0] % 16 == 0 and mod.weight.shape[1] % 16 == 0
    return dims_multiples_of_16 and not any(f in fqn for f in CURRENT.get("filter_fqns", []))


_build_model = S.build_model


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _build_model(family, config_kwargs, device)
    recipe = CURRENT.get("fp8")
    if recipe:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # pylint: disable=C0415
        linears = {name: tuple(m.weight.shape) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe),
                                   module_filter_fn=module_filter_fn)
        converted = sorted(name for name, m in model.named_modules() if type(m).__name__ == "Float8Linear")
        CURRENT["record"] = {"recipe": recipe, "torchao": "36027d82d", "converted": converted,
                             "left_bf16": sorted(set(linears) - set(converted))}
        notes["fp8"] = f"convert_to_float8_training(recipe {recipe}): {len(converted)} of {len(linears)} Linears"
    if CURRENT.get("ac_full"):  # Transformers' gradient checkpointing, non-reentrant, on every decoder layer
        for layer in model.model.layers:
            layer.gradient_checkpointing = True
            layer._gradient_checkpointing_func = functools.partial(  # pylint: disable=protected-access
                torch.utils.checkpoint.checkpoint, use_reentrant=False)
        notes["activation_checkpointing"] = (
            "every decoder layer: gradient_checkpointing = True, _gradient_checkpointing_func = "
            "functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)")
    return model, config, notes


S.build_model = build_model
_run_case = PAR.run_case


def run_case(case: Dict[str, Any], reference_dirs: Sequence[str]) -> Dict[str, Any]:
    CURRENT.clear()
    CURRENT["fp8"] = PAR.LAYOUTS[case["layout"]]["fp8"]
    CURRENT["ac_full"] = PAR.LAYOUTS[case["layout"]]["ac_full"]
    CURRENT["filter_fqns"] = PAR.LAYOUTS[case["layout"]].get("filter_fqns", [])
    try:
        result = _run_case(case, reference_dirs)
        result["fp8"] = CURRENT.get("record")
        result["parallel"]["fp8"] = CURRENT["fp8"]
        result["parallel"]["recompute"] = "full" if CURRENT["ac_full"] else "none"
        result["parallel"]["fp8_filter_fqns"] = CURRENT["filter_fqns"]
        return result
    finally:
        CURRENT.clear()


PAR.run_case = run_case
PAR.ORACLE = "census_oracle_parallel_fp8"
PAR.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    sys.exit(PAR.main())
