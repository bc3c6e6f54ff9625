#!/usr/bin/env python3
"""Census steady-state step oracle, LORA: the offloading oracle's machinery with PEFT's LoRA on the model.

This file imports ``census_oracle_steady_offload.py`` (beside it, which imports the loss and extended oracles) and
edits nothing in it. Each kind here builds the model as those do, then runs PEFT's own ``get_peft_model`` on it,
from PEFT's sources (``git archive 5d602fd src/peft`` of huggingface/peft, 0.20.1.dev0, in ``/opt/peft/src``; it
imports ``accelerate``, Debian's ``python3-accelerate``). PEFT adapts the model in place: its Linears become
``lora.Linear`` with ``lora_A`` / ``lora_B``, every other parameter is frozen (``requires_grad=False``), and the
model the oracle steps is the adapted one. What is stood in for:

* ``nn.Module._apply`` during ``get_peft_model``: torch 2.14 swaps a fake parameter's tensor on ``.to()``, which
  fails on the fake mode's weak references; the stand-in assigns ``param.data`` instead (the same values);
* ``copy.deepcopy`` in ModulesToSaveWrapper (``modules_to_save``): deep-copying a fake parameter reads its data
  pointer, which torch 2.14 deprecates for FakeTensor and which crashed the cases after it; the stand-in makes the
  copy's parameters ``empty_like`` the original's (the same shapes, dtypes and bytes; their values are never read);
* PEFT's ``nn.Dropout`` (``lora_dropout > 0``): on the CPU fakes ``F.dropout`` runs ATen's composite, a noise tensor
  in the input's dtype; CUDA runs ``native_dropout``, whose backward keeps a bool mask. The stand-in calls
  ``torch.native_dropout(x, p, True)``, as CUDA does.

Under full checkpointing (``_ac_full`` kinds) the model's ``enable_input_require_grads()`` runs, as Transformers'
``gradient_checkpointing_enable`` runs it for a text model (``needs_embedding_grads``) and TRL for a PEFT model.

The optimizer is the offloading oracle's AdamW over every parameter; torch.optim gives a frozen one (no ``.grad``)
no state, as the Trainer's optimizer over the trainable ones alone holds. Each result has ``lora``: the config, the
adapted modules, and the adapters' and the frozen base's counts and bytes.
"""
import contextlib
import os
import sys
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, "/opt/peft/src")
# The optimizers oracle first: its optimizer (the kind's, from its CURRENT) stands under the offloading
# oracle's machinery, each kind naming it (AdamW's forms, bitsandbytes' AdamW8bit, SGD).
import census_oracle_steady_optim as OPTIM  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
import census_oracle_steady_offload as OFFL  # noqa: E402  pylint: disable=wrong-import-position

E = OFFL.E
S = OFFL.S
torch = E.torch

PEFT_COMMIT = "5d602fd"
DENSE = ("llama", "qwen3", "qwen2", "mistral", "gemma3")
MORE_DENSE = ("gemma", "gemma2", "smollm3", "phi3", "olmo3", "seed_oss")

