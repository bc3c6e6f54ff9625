#!/usr/bin/env python3
"""Census steady-state step oracle, QLORA: the LoRA oracle's machinery on a bitsandbytes 4-bit base.

This file imports ``census_oracle_steady_lora.py`` (beside it) and edits nothing in it. Each kind builds the bf16
model as that oracle does, then quantizes it as Transformers' ``BitsAndBytesConfig(load_in_4bit=True, ...)`` loads
it, then (where the kind asks) runs PEFT's ``prepare_model_for_kbit_training``, then ``get_peft_model``, from their
sources: bitsandbytes ``git archive 95f9af3`` (0.50.2.dev0) in ``/opt/bnb``, or the tree ``CENSUS_ORACLE_BNB``
names (``git archive 0.49.2`` for the ``_bnb049`` kinds); PEFT 5d602fd in ``/opt/peft/src``.

The quantization, as Transformers runs it (``integrations/bitsandbytes.py replace_with_bnb_linear`` over
``get_modules_to_not_convert``: the output embeddings, tied and last keys, ``_keep_in_fp32_modules`` kept): every
module whose type is exactly ``nn.Linear`` becomes a ``bnb.nn.Linear4bit`` of the config's compute dtype, quant
type, double quantization and storage, frozen. What is stood in for:

* ``Params4bit`` cannot wrap a fake tensor (``_make_subclass``): the packed weight is the fake tensor
  ``bitsandbytes.functional.quantize_4bit`` returns for the bf16 weight (its registered fake kernels: packed
  ``[(n+1)//(2*itemsize), 1]``, absmax fp32 ``[ceil(n/64)]``; double quantization's offset, uint8 absmax and fp32
  second-level absmax), made an ``nn.Parameter`` (requires_grad False) carrying ``quant_state``,
  ``compress_statistics``, ``quant_type`` and ``quant_storage`` as ``Params4bit`` does. Each layer's quantization
  state (its absmax, code, offset, second-level absmax and that level's copy of the dynamic map) is registered on
  its ``Linear4bit`` as a non-persistent buffer, so the tracker counts it (category buffers); the dynamic map
  ``quantize_blockwise`` caches on the device (fp32 [256]) once;
* ``bitsandbytes::gemm_4bit`` as CUDA dispatches it (``backends/cuda/ops.py``): past 1536 tokens, or where the
  inner dimension is not a multiple of the block size, ``_dequant_linear_fallback`` (an fp32 absmax, their sum with
  the offset, the dequantized ``[out, in]`` weight in the compute dtype, ``F.linear``), its buffers made as that
  function makes them (the dequantization kernels write into them); else the fused kernel, its fake output alone.
  bitsandbytes 0.49 runs ``dequantize_4bit`` and ``F.linear`` in Python: seen as they run;
* the LoRA oracle's stand-ins (``_apply`` by ``.data``, dropout as ``native_dropout``).

``prepare_model_for_kbit_training(model)`` (the ``_kbit`` kinds) runs as PEFT has it: every bf16 parameter but the
packed weights cast to fp32, and, by default, ``enable_input_require_grads`` and
``gradient_checkpointing_enable(gradient_checkpointing_kwargs={})``: ``torch.utils.checkpoint`` without
``use_reentrant``, which this torch runs reentrant. ``_kbit_no_gc`` kinds pass ``use_gradient_checkpointing=False``.
Each result's ``lora`` block gains ``quantization``: the config and the bytes of the packed weights and of the state.
"""
import os
import sys
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
BNB_TREE = os.environ.get("CENSUS_ORACLE_BNB", "/opt/bnb")
import census_oracle_steady_lora as LORA  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, BNB_TREE)  # ahead of the optimizers oracle's /opt/bnb
E = LORA.E
S = LORA.S
torch = E.torch

