#!/usr/bin/env python3
"""Census steady-state step oracle, AUTOCAST: the HF Trainer's ``bf16=True`` on a model loaded in fp32.

This file imports ``census_oracle_steady_lora.py`` (beside it, which imports the offloading, optimizers, loss and
extended oracles) and edits nothing in them. Each kind builds the model with fp32 as the default dtype (what
``from_pretrained(..., dtype=torch.float32)`` loads), LoRA's kinds then run PEFT's ``get_peft_model`` on it, and
the model's forward is wrapped as accelerate 1.14's ``Accelerator.prepare_model`` wraps it under
``mixed_precision="bf16"``:

    model.forward = MethodType(autocast_context(model.forward.__func__), model)
    model.forward = MethodType(convert_outputs_to_fp32(model.forward.__func__), model)

``convert_outputs_to_fp32`` is accelerate's own (Debian's python3-accelerate 1.14.0); ``autocast_context`` is
``torch.autocast(device_type, dtype=torch.bfloat16)``, the context ``get_mixed_precision_context_manager`` returns,
on the fakes' device, the CPU. What is stood in for, since the oracle's tensors are CPU fakes:

* **CUDA's autocast policy on the CPU key.** ``torch.autocast("cpu")`` runs the kernels registered at
  ``AutocastCPU``, whose op lists are not CUDA's. Every op this torch registers at ``AutocastCUDA`` gets a Python
  kernel at ``AutocastCPU`` with CUDA's policy (``autocast_mode.cpp``): lower_precision_fp (the matrix products,
  the convolutions, ``scaled_dot_product_attention``) casts its floating tensors to bf16; fp32 casts them to fp32;
  fp32_set_opt_dtype (``sum``, ``softmax``, ``log_softmax``, ``cumsum``, ``prod``, ``cumprod``) passes
  ``dtype=torch.float32`` where the first argument is floating and no dtype was given; promote casts them to the
  widest. Every op registered at ``AutocastCPU`` alone (``cat``, ``stack``, ``cross_entropy_loss``, ...) gets
  ``torch.library.fallthrough_kernel``, as CUDA has no kernel for it. Each kernel runs its op with ``AutocastCPU``
  excluded, as ``WrapFunction_`` does.
* **The cast cache** (``cached_cast``): a bf16 cast of an fp32 leaf that requires grad and is no view is made once
  per autocast region and reused; ``torch.clear_autocast_cache``, which ``torch.autocast.__exit__`` calls when the
  outermost region closes, empties it.
* **The attention kernel.** Transformers calls the registered attention function (the census's flash stand-in, a
  custom op no autocast list names) where ``torch.nn.functional.scaled_dot_product_attention`` would run: q, k and
  v are cast as that op's lower_precision_fp kernel casts them, then the kernel runs.

The ``_load_bf16`` kinds build the model in bf16 (Transformers 5's ``dtype="auto"`` on a bf16 checkpoint, which TRL
loads by default) and wrap it the same way: the products already bf16, the fp32 lists and the output copy alike.

Checkpointing (``_ac_full``) is ``torch.utils.checkpoint`` non-reentrant, whose recompute re-enters the autocast
state its forward saw (``_get_autocast_kwargs``), so its casts are made again and cached in the recompute's own
region. No fp32 kind runs a mixture of experts: Transformers' ``grouped_mm`` refuses fp32 experts (``_grouped_mm``'s
check: "Expected mat_a to be BFloat16"), as it does on CUDA, and its eager experts loop over ``nonzero``, whose
size fake tensors cannot know. Qwen3-Next's kinds build every layer's MLP dense (``mlp_only_layers`` all of them):
its gated delta rule, causal convolution and gated attention run under autocast beside dense MLPs.
"""
import contextlib
import functools
import os
import sys
import types
import weakref
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_oracle_steady_lora as LORA  # noqa: E402  pylint: disable=wrong-import-position

E = LORA.E
S = LORA.S
O = S.O
torch = E.torch

