#!/usr/bin/env python3
"""Census steady-state step oracle, OPTIMIZERS: the extended steady oracle's two-step machinery with other optimizers.

This file imports ``census_oracle_steady_ext.py`` (beside it) and edits nothing in it. Each kind here runs through
its ``run_steady_case_ext`` with the optimizer the kind names built in place of AdamW (``make_optimizer_ext``
is rebound for the case), and records the same JSON layout:

* ``sgd``: ``torch.optim.SGD(params, lr=1e-3, momentum=0.9)`` as ``foreach=False`` (``_single_tensor_sgd``),
  ``foreach=True`` (``_multi_tensor_sgd``) and ``fused=True`` (``_fused_sgd``);
* ``adafactor``: ``torch.optim.Adafactor(params)`` (lr 1e-2, its defaults) as ``foreach=False`` (its default:
  ``_single_tensor_adafactor``) and ``foreach=True`` (``_multi_tensor_adafactor``);
* ``adamw8bit``: bitsandbytes' ``AdamW8bit(params)`` (lr 1e-3, weight decay 1e-2, blocks of 256, parameters
  under 4,096 elements with fp32 states), from its sources (commit 95f9af3), on its fake kernels. Its two
  quantile maps are built at construction, on the host, outside the fake mode (``create_dynamic_map`` reads
  ``.tolist()``); on CUDA the first ``init_state`` copies each to the device (``.to(p.device)``), a 1 KiB
  fp32 [256] each, shared by every parameter. On the CPU fakes that copy is a no-op, so the stand-in makes it:
  at the first ``init_state`` each map is replaced by a fake fp32 [256] on the device, as CUDA's copy is.
"""
import os
import sys
from typing import Any, Dict, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, "/opt/bnb")
import census_oracle_steady_ext as E  # noqa: E402  pylint: disable=wrong-import-position

torch = E.torch
SD = E.SD
S = E.S

OPTIM_KINDS: Dict[str, Dict[str, Any]] = {
    "single_sgd_steady": dict(m=1, batch=1, optimizer="sgd", foreach=False),
    "single_sgd_foreach_steady": dict(m=1, batch=1, optimizer="sgd", foreach=True),
    "single_sgd_fused_steady": dict(m=1, batch=1, optimizer="sgd", fused=True),
    "single_adafactor_steady": dict(m=1, batch=1, optimizer="adafactor", foreach=False),
    "single_adafactor_foreach_steady": dict(m=1, batch=1, optimizer="adafactor", foreach=True),
    "single_adamw8bit_steady": dict(m=1, batch=1, optimizer="adamw8bit"),
    "accum_m4_sgd_foreach_steady": dict(m=S.ACCUM_M, batch=1, optimizer="sgd", foreach=True),
    "accum_m4_adafactor_steady": dict(m=S.ACCUM_M, batch=1, optimizer="adafactor", foreach=False),
}
CURRENT: Dict[str, Any] = {}


class HostStep(int):
    """bitsandbytes' state["step"]: a Python int, no tensor; named for the ext oracle's step_tensor_dtype."""
    dtype = "python int (host)"


def make_optimizer(params: Sequence[Any], foreach: bool, fused: bool) -> Tuple[Any, str]:
    name = CURRENT["optimizer"]
    if name == "sgd":
        if fused:
            return torch.optim.SGD(params, lr=1e-3, momentum=0.9, fused=True), "torch.optim.SGD(lr=1e-3, momentum=0.9, fused=True)"
        return (torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach),
                f"torch.optim.SGD(lr=1e-3, momentum=0.9, foreach={foreach})")
    if name == "adafactor":
        return torch.optim.Adafactor(params, foreach=foreach), f"torch.optim.Adafactor(foreach={foreach})"
    if name == "adamw8bit":
        import bitsandbytes as bnb  # pylint: disable=import-outside-toplevel
        with torch._subclasses.fake_tensor.unset_fake_temporarily():  # pylint: disable=protected-access
            optimizer = bnb.optim.AdamW8bit(params)  # its quantile maps real, on the host
        original = optimizer.init_state

        def init_state(group: Any, p: Any, gindex: int, pindex: int) -> None:
            if p.numel() >= 4096 and not getattr(optimizer, "_maps_on_device", False):
                # CUDA's .to(p.device) of each map at the first 8-bit state: a fake fp32 [256] on the device
                for key in ("dynamic", "udynamic"):
                    optimizer.name2qmap[key] = torch.empty(256, dtype=torch.float32)
                optimizer._maps_on_device = True  # pylint: disable=protected-access
            original(group, p, gindex, pindex)

        optimizer.init_state = init_state
        step = optimizer.step

        def stepped(*args: Any, **kwargs: Any) -> Any:
            out = step(*args, **kwargs)
            for state in optimizer.state.values():  # the ext oracle reads state["step"].dtype
                if "step" in state:
                    state["step"] = HostStep(state["step"])
            return out

        optimizer.step = stepped
        return optimizer, "bitsandbytes.optim.AdamW8bit(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)"
    raise ValueError(name)


def optimizer_config(case: Dict[str, Any]) -> Dict[str, Any]:
    return {"optimizer": case.get("optimizer"), "asked": {k: case.get(k) for k in ("foreach", "fused")},
            "zero_grad": "optimizer.zero_grad(set_to_none=True)"}


_run_ext = E.run_steady_case_ext


def run_steady_case_optim(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    CURRENT.clear()
    CURRENT.update(case)
    return _run_ext(group, case, sets, kernels)


E.make_optimizer_ext = make_optimizer
E.optimizer_config = optimizer_config
E.run_steady_case_ext = run_steady_case_optim
E.KINDS_EXT = OPTIM_KINDS
E.KINDS = dict(SD.KINDS, **OPTIM_KINDS)
E.EXT_FAMILIES = {k: E.FAMILIES for k in OPTIM_KINDS}
E.EXT_FAMILIES["accum_m4_sgd_foreach_steady"] = ("llama", "qwen3_moe")
E.EXT_FAMILIES["accum_m4_adafactor_steady"] = ("llama", "qwen3_moe")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_optim"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(OPTIM_KINDS)]
    sys.exit(E.main(argv))
