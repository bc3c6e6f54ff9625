#!/usr/bin/env python3
"""Census steady-state step oracle, LIGER'S KERNELS: the offloading oracle's machinery with Liger's patch applied.

This file imports ``census_oracle_steady_offload.py`` (beside it, which imports the loss and extended oracles) and
edits nothing in it. Each kind here builds the model as those do, then applies Liger's patch to the model instance
as Transformers' Trainer and TRL do for ``use_liger_kernel=True`` (``_apply_liger_kernel_to_instance``: the model
type's ``apply_liger_kernel_to_<type>(model=model)`` with its defaults), from Liger's sources (linkedin/Liger-Kernel
ead96b6, ``/opt/liger/src/liger_kernel``, ``git archive ead96b6 src/liger_kernel``):

* ``transformers/monkey_patch.py``: ``apply_liger_kernel_to_{llama,mistral,qwen2,qwen3,smollm3,gemma,gemma2}``
  and ``apply_liger_kernel_to_gemma3_text``, ``_patch_rms_norm_module``, ``_patch_swiglu_module``,
  ``_patch_geglu_module``, ``_bind_method_to_module``, run as written, with
  ``fused_linear_cross_entropy=False``: the fused loss is the loss oracle's ``liger-flce`` (its ``lce_forward``
  training path), run where the kind names it (``_liger_`` kinds without ``_hf``); ``_liger_hf`` kinds keep
  Transformers' loss, as ``--liger --loss hf`` does;
  What some apply functions import in their bodies comes from stand-in modules: Gemma's norm classes, executed
  from their source, and the forwards Qwen3's, SmolLM3's and Gemma 3's import for the fused loss, each refusing
  a call (with ``fused_linear_cross_entropy=False`` none is bound);
* ``transformers/rms_norm.py`` (``LigerRMSNorm`` and Gemma's), ``transformers/swiglu.py`` (``LigerSwiGLUMLP``),
  ``transformers/geglu.py`` (``LigerGEGLUMLP``), ``transformers/rope.py`` (``liger_rotary_pos_emb``);
* ``ops/rms_norm.py``, ``ops/swiglu.py``, ``ops/geglu.py``, ``ops/rope.py``: the autograd functions and the
  Python around their kernels, and ``ops/utils.py``'s ``ensure_contiguous`` and ``calculate_settings``.

Triton does not run here. Each kernel launch (``kernel[grid](...)``) is stood in for by a call that writes nothing
and allocates nothing, which is each kernel's contract on the tensors its Python made (every allocation is
Python's: ``torch.empty``, ``empty_like``, ``zeros_like``, ``.contiguous()``, ``.sum``, ``.to``). ``triton.cdiv``,
``triton.next_power_of_2`` and ``tl.constexpr`` are what they are; ``device_context`` enters nothing. The fake
tensors sit on the CPU, where ``rms_norm_backward`` would take one streaming multiprocessor: its device checks
are answered as on the GPU the kernels run on (``X.device.type == "cuda"`` true, ``"xpu"`` and ``"npu"`` false,
an AST edit of the function) and ``torch.cuda.get_device_properties(...).multi_processor_count`` is an H100's
132, so its ``_dW`` buffer is (132, H) fp32 as on that GPU. What the patch sets on the modeling module
(``apply_rotary_pos_emb``, and the norm and MLP classes, which only models built later would take) is put back after
each case, so each case's model is patched as an instance alone: Qwen3's per-head ``q_norm`` and ``k_norm`` stay
Transformers' own, as under Transformers' Trainer and TRL.
"""
import ast
import collections
import contextlib
import functools
import importlib
import inspect
import logging
import math
import operator
import os
import sys
import types
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_oracle_steady_offload as OFFL  # noqa: E402  pylint: disable=wrong-import-position

L = OFFL.L
E = OFFL.E
S = OFFL.S
torch = E.torch