ALL16 = LORA.ALL16
QLORA = dict(quant_type="nf4", double_quant=True, compute="bfloat16")  # the QLoRA recipe's BitsAndBytesConfig
DEFAULTS: Dict[str, Any] = {}  # BitsAndBytesConfig(load_in_4bit=True): fp4, no double quant, fp32 compute, uint8
MTS = dict(ALL16, modules_to_save=["embed_tokens", "lm_head"])  # PEFT's modules_to_save: trained copies
QLORA_KINDS: Dict[str, Dict[str, Any]] = {
    # a QLoRA run that trains the embedding and head (new tokens): their copies in the base's dtype, or fp32 after
    # prepare_model_for_kbit_training's casts
    "single_adamw_qlora_all_mts_embed_head_steady": dict(m=1, batch=1, foreach=False, lora=MTS, quant=QLORA),
    "single_adamw_qlora_all_mts_embed_head_kbit_steady": dict(m=1, batch=1, foreach=False, lora=MTS, quant=QLORA,
                                                              kbit="gc"),
    "single_adamw_qlora_all_steady": dict(m=1, batch=1, foreach=False, lora=ALL16, quant=QLORA),
    "single_adamw_qlora_steady": dict(m=1, batch=1, foreach=False, lora={}, quant=QLORA),
    "single_adamw_qlora_all_bnb_defaults_steady": dict(m=1, batch=1, foreach=False, lora=ALL16, quant=DEFAULTS),
    "single_adamw_qlora_all_bf16_storage_steady": dict(m=1, batch=1, foreach=False, lora=ALL16,
                                                       quant=dict(QLORA, storage="bfloat16")),
    "single_adamw_qlora_all_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", lora=ALL16, quant=QLORA),
    "single_adamw_qlora_all_bf16_dropout_steady": dict(m=1, batch=1, foreach=False,
                                                       lora=dict(ALL16, fp32=False, dropout=0.1), quant=QLORA),
    "single_adamw_qlora_all_kbit_steady": dict(m=1, batch=1, foreach=False, lora=ALL16, quant=QLORA, kbit="gc"),
    "single_adamw_qlora_all_kbit_no_gc_steady": dict(m=1, batch=1, foreach=False, lora=ALL16, quant=QLORA,
                                                     kbit="no_gc"),
    # as TRL's SFTTrainer runs a QLoRA model (its chunked loss, checkpointing, its activation offloading), and
    # the QLoRA paper's optimizer (bitsandbytes' 8-bit AdamW; its paged form holds the same states elsewhere)
    "single_adamw_qlora_all_trl_chunked_nll_offload_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", loss="trl-chunked-nll", offload=True, lora=ALL16, quant=QLORA),
    "single_adamw8bit_qlora_all_steady": dict(m=1, batch=1, optimizer="adamw8bit", lora=ALL16, quant=QLORA),
    # DoRA over the 4-bit base: its weight dequantized in each forward (dequantize_module_weight)
    "single_adamw_qlora_dora_all_steady": dict(m=1, batch=1, foreach=False, lora=dict(ALL16, dora=True), quant=QLORA),
    "single_adamw_qlora_dora_all_dropout_steady": dict(m=1, batch=1, foreach=False,
                                                       lora=dict(ALL16, dora=True, dropout=0.1), quant=QLORA),
    # a mixture of experts' and a hybrid's attention (their experts are no nn.Linear: Transformers leaves them)
    "single_adamw_qlora_attn_steady": dict(m=1, batch=1, foreach=False, lora=LORA.ATTN, quant=QLORA),
    "single_adamw_qlora_attn_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", lora=LORA.ATTN,
                                                   quant=QLORA),
    "single_adamw_qlora_all_bnb049_steady": dict(m=1, batch=1, foreach=False, lora=ALL16, quant=QLORA, bnb="0.49"),
    "single_adamw_qlora_all_kbit_bnb049_steady": dict(m=1, batch=1, foreach=False, lora=ALL16, quant=QLORA,
                                                      kbit="gc", bnb="0.49"),
}
CURRENT: Dict[str, Any] = {}
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16, "uint8": torch.uint8}


def _bnb() -> Any:
    import bitsandbytes as bnb  # pylint: disable=import-outside-toplevel
    return bnb


