#!/usr/bin/env python3
"""Census parallel oracle, TORCHTUNE'S CHUNKED LOSS: one rank of an FSDP2 step whose loss is torchtune's.

This file imports the parallel oracle (``census_oracle_parallel.py`` of the shared oracle's ``step/parallel``,
from the folder named by ``CENSUS_PARALLEL_ORACLE``, ``/opt/work/parallel`` by default) and
``census_oracle_steady_loss.py`` (beside this file, with the steady-state oracle's step module, which both run on),
and edits nothing in either. Its layouts are the parallel oracle's FSDP2 ones, ``fsdp4`` (fp32 shards under
MixedPrecisionPolicy(bf16, fp32)) and ``fsdp4_bf16`` (``_ttchunked``), FSDP2's units the parallel oracle's (each
decoder layer, then the root: the embedding, final norm and head), with torchtune's ``CEWithChunkedOutputLoss``
(torchtune bd2a0fc, executed from its source file as ``census_oracle_steady_loss.py`` loads it) as torchtune's
distributed recipe runs it around its model:

* the model's forward returns the head's 8 chunks (``TransformerDecoder.chunked_output``), so the root's
  post-forward (its reshard) comes before the loss, and FSDP2 hooks its pre-backward on each chunk (a dataclass
  of the list, which FSDP2 traverses);
* ``_loss_step`` then runs the loss outside the model's forward and drops the outputs (``del outputs``).

Each result's ``parallel`` records the loss; ``census step --fsdp --loss torchtune-chunked`` prices it.
"""
import dataclasses
import os
import sys
import types
from typing import Any, Dict, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
# The steady-state oracle's step module (beside this file) serves both: the parallel oracle's folder comes after.
sys.path.insert(0, os.environ.get("CENSUS_PARALLEL_ORACLE", "/opt/work/parallel"))
sys.path.insert(0, HERE)
import census_oracle_steady_loss as L  # noqa: E402  pylint: disable=wrong-import-position
import census_oracle_parallel as PAR  # noqa: E402  pylint: disable=wrong-import-position

if L.S is not PAR.S:
    raise RuntimeError("the steady loss oracle patched another census_oracle_step than the parallel oracle's")

LOSSES = {"ttchunked": "torchtune-chunked"}
PAR.LAYOUTS = {
    f"{name}_{short}": dict(PAR.LAYOUTS[name], loss=loss, note=PAR.LAYOUTS[name]["note"] + f"; torchtune's {loss} loss")
    for name in ("fsdp4", "fsdp4_bf16") for short, loss in LOSSES.items()}
PAR.STEPS = {name: PAR.STEPS[name.rsplit("_", 1)[0]] for name in PAR.LAYOUTS}
PAR.FAMILIES = ("llama", "qwen3_moe")


@dataclasses.dataclass
class TorchtuneOutputs:
    """What torchtune's model returns under CEWithChunkedOutputLoss: the head's chunks. Its ``loss`` is the
    recipe's ``self._loss_fn(outputs, labels)``, run outside the model's forward."""
    logits: list
    labels: Any

    @property
    def loss(self) -> Any:
        L.CURRENT["tokens"] = self.labels.shape[0] * (self.labels.shape[1] - 1)
        return L.CURRENT["torchtune_loss"](self.logits, self.labels)


def chunked_output_forward(self: Any, input_ids: Any = None, labels: Any = None, **kwargs: Any) -> Any:
    """TransformerDecoder.forward under set_num_output_chunks: the norm's output in chunks through the head."""
    loss_fn = L.CURRENT["torchtune_loss"]
    hidden = self.model(input_ids=input_ids, **kwargs)[0]
    outputs = [self.lm_head(chunk) for chunk in hidden.tensor_split(loss_fn.num_output_chunks, dim=1)]
    del hidden
    return TorchtuneOutputs(logits=outputs, labels=labels)


_build_model = PAR.S.build_model


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _build_model(family, config_kwargs, device)  # the steady loss oracle's: the loss made
    model.forward = types.MethodType(chunked_output_forward, model)
    notes["loss"] += "; the model returns the head's chunks, the loss runs outside its forward"
    return model, config, notes


PAR.S.build_model = build_model
_run_case = PAR.run_case


def run_case(case: Dict[str, Any], reference_dirs: Sequence[str]) -> Dict[str, Any]:
    loss = PAR.LAYOUTS[case["layout"]]["loss"]
    L.CURRENT.clear()
    L.CURRENT["loss"] = loss
    result = _run_case(case, reference_dirs)
    if isinstance(result.get("parallel"), dict):
        result["parallel"]["loss"] = loss
    result["loss"] = {"name": loss, "torchtune_commit": L.TORCHTUNE_COMMIT, "num_output_chunks": 8,
                      "tokens": L.CURRENT.get("tokens")}
    return result


PAR.run_case = run_case
PAR.ORACLE = "census_oracle_parallel_loss"
PAR.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    sys.exit(PAR.main())