LIGER_SOURCE = L.LIGER_SOURCE
LIGER_COMMIT = L.LIGER_COMMIT
SM_COUNT = 132  # an H100's (and an H200's) streaming multiprocessors
LIGER_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "smollm3", "gemma", "gemma2", "gemma3")
# The apply function of each family's model type (MODEL_TYPE_TO_APPLY_LIGER_FN): the gemma3 toy is Gemma 3's text
# model (model_type gemma3_text).
APPLY = {family: f"apply_liger_kernel_to_{family}" for family in LIGER_FAMILIES}
APPLY["gemma3"] = "apply_liger_kernel_to_gemma3_text"

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
    # --liger --pp 2: the two stages of the extended oracle's 1F1B pipeline, four micro-batches
    "pp2_m4_r0_adamw_liger_steady": dict(_BASE, m=4, batch=1, p=2, r=0, loss="liger-flce"),
    "pp2_m4_r1_adamw_liger_steady": dict(_BASE, m=4, batch=1, p=2, r=1, loss="liger-flce"),
}
CURRENT: Dict[str, Any] = {}


class _Kernel:
    """A Triton kernel launched as kernel[grid](...): writes in place, allocates nothing."""

    def __getitem__(self, grid: Any) -> Any:
        del grid
        return lambda *args, **kwargs: CURRENT.setdefault("launches", collections.Counter()).update([self.name])

    def __init__(self, name: str) -> None:
        self.name = name


class _Constexpr:
    """tl.constexpr(value), as Liger's casting-mode constants read it (.value)."""

    def __init__(self, value: Any) -> None:
        self.value = value


_TL = types.SimpleNamespace(constexpr=_Constexpr, float32=None, float16=None, bfloat16=None)