class _CudaGemm4bit:
    """torch.ops.bitsandbytes.gemm_4bit.default as CUDA dispatches it (backends/cuda/ops.py, 0.50)."""

    def __init__(self, fused: Any) -> None:
        self.fused = fused

    def __call__(self, A, B, shapeB, absmax, blocksize, quant_type, bias=None, absmax_8bit=None,  # noqa: N803
                 absmax_code=None, absmax_offset=None):
        K = A.shape[-1]  # noqa: N806
        M = A.numel() // K  # noqa: N806
        if M > 1536 or K % blocksize != 0:  # _dequant_linear_fallback
            if absmax_8bit is not None:
                absmax_dq = torch.empty_like(absmax_8bit, dtype=torch.float32)
                absmax = absmax_dq + absmax_offset
            B_dq = torch.empty(shapeB, dtype=A.dtype, device=A.device)  # noqa: N806
            return torch.nn.functional.linear(A, B_dq, bias)
        return self.fused(A, B, shapeB, absmax, blocksize, quant_type, bias=bias, absmax_8bit=absmax_8bit,
                          absmax_code=absmax_code, absmax_offset=absmax_offset)


class _Namespace:
    def __init__(self, real: Any, **overrides: Any) -> None:
        self._real = real
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def cuda_dispatch() -> str:
    """bitsandbytes' autograd module sees torch.ops.bitsandbytes.gemm_4bit as CUDA dispatches it."""
    functions = sys.modules["bitsandbytes.autograd._functions"]
    if not hasattr(torch.ops.bitsandbytes, "gemm_4bit"):
        return "no gemm_4bit op (bitsandbytes 0.49: dequantize_4bit and F.linear in Python)"
    gemm = _Namespace(torch.ops.bitsandbytes.gemm_4bit, default=_CudaGemm4bit(torch.ops.bitsandbytes.gemm_4bit.default))
    ops = _Namespace(torch.ops, bitsandbytes=_Namespace(torch.ops.bitsandbytes, gemm_4bit=gemm))
    functions.torch = _Namespace(torch, ops=ops)
    return ("gemm_4bit as CUDA dispatches it: _dequant_linear_fallback past 1536 tokens or a misaligned inner "
            "dimension (its buffers made as it makes them), else the fused kernel's fake output")


def dequantize_stand_in() -> str:
    """PEFT's dequantize_module_weight (which DoRA reads) tells a Params4bit by its class name; the oracle's packed
    weight is a fake tensor carrying Params4bit's attributes: dequantized as dequantize_bnb_weight does it."""
    import peft.tuners.lora.dora as dora  # pylint: disable=import-outside-toplevel
    original = dora.dequantize_module_weight
    if getattr(original, "stands_in", False):
        return original.stands_in

    def dequantize_module_weight(module: Any) -> Any:
        weight = getattr(module, "weight", None)
        if getattr(weight, "bnb_quantized", False) and getattr(weight, "quant_state", None) is not None:
            return _bnb().functional.dequantize_4bit(weight.data, weight.quant_state)
        return original(module)

    copy_module = dora.deepcopy

    def deepcopy(module: Any, memo: Any = None) -> Any:
        # DoraLinearLayer.update_layer copies a Linear4bit before it reads its weight's norm (for FSDP's sake);
        # a fake tensor cannot be deep-copied (its data pointer), and the copy is gone once the magnitude is
        # made, before any step: the layer itself is read.
        if isinstance(module, _bnb().nn.Linear4bit):
            return module
        return copy_module(module, memo)

    dequantize_module_weight.stands_in = (  # type: ignore[attr-defined]
        "peft.tuners.lora.dora.dequantize_module_weight: a stand-in packed weight dequantized as "
        "dequantize_bnb_weight does (bnb.functional.dequantize_4bit(weight.data, weight.quant_state)); "
        "its deepcopy of a Linear4bit at DoRA's init: the layer itself (the copy goes before any step)")
    dora.dequantize_module_weight = dequantize_module_weight
    dora.deepcopy = deepcopy
    return dequantize_module_weight.stands_in


