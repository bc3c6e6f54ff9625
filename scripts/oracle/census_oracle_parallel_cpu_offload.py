#!/usr/bin/env python3
"""Census parallel oracle, CPU OFFLOADING: one rank of an FSDP2 step under FSDP2's CPUOffloadPolicy.

This file imports the parallel oracle (``census_oracle_parallel.py`` of the shared oracle's ``step/parallel``, with
its ``census_oracle_step.py`` and ``census_oracle_torch2.py``, from the folder named by ``CENSUS_PARALLEL_ORACLE``,
``/opt/work/parallel`` by default) and edits nothing in it. Its layouts are the parallel oracle's FSDP2 ones,
``fsdp4`` (fp32 shards under MixedPrecisionPolicy(bf16, fp32)) and ``fsdp4_bf16``, each unit made by
``fully_shard(..., offload_policy=CPUOffloadPolicy(pin_memory=False))``, torch 2.14's FSDP2 running its own offload
code paths (``_fsdp_param.py``, ``_fsdp_collectives.py``):

* at rest the sharded parameters, their gradients and the optimizer's states are host tensors;
* each all-gather copies every shard to the device on its own (``FSDPParam.all_gather_inputs``:
  ``sharded_param_data.to(self.device, non_blocking=True)``, then, under mixed precision, its cast to bf16), not
  through the foreach copy-in;
* each reduce-scatter copies every new sharded gradient to the host (``foreach_reduce``:
  ``new_sharded_grad.to(torch.device("cpu"))``), where it becomes the ``.grad`` or is added into it;
* the optimizer steps the host parameters: every tensor it makes is a host tensor.

The fake process group's mesh is a CPU one, so the device and the host are one device here, and both copies would
be no-ops (``Tensor.to`` returns its input on its own device). Inside FSDP2's all-gather and reduce regions (the
parallel oracle's) a ``Tensor.to`` that names a device is made to copy (``copy=True``: ``aten._to_copy``), as it
copies between a GPU and the host. The host tensors are then labelled: the sharded parameters, the reduce's host
copies, the gradients and optimizer states, and everything the optimizer step and ``zero_grad`` make. The device
analysis (``peak``, ``phases``, ...) walks the other storages' events only; ``host`` records the host's: its peak
(the first maximum of the live host bytes, with its phase and its split into parameters, gradients, optimizer
states and other), the live host bytes at the end, and the bytes the copies moved each way. The gradients' bytes
(``gradients``) count the host's too. ``pin_memory=False``: pinning needs a CUDA runtime; it moves no byte the
oracle counts (pinned blocks are the caching host allocator's, which Census prices from its source). Each layout
runs with every decoder layer checkpointed too (``_ac_full``: Transformers' non-reentrant gradient checkpointing,
as ``census step --recompute full``).
"""
import functools
import os
import sys
from typing import Any, Dict, List, Sequence, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("CENSUS_PARALLEL_ORACLE", "/opt/work/parallel"))
import census_oracle_parallel as PAR  # noqa: E402  pylint: disable=wrong-import-position

torch = PAR.torch

PAR.LAYOUTS = {
    f"{name}_cpu_offload{ac}": dict(PAR.LAYOUTS[name], cpu_offload=True, ac_full=bool(ac),
                                    note=PAR.LAYOUTS[name]["note"] + "; CPUOffloadPolicy(pin_memory=False)" +
                                    ("; every decoder layer checkpointed (use_reentrant=False)" if ac else ""))
    for name in ("fsdp4", "fsdp4_bf16") for ac in ("", "_ac_full")}
PAR.STEPS = {name: PAR.STEPS[name.split("_cpu_offload")[0]] for name in PAR.LAYOUTS}
CURRENT: Dict[str, Any] = {}
_build_model = PAR.S.build_model


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    """The model, with every decoder layer checkpointed where the layout asks (Transformers' non-reentrant
    gradient checkpointing, as census step --recompute full)."""
    model, config, notes = _build_model(family, config_kwargs, device)
    if CURRENT.get("ac_full"):
        for layer in model.model.layers:
            layer.gradient_checkpointing = True
            layer._gradient_checkpointing_func = functools.partial(  # pylint: disable=protected-access
                torch.utils.checkpoint.checkpoint, use_reentrant=False)
        notes["activation_checkpointing"] = "every decoder layer, use_reentrant=False"
    return model, config, notes


PAR.S.build_model = build_model
PAR.FAMILIES = ("llama", "qwen3", "qwen3_moe", "gemma2")

HOST_REGIONS = {"fsdp_all_gather": "device", "fsdp_reduce": "host"}


class Copies:
    """What the patched Tensor.to copied this case: the host copies' keys, and the bytes each way."""
    host_keys: Set[Tuple[int, int]] = set()
    offloaded_bytes = 0
    brought_back_bytes = 0


def _names_device(args: Sequence[Any], kwargs: Dict[str, Any]) -> bool:
    first = args[0] if args else kwargs.get("device")
    return isinstance(first, (torch.device, str))


