#!/usr/bin/env python3
"""Liger's patch on a Transformers model, executed from Liger's sources on fake tensors, for Census's oracles.

linkedin/Liger-Kernel ead96b6, ``/opt/liger/src/liger_kernel`` (``git archive ead96b6 src/liger_kernel``).
``apply(model, family)`` runs the model type's ``apply_liger_kernel_to_<type>(model=model,
fused_linear_cross_entropy=False)`` as Transformers' Trainer and TRL call it for ``use_liger_kernel=True``
(``_apply_liger_kernel_to_instance``), and returns what put the modeling module back as it was:

* ``transformers/monkey_patch.py``: ``apply_liger_kernel_to_{llama,mistral,qwen2,qwen3,smollm3,gemma,gemma2}``
  and ``apply_liger_kernel_to_gemma3_text``, ``_patch_rms_norm_module``, ``_patch_swiglu_module``,
  ``_patch_geglu_module``, ``_bind_method_to_module``, run as written. What some apply functions import in their
  bodies comes from stand-in modules: Gemma's norm classes, executed from their source, and the forwards Qwen3's,
  SmolLM3's and Gemma 3's import for the fused loss, each refusing a call (with
  ``fused_linear_cross_entropy=False`` none is bound; the fused loss is the loss oracle's ``liger-flce``);
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
(``apply_rotary_pos_emb``, and the norm and MLP classes, which only models built later would take) is put back by
the returned ``restore``, so each model is patched as an instance alone: Qwen3's per-head ``q_norm`` and
``k_norm`` stay Transformers' own, as under Transformers' Trainer and TRL.
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

import torch

LIGER_SOURCE = "/opt/liger/src/liger_kernel"
LIGER_COMMIT = "ead96b6"
SM_COUNT = 132  # an H100's (and an H200's) streaming multiprocessors
LIGER_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "smollm3", "gemma", "gemma2", "gemma3")
# The apply function of each family's model type (MODEL_TYPE_TO_APPLY_LIGER_FN): the gemma3 toy is Gemma 3's text
# model (model_type gemma3_text).
APPLY = {family: f"apply_liger_kernel_to_{family}" for family in LIGER_FAMILIES}
APPLY["gemma3"] = "apply_liger_kernel_to_gemma3_text"
# What the running case's patch did: the kernels launched, the device checks answered.
RECORD: Dict[str, Any] = {}


class _Kernel:
    """A Triton kernel launched as kernel[grid](...): writes in place, allocates nothing."""

    def __getitem__(self, grid: Any) -> Any:
        del grid
        return lambda *args, **kwargs: RECORD.setdefault("launches", collections.Counter()).update([self.name])

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
            RECORD.setdefault("device_checks", []).append(node.comparators[0].value)
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


@contextlib.contextmanager
def case() -> Any:
    """One case's patch: its record cleared before it, the modeling module put back after it."""
    RECORD.clear()
    try:
        yield RECORD
    finally:
        restore = RECORD.pop("restore", None)
        if restore is not None:
            restore()
        RECORD.clear()


def apply(model: Any, family: str) -> str:
    """Liger's patch on *model* as its trainer applies it, inside case(); the note saying what ran."""
    patch = load_liger_kernels()
    _imported_modules(patch)
    modeling = _modeling(family)
    names = dict(vars(modeling))

    def restore() -> None:  # the classes and the rotary the patch swapped on the module
        for name, value in names.items():
            if vars(modeling).get(name) is not value:
                setattr(modeling, name, value)

    RECORD["restore"] = restore
    patch[APPLY[family]](model=model, fused_linear_cross_entropy=False)
    RECORD["modules"] = dict(collections.Counter(
        type(m).__name__ + (" (Liger's forward)" if "forward" in m.__dict__ else "") for m in model.modules()))
    note = (f"liger {LIGER_COMMIT} {APPLY[family]}(model=model, fused_linear_cross_entropy=False) as "
            "_apply_liger_kernel_to_instance calls it (rope, rms_norm, swiglu or geglu: the defaults)")
    return note


def record() -> Dict[str, Any]:
    """The running case's record of the patch."""
    return {"liger_commit": LIGER_COMMIT, "sm_count": SM_COUNT,
            "device_checks_answered": sorted(set(RECORD.get("device_checks", []))),
            "modules": RECORD.get("modules"), "kernel_launches": dict(RECORD.get("launches") or {})}