ALL16 = dict(r=16, alpha=32, targets="all-linear")
ATTN = dict(r=16, alpha=16, targets=["q_proj", "k_proj", "v_proj", "o_proj"])  # a MoE's attention
LORA_KINDS: Dict[str, Dict[str, Any]] = {
    # PEFT's defaults: r 8, alpha 8, dropout 0, the model type's targets (q_proj, v_proj), fp32 adapters
    "single_adamw_lora_steady": dict(m=1, batch=1, foreach=False, lora={}),
    "single_adamw_lora_all_steady": dict(m=1, batch=1, foreach=False, lora=ALL16),
    "single_adamw_lora_all_bf16_steady": dict(m=1, batch=1, foreach=False, lora=dict(ALL16, fp32=False)),
    "single_adamw_lora_all_dropout_steady": dict(m=1, batch=1, foreach=False, lora=dict(ALL16, dropout=0.1)),
    "single_adamw_lora_all_bf16_dropout_steady": dict(m=1, batch=1, foreach=False,
                                                      lora=dict(ALL16, fp32=False, dropout=0.1)),
    "single_adamw_lora_mlp_steady": dict(m=1, batch=1, foreach=False,
                                         lora=dict(r=4, alpha=16, targets=["gate_proj", "up_proj", "down_proj"])),
    "single_adamw_lora_attn_steady": dict(m=1, batch=1, foreach=False, lora=ATTN),
    "single_adamw_lora_attn_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", lora=ATTN),
    "single_adamw_lora_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", lora={}),
    "single_adamw_lora_all_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", lora=ALL16),
    "single_adamw_foreach_lora_all_steady": dict(m=1, batch=1, foreach=True, lora=ALL16),
    "single_b2_adamw_lora_all_steady": dict(m=1, batch=S.B2, foreach=False, lora=ALL16),
    "accum_m4_adamw_lora_all_steady": dict(m=S.ACCUM_M, batch=1, foreach=False, lora=ALL16),
    # the LM head adapted beside the attention's q and v (an untied head; Transformers' loss on its logits)
    "single_adamw_lora_head_steady": dict(m=1, batch=1, foreach=False,
                                          lora=dict(r=8, alpha=16, targets=["q_proj", "v_proj", "lm_head"])),
    # PEFT's modules_to_save: a trained copy of the LM head (and of the embedding) beside the frozen original,
    # as a run that adds tokens trains them
    "single_adamw_lora_mts_head_steady": dict(m=1, batch=1, foreach=False, lora=dict(modules_to_save=["lm_head"])),
    "single_adamw_lora_all_mts_embed_head_steady": dict(m=1, batch=1, foreach=False,
                                                        lora=dict(ALL16, modules_to_save=["embed_tokens", "lm_head"])),
    "single_adamw_lora_all_mts_embed_head_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", lora=dict(ALL16, modules_to_save=["embed_tokens", "lm_head"])),
    "single_adamw_lora_all_mts_embed_head_trl_chunked_nll_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", loss="trl-chunked-nll",
        lora=dict(ALL16, modules_to_save=["embed_tokens", "lm_head"])),
    "single_adamw_dora_all_mts_embed_head_steady": dict(
        m=1, batch=1, foreach=False, lora=dict(ALL16, dora=True, modules_to_save=["embed_tokens", "lm_head"])),
    "single_adamw_lora_all_mts_embed_head_trl_chunked_nll_offload_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", loss="trl-chunked-nll", offload=True,
        lora=dict(ALL16, modules_to_save=["embed_tokens", "lm_head"])),
    "single_adamw_lora_all_mts_embed_head_bf16_steady": dict(
        m=1, batch=1, foreach=False, lora=dict(ALL16, fp32=False, modules_to_save=["embed_tokens", "lm_head"])),
    # other optimizers over the adapters: AdamW fused (the HF Trainer's adamw_torch_fused), bitsandbytes' 8-bit
    # AdamW (its adamw_bnb_8bit), SGD
    "single_adamw_fused_lora_all_steady": dict(m=1, batch=1, foreach=False, fused=True, lora=ALL16),
    "single_adamw8bit_lora_all_steady": dict(m=1, batch=1, optimizer="adamw8bit", lora=ALL16),
    "single_sgd_foreach_lora_all_steady": dict(m=1, batch=1, optimizer="sgd", foreach=True, lora=ALL16),
    # DoRA (use_dora=True): the magnitude vectors, the weight norms, and the base recomputed on a dropped input
    "single_adamw_dora_all_steady": dict(m=1, batch=1, foreach=False, lora=dict(ALL16, dora=True)),
    "single_adamw_dora_all_bf16_steady": dict(m=1, batch=1, foreach=False, lora=dict(ALL16, dora=True, fp32=False)),
    "single_adamw_dora_all_dropout_steady": dict(m=1, batch=1, foreach=False,
                                                 lora=dict(ALL16, dora=True, dropout=0.1)),
    "single_adamw_dora_all_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", lora=dict(ALL16, dora=True)),
    # as TRL's SFTTrainer runs a PEFT model by default (its chunked loss, gradient checkpointing), and with its
    # activation offloading
    "single_adamw_lora_all_trl_chunked_nll_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full",
                                                                 loss="trl-chunked-nll", lora=ALL16),
    "single_adamw_lora_all_trl_chunked_nll_offload_ac_full_steady": dict(
        m=1, batch=1, foreach=False, ac="full", loss="trl-chunked-nll", offload=True, lora=ALL16),
    "single_adamw_lora_all_offload_steady": dict(m=1, batch=1, foreach=False, offload=True, lora=ALL16),
    "single_adamw_lora_all_offload_ac_full_steady": dict(m=1, batch=1, foreach=False, offload=True, ac="full",
                                                         lora=ALL16),
}
CURRENT: Dict[str, Any] = {}