def patch_tensor_to() -> str:
    original = torch.Tensor.to
    if getattr(original, "_census", False):
        return "already patched"

    def to(self, *args, **kwargs):
        tracker = PAR.TRACKERS[0] if PAR.TRACKERS else None
        if tracker is None or not tracker.active or tracker.region() not in HOST_REGIONS or \
                not _names_device(args, kwargs):
            return original(self, *args, **kwargs)
        out = original(self, *args, **dict(kwargs, copy=True))
        nbytes = out.untyped_storage().nbytes()
        if HOST_REGIONS[tracker.region()] == "host":
            Copies.host_keys.add(tracker.key(out))
            Copies.offloaded_bytes += nbytes
        else:
            Copies.brought_back_bytes += nbytes
        return out

    to._census = True  # pylint: disable=protected-access
    torch.Tensor.to = to
    return "torch.Tensor.to: a device named inside FSDP2's all-gather or reduce copies (copy=True)"


def patch_fully_shard() -> str:
    import torch.distributed.fsdp as fsdp  # pylint: disable=import-outside-toplevel
    original = getattr(fsdp.fully_shard, "_census_original", fsdp.fully_shard)

    def fully_shard(module, **kwargs):
        kwargs.setdefault("offload_policy", fsdp.CPUOffloadPolicy(pin_memory=False))
        return original(module, **kwargs)

    fully_shard._census_original = original  # pylint: disable=protected-access
    fsdp.fully_shard = fully_shard
    return "torch.distributed.fsdp.fully_shard(..., offload_policy=CPUOffloadPolicy(pin_memory=False))"


HOST_SPLIT = ("parameters", "gradients", "optimizer_states")


class OffloadStep(PAR.ParallelStep):
    """The parallel oracle's step, its device analysis over the device's storages, and the host's beside it."""

    def host_keys(self) -> Set[Tuple[int, int]]:
        keys = set(Copies.host_keys)
        for name in HOST_SPLIT:
            keys |= self.keys[name]
        for key, (_op, _dtype, _shape, phase) in self.live.info.items():
            if phase in ("optimizer_step", "zero_grad"):
                keys.add(key)
        return keys

    def analyse(self, top: int = 25) -> Dict[str, Any]:
        host = self.host_keys()
        events, names, phases = self.live.events, self.live.names, self.phases
        on_device = [i for i, (key, _delta) in enumerate(events) if key not in host]
        # each phase's first event, renumbered over the device's events
        starts = [sum(1 for i in on_device if i < start) for _name, start in phases]
        try:
            self.live.events = [events[i] for i in on_device]
            self.live.names = [names[i] for i in on_device]
            self.phases = [(name, start) for (name, _), start in zip(phases, starts)]
            analysis = super().analyse(top)
        finally:
            self.live.events, self.live.names, self.phases = events, names, phases
        analysis["host"] = self.host_analysis(host)
        return analysis

    def host_analysis(self, host: Set[Tuple[int, int]]) -> Dict[str, Any]:
        events, phases = self.live.events, self.phases
        category = {}
        for name in HOST_SPLIT:
            for key in self.keys[name]:
                category[key] = name
        sums = {name: 0 for name in HOST_SPLIT + ("other",)}
        total = 0
        peak: Dict[str, Any] = dict(peak_bytes=0, peak_phase=None, peak_split=dict(sums))
        at_end: List[Dict[str, int]] = []
        for p, (name, start) in enumerate(phases):
            end = phases[p + 1][1] if p + 1 < len(phases) else len(events)
            for key, delta in events[start:end]:
                if key not in host:
                    continue
                sums[category.get(key, "other")] += delta
                total += delta
                if total > peak["peak_bytes"]:
                    peak.update(peak_bytes=total, peak_phase=name, peak_split=dict(sums))
            at_end.append(dict(sums, name=name))
        return dict(peak, live_at_end_bytes=total, offloaded_bytes=Copies.offloaded_bytes,
                    brought_back_bytes=Copies.brought_back_bytes, split_at_end_of_phase=at_end)


PAR.ParallelStep = OffloadStep
_run_case = PAR.run_case
_analyse = OffloadStep.analyse


def run_case(case: Dict[str, Any], reference_dirs: Sequence[str]) -> Dict[str, Any]:
    setup = {"tensor_to": patch_tensor_to(), "fully_shard": patch_fully_shard()}
    CURRENT["ac_full"] = PAR.LAYOUTS[case["layout"]]["ac_full"]
    host: Dict[str, Any] = {}

    def analyse(self, top: int = 25) -> Dict[str, Any]:
        analysis = _analyse(self, top)
        host.update(analysis.pop("host"))
        return analysis

    OffloadStep.analyse = analyse
    try:
        result = _run_case(case, reference_dirs)
    finally:
        OffloadStep.analyse = _analyse
    result["setup"].update(setup)
    result["parallel"]["cpu_offload"] = {"policy": "CPUOffloadPolicy(pin_memory=False)", "optimizer": "on the host"}
    result["parallel"]["recompute"] = "full" if CURRENT["ac_full"] else "none"
    by_phase = {row["name"]: row for row in host.pop("split_at_end_of_phase")}
    # the gradients wherever they are: the device's (none here) and the host's
    gradients = result["gradients"]
    backs = [ph["name"] for ph in result["phases"] if ph["name"].startswith("B")]
    if backs:
        gradients["bytes_after_first_backward"] += by_phase[backs[0]]["gradients"]
        gradients["bytes_after_last_backward"] += by_phase[backs[-1]]["gradients"]
    result["host"] = host
    return result


PAR.run_case = run_case
PAR.ORACLE = "census_oracle_parallel_cpu_offload"
PAR.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    sys.exit(PAR.main())
