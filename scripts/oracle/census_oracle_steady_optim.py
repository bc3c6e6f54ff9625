#!/usr/bin/env python3
"""Census steady-state step oracle, OPTIMIZERS: the extended steady oracle's two-step machinery with other optimizers.

This file imports ``census_oracle_steady_ext.py`` (beside it) and edits nothing in it. Each kind here runs through
its ``run_steady_case_ext`` with the optimizer the kind names built in place of AdamW (``make_optimizer_ext``
is rebound for the case), and records the same JSON layout:

* ``sgd``: ``torch.optim.SGD(params, lr=1e-3, momentum=0.9)`` as ``foreach=False`` (``_single_tensor_sgd``),
  ``foreach=True`` (``_multi_tensor_sgd``) and ``fused=True`` (``_fused_sgd``);
* ``adafactor``: ``torch.optim.Adafactor(params)`` (lr 1e-2, its defaults) as ``foreach=False`` (its default:
  ``_single_tensor_adafactor``) and ``foreach=True`` (``_multi_tensor_adafactor``);
* ``muon``: ``torch.optim.Muon()`` (its defaults) over the model's 2-D weights but its embeddings' and its head's,
  then ``torch.optim.AdamW(lr=1e-4, foreach=True)`` over the rest, stepped in that order (``MuonWithAdamW``);
* ``adamw8bit``: bitsandbytes' ``AdamW8bit(params)`` (lr 1e-3, weight decay 1e-2, blocks of 256, parameters
  under 4,096 elements with fp32 states), from its sources (commit 95f9af3), on its fake kernels. Its two
  quantile maps are built at construction, on the host, outside the fake mode (``create_dynamic_map`` reads
  ``.tolist()``); on CUDA the first ``init_state`` copies each to the device (``.to(p.device)``), a 1 KiB
  fp32 [256] each, shared by every parameter. On the CPU fakes that copy is a no-op, so the stand-in makes it:
  at the first ``init_state`` each map is replaced by a fake fp32 [256] on the device, as CUDA's copy is.
"""
import collections
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
    "single_torchao_adamw8bit_steady": dict(m=1, batch=1, optimizer="torchao-adamw8bit"),
    "single_torchao_adamw4bit_steady": dict(m=1, batch=1, optimizer="torchao-adamw4bit"),
    "single_adamw_in_bwd_steady": dict(m=1, batch=1, optimizer="adamw", foreach=False, in_bwd=True),
    "single_adamw_foreach_in_bwd_steady": dict(m=1, batch=1, optimizer="adamw", foreach=True, in_bwd=True),
    "single_adamw_fused_in_bwd_steady": dict(m=1, batch=1, optimizer="adamw", fused=True, in_bwd=True),
    "single_adamw8bit_in_bwd_steady": dict(m=1, batch=1, optimizer="adamw8bit", in_bwd=True),
    "accum_m4_adafactor_steady": dict(m=S.ACCUM_M, batch=1, optimizer="adafactor", foreach=False),
    "single_muon_steady": dict(m=1, batch=1, optimizer="muon"),
    "accum_m4_muon_steady": dict(m=S.ACCUM_M, batch=1, optimizer="muon"),
}
CURRENT: Dict[str, Any] = {}


class HostStep(int):
    """bitsandbytes' state["step"]: a Python int, no tensor; named for the ext oracle's step_tensor_dtype."""
    dtype = "python int (host)"


class TorchaoStandIn:
    """torchao's AdamW8bit / AdamW4bit: its step() as written, its states as its _new_buffer makes them, the
    torch.compile'd single_param_adam stood in by a fused kernel that writes in place and allocates nothing
    (the compiled kernel does not run in the chroot, and its eager form's fp32 copies are not what it
    allocates). `state` shows each quantized state by its tensors (codes, scale, qmap)."""

    def __init__(self, params: Sequence[Any], name: str) -> None:
        sys.path.insert(0, "/opt/ao")
        import torchao.optim as ao  # pylint: disable=import-outside-toplevel
        import torchao.optim.adam as ao_adam  # pylint: disable=import-outside-toplevel
        from torchao.optim import subclass_4bit, subclass_8bit  # pylint: disable=import-outside-toplevel
        with torch._subclasses.fake_tensor.unset_fake_temporarily():  # pylint: disable=protected-access
            for module in (subclass_8bit, subclass_4bit):  # .tolist() of real tensors, cached
                module.get_qmap_signed()
                module.get_qmap_unsigned()
            self.inner = (ao.AdamW8bit if name.endswith("8bit") else ao.AdamW4bit)(params)

        def compile_stand_in(fn: Any, **kwargs: Any) -> Any:
            del fn, kwargs
            return lambda *args: None

        ao_adam.torch = _TorchWithCompile(compile_stand_in)
        self.param_groups = self.inner.param_groups

    @property
    def state(self) -> Dict[Any, Any]:
        states: Dict[Any, Any] = collections.defaultdict(dict)
        for p, st in self.inner.state.items():
            flat = {}
            for key, value in st.items():
                inner = [a for a in ("codes", "scale", "qmap") if hasattr(value, a)]
                if inner:
                    flat.update({f"{key}.{a}": getattr(value, a) for a in inner})
                else:
                    flat[key] = value
            states[p] = flat
        return states

    def step(self) -> None:
        self.inner.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.inner.zero_grad(set_to_none=set_to_none)


class _TorchWithCompile:
    """torch, as torchao.optim.adam sees it, with torch.compile replaced."""

    def __init__(self, compile_fn: Any) -> None:
        self.compile = compile_fn

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