@contextlib.contextmanager
def apply_by_data():
    """nn.Module._apply assigning each converted parameter's .data, where torch 2.14 would swap a fake's tensor."""
    original = torch.nn.Module._apply  # pylint: disable=protected-access

    def _apply(self: Any, fn: Any, recurse: bool = True) -> Any:
        if recurse:
            for module in self.children():
                module._apply(fn)  # pylint: disable=protected-access
        for param in self._parameters.values():  # pylint: disable=protected-access
            if param is None:
                continue
            with torch.no_grad():
                applied = fn(param)
            if applied is not param:
                param.data = applied
        for key, buf in self._buffers.items():  # pylint: disable=protected-access
            if buf is not None:
                self._buffers[key] = fn(buf)  # pylint: disable=protected-access
        return self

    torch.nn.Module._apply = _apply  # pylint: disable=protected-access
    try:
        yield
    finally:
        torch.nn.Module._apply = original  # pylint: disable=protected-access


def fresh_copy(module: Any, memo: Any = None) -> Any:
    """copy.deepcopy of a Linear or an Embedding as ModulesToSaveWrapper.update makes it: the same module with
    parameters of its own, each empty_like the original's (its shape, dtype and device). Deep-copying a fake
    parameter reads its data pointer, which torch 2.14 deprecates for FakeTensor and which crashed later cases;
    the copy's values are never read."""
    import collections  # pylint: disable=import-outside-toplevel
    clone = module.__class__.__new__(module.__class__)
    clone.__dict__ = dict(module.__dict__)
    for key, value in module.__dict__.items():
        if isinstance(value, collections.OrderedDict):
            clone.__dict__[key] = collections.OrderedDict(value)
        elif isinstance(value, dict):
            clone.__dict__[key] = dict(value)
    with torch.no_grad():
        for key, param in module._parameters.items():  # pylint: disable=protected-access
            if param is not None:
                clone._parameters[key] = torch.nn.Parameter(torch.empty_like(param),  # pylint: disable=protected-access
                                                            requires_grad=param.requires_grad)
    assert not module._modules, f"fresh_copy copies a leaf module, not {type(module).__name__}"  # pylint: disable=protected-access
    return clone


class _CopyWithFreshDeepcopy:  # pylint: disable=too-few-public-methods
    """The ``copy`` module PEFT's utils/other.py sees: its deepcopy is fresh_copy, the rest the module's own."""

    def __getattr__(self, name: str) -> Any:
        import copy  # pylint: disable=import-outside-toplevel
        return fresh_copy if name == "deepcopy" else getattr(copy, name)