ALL16 = LORA.ALL16
DENSE = ("llama", "qwen3", "qwen2", "mistral", "gemma3")
HYBRID = ("qwen3_next",)  # its linear attention beside full attention; every MLP dense (mlp_only_layers)
MTS = dict(ALL16, modules_to_save=["embed_tokens", "lm_head"])  # PEFT's modules_to_save: trained copies
AUTOCAST_KINDS: Dict[str, Dict[str, Any]] = {
    # the embedding and head trained as copies (modules_to_save) on the fp32 base, and TRL's default run with them
    "single_adamw_lora_all_mts_embed_head_autocast_steady": dict(m=1, batch=1, foreach=False, lora=MTS,
                                                                 autocast=True),
    "single_adamw_lora_all_mts_embed_head_trl_chunked_nll_autocast_load_bf16_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", loss="trl-chunked-nll", lora=MTS, autocast=True, load="bf16"),
    "single_adamw_autocast_steady": dict(m=1, batch=1, foreach=False, autocast=True),
    "single_adamw_autocast_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", autocast=True),
    "single_adamw_foreach_autocast_steady": dict(m=1, batch=1, foreach=True, autocast=True),
    "accum_m4_adamw_autocast_steady": dict(m=S.ACCUM_M, batch=1, foreach=False, autocast=True),
    # PEFT's LoRA on the fp32 base (the frozen weights cast at each use), the Trainer's autocast around it
    "single_adamw_lora_all_autocast_steady": dict(m=1, batch=1, foreach=False, lora=ALL16, autocast=True),
    "single_adamw_lora_all_autocast_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", lora=ALL16,
                                                         autocast=True),
    "single_adamw_lora_autocast_steady": dict(m=1, batch=1, foreach=False, lora={}, autocast=True),
    # the model loaded in bf16 (Transformers 5's dtype="auto", TRL's default) under the same bf16=True
    "single_adamw_autocast_load_bf16_steady": dict(m=1, batch=1, foreach=False, autocast=True, load="bf16"),
    "single_adamw_autocast_load_bf16_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", autocast=True,
                                                           load="bf16"),
    # TRL's SFTTrainer on a PEFT model by default: bf16 load, fp32 adapters, checkpointing, bf16=True
    "single_adamw_lora_all_autocast_load_bf16_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full",
                                                                    lora=ALL16, autocast=True, load="bf16"),
    # ... with TRL's default loss, its chunked cross-entropy patched into the forward, so under the autocast too
    "single_adamw_lora_all_trl_chunked_nll_autocast_load_bf16_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", loss="trl-chunked-nll", lora=ALL16, autocast=True, load="bf16"),
    "single_adamw_trl_chunked_nll_autocast_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full",
                                                                 loss="trl-chunked-nll", autocast=True),
    # reentrant checkpointing (gradient_checkpointing_kwargs={"use_reentrant": True}, or {}): the forward under
    # no_grad fills the cast cache all the same, and the recompute re-enters the autocast
    "single_adamw_autocast_ac_full_reentrant_steady": dict(m=1, batch=1, foreach=False, ac="full", reentrant=True,
                                                           autocast=True),
    "single_adamw_lora_all_autocast_ac_full_reentrant_steady": dict(m=1, batch=1, foreach=False, ac="full",
                                                                    reentrant=True, lora=ALL16, autocast=True),
    # TRL's activation offloading (SFTConfig.activation_offloading): its context around the micro-batch's forward,
    # loss and backward, the autocast inside the forward
    "single_adamw_autocast_offload_steady": dict(m=1, batch=1, foreach=False, offload=True, autocast=True),
    "single_adamw_lora_all_trl_chunked_nll_offload_autocast_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", loss="trl-chunked-nll", offload=True, lora=ALL16, autocast=True),
    "single_adamw_lora_all_trl_chunked_nll_offload_autocast_load_bf16_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", loss="trl-chunked-nll", offload=True, lora=ALL16, autocast=True,
        load="bf16"),
}
CURRENT: Dict[str, Any] = {}