class MuonWithAdamW:
    """torch.optim.Muon() (its defaults: lr 1e-3, weight decay 0.1, momentum 0.95, Nesterov, 5 Newton-Schulz
    steps) over the model's 2-D weights but its embeddings' and its head's, and torch.optim.AdamW(lr=1e-4,
    foreach=True) over the rest (the embeddings, the head, the norms' and other vectors, 3-D experts), as
    torchtitan pairs them; stepped and zero_grad()-ed in that order."""

    def __init__(self, params: Sequence[Any], model: Any) -> None:
        embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
        head = model.get_output_embeddings()
        if head is not None:
            embeddings.add(id(head.weight))
        matrices = [p for p in params if p.ndim == 2 and id(p) not in embeddings]
        rest = [p for p in params if not (p.ndim == 2 and id(p) not in embeddings)]
        self.muon = torch.optim.Muon(matrices)
        self.adamw = torch.optim.AdamW(rest, lr=1e-4, foreach=True)
        self.param_groups = self.muon.param_groups

    @property
    def state(self) -> Dict[Any, Any]:
        states: Dict[Any, Any] = collections.defaultdict(dict)
        for optimizer in (self.muon, self.adamw):
            states.update(optimizer.state)
        return states

    def step(self) -> None:
        self.muon.step()
        self.adamw.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.muon.zero_grad(set_to_none=set_to_none)
        self.adamw.zero_grad(set_to_none=set_to_none)


class InBackward:
    """torchtune's optim_dict run in the backward: the step's optimizer.step() and zero_grad() do nothing."""

    def __init__(self, optimizers: Dict[Any, Any]) -> None:
        self.optimizers = optimizers
        self.param_groups = next(iter(optimizers.values())).param_groups

    @property
    def state(self) -> Dict[Any, Any]:
        states: Dict[Any, Any] = collections.defaultdict(dict)
        states.update({p: o.state[p] for p, o in self.optimizers.items() if p in o.state})
        return states

    def step(self) -> None:
        pass

    def zero_grad(self, set_to_none: bool = True) -> None:
        del set_to_none


def make_optimizer(params: Sequence[Any], foreach: bool, fused: bool) -> Tuple[Any, str]:
    if CURRENT.get("in_bwd"):
        optim_dict = {p: make_one_optimizer([p], foreach, fused)[0] for p in params}

        def optim_step(param: Any) -> None:
            live = CURRENT["step"].live
            live.scalar_value = CURRENT["steps_started"]  # step.item(), as the step oracle answers it
            optim_dict[param].step()
            optim_dict[param].zero_grad()
            live.scalar_value = 0

        def register() -> None:
            # after the step oracle's own post-accumulate-grad hook (it reads .grad), as each step starts
            for handle in CURRENT.get("handles", []):
                handle.remove()
            CURRENT["handles"] = [p.register_post_accumulate_grad_hook(optim_step) for p in params if p.requires_grad]

        CURRENT["register"] = register
        return InBackward(optim_dict), "torchtune register_optim_in_bwd_hooks: " + make_one_optimizer(
            [], foreach, fused, describe=True)[1]
    return make_one_optimizer(params, foreach, fused)


def make_one_optimizer(params: Sequence[Any], foreach: bool, fused: bool, describe: bool = False) -> Tuple[Any, str]:
    name = CURRENT["optimizer"]
    if describe:
        return None, f"{name}(foreach={foreach}, fused={fused}) a parameter"
    if name == "adamw":
        if fused:
            return torch.optim.AdamW(params, lr=1e-4, fused=True), "torch.optim.AdamW(lr=1e-4, fused=True)"
        return (torch.optim.AdamW(params, lr=1e-4, foreach=foreach, fused=False),
                f"torch.optim.AdamW(lr=1e-4, foreach={foreach})")
    if name == "sgd":
        if fused:
            return torch.optim.SGD(params, lr=1e-3, momentum=0.9, fused=True), "torch.optim.SGD(lr=1e-3, momentum=0.9, fused=True)"
        return (torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=foreach),
                f"torch.optim.SGD(lr=1e-3, momentum=0.9, foreach={foreach})")
    if name == "adafactor":
        return torch.optim.Adafactor(params, foreach=foreach), f"torch.optim.Adafactor(foreach={foreach})"
    if name == "muon":
        return MuonWithAdamW(params, CURRENT["model"]), ("torch.optim.Muon() over the 2-D weights but the embeddings' "
                                                         "and the head's, then torch.optim.AdamW(lr=1e-4, foreach=True) "
                                                         "over the rest")
    if name.startswith("torchao-"):
        return TorchaoStandIn(params, name), (f"torchao.optim.{'AdamW8bit' if name.endswith('8bit') else 'AdamW4bit'}"
                                              "() (36027d8): its states as it makes them; its torch.compile'd "
                                              "single_param_adam stood in by a kernel that allocates nothing")
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
_step_start = S.Step.start
_build_model = S.build_model


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    """The step oracle's build_model; the model kept for the optimizer that sorts its parameters by module."""
    model, config, notes = _build_model(family, config_kwargs, device)
    CURRENT["model"] = model
    return model, config, notes


S.build_model = build_model


def step_start(self: Any) -> None:
    """The step oracle's Step.start, then (optimizer in the backward) its hooks after the step's own."""
    _step_start(self)
    CURRENT["step"] = self
    CURRENT["steps_started"] = CURRENT.get("steps_started", 0) + 1
    if "register" in CURRENT:
        CURRENT["register"]()


S.Step.start = step_start


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
E.EXT_FAMILIES["accum_m4_muon_steady"] = ("llama", "qwen3_moe")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_optim"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(OPTIM_KINDS)]
    sys.exit(E.main(argv))