class NativeDropout(torch.nn.Module):
    """nn.Dropout(p) in training as CUDA runs it: native_dropout, its backward keeping the bool mask."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Any) -> Any:
        return torch.native_dropout(x, self.p, True)[0]


def apply_lora(model: Any, lora: Dict[str, Any]) -> Dict[str, Any]:
    import peft  # pylint: disable=import-outside-toplevel
    from peft.tuners.lora import LoraLayer  # pylint: disable=import-outside-toplevel
    kwargs = dict(r=lora.get("r", 8), lora_alpha=lora.get("alpha", 8), lora_dropout=lora.get("dropout", 0.0),
                  task_type="CAUSAL_LM")
    if lora.get("dora"):
        kwargs["use_dora"] = True
    if "targets" in lora:
        kwargs["target_modules"] = lora["targets"]
    if "modules_to_save" in lora:
        kwargs["modules_to_save"] = lora["modules_to_save"]
    config = peft.LoraConfig(**kwargs)
    fp32 = lora.get("fp32", True)
    if "modules_to_save" in lora:
        import peft.utils.other as peft_other  # pylint: disable=import-outside-toplevel
        peft_other.copy = _CopyWithFreshDeepcopy()
    with apply_by_data():
        CURRENT["peft_model"] = peft.get_peft_model(model, config, autocast_adapter_dtype=fp32)
    adapted = []
    for name, module in model.named_modules():
        if isinstance(module, LoraLayer):
            adapted.append(name)
            for key, dropout in list(module.lora_dropout.items()):
                if isinstance(dropout, torch.nn.Dropout):
                    module.lora_dropout[key] = NativeDropout(dropout.p)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    frozen = [(n, p) for n, p in model.named_parameters() if not p.requires_grad]
    return {
        "peft": f"huggingface/peft {PEFT_COMMIT} (0.20.1.dev0) get_peft_model(model, LoraConfig({kwargs}), "
                f"autocast_adapter_dtype={fp32}); nn.Dropout as torch.native_dropout",
        "r": kwargs["r"], "alpha": kwargs["lora_alpha"], "dropout": kwargs["lora_dropout"],
        "target_modules_asked": lora.get("targets", "default"),
        "target_modules": sorted(config.target_modules) if isinstance(config.target_modules, (set, list))
        else config.target_modules,
        "adapter_dtype": "float32" if fp32 else "bfloat16",
        "use_dora": bool(lora.get("dora")),
        "modules_to_save": lora.get("modules_to_save", []),
        "adapted_modules": adapted,
        "trainable_parameters": sum(p.numel() for _, p in trainable),
        "trainable_bytes": sum(p.numel() * p.element_size() for _, p in trainable),
        "trainable_names": sorted(n for n, _ in trainable),
        "frozen_parameters": sum(p.numel() for _, p in frozen),
        "frozen_bytes": sum(p.numel() * p.element_size() for _, p in frozen),
    }


_build_model = S.build_model  # the offloading oracle's (its checkpointing where the kind asks)


def build_model(family: str, config_kwargs: Dict[str, Any], device: Any = None) -> Any:
    # TRL's SFTTrainer makes its offloading manager from the adapted model, after get_peft_model, collecting
    # every parameter's storage, the adapters' too: the offloading oracle's is made here, after PEFT, not inside
    # its build. (torchtune's recipes run torchtune's own LoRA, not PEFT's: no kind here.)
    case = OFFL.OFF.get("case") or {}
    offload = case.get("offload") if "lora" in CURRENT else None
    if offload:
        case["offload"] = False
    # SFTTrainer patches TRL's chunked loss into the adapted model (get_peft_model first): the head it reads is the
    # adapted model's, a modules_to_save copy where PEFT made one. The loss oracle's patch waits until then.
    trl_loss = "lora" in CURRENT and OFFL.L.CURRENT.get("loss") == "trl-chunked-nll"
    if trl_loss:
        OFFL.L.CURRENT["loss"] = None
    try:
        model, config, notes = _build_model(family, config_kwargs, device)
    finally:
        if offload:
            case["offload"] = offload
        if trl_loss:
            OFFL.L.CURRENT["loss"] = "trl-chunked-nll"
    if "lora" in CURRENT:
        CURRENT["record"] = apply_lora(model, CURRENT["lora"])
        if CURRENT.get("ac"):
            model.enable_input_require_grads()
            CURRENT["record"]["enable_input_require_grads"] = True
        notes["lora"] = CURRENT["record"]["peft"]
    if trl_loss:
        OFFL.L.load_trl()["_patch_chunked_ce_lm_head"](model, OFFL.L.CHUNK)
        notes["loss"] = (f"trl {OFFL.L.TRL_COMMIT} _patch_chunked_ce_lm_head(model, {OFFL.L.CHUNK}) on the adapted model, "
                         "after get_peft_model as SFTTrainer runs it: the backbone, then _chunked_cross_entropy_loss "
                         "over the last hidden state")
    if offload:
        # SFTTrainer hands TRL the PeftModel: TRL unwraps it (base_model) to find lm_head, which it runs under
        # its NoOpManager; the oracle's layer hooks go on the adapted model's layers.
        backbone = S.backbone
        S.backbone = lambda _: backbone(model)
        try:
            OFFL.OFF["ctx"] = OFFL.make_manager(CURRENT["peft_model"])
        finally:
            S.backbone = backbone
        notes["activation_offloading"] = (
            f"trl {OFFL.TRL_COMMIT} get_act_offloading_ctx_manager(model) on the adapted model, entered around "
            "each micro-batch's forward + loss + backward")
    return model, config, notes


S.build_model = build_model
_run_offload = E.run_steady_case_ext


def run_steady_case_lora(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    case = dict(case, optimizer=case.get("optimizer", "adamw"))  # the optimizers oracle's name for it
    CURRENT.clear()
    CURRENT.update(case)
    result = _run_offload(group, case, sets, kernels)
    result["lora"] = CURRENT.get("record")
    CURRENT.clear()
    return result


E.run_steady_case_ext = run_steady_case_lora
E.KINDS_EXT = LORA_KINDS
E.KINDS = dict(E.KINDS, **LORA_KINDS)
E.EXT_FAMILIES = {k: DENSE for k in LORA_KINDS}
# More dense families, all-linear (PEFT maps default targets for gemma and gemma2 alone of them)
for _k in ("single_adamw_lora_all_steady", "single_adamw_lora_all_ac_full_steady",
           "single_adamw_lora_all_bf16_dropout_steady"):
    E.EXT_FAMILIES[_k] = DENSE + MORE_DENSE
E.EXT_FAMILIES["single_adamw_lora_steady"] = DENSE + ("gemma", "gemma2")
for _k in ("single_adamw_fused_lora_all_steady", "single_adamw8bit_lora_all_steady",
           "single_sgd_foreach_lora_all_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3")
for _k in ("single_adamw_dora_all_steady", "single_adamw_dora_all_bf16_steady", "single_adamw_dora_all_dropout_steady",
           "single_adamw_dora_all_ac_full_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3", "gemma3")
E.EXT_FAMILIES["single_adamw_dora_all_steady"] = ("llama", "qwen3", "gemma3", "qwen2")  # Qwen2's biases
E.EXT_FAMILIES["single_adamw_lora_attn_steady"] = ("llama", "mixtral", "qwen3_moe", "gpt_oss", "qwen3_next")
E.EXT_FAMILIES["single_adamw_lora_attn_ac_full_steady"] = ("mixtral", "qwen3_moe", "gpt_oss", "qwen3_next")
for _k in ("single_b2_adamw_lora_all_steady", "accum_m4_adamw_lora_all_steady",
           "single_adamw_foreach_lora_all_steady", "single_adamw_lora_all_trl_chunked_nll_ac_full_steady",
           "single_adamw_lora_all_trl_chunked_nll_offload_ac_full_steady", "single_adamw_lora_all_offload_steady",
           "single_adamw_lora_all_offload_ac_full_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3")
E.EXT_FAMILIES["single_adamw_lora_head_steady"] = ("llama", "qwen2", "mistral")
for _k in ("single_adamw_lora_all_mts_embed_head_trl_chunked_nll_ac_full_steady",
           "single_adamw_dora_all_mts_embed_head_steady",
           "single_adamw_lora_all_mts_embed_head_trl_chunked_nll_offload_ac_full_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3")
# modules_to_save on the families whose head is untied (a tied one is PEFT's ensure_weight_tying case)
for _k in ("single_adamw_lora_mts_head_steady", "single_adamw_lora_all_mts_embed_head_steady",
           "single_adamw_lora_all_mts_embed_head_ac_full_steady", "single_adamw_lora_all_mts_embed_head_bf16_steady"):
    E.EXT_FAMILIES[_k] = ("llama", "qwen3", "qwen2", "mistral")
E.STEADY_SIBLING = {}
E.EXT = "census_oracle_steady_lora"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(LORA_KINDS)]
    sys.exit(E.main(argv))
