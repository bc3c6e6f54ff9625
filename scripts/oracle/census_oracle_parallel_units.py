#!/usr/bin/env python3
"""Census parallel oracle, TORCHTITAN'S FSDP2 UNITS: one rank of an FSDP2 step wrapped as torchtitan v0.2 wraps it.

This file imports the parallel oracle (``census_oracle_parallel.py`` of the shared oracle's ``step/parallel``, with
its ``census_oracle_step.py`` and ``census_oracle_torch2.py``, from the folder named by ``CENSUS_PARALLEL_ORACLE``,
``/opt/work/parallel`` by default) and edits nothing in it. Its layouts are the parallel oracle's FSDP2 ones,
``fsdp4`` (fp32 shards under MixedPrecisionPolicy(bf16, fp32)) and ``fsdp4_bf16``, each model wrapped by
torchtitan v0.2's ``apply_fsdp`` (``torchtitan/models/llama3/infra/parallelize.py`` at 29624e3) with its
``fsdp_reshard_after_forward = "default"`` and no pipeline, on Transformers' model, module for module:

* ``fully_shard(model.model.embed_tokens, reshard_after_forward=True)`` (torchtitan's ``tok_embeddings``);
* ``fully_shard(layer, reshard_after_forward=True)`` for every decoder layer, the last one too;
* ``fully_shard([model.model.norm, model.lm_head], reshard_after_forward=False)`` (torchtitan's ``norm`` and
  ``output``: resharded only under "always");
* ``fully_shard(model)``, the root, which holds no parameter of its own.

The loss is Transformers' own, computed inside the root's forward, as every case of the parallel oracle computes it.
Each result's ``parallel`` records ``fsdp_wrap: "torchtitan"``; ``census step --fsdp-wrap torchtitan`` prices it.
"""
import os
import sys
from typing import Any, Dict, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("CENSUS_PARALLEL_ORACLE", "/opt/work/parallel"))
import census_oracle_parallel as PAR  # noqa: E402  pylint: disable=wrong-import-position

PAR.LAYOUTS = {
    f"{name}_tt": dict(PAR.LAYOUTS[name], note=PAR.LAYOUTS[name]["note"] + "; torchtitan v0.2's FSDP2 units")
    for name in ("fsdp4", "fsdp4_bf16")}
PAR.STEPS = {name: PAR.STEPS[name[:-len("_tt")]] for name in PAR.LAYOUTS}
PAR.FAMILIES = ("llama", "qwen3", "qwen3_moe")


def apply_fsdp(model: Any, dp_mesh: Any, mp: bool) -> Dict[str, Any]:
    import torch  # pylint: disable=import-outside-toplevel
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # pylint: disable=import-outside-toplevel
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mp else \
        MixedPrecisionPolicy()
    if getattr(model.config, "tie_word_embeddings", False):
        raise ValueError("torchtitan's units shard the embedding and the head apart: a tied head cannot be wrapped")
    config = {"mesh": dp_mesh, "mp_policy": policy}
    units = []
    fully_shard(model.model.embed_tokens, **config, reshard_after_forward=True)
    units.append({"module": "model.embed_tokens", "reshard_after_forward": True})
    for i, block in enumerate(model.model.layers):
        fully_shard(block, **config, reshard_after_forward=True)
        units.append({"module": f"model.layers.{i}", "reshard_after_forward": True})
    fully_shard([model.model.norm, model.lm_head], **config, reshard_after_forward=False)
    units.append({"module": "[model.norm, lm_head]", "reshard_after_forward": False})
    fully_shard(model, **config)
    units.append({"module": "<root CausalLM> (no parameter of its own)", "reshard_after_forward": True})
    return {"units": units,
            "mp_policy": {"param_dtype": str(policy.param_dtype), "reduce_dtype": str(policy.reduce_dtype),
                          "output_dtype": str(policy.output_dtype), "cast_forward_inputs": policy.cast_forward_inputs},
            "wrapping": "torchtitan v0.2's apply_fsdp (29624e3), fsdp_reshard_after_forward default, no pipeline: "
                        "fully_shard(embed_tokens), each decoder layer, [norm, lm_head] (not resharded), then the "
                        "root",
            "shard_placement": "Shard(0) of each parameter (FSDP2 default), on the dp mesh"}


PAR.apply_fsdp = apply_fsdp
_run_case = PAR.run_case


def run_case(case: Dict[str, Any], reference_dirs: Sequence[str]) -> Dict[str, Any]:
    result = _run_case(case, reference_dirs)
    if isinstance(result.get("parallel"), dict):
        result["parallel"]["fsdp_wrap"] = "torchtitan"
    return result


PAR.run_case = run_case
PAR.ORACLE = "census_oracle_parallel_units"
PAR.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    sys.exit(PAR.main())