# --- CUDA's autocast policy, registered at AutocastCPU ---------------------------------------------------------

KEY = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)  # pylint: disable=protected-access
LOWER = ("_convolution", "_convolution.deprecated", "_scaled_dot_product_flash_attention", "_thnn_fused_gru_cell",
         "_thnn_fused_lstm_cell", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "conv1d",
         "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input",
         "convolution", "cudnn_convolution", "cudnn_convolution_transpose", "einsum", "gru_cell",
         "linalg_multi_dot", "linalg_vecdot", "linear", "lstm_cell", "matmul", "mm", "mv", "prelu", "rnn_relu_cell",
         "rnn_tanh_cell", "scaled_dot_product_attention")
SET_OPT_DTYPE = ("cumprod", "cumsum", "log_softmax.int", "prod", "prod.dim_int", "softmax.int", "sum",
                 "sum.dim_IntList")
PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put", "scatter_add",
           "tensordot", "vdot")
CACHE: Dict[int, Any] = {}
POLICY: Dict[str, Any] = {"registered": False}


def _eligible(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point() and a.dtype != torch.float64


def cached_cast(to: Any, a: Any) -> Any:
    """autocast_mode.cpp cached_cast on one argument (lists mapped)."""
    if isinstance(a, (list, tuple)):
        return type(a)(cached_cast(to, x) for x in a)
    if not _eligible(a) or a.dtype == to:
        return a
    can_cache = (to == torch.bfloat16 and a.dtype == torch.float32 and a.requires_grad and a.is_leaf
                 and not a._is_view() and torch.is_autocast_cache_enabled())  # pylint: disable=protected-access
    if can_cache:
        hit = CACHE.get(id(a))
        if hit is not None and hit[0]() is a:
            return hit[1]
        cast = a.to(to)
        CACHE[id(a)] = (weakref.ref(a), cast)
        return cast
    return a.to(to)


def _widest(args: Any) -> Any:
    widest = None
    for a in args:
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            if _eligible(x):
                widest = x.dtype if widest is None else torch.promote_types(widest, x.dtype)
    return widest


def _kernel(op: Any, policy: str) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        with torch._C._ExcludeDispatchKeyGuard(KEY):  # pylint: disable=protected-access
            if policy == "lower":
                args = tuple(cached_cast(torch.bfloat16, a) for a in args)
                kwargs = {k: cached_cast(torch.bfloat16, v) for k, v in kwargs.items()}
            elif policy == "fp32":
                args = tuple(cached_cast(torch.float32, a) for a in args)
                kwargs = {k: cached_cast(torch.float32, v) for k, v in kwargs.items()}
            elif policy == "set_opt_dtype":
                if args and _eligible(args[0]) and kwargs.get("dtype") is None:
                    schema_args = [arg.name for arg in op._schema.arguments]  # pylint: disable=protected-access
                    position = schema_args.index("dtype")
                    if len(args) > position:
                        if args[position] is None:
                            args = args[:position] + (torch.float32,) + args[position + 1:]
                    else:
                        kwargs["dtype"] = torch.float32
            else:  # promote
                widest = _widest(list(args) + list(kwargs.values()))
                if widest is not None:
                    args = tuple(cached_cast(widest, a) for a in args)
                    kwargs = {k: cached_cast(widest, v) for k, v in kwargs.items()}
            return op(*args, **kwargs)
    return kernel


def register_cuda_policy() -> Dict[str, Any]:
    if POLICY["registered"]:
        return POLICY["note"]
    lib = torch.library.Library("aten", "IMPL")  # pylint: disable=no-member
    POLICY["lib"] = lib
    cuda = {n.split("::", 1)[1] for n in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCUDA")}  # pylint: disable=W0212
    cpu = {n.split("::", 1)[1] for n in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")}  # pylint: disable=W0212
    counts: Dict[str, int] = {}
    for name in sorted(cuda):
        base, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
        policy = ("lower" if name in LOWER else "set_opt_dtype" if name in SET_OPT_DTYPE
                  else "promote" if name in PROMOTE else "fp32")
        lib.impl(name, _kernel(op, policy), "AutocastCPU")
        counts[policy] = counts.get(policy, 0) + 1
    for name in sorted(cpu - cuda):
        lib.impl(name, torch.library.fallthrough_kernel, "AutocastCPU")
        counts["fallthrough"] = counts.get("fallthrough", 0) + 1
    clear = torch.clear_autocast_cache

    def clear_autocast_cache() -> None:
        CACHE.clear()
        clear()

    torch.clear_autocast_cache = clear_autocast_cache
    POLICY["registered"] = True
    POLICY["note"] = (f"CUDA's autocast policy at AutocastCPU: {len(cuda)} ops this torch registers at AutocastCUDA "
                      f"({counts}), the {len(cpu - cuda)} CPU-only ones falling through; the cast cache in Python, "
                      "emptied by torch.clear_autocast_cache")
    return POLICY["note"]


# --- the model as the Trainer runs it ------------------------------------------------------------------------

_default_dtype = O._default_dtype  # pylint: disable=protected-access


@contextlib.contextmanager
def _fp32_when_autocast(dtype: Any):
    fp32 = CURRENT.get("autocast") and CURRENT.get("load") != "bf16"
    with _default_dtype(torch.float32 if fp32 else dtype):
        yield


O._default_dtype = _fp32_when_autocast  # pylint: disable=protected-access
_make_config = O.make_config


def make_config(family: str, kwargs: Any) -> Any:
    config, how = _make_config(family, kwargs)
    if CURRENT.get("autocast") and CURRENT.get("load") != "bf16" and family in HYBRID:
        config.mlp_only_layers = list(range(config.num_hidden_layers))
        how += "; mlp_only_layers = every layer (dense MLPs)"
    return config, how


O.make_config = make_config
_build_lora = S.build_model  # the LoRA oracle's (PEFT where the kind asks, the offloading oracle's build)


def _autocast_attention(function: Any) -> Any:
    def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
        if torch.is_autocast_enabled("cpu"):
            with torch._C._ExcludeDispatchKeyGuard(KEY):  # pylint: disable=protected-access
                query, key, value = (cached_cast(torch.bfloat16, t) for t in (query, key, value))
                return function(module, query, key, value, attention_mask, **kwargs)
        return function(module, query, key, value, attention_mask, **kwargs)
    return attention


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _build_lora(family, config_kwargs, device)
    if not CURRENT.get("autocast"):
        return model, config, notes
    if CURRENT.get("reentrant"):
        for layer in S.backbone(model).layers:
            layer._gradient_checkpointing_func = functools.partial(  # pylint: disable=protected-access
                torch.utils.checkpoint.checkpoint, use_reentrant=True)
        notes["activation_checkpointing"] = (
            "every decoder layer: functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=True), as "
            "gradient_checkpointing_enable({'use_reentrant': True}) sets it")
    from accelerate.utils import convert_outputs_to_fp32  # pylint: disable=import-outside-toplevel
    import accelerate  # pylint: disable=import-outside-toplevel
    notes["autocast_policy"] = register_cuda_policy()
    autocast_context = torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    new_forward = autocast_context(model.forward.__func__)
    model.forward = types.MethodType(new_forward, model)
    model.forward = types.MethodType(convert_outputs_to_fp32(model.forward.__func__), model)
    notes["mixed_precision"] = (
        f"accelerate {accelerate.__version__} Accelerator.prepare_model(mixed_precision='bf16') as it wraps the "
        "forward: torch.autocast(device_type='cpu', dtype=torch.bfloat16) (CUDA's policy registered), then "
        "convert_outputs_to_fp32; the model built with "
        + ("bf16 (the step oracle's own build)" if CURRENT.get("load") == "bf16" else "fp32 as the default dtype"))
    by_dtype: Dict[str, int] = {}
    for p in model.parameters():
        d = str(p.dtype).replace("torch.", "")
        by_dtype[d] = by_dtype.get(d, 0) + p.numel()
    notes["parameters_by_dtype"] = by_dtype
    return model, config, notes


S.build_model = build_model
# The census's flash stand-in as Transformers finds it (O registers its module's _flash_attention by name).
O._flash_attention = _autocast_attention(O._flash_attention)  # pylint: disable=protected-access
_run_lora = E.run_steady_case_ext


def run_steady_case_autocast(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    CURRENT.clear()
    CURRENT.update(case)
    try:
        result = _run_lora(group, case, sets, kernels)
    finally:
        CURRENT.clear()
        CACHE.clear()
    result["autocast"] = {"dtype": "bfloat16", "device_policy": "cuda",
                          "weights": "bfloat16" if case.get("load") == "bf16" else "float32",
                          "outputs": "accelerate convert_outputs_to_fp32"} if case.get("autocast") else None
    return result


E.run_steady_case_ext = run_steady_case_autocast
E.KINDS_EXT = AUTOCAST_KINDS
E.KINDS = dict(E.KINDS, **AUTOCAST_KINDS)
E.EXT_FAMILIES = {k: DENSE + HYBRID for k in AUTOCAST_KINDS}
for _k in ("single_adamw_foreach_autocast_steady", "accum_m4_adamw_autocast_steady",
           "single_adamw_lora_autocast_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3")
E.EXT_FAMILIES["single_adamw_lora_all_autocast_ac_full_steady"] = ("llama", "qwen3", "qwen3_next")
# Loaded in bf16 the experts run Transformers' grouped_mm (bf16), and Qwen3-Next keeps its mixture of experts
E.EXT_FAMILIES["single_adamw_autocast_load_bf16_steady"] = DENSE + ("qwen3_next", "qwen3_moe", "mixtral")
E.EXT_FAMILIES["single_adamw_autocast_load_bf16_ac_full_steady"] = ("llama", "qwen3", "qwen3_next", "qwen3_moe")
E.EXT_FAMILIES["single_adamw_lora_all_autocast_load_bf16_ac_full_steady"] = ("llama", "qwen3", "gemma3")
E.EXT_FAMILIES["single_adamw_lora_all_trl_chunked_nll_autocast_load_bf16_ac_full_steady"] = ("llama", "qwen3", "gemma3")
E.EXT_FAMILIES["single_adamw_trl_chunked_nll_autocast_ac_full_steady"] = ("llama", "qwen3")
# More dense families, each kind's plainest forms
MORE_DENSE = ("gemma", "gemma2", "smollm3", "phi3", "olmo3", "seed_oss")
for _k in ("single_adamw_autocast_steady", "single_adamw_autocast_ac_full_steady", "single_adamw_autocast_load_bf16_steady",
           "single_adamw_lora_all_autocast_steady"):
    E.EXT_FAMILIES[_k] = E.EXT_FAMILIES[_k] + MORE_DENSE
E.EXT_FAMILIES["single_adamw_autocast_ac_full_reentrant_steady"] = ("llama", "qwen3", "qwen3_next")
for _k in ("single_adamw_lora_all_mts_embed_head_autocast_steady",
           "single_adamw_lora_all_mts_embed_head_trl_chunked_nll_autocast_load_bf16_ac_full_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3")
E.EXT_FAMILIES["single_adamw_lora_all_autocast_ac_full_reentrant_steady"] = ("llama", "qwen3")
for _k in ("single_adamw_autocast_offload_steady", "single_adamw_lora_all_trl_chunked_nll_offload_autocast_ac_full_steady",
           "single_adamw_lora_all_trl_chunked_nll_offload_autocast_load_bf16_ac_full_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_autocast"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(AUTOCAST_KINDS)]
    sys.exit(E.main(argv))