def quantize(model: Any, quant: Dict[str, Any]) -> Dict[str, Any]:
    """replace_with_bnb_linear + the weights' quantization, as from_pretrained(quantization_config=...) loads."""
    bnb = _bnb()
    F = bnb.functional  # noqa: N806
    from transformers import BitsAndBytesConfig  # pylint: disable=import-outside-toplevel
    from transformers.quantizers.base import HfQuantizer  # pylint: disable=import-outside-toplevel
    from transformers.quantizers.quantizers_utils import should_convert_module  # pylint: disable=C0415
    from torch._subclasses.fake_tensor import unset_fake_temporarily  # pylint: disable=C0415
    kwargs = dict(load_in_4bit=True)
    if "quant_type" in quant:
        kwargs["bnb_4bit_quant_type"] = quant["quant_type"]
    if "double_quant" in quant:
        kwargs["bnb_4bit_use_double_quant"] = quant["double_quant"]
    if "compute" in quant:
        kwargs["bnb_4bit_compute_dtype"] = DTYPES[quant["compute"]]
    if "storage" in quant:
        kwargs["bnb_4bit_quant_storage"] = DTYPES[quant["storage"]]
    config = BitsAndBytesConfig(**kwargs)
    skip = HfQuantizer.get_modules_to_not_convert(model, config.llm_int8_skip_modules, model._keep_in_fp32_modules)
    # quantize_blockwise's dynamic map: built with .tolist() (no fake); its values never matter here
    F.name2qmap["dynamic"] = torch.zeros(256, dtype=torch.float32)
    shared = F.name2qmap["dynamic"]
    packed_bytes = state_bytes = 0
    converted = []
    shared_registered = False
    for name, module in list(model.named_modules()):
        if type(module) is not torch.nn.Linear or not should_convert_module(name, skip):  # pylint: disable=C0123
            continue
        with unset_fake_temporarily(), torch.device("meta"):
            new = bnb.nn.Linear4bit(module.in_features, module.out_features, module.bias is not None,
                                    config.bnb_4bit_compute_dtype,
                                    compress_statistics=config.bnb_4bit_use_double_quant,
                                    quant_type=config.bnb_4bit_quant_type,
                                    quant_storage=config.bnb_4bit_quant_storage)
        new.source_cls = type(module)
        with torch.no_grad():
            packed, state = F.quantize_4bit(module.weight.detach(), blocksize=64,
                                            compress_statistics=config.bnb_4bit_use_double_quant,
                                            quant_type=config.bnb_4bit_quant_type,
                                            quant_storage=config.bnb_4bit_quant_storage)
        weight = torch.nn.Parameter(packed, requires_grad=False)
        for attr, value in (("quant_state", state), ("compress_statistics", config.bnb_4bit_use_double_quant),
                            ("quant_type", config.bnb_4bit_quant_type), ("blocksize", 64),
                            ("quant_storage", config.bnb_4bit_quant_storage), ("bnb_quantized", True),
                            ("module", new)):
            setattr(weight, attr, value)
        new.weight = weight
        new.quant_state = state
        if module.bias is not None:
            new.bias = module.bias
        new.requires_grad_(False)
        tensors = [("quant_absmax", state.absmax), ("quant_code", state.code)]
        if state.nested:
            # quantize_blockwise keeps its own copy of the dynamic map (code.to(device, copy=True))
            tensors += [("quant_offset", state.offset), ("quant_state2_absmax", state.state2.absmax),
                        ("quant_state2_code", state.state2.code)]
            if not shared_registered:
                tensors.append(("quant_dynamic_map", shared))
                shared_registered = True
        for key, tensor in tensors:
            new.register_buffer(key, tensor, persistent=False)
            state_bytes += tensor.untyped_storage().nbytes()
        packed_bytes += packed.untyped_storage().nbytes()
        model.set_submodule(name, new)
        converted.append(name)
    model.is_loaded_in_4bit = True
    return {
        "bitsandbytes": f"{_bnb().__version__} ({BNB_TREE})",
        "config": f"BitsAndBytesConfig({', '.join(f'{k}={v}' for k, v in kwargs.items())})",
        "quant_type": config.bnb_4bit_quant_type, "double_quant": bool(config.bnb_4bit_use_double_quant),
        "compute_dtype": str(config.bnb_4bit_compute_dtype).replace("torch.", ""),
        "quant_storage": str(config.bnb_4bit_quant_storage).replace("torch.", ""),
        "not_converted": sorted(skip), "converted_linears": len(converted),
        "packed_bytes": packed_bytes, "state_bytes": state_bytes, "gemm_4bit": cuda_dispatch(),
        "dequantize_module_weight": dequantize_stand_in(),
    }