class _Triton:
    """What the op files read of triton: its integer helpers and the jit decorator (kernels stood in for)."""

    cdiv = staticmethod(lambda a, b: (a + b - 1) // b)
    next_power_of_2 = staticmethod(lambda n: 1 << (n - 1).bit_length() if n > 0 else 1)
    jit = staticmethod(lambda fn: _Kernel(fn.__name__))


class _Cuda:
    """torch.cuda as rms_norm_backward reads it: the device's multiprocessor count."""

    @staticmethod
    def get_device_properties(device: Any) -> Any:
        del device
        return types.SimpleNamespace(multi_processor_count=SM_COUNT)


class _TorchOnGpu:
    """torch, as Liger's op files see it, with torch.cuda's device properties answered as on an H100."""

    def __getattr__(self, name: str) -> Any:
        return _Cuda if name == "cuda" else getattr(torch, name)


class _DeviceChecks(ast.NodeTransformer):
    """``<t>.device.type == "cuda"`` read as true and ``"xpu"`` / ``"npu"`` as false: the kernels' GPU."""

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = node.left
        if (isinstance(left, ast.Attribute) and left.attr == "type" and isinstance(left.value, ast.Attribute)
                and left.value.attr == "device" and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
                and isinstance(node.comparators[0], ast.Constant)):
            CURRENT.setdefault("device_checks", []).append(node.comparators[0].value)
            return ast.copy_location(ast.Constant(node.comparators[0].value == "cuda"), node)
        return self.generic_visit(node)


def _name(node: ast.stmt) -> Any:
    """The name a top-level statement defines: a function, a class, or one plain (annotated) assignment."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _defined(path: str, names: set, namespace: Dict[str, Any], edit: Any = None) -> None:
    """Execute the top-level definitions `names` of Liger's file `path` into `namespace`, as the file writes them."""
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    body = [node for node in tree.body if _name(node) in names]
    missing = names - {_name(node) for node in body}
    if missing:
        raise RuntimeError(f"{path}: no definition of {sorted(missing)}")
    module = ast.Module(body=body, type_ignores=[])
    if edit is not None:
        module = ast.fix_missing_locations(edit.visit(module))
    exec(compile(module, path, "exec"), namespace)  # pylint: disable=exec-used


def load_liger_kernels() -> Dict[str, Any]:
    """Liger's RMSNorm, SwiGLU and rotary, and its instance patch, executed from its source files."""
    from torch.distributed.tensor import DTensor  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel
    ops = os.path.join(LIGER_SOURCE, "ops")
    utils: Dict[str, Any] = {"torch": torch, "triton": _Triton, "functools": functools, "is_hip": lambda: False,
                             "__name__": "liger_kernel.ops.utils"}
    _defined(os.path.join(ops, "utils.py"), {"ensure_contiguous", "calculate_settings"}, utils)
    ns: Dict[str, Any] = {
        "torch": _TorchOnGpu(), "math": math, "operator": operator, "triton": _Triton, "tl": _TL,
        "calculate_settings": utils["calculate_settings"], "ensure_contiguous": utils["ensure_contiguous"],
        "device_context": lambda device: contextlib.nullcontext(), "set_large_grf_mode": lambda kwargs: None,
        "get_npu_core_count": lambda: 1, "torch_to_triton_dtype": collections.defaultdict(lambda: None),
        "_DTensor": DTensor, "infer_device_arch": lambda *_: "hopper", "__name__": "liger_kernel.ops"}
    for kernel in ("_rms_norm_forward_kernel", "_block_rms_norm_forward_kernel", "_rms_norm_backward_kernel",
                   "_block_rms_norm_backward_kernel", "_swiglu_forward_kernel", "_swiglu_backward_kernel",
                   "_swiglu_forward_kernel_tiled", "_swiglu_backward_kernel_tiled", "_triton_rope",
                   "_geglu_tanh_forward_kernel", "_geglu_tanh_backward_kernel"):
        ns[kernel] = _Kernel(kernel)
    _defined(os.path.join(ops, "rms_norm.py"),
             {"_CASTING_MODE_NONE", "_CASTING_MODE_LLAMA", "_CASTING_MODE_GEMMA", "_str_to_casting_mode",
              "rms_norm_forward", "rms_norm_backward", "LigerRMSNormFunction"}, ns, _DeviceChecks())
    _defined(os.path.join(ops, "swiglu.py"),
             {"_SWIGLU_TILE", "_SWIGLU_TILE_MIN_BLOCK", "_should_tile", "_swiglu_tile_settings", "swiglu_forward",
              "swiglu_backward", "LigerSiLUMulFunction"}, ns)
    _defined(os.path.join(ops, "rope.py"), {"rope_forward", "rope_backward", "LigerRopeFunction"}, ns)
    _defined(os.path.join(ops, "geglu.py"), {"geglu_forward", "geglu_backward", "LigerGELUMulFunction"}, ns)
    modules: Dict[str, Any] = {"torch": torch, "nn": torch.nn, "__name__": "liger_kernel.transformers",
                               "LigerRMSNormFunction": ns["LigerRMSNormFunction"],
                               "LigerSiLUMulFunction": ns["LigerSiLUMulFunction"],
                               "LigerRopeFunction": ns["LigerRopeFunction"],
                               "LigerGELUMulFunction": ns["LigerGELUMulFunction"]}
    here = os.path.join(LIGER_SOURCE, "transformers")
    _defined(os.path.join(here, "rms_norm.py"), {"LigerRMSNorm", "LigerRMSNormForGemma", "LigerRMSNormForGemma2",
                                                 "LigerRMSNormForGemma3"}, modules)
    _defined(os.path.join(here, "swiglu.py"), {"LigerSwiGLUMLP"}, modules)
    _defined(os.path.join(here, "geglu.py"), {"LigerGEGLUMLP"}, modules)
    _defined(os.path.join(here, "rope.py"), {"liger_rotary_pos_emb"}, modules)
    from transformers import PreTrainedModel  # pylint: disable=import-outside-toplevel
    patch: Dict[str, Any] = dict(modules, inspect=inspect, transformers=transformers, PreTrainedModel=PreTrainedModel,
                                 MethodType=types.MethodType, partial=functools.partial, PEFT_AVAILABLE=False,
                                 logger=logging.getLogger("liger_kernel"),
                                 Callable=Any, Optional=Any, __name__="liger_kernel.transformers.monkey_patch")
    _defined(os.path.join(here, "monkey_patch.py"),
             {"_bind_method_to_module", "_patch_rms_norm_module", "_patch_swiglu_module", "_patch_geglu_module"}
             | set(APPLY.values()), patch)
    return patch


def _imported_modules(modules: Dict[str, Any]) -> None:
    """What some apply functions import inside their bodies, whatever they bind: the norm classes Gemma's swap on
    the modeling module (LigerRMSNormForGemma*, from their source), and the forwards Qwen3's, SmolLM3's and Gemma
    3's import for the fused loss, which is never bound here (fused_linear_cross_entropy=False): each refuses a
    call."""
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Liger's model forward is the loss oracle's liger-flce here")
    for name in ("liger_kernel", "liger_kernel.transformers", "liger_kernel.transformers.model"):
        sys.modules.setdefault(name, types.ModuleType(name))
    norms = types.ModuleType("liger_kernel.transformers.rms_norm")
    for name in ("LigerRMSNorm", "LigerRMSNormForGemma", "LigerRMSNormForGemma2", "LigerRMSNormForGemma3"):
        setattr(norms, name, modules[name])
    sys.modules[norms.__name__] = norms
    for family in LIGER_FAMILIES:
        module = types.ModuleType(f"liger_kernel.transformers.model.{family}")
        module.__getattr__ = lambda name: forward  # lce_forward, causal_forward
        sys.modules.setdefault(module.__name__, module)


def _modeling(family: str) -> Any:
    return importlib.import_module(f"transformers.models.{family}.modeling_{family}")


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
        patch = load_liger_kernels()
        _imported_modules(patch)
        modeling = _modeling(family)
        CURRENT["restore"] = (modeling, dict(vars(modeling)))
        patch[APPLY[family]](model=model, fused_linear_cross_entropy=False)
        patched = collections.Counter(type(m).__name__ + (" (Liger's forward)" if "forward" in m.__dict__ else "")
                                      for m in model.modules())
        CURRENT["patched"] = dict(patched)
        notes["liger_kernels"] = (
            f"liger {LIGER_COMMIT} {APPLY[family]}(model=model, fused_linear_cross_entropy=False) "
            "as _apply_liger_kernel_to_instance calls it (rope, rms_norm, swiglu: the defaults); "
            + ("the fused loss: the loss oracle's liger-flce" if CURRENT.get("loss") == "liger-flce"
               else "Transformers' own loss"))
    return model, config, notes


S.build_model = build_model
_run_offload = E.run_steady_case_ext


def run_steady_case_liger(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    CURRENT.clear()
    CURRENT.update(case)
    try:
        result = _run_offload(group, case, sets, kernels)
        result["liger"] = {"liger_commit": LIGER_COMMIT, "kernels": ["rms_norm", "swiglu", "rope"],
                           "fused_linear_cross_entropy": case.get("loss") == "liger-flce", "sm_count": SM_COUNT,
                           "device_checks_answered": sorted(set(CURRENT.get("device_checks", []))),
                           "modules": CURRENT.get("patched"),
                           "kernel_launches_both_steps": dict(CURRENT.get("launches") or {})}
        return result
    finally:
        if "restore" in CURRENT:
            modeling, names = CURRENT["restore"]  # the classes and the rotary the patch swapped on the module
            for name, value in names.items():
                if vars(modeling).get(name) is not value:
                    setattr(modeling, name, value)
        CURRENT.clear()


E.run_steady_case_ext = run_steady_case_liger
E.KINDS_EXT = LIGER_KINDS
E.KINDS = dict(E.KINDS, **LIGER_KINDS)
E.EXT_FAMILIES = {k: LIGER_FAMILIES for k in LIGER_KINDS}
for _k in ("single_b2_adamw_liger_steady", "accum_m4_adamw_liger_steady", "single_adamw_liger_ac_full_steady",
           "single_adamw_liger_ac_full_reentrant_steady", "single_adamw_liger_offload_steady"):
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