_lora_build_model = LORA._build_model  # the offloading oracle's (its checkpointing where the kind asks)


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    model, config, notes = _lora_build_model(family, config_kwargs, device)
    if "quant" in CURRENT:
        record = quantize(model, CURRENT["quant"])
        if CURRENT.get("kbit"):
            import peft  # pylint: disable=import-outside-toplevel
            gc = CURRENT["kbit"] == "gc"
            peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=gc)
            record["prepare_model_for_kbit_training"] = (
                f"peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing={gc})"
                + (": gradient_checkpointing_kwargs {} (use_reentrant unset: reentrant)" if gc else ""))
        CURRENT["quant_record"] = record
        CURRENT["model"] = model
        notes["quantization"] = record["config"]
    return model, config, notes


LORA._build_model = build_model
_run_lora = LORA.run_steady_case_lora


def run_steady_case_qlora(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    want = case.get("bnb")
    version = _bnb().__version__
    if (want == "0.49") != version.startswith("0.49"):
        raise RuntimeError(f"kind {case['kind']} wants bitsandbytes {want or '0.50'}, got {version} ({BNB_TREE})")
    CURRENT.clear()
    CURRENT.update(case)
    try:
        result = _run_lora(group, case, sets, kernels)
    finally:
        record = CURRENT.get("quant_record")
        model = CURRENT.get("model")
        CURRENT.clear()
    if result.get("lora") is not None and record is not None:
        result["lora"]["quantization"] = record
        # Linear4bit.forward casts its bias to the compute dtype in the first forward (bias.data = ...): the
        # parameters as the steady steps hold them, measured after the steps.
        params = list(model.parameters())
        before = result["parameters"]["bytes"]
        after = sum(q.untyped_storage().nbytes() for q in params)
        if after != before:
            result["parameters"]["bytes_before_first_forward"] = before
            result["parameters"]["bytes"] = after
            result["lora"]["frozen_bytes"] += after - before
            by_dtype: Dict[str, int] = {}
            for q in params:
                d = str(q.dtype).replace("torch.", "")
                by_dtype[d] = by_dtype.get(d, 0) + q.numel() * q.element_size()
            result["parameters"]["bytes_by_dtype"] = by_dtype
    return result


E.run_steady_case_ext = run_steady_case_qlora
E.KINDS_EXT = QLORA_KINDS
E.KINDS = dict(E.KINDS, **QLORA_KINDS)
E.EXT_FAMILIES = {k: ("llama", "qwen3") for k in QLORA_KINDS}
for _k in ("single_adamw_qlora_all_steady", "single_adamw_qlora_all_ac_full_steady", "single_adamw_qlora_all_kbit_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3", "qwen2", "mistral", "gemma3")
E.EXT_FAMILIES["single_adamw_qlora_all_bnb_defaults_steady"] = ("llama", "qwen2")
E.EXT_FAMILIES["single_adamw_qlora_dora_all_steady"] = ("llama", "qwen3", "qwen2")
E.EXT_FAMILIES["single_adamw_qlora_attn_steady"] = ("mixtral", "qwen3_moe", "gpt_oss", "qwen3_next")
E.EXT_FAMILIES["single_adamw_qlora_attn_ac_full_steady"] = ("qwen3_moe", "qwen3_next")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_qlora"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(k for k in QLORA_KINDS if ("bnb049" in k) == BNB_TREE.endswith("049"))]
    sys.exit(E.main(argv))
