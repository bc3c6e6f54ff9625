#!/usr/bin/env python3
"""Census step oracle: the live bytes of every storage over one rank's whole training step, on fake tensors.

Ground truth for Census's shape-only simulation of PyTorch's eager autograd
over a full step (not one layer). A causal LM is built with
``AutoModelForCausalLM.from_config`` under ``FakeTensorMode`` (default dtype
bf16, train mode, ``use_cache=False``, attention through the torch2 oracle's
flash stand-in ``nd_census_attention``, experts ``grouped_mm``, Qwen3-Next's
gated delta rule eager), and every storage an op returns is tracked from its
allocation to its free (``weakref.finalize`` on the storage, under a
``TorchDispatchMode``: the torch2 oracle's ``LiveBytes``, i.e. the census's
``_LiveBytes``), parameters and buffers counted from the step's start. The
peak is the running maximum over the whole event log (nothing excluded), and
at that moment the live bytes are split into parameters, gradients (storages
that are some parameter's ``.grad``), optimizer states and everything else.

Cases (one JSON each):

* ``single``: one micro-batch, embedding -> layers -> final norm -> LM head ->
  Transformers' causal-LM loss (``labels``), ``loss.backward()``;
* ``accum_m4``: 4 micro-batches, ``(loss / 4).backward()`` each, gradients
  accumulating in ``.grad``;
* ``accum_m4_adamw``: ``accum_m4`` then ``torch.optim.AdamW(foreach=False,
  fused=False).step()`` (first step: states created) and
  ``zero_grad(set_to_none=True)``;
* ``pp{p}_m{m}_r{r}``: stage r of p under 1F1B with m micro-batches (warm-up
  ``min(p-r-1, m)`` forwards, steady one-forward-one-backward, cool-down
  backwards), each micro-batch's graph alive until its backward;
* ``sac_selective`` / ``ac_full``: ``single`` with every decoder layer under
  the torch2 oracle's selective checkpointing (HyperParallel's policy, fresh
  per layer call) / full non-reentrant activation checkpointing.

``--real DEVICE`` (cpu or cuda) runs the same cases on REAL tensors on that
device (real bf16 parameters, cheaply initialised; real random input ids and
labels; the flash stand-in allocating empty outputs), under the same tracker,
so that the tracked bytes are counted as in fake mode; on cuda it also records
the caching allocator's numbers at every phase boundary (``cuda``).

Imports the torch2 oracle (``census_oracle_torch2.py``, beside this file or in
``../torch2/``) for its kernels, tracker, policy and helpers. See README.md.

This copy (Census's scripts/device/oracle_step/) extends the step oracle of the shared oracle folder
(census_oracle_step.py sha256 c38dd91c3cd5...) for the caching-allocator check (scripts/device/README.md):
at every phase boundary ``cuda_numbers`` also reads ``torch.cuda.memory_stats()``'s requested bytes,
inactive split bytes and blocks, segments, and the device allocs and frees (current and peak), and
``--empty-cache-before-step`` returns the cached blocks left by the model's build and the cuBLAS
warm-up before the step starts (``torch.cuda.empty_cache()``), so the step starts from its live tensors
as Census's simulated allocator does. Every other number is the shared oracle's, computed as there.
"""
import argparse
import contextlib
import gc
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
for _candidate in (HERE, os.path.join(HERE, "..", "torch2")):
    if os.path.exists(os.path.join(_candidate, "census_oracle_torch2.py")):
        sys.path.insert(0, os.path.abspath(_candidate))
        break
import census_oracle_torch2 as O  # noqa: E402  pylint: disable=wrong-import-position

torch = O.torch
ORACLE = "census_oracle_step"
SCHEMA = 1
_STARTED = time.perf_counter()

# ---------------------------------------------------------------------------
# The matrix (pure Python)
# ---------------------------------------------------------------------------

# The first four families (17 kinds each; their cases, ids and numbers unchanged) and every other family of
# the torch2 oracle's FAMILIES (the "added" families: 7 kinds each).
ORIGINAL_FAMILIES = ("llama", "qwen3_moe", "deepseek_v3", "qwen3_next")
ADDED_FAMILIES = tuple(f for f in O.FAMILIES if f not in ORIGINAL_FAMILIES)
FAMILIES = ORIGINAL_FAMILIES + ADDED_FAMILIES
SHARED_FAMILIES = ("llama", "qwen3_moe")  # the original families' split (by family, both seqs)
SHARED_SEQ = 128  # the added families' and the b2 kinds' split: seq 128 shared, any other seq held out
MOE_FAMILIES = ("qwen3_moe", "deepseek_v3", "qwen3_next")  # the original families run grouped_mm unconditionally
TOY_SEQS = (128, 256)
LAYERS = 4
PIPELINES = ((2, 4), (2, 8), (4, 4), (4, 8))  # (p, m)
ACCUM_M = 4
B2 = 2  # the micro-batch of two sequences
B2_ACCUM_FAMILIES = ("llama", "qwen3_moe", "deepseek_v3")  # accum_m4_adamw_b2
# Families whose model forward cannot be split into pipeline stages honestly (why), by reading Transformers 5.16.
PP_REFUSED = {
    "gemma4": "Gemma4TextModel.forward builds per-layer inputs at the model level from input_ids "
              "(embed_tokens_per_layer) and from inputs_embeds (per_layer_model_projection + norm) and hands "
              "layer i the slice [:, :, i, :]; given inputs_embeds alone it reverses the main embedding to recover "
              "input_ids (a data-dependent search through embed_tokens on a later stage), and its KV-shared last "
              "layers (num_kv_shared_layers=2) read K/V that layers 0-1 (stage 0) store in the forward's shared "
              "cache: model.model(inputs_embeds=x) on stage 1 can do neither as a pipeline would",
    "deepseek_v4": "DeepseekV4Model.forward expands inputs_embeds into hc_mult hyper-connection streams "
                   "([b,s,hc,h]) before the layers and collapses them with hc_head after them: a stage boundary "
                   "must carry the [b,s,hc,h] streams, which model.model's forward neither takes nor returns",
    "granitemoehybrid": "GraniteMoeHybridModel.forward multiplies inputs_embeds by embedding_multiplier even "
                        "when they are given (not only after embed_tokens): model.model(inputs_embeds=x) on a "
                        "later stage would scale the received hidden state again (an extra op and storage)",
}


def _cycle(values: Sequence[Any], n: int = LAYERS) -> List[Any]:
    return [values[i % len(values)] for i in range(n)]


def toy_config_kwargs(family: str) -> Dict[str, Any]:
    """The torch2 oracle's toy fields for *family*, with 4 layers covering each of its layer kinds.

    Original families as before (Qwen3-Next linear/full alternating). Added families: a per-layer pattern
    the toy states (layer_types, mlp_layer_types, indexer_types, layers_block_type) is repeated to 4 layers
    unless set here: Gemma-3 sliding/full alternating, Gemma-4 sliding/full with the last 2 layers KV-shared,
    GLM-5 (glm_moe_dsa) full/shared/full/shared indexers, MiMo-V2-Flash full-dense, sliding-moe, full-moe,
    sliding-moe; Phi-3 / SmolLM3 pad_token_id 0 (their default pad id is beyond the toy vocabulary).
    """
    kwargs = O.toy_kwargs(family)
    kwargs["num_hidden_layers"] = LAYERS
    if family == "qwen3_next":
        kwargs["layer_types"] = ["linear_attention", "full_attention"] * (LAYERS // 2)
    if family in ORIGINAL_FAMILIES:
        return kwargs
    for name in ("layer_types", "mlp_layer_types", "indexer_types", "layers_block_type"):
        if isinstance(kwargs.get(name), (list, tuple)) and len(kwargs[name]) != LAYERS:
            kwargs[name] = _cycle(list(kwargs[name]))
    if family == "gemma3":
        kwargs["layer_types"] = _cycle(["sliding_attention", "full_attention"])
    elif family == "gemma4":
        kwargs.update(num_kv_shared_layers=2, layer_types=_cycle(["sliding_attention", "full_attention"]))
    elif family == "glm_moe_dsa":
        kwargs["indexer_types"] = _cycle(["full", "shared"])
    elif family == "mimo_v2_flash":
        kwargs.update(layer_types=["full_attention", "sliding_attention", "full_attention", "sliding_attention"],
                      mlp_layer_types=["dense", "sparse", "sparse", "sparse"])
    elif family in ("phi3", "smollm3"):
        kwargs["pad_token_id"] = 0
    return kwargs


LLAMA8B_SHAPES = ((LAYERS, 4096), (2, 8192))  # (layers, seq)


def llama8b_config_kwargs(layers: int = LAYERS) -> Dict[str, Any]:
    kwargs = dict(O.CHECKPOINTS["llama"][1])
    kwargs.update(num_hidden_layers=layers, max_position_embeddings=8192)
    return kwargs


def case_kinds(full: bool = True) -> List[Dict[str, Any]]:
    """The original families' 17 kinds (batch 1)."""
    kinds = [dict(kind="single", m=1), dict(kind="accum", m=ACCUM_M), dict(kind="accum_adamw", m=ACCUM_M)]
    if full:
        for p, m in PIPELINES:
            for r in range(p):
                kinds.append(dict(kind="pipeline", p=p, m=m, r=r))
        kinds += [dict(kind="sac_selective", m=1), dict(kind="ac_full", m=1)]
    return kinds


def b2_kinds(family: str) -> List[Dict[str, Any]]:
    """Micro-batches of 2 sequences: single_b2 for every family, accum_m4_adamw_b2 for three."""
    kinds = [dict(kind="single", m=1, batch=B2)]
    if family in B2_ACCUM_FAMILIES:
        kinds.append(dict(kind="accum_adamw", m=ACCUM_M, batch=B2))
    return kinds


def added_kinds() -> List[Dict[str, Any]]:
    """The added families' 7 kinds: single, single_b2, accum_m4_adamw, pp2_m4_r0/r1, sac_selective, ac_full."""
    return [dict(kind="single", m=1), dict(kind="single", m=1, batch=B2), dict(kind="accum_adamw", m=ACCUM_M),
            dict(kind="pipeline", p=2, m=4, r=0), dict(kind="pipeline", p=2, m=4, r=1),
            dict(kind="sac_selective", m=1), dict(kind="ac_full", m=1)]


def family_kinds(family: str, added_only: bool = False) -> List[Dict[str, Any]]:
    """Every kind of *family*; *added_only*: only those added after the first run (b2 kinds, added families)."""
    if family in ORIGINAL_FAMILIES:
        return b2_kinds(family) if added_only else case_kinds() + b2_kinds(family)
    return added_kinds()


def kind_id(k: Dict[str, Any]) -> str:
    tail = f"_b{k['batch']}" if k.get("batch", 1) != 1 else ""
    if k["kind"] == "single":
        return "single" + tail
    if k["kind"] == "accum":
        return f"accum_m{k['m']}" + tail
    if k["kind"] == "accum_adamw":
        return f"accum_m{k['m']}_adamw" + tail
    if k["kind"] == "pipeline":
        return f"pp{k['p']}_m{k['m']}_r{k['r']}" + tail
    return k["kind"] + tail


def case_split(family: str, seq: int, k: Dict[str, Any]) -> str:
    """The original families' first 17 kinds keep their split (by family); every case added since is split by
    sequence length (seq 128 shared, others held out)."""
    if family in ORIGINAL_FAMILIES and k.get("batch", 1) == 1:
        return "shared" if family in SHARED_FAMILIES else "heldout"
    return "shared" if seq == SHARED_SEQ else "heldout"


def build_matrix(families: Sequence[str], seqs: Sequence[int], llama8b: bool,
                 added_only: bool = False) -> List[Dict[str, Any]]:
    """Groups of cases, one subprocess per group (family, size, seq)."""
    groups = []
    # the Llama-3-8B-shape group first (the one most likely to take long)
    for family in families:
        for seq in seqs:
            size = "toy"
            cases = [dict(k, id=f"{family}_{size}_L{LAYERS}_s{seq}_{kind_id(k)}", split=case_split(family, seq, k))
                     for k in family_kinds(family, added_only)]
            splits = sorted({c["split"] for c in cases})
            groups.append(dict(id=f"{family}_{size}_s{seq}", family=family, size=size, seq=seq,
                               config_kwargs=toy_config_kwargs(family), checkpoint=None,
                               split=splits[0] if len(splits) == 1 else "mixed", cases=cases))
    if llama8b:
        big = []
        for layers, seq in LLAMA8B_SHAPES:
            cases = [dict(k, id=f"llama_h4096_L{layers}_s{seq}_{kind_id(k)}") for k in case_kinds(full=False)
                     if k["kind"] in ("single", "accum_adamw")]
            # the first 4-layer group keeps its old id (its fake JSONs are the held-out set's)
            gid = f"llama_h4096_s{seq}" if layers == LAYERS else f"llama_h4096_L{layers}_s{seq}"
            big.append(dict(id=gid, family="llama", size="Llama-3-8B-shape", seq=seq,
                            config_kwargs=llama8b_config_kwargs(layers),
                            checkpoint=f"Llama-3-8B ({layers} layers)", split="heldout", cases=cases))
        groups = big + groups
    return groups


def schedule_1f1b(p: int, r: int, m: int) -> List[Tuple[str, int]]:
    """Stage *r*'s 1F1B order: warm-up min(p-r-1, m) forwards, steady F/B pairs, cool-down backwards."""
    warm = min(p - r - 1, m)
    order = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        order += [("F", warm + i), ("B", i)]
    order += [("B", i) for i in range(m - warm, m)]
    return order


# ---------------------------------------------------------------------------
# The tracker: the torch2 oracle's LiveBytes, remembering what each storage is
# ---------------------------------------------------------------------------

class StepBytes(O.LiveBytes):
    """LiveBytes over a whole step: each storage's first op, dtype, shape and phase; ops counted by name.

    A scalar read of a fake tensor is answered ``scalar_value`` (0 as the
    census answers it; 1 during the optimizer step, whose bias corrections
    divide by ``1 - beta**step``); a scalar read of a real tensor (``--real``)
    runs, and is counted the same way. Each storage's device type is kept
    (``devices``), so that a real CUDA run can count the bytes on the GPU alone.
    """

    def __init__(self) -> None:
        super().__init__()
        self.info: Dict[Tuple[int, int], Tuple[str, str, List[int], str]] = {}
        self.devices: Dict[Tuple[int, int], str] = {}
        self.phase = "setup"
        self.scalar_value = 0
        self.scalar_reads: Dict[str, int] = {}
        self.op_counts: Dict[str, int] = {}

    def track(self, tensor: Any) -> None:
        key = self.key(tensor)
        if key in self.sizes:
            return
        super().track(tensor)
        self.info[key] = (self._op, str(tensor.dtype).replace("torch.", ""), list(tensor.shape), self.phase)
        self.devices[key] = tensor.device.type

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # pylint: disable=unused-argument
        if func is self._scalar and args:
            self.scalar_reads[self.phase] = self.scalar_reads.get(self.phase, 0) + 1
            if O._is_fake(args[0]):  # pylint: disable=protected-access
                O.ScalarReads.count += 1
                return self.scalar_value
            return func(*args, **(kwargs or {}))
        name = str(func)
        self.op_counts[name] = self.op_counts.get(name, 0) + 1
        out = func(*args, **(kwargs or {}))
        self._op = name
        try:
            for tensor in O.tree_flatten(out)[0]:
                if isinstance(tensor, torch.Tensor):
                    self.track(tensor)
        finally:
            self._op = "input"
        return out


CATEGORIES = ("parameters", "gradients", "optimizer_states", "buffers", "inputs", "param_grad_inflight",
              "activations")


class Step:
    """One rank's step: the tracker, its phases, and which storages are parameters, gradients, states, inputs."""

    def __init__(self, params: Sequence[Any], buffers: Sequence[Any], on_mark: Any = None) -> None:
        self.live = StepBytes()
        self.phases: List[Tuple[str, int]] = []
        self.params = params
        self.buffers = buffers
        self.keys: Dict[str, set] = {c: set() for c in CATEGORIES}
        self.untracked_grads = 0
        self.handles: List[Any] = []
        self.on_mark = on_mark  # real CUDA: reads the allocator at each phase boundary

    def mark(self, name: str) -> None:
        if self.on_mark is not None:
            self.on_mark(name, len(self.live.events))
        self.live.phase = name
        self.phases.append((name, len(self.live.events)))

    def start(self) -> None:
        self.mark("setup")
        for p in self.params:
            self.live.track(p)
            self.keys["parameters"].add(self.live.key(p))
        for b in self.buffers:
            self.live.track(b)
            key = self.live.key(b)
            if key not in self.keys["parameters"]:
                self.keys["buffers"].add(key)
        for p in self.params:
            if p.requires_grad:
                self.handles.append(p.register_hook(self._incoming))
                self.handles.append(p.register_post_accumulate_grad_hook(self._accumulated))

    def _incoming(self, grad: Any) -> None:
        key = self.live.key(grad)
        if key not in self.live.sizes:
            self.untracked_grads += 1
        self.keys["param_grad_inflight"].add(key)

    def _accumulated(self, param: Any) -> None:
        self.keys["gradients"].add(self.live.key(param.grad))

    def note_grads(self) -> None:
        for p in self.params:
            if getattr(p, "grad", None) is not None:
                self.keys["gradients"].add(self.live.key(p.grad))

    def note_input(self, tensor: Any) -> Any:
        self.live.track(tensor)
        self.keys["inputs"].add(self.live.key(tensor))
        return tensor

    def stop(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    # -- analysis ----------------------------------------------------------

    def category_of(self) -> Dict[Tuple[int, int], str]:
        cat: Dict[Tuple[int, int], str] = {}
        # later assignments win: a parameter's gradient that arrived in flight and was kept is a gradient
        for name in ("param_grad_inflight", "inputs", "buffers", "optimizer_states", "gradients", "parameters"):
            for key in self.keys[name]:
                cat[key] = name
        return cat

    @staticmethod
    def _split(sums: Dict[str, int]) -> Dict[str, Any]:
        other = {c: sums.get(c, 0) for c in ("buffers", "inputs", "param_grad_inflight", "activations")}
        return {"parameters": sums.get("parameters", 0), "gradients": sums.get("gradients", 0),
                "optimizer_states": sums.get("optimizer_states", 0), "other": sum(other.values()),
                "other_detail": other}

    def analyse(self, top: int = 25) -> Dict[str, Any]:
        events = self.live.events
        cat = self.category_of()
        bounds = [(name, start, (self.phases[i + 1][1] if i + 1 < len(self.phases) else len(events)))
                  for i, (name, start) in enumerate(self.phases)]
        sums = {c: 0 for c in CATEGORIES}
        total = 0
        overall = dict(bytes=-1, event=-1, phase=None, split=None)
        # the most bytes that are neither parameters, gradients nor optimizer states, and when
        other_peak = dict(bytes=-1, event=-1, phase=None, op=None, live_total=None)
        held = ("parameters", "gradients", "optimizer_states")
        per_phase = []
        index = 0
        for name, start, end in bounds:
            rec = dict(name=name, events_from=start, events_to=end, live_at_start=total,
                       split_at_start=self._split(sums), peak_bytes=total, peak_event=start - 1,
                       peak_op=None, split_at_peak=self._split(sums))
            for index in range(start, end):
                key, delta = events[index]
                sums[cat.get(key, "activations")] += delta
                total += delta
                if total > rec["peak_bytes"]:
                    rec["peak_bytes"], rec["peak_event"] = total, index
                    rec["peak_op"] = self.live.names[index]
                    rec["split_at_peak"] = self._split(sums)
                if total > overall["bytes"]:
                    overall.update(bytes=total, event=index, phase=name, split=self._split(sums),
                                   op=self.live.names[index])
                other_now = total - sum(sums[c] for c in held)
                if other_now > other_peak["bytes"]:
                    other_peak.update(bytes=other_now, event=index, phase=name, op=self.live.names[index],
                                      live_total=total, split=self._split(sums))
            rec["live_at_end"] = total
            rec["split_at_end"] = self._split(sums)
            per_phase.append(rec)
        # what else is live at the overall peak, by allocating op and phase, and the largest storages
        live: Dict[Tuple[int, int], int] = {}
        for key, delta in events[: overall["event"] + 1]:
            if delta > 0:
                live[key] = delta
            else:
                live.pop(key, None)
        by_op: Dict[str, int] = {}
        rows = []
        for key, size in live.items():
            category = cat.get(key, "activations")
            if category in ("parameters", "gradients", "optimizer_states", "buffers"):
                continue
            op, dtype, shape, phase = self.live.info.get(key, ("?", "?", [], "?"))
            label = f"{category}:{op}@{phase}"
            by_op[label] = by_op.get(label, 0) + size
            rows.append(dict(bytes=size, category=category, op=op, dtype=dtype, shape=shape, phase=phase))
        rows.sort(key=lambda row: (-row["bytes"], row["phase"], row["op"]))
        overall["other_live_storages"] = len(rows)
        overall["other_by_op_and_phase"] = dict(sorted(by_op.items(), key=lambda kv: -kv[1]))
        overall["largest_other_storages"] = rows[:top]
        # every allocation over the step by the op that returned it: [storages, bytes]
        by_alloc: Dict[str, List[int]] = {}
        for (key, delta), name in zip(events, self.live.names):
            if delta > 0:
                slot = by_alloc.setdefault(name, [0, 0])
                slot[0] += 1
                slot[1] += delta
        return dict(peak=overall, other_peak=other_peak, phases=per_phase, events=len(events),
                    allocations_by_op=dict(sorted(by_alloc.items())))


    def device_series(self, device_type: str, block: int = 512) -> Dict[str, Any]:
        """The tracked bytes on *device_type* alone, exact and with each storage rounded up to *block* bytes.

        The rounding is the CUDA caching allocator's request rounding (a multiple
        of 512 B, 0 B storages not allocated): what ``memory_allocated`` would
        read if every tracked storage were one block and nothing else lived.
        """
        events = self.live.events
        bounds = [(name, start, (self.phases[i + 1][1] if i + 1 < len(self.phases) else len(events)))
                  for i, (name, start) in enumerate(self.phases)]
        exact = rounded = 0
        top = dict(bytes=-1, event=-1, phase=None, op=None)
        top_rounded = dict(bytes=-1, event=-1, phase=None, op=None)
        phases = []
        for name, start, end in bounds:
            rec = dict(name=name, bytes_at_start=exact, rounded_at_start=rounded, peak_bytes=exact,
                       peak_event=start - 1, peak_rounded=rounded, peak_rounded_event=start - 1)
            for index in range(start, end):
                key, delta = events[index]
                if self.live.devices.get(key) != device_type:
                    continue
                exact += delta
                rounded += (1 if delta > 0 else -1) * (-(-abs(delta) // block) * block)
                if exact > rec["peak_bytes"]:
                    rec["peak_bytes"], rec["peak_event"] = exact, index
                if rounded > rec["peak_rounded"]:
                    rec["peak_rounded"], rec["peak_rounded_event"] = rounded, index
                if exact > top["bytes"]:
                    top.update(bytes=exact, event=index, phase=name, op=self.live.names[index])
                if rounded > top_rounded["bytes"]:
                    top_rounded.update(bytes=rounded, event=index, phase=name, op=self.live.names[index])
            rec["bytes_at_end"], rec["rounded_at_end"] = exact, rounded
            phases.append(rec)
        off = {}
        for key, device in self.live.devices.items():
            if device != device_type:
                op = self.live.info.get(key, ("?",))[0]
                off[op] = off.get(op, 0) + 1
        return dict(device_type=device_type, rounding_bytes=block, peak=top, peak_rounded=top_rounded,
                    phases=phases, storages_off_device_by_op=off)


def _phase_max(phases: Sequence[Dict[str, Any]], prefix: str) -> Optional[Dict[str, Any]]:
    chosen = [p for p in phases if re.fullmatch(prefix, p["name"])]
    if not chosen:
        return None
    best = max(chosen, key=lambda p: (p["peak_bytes"], -p["events_from"]))
    return {"bytes": best["peak_bytes"], "phase": best["name"], "event": best["peak_event"], "op": best["peak_op"],
            "split": best["split_at_peak"]}


# ---------------------------------------------------------------------------
# Building the model
# ---------------------------------------------------------------------------

def _no_init(transformers: Any) -> Tuple[Any, str]:
    """Transformers' ``no_init_weights`` context (real mode: the weights are initialised here, cheaply)."""
    for where in ("initialization", "modeling_utils"):
        try:
            module = __import__(f"{transformers.__name__}.{where}", fromlist=["no_init_weights"])
            function = getattr(module, "no_init_weights", None)
            if function is not None:
                return function(), f"transformers.{where}.no_init_weights"
        except Exception:  # pylint: disable=broad-except
            continue
    return contextlib.nullcontext(), "Transformers' own init (no no_init_weights found)"


def init_real_parameters(model: Any, seed: int = 0) -> str:
    """Cheap deterministic init under no_grad: 1-D weights 1, biases 0, the rest normal(0, 0.02)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            elif param.dim() <= 1:
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02)
    return "torch.no_grad: *bias -> zeros_, 1-D -> 1.0, else normal_(0, 0.02); torch.manual_seed(0)"


def build_model(family: str, config_kwargs: Dict[str, Any], device: Optional[str] = None
                ) -> Tuple[Any, Any, Dict[str, Any]]:
    """AutoModelForCausalLM.from_config, bf16, train mode, census kernels.

    Fake mode (*device* None): under the caller's FakeTensorMode. Real mode: under
    ``torch.device(device)`` and Transformers' ``no_init_weights``, then
    :func:`init_real_parameters`.
    """
    transformers = O._import_transformers()  # pylint: disable=protected-access
    notes: Dict[str, Any] = {}

    def fresh_config(experts: bool) -> Any:
        config, how = O.make_config(family, config_kwargs)
        notes["config_built_by"] = how
        if family == "qwen3_vl_moe":
            config = _vl_wrapper_config(family, config)
            notes["config_built_by"] = how + " as text_config of " + type(config).__name__ + \
                " (vision tower depth 1, width 32: built, never run, not tracked)"
        config._attn_implementation = O.FLASH_NAME  # pylint: disable=protected-access
        if experts:
            config._experts_implementation = "grouped_mm"  # pylint: disable=protected-access
        config.use_cache = False
        return config

    # The original MoE families run grouped_mm unconditionally, Llama without the argument (as before); an added
    # family is first built with experts_implementation="grouped_mm" and, where Transformers refuses the argument
    # for its model class (ValueError "... does not support setting experts implementation"), without it.
    moe = family in MOE_FAMILIES
    detect = family not in ORIGINAL_FAMILIES
    config = fresh_config(moe or detect)
    began = time.perf_counter()
    where = contextlib.nullcontext()
    no_init: Any = contextlib.nullcontext()
    if device is not None:
        where = torch.device(device)
        no_init, notes["real_build"] = _no_init(transformers)
        notes["real_build"] += f" under torch.device({device!r})"
    with O._default_dtype(torch.bfloat16), where, no_init:  # pylint: disable=protected-access
        extra = dict(experts_implementation="grouped_mm") if (moe or detect) else {}
        model_cls = _model_class(transformers, family)
        try:
            model = model_cls.from_config(config, attn_implementation=O.FLASH_NAME, **extra)
            notes["experts_implementation_requested"] = "grouped_mm" if (moe or detect) else None
            if detect:
                notes["experts_implementation_detection"] = "experts_implementation='grouped_mm' accepted"
        except ValueError as exc:
            if not detect or "experts implementation" not in str(exc):
                raise
            notes["experts_implementation_detection"] = f"refused ({exc}); built without the argument"
            notes["experts_implementation_requested"] = None
            config = fresh_config(False)
            model = model_cls.from_config(config, attn_implementation=O.FLASH_NAME)
    if device is not None:
        notes["real_init"] = init_real_parameters(model)
        devices = sorted({str(t.device) for t in list(model.parameters()) + list(model.buffers())})
        notes["real_tensor_devices"] = devices
        notes["use_kernels"] = getattr(model, "use_kernels", None)
        notes["hub_kernels_env"] = os.environ.get("USE_HUB_KERNELS")
        notes["kernels_package_importable"] = O._find_spec("kernels")  # pylint: disable=protected-access
        if getattr(model, "use_kernels", False):
            raise RuntimeError("the model was built with hub kernels (use_kernels); the real run refuses them")
    model.train()
    notes["build_seconds"] = round(time.perf_counter() - began, 3)
    notes["model_class"] = type(model).__name__
    notes["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    notes["experts_implementation"] = getattr(model.config, "_experts_implementation", None)
    notes["tie_word_embeddings"] = bool(getattr(model.config, "tie_word_embeddings", False))
    notes["lm_head_tied"] = (O._address(model.lm_head.weight)  # pylint: disable=protected-access
                             == O._address(model.get_input_embeddings().weight))  # pylint: disable=protected-access
    notes["loss_function"] = getattr(getattr(model, "loss_function", None), "__name__", None)
    notes["experts_classes"] = sorted({type(m).__name__ for m in model.modules() if "expert" in type(m).__name__.lower()})
    base = backbone(model)
    notes["decoder_layer_class"] = type(base.layers[0]).__name__
    notes["decoder_layer_classes"] = [type(layer).__name__ for layer in base.layers]
    notes["backbone_class"] = type(base).__name__
    notes["model_level_modules"] = {name: type(module).__name__ for name, module in base.named_children()
                                    if name != "layers"}
    notes["causal_lm_children"] = {name: type(module).__name__ for name, module in model.named_children()}
    if family == "qwen3_vl_moe":
        notes["untracked_vision_parameters"] = sum(q.numel() for q in model.model.visual.parameters())
    return model, config, notes


def _vl_wrapper_config(family: str, text_config: Any) -> Any:
    """Qwen3-VL-MoE: AutoModelForCausalLM maps no text-only config; the text model runs inside
    Qwen3VLMoeForConditionalGeneration (text-only input), with a minimal vision tower."""
    module = __import__(f"transformers.models.{O.FAMILIES[family]['module']}.configuration_"
                        f"{O.FAMILIES[family]['module']}", fromlist=["Qwen3VLMoeConfig"])
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=text_config.hidden_size,
                  deepstack_visual_indexes=[])
    return module.Qwen3VLMoeConfig(text_config=text_config.to_dict(), vision_config=vision)


def _model_class(transformers: Any, family: str) -> Any:
    if family == "qwen3_vl_moe":  # Qwen3VLMoeConfig -> Qwen3VLMoeForConditionalGeneration
        return transformers.AutoModelForImageTextToText
    return transformers.AutoModelForCausalLM


def backbone(model: Any) -> Any:
    """The decoder (the module holding ``layers``): model.model, or Qwen3-VL's model.model.language_model."""
    base = model.model
    if not hasattr(base, "layers") and hasattr(base, "language_model"):
        base = base.language_model
    return base


def unique_tensors(tensors: Sequence[Any]) -> List[Any]:
    seen, out = set(), []
    for t in tensors:
        address = O._address(t)  # pylint: disable=protected-access
        if address not in seen:
            seen.add(address)
            out.append(t)
    return out


FINAL_NORM_NAMES = ("norm", "norm_f", "final_layernorm")


def stage_modules(model: Any, p: int, r: int, family: str = "") -> Tuple[List[Any], Dict[str, Any]]:
    """Make *model* stage r of p (its layers only; final norm an Identity where not last); return the modules it runs.

    The model-level modules are the decoder's own children (all but ``layers``): each rotary embedding
    (class name ``*Rotary*``: Gemma-3's local one, Qwen3-VL's 3-grid one) runs on every stage, the input
    embedding on the first, the final norm (``norm`` / ``norm_f`` / ``final_layernorm``) and the head on the
    last; a model-level module of any other role (Gemma-4's per-layer-input embedding, DeepSeek-V4's
    ``hc_head``) refuses the split (ValueError), as do the families of ``PP_REFUSED``. Parameters and buffers
    held by the decoder itself (not by a child) go with every stage.
    """
    if family in PP_REFUSED:
        raise ValueError(f"pipeline split refused for {family}: {PP_REFUSED[family]}")
    base = backbone(model)
    layers = list(base.layers)
    per = len(layers) // p
    lo, hi = r * per, (r + 1) * per
    base.layers = torch.nn.ModuleList(layers[lo:hi])
    embedding = model.get_input_embeddings()
    used = list(base.layers)
    roles: Dict[str, str] = {}
    final_norm = None
    for name, module in base.named_children():
        if name == "layers":
            continue
        if module is embedding:
            roles[name] = "input embedding (first stage)"
            if r == 0:
                used.append(module)
        elif "rotary" in type(module).__name__.lower():
            roles[name] = "rotary embedding (every stage)"
            used.append(module)
        elif name in FINAL_NORM_NAMES and final_norm is None:
            roles[name] = "final norm (last stage; Identity elsewhere)"
            final_norm = name
        else:
            raise ValueError(f"pipeline split refused: model-level module {name} ({type(module).__name__}) of "
                             f"{type(base).__name__} is neither the input embedding, a rotary embedding nor the "
                             f"final norm, and its forward runs it outside the layers")
    if final_norm is None:
        raise ValueError(f"pipeline split refused: {type(base).__name__} has no final norm among {FINAL_NORM_NAMES}")
    extra_children = [name for name, _ in model.named_children() if name not in ("model", "lm_head")]
    if extra_children:
        raise ValueError(f"pipeline split refused: {type(model).__name__} has model-level modules {extra_children} "
                         f"besides model and lm_head")
    if r == p - 1:
        used += [getattr(base, final_norm), model.lm_head]
    else:
        setattr(base, final_norm, torch.nn.Identity())
    own = [q for _, q in base.named_parameters(recurse=False)] + [b for _, b in base.named_buffers(recurse=False)]
    if own:
        holder = torch.nn.Module()
        for i, t in enumerate(own):
            holder.register_buffer(f"t{i}", t, persistent=False) if not isinstance(t, torch.nn.Parameter) \
                else holder.register_parameter(f"t{i}", t)
        used.append(holder)
    return used, {"layers": [lo, hi], "first": r == 0, "last": r == p - 1, "model_level_roles": roles,
                  "decoder_own_tensors": len(own)}


# ---------------------------------------------------------------------------
# Real CUDA: the caching allocator's numbers at every phase boundary
# ---------------------------------------------------------------------------

def cuda_numbers() -> Dict[str, Any]:
    """memory_allocated / max / reserved / max, active_bytes.all.peak, retries and OOMs (no tensor op runs);
    and (this copy) the requested bytes, the inactive split bytes and blocks, the segments and the device
    allocs and frees, current and peak, from torch.cuda.memory_stats()."""
    stats = torch.cuda.memory_stats()

    def stat(name: str) -> int:
        return int(stats.get(name, 0))

    return {"allocated": torch.cuda.memory_allocated(), "max_allocated": torch.cuda.max_memory_allocated(),
            "reserved": torch.cuda.memory_reserved(), "max_reserved": torch.cuda.max_memory_reserved(),
            "active_peak": stat("active_bytes.all.peak"),
            "active_current": stat("active_bytes.all.current"),
            "num_alloc_retries": stat("num_alloc_retries"), "num_ooms": stat("num_ooms"),
            "allocation_count": stat("allocation.all.allocated"),
            "requested_current": stat("requested_bytes.all.current"), "requested_peak": stat("requested_bytes.all.peak"),
            "inactive_split_bytes": stat("inactive_split_bytes.all.current"),
            "inactive_split_peak": stat("inactive_split_bytes.all.peak"),
            "inactive_split_blocks": stat("inactive_split.all.current"),
            "segments": stat("segment.all.current"), "segments_peak": stat("segment.all.peak"),
            "large_pool_reserved": stat("reserved_bytes.large_pool.current"),
            "small_pool_reserved": stat("reserved_bytes.small_pool.current"),
            "num_device_alloc": stat("num_device_alloc"), "num_device_free": stat("num_device_free"),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}


class CudaPhases:
    """Reads the allocator at the step's start, at every phase boundary and at its end.

    ``reset_peak_memory_stats`` runs at the step's start and again at each
    boundary, so each phase's ``max_allocated`` / ``max_reserved`` /
    ``active_peak`` are its own; ``cumulative_*`` (the running maxima since the
    step's start, what the counters would read without the per-phase resets)
    and ``overall`` are their maxima. ``allocation_count`` is cumulative.
    """

    def __init__(self) -> None:
        self.records: List[Dict[str, Any]] = []
        self.current: Optional[Dict[str, Any]] = None
        self.begin: Optional[Dict[str, Any]] = None
        self.cumulative = {"max_allocated": 0, "max_reserved": 0, "active_peak": 0, "requested_peak": 0,
                           "inactive_split_peak": 0, "segments_peak": 0}

    def start(self) -> None:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        self.begin = cuda_numbers()
        for k in self.cumulative:
            self.cumulative[k] = self.begin[k]

    def _close(self, numbers: Dict[str, Any], event: int) -> None:
        if self.current is None:
            return
        for k in self.cumulative:
            self.cumulative[k] = max(self.cumulative[k], numbers[k])
        self.current["end"] = numbers
        self.current["events_to"] = event
        self.current["cumulative_at_end"] = dict(self.cumulative)
        self.records.append(self.current)
        self.current = None

    def mark(self, name: str, event: int) -> None:
        numbers = cuda_numbers()
        self._close(numbers, event)
        torch.cuda.reset_peak_memory_stats()
        self.current = {"name": name, "events_from": event, "start": cuda_numbers()}

    def stop(self, event: int) -> Dict[str, Any]:
        torch.cuda.synchronize()
        self._close(cuda_numbers(), event)
        end = cuda_numbers()
        overall = {k: max([r["end"][k] for r in self.records] + [self.begin[k]])
                   for k in ("max_allocated", "max_reserved", "active_peak", "requested_peak",
                             "inactive_split_peak", "segments_peak")}
        overall["num_alloc_retries"] = end["num_alloc_retries"] - self.begin["num_alloc_retries"]
        overall["num_ooms"] = end["num_ooms"] - self.begin["num_ooms"]
        overall["allocations"] = end["allocation_count"] - self.begin["allocation_count"]
        where = max(self.records, key=lambda r: r["end"]["max_allocated"]) if self.records else None
        overall["max_allocated_phase"] = where["name"] if where else None
        return {"at_step_start": self.begin, "at_step_end": end, "overall": overall, "phases": self.records,
                "rule": "reset_peak_memory_stats at the step's start and at each phase boundary; a phase's end.max_* "
                        "is its own maximum, cumulative_at_end the running maximum since the step's start"}


def compare_cuda(cuda: Dict[str, Any], series: Dict[str, Any], analysis_phases: Sequence[Dict[str, Any]],
                 baseline: int) -> Dict[str, Any]:
    """The allocator beside the tracker's bytes on the GPU, per phase and overall (allocator minus tracked)."""
    tracked = {p["name"]: p for p in series["phases"]}
    rows = []
    for rec in cuda["phases"]:
        t = tracked.get(rec["name"])
        if t is None:
            continue
        rows.append({"name": rec["name"],
                     "allocated_at_start": rec["start"]["allocated"], "tracked_at_start": t["bytes_at_start"],
                     "allocated_at_end": rec["end"]["allocated"], "tracked_at_end": t["bytes_at_end"],
                     "max_allocated": rec["end"]["max_allocated"], "tracked_peak": t["peak_bytes"],
                     "tracked_peak_rounded": t["peak_rounded"],
                     "untracked_at_start": rec["start"]["allocated"] - t["bytes_at_start"],
                     "untracked_at_end": rec["end"]["allocated"] - t["bytes_at_end"],
                     "max_allocated_minus_tracked_peak": rec["end"]["max_allocated"] - t["peak_bytes"],
                     "max_allocated_minus_tracked_peak_rounded": rec["end"]["max_allocated"] - t["peak_rounded"],
                     "max_reserved": rec["end"]["max_reserved"], "active_peak": rec["end"]["active_peak"]})
    overall = cuda["overall"]
    peak, peak_rounded = series["peak"]["bytes"], series["peak_rounded"]["bytes"]
    del analysis_phases
    return {"phases": rows,
            "max_allocated": overall["max_allocated"], "tracked_device_peak": peak,
            "tracked_device_peak_rounded": peak_rounded,
            "max_allocated_minus_tracked_peak": overall["max_allocated"] - peak,
            "max_allocated_minus_tracked_peak_rounded": overall["max_allocated"] - peak_rounded,
            # after `setup` (parameters and buffers tracked): the process baseline (cuBLAS workspaces) + rounding
            "untracked_after_setup": rows[0]["untracked_at_end"] if rows else None,
            "allocated_at_step_start": cuda["at_step_start"]["allocated"],
            "baseline_before_build": baseline,
            "note": "untracked = allocator minus the tracked storages on the GPU: the process baseline (cuBLAS "
                    "workspaces), block rounding, and anything allocated outside the tracked ops' outputs "
                    "(kernel workspaces, autograd-internal buffers) while it lives"}


def cuda_environment() -> Dict[str, Any]:
    """The device, the versions, the allocator settings, and the baseline after a cuBLAS warm-up."""
    env: Dict[str, Any] = {"torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
    if not torch.cuda.is_available():
        return env
    env["device_name"] = torch.cuda.get_device_name(0)
    env["capability"] = list(torch.cuda.get_device_capability(0))
    env["device_count"] = torch.cuda.device_count()
    env["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "CUBLAS_WORKSPACE_CONFIG",
                "CUBLASLT_WORKSPACE_SIZE", "CUDA_VISIBLE_DEVICES", "USE_HUB_KERNELS"):
        env[var] = os.environ.get(var)
    torch.cuda.init()
    env["allocated_after_init"] = torch.cuda.memory_allocated()
    free, total = torch.cuda.mem_get_info()
    env["mem_get_info_after_init"] = {"free": free, "total": total, "used_by_driver_and_others": total - free}
    # cuBLAS / cuBLASLt handles and workspaces for this thread and for autograd's device thread
    a = torch.randn(256, 256, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    b = torch.randn(256, dtype=torch.bfloat16, device="cuda")
    (torch.nn.functional.linear(a, a, b) @ a).float().sum().backward()
    c = torch.randn(256, 256, device="cuda")
    (c @ c).sum().item()
    del a, b, c
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    env["allocated_after_cublas_warmup"] = torch.cuda.memory_allocated()
    env["reserved_after_cublas_warmup"] = torch.cuda.memory_reserved()
    free, total = torch.cuda.mem_get_info()
    env["mem_get_info_after_warmup"] = {"free": free, "total": total, "used_by_driver_and_others": total - free}
    return env


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------

def _versions() -> Dict[str, Any]:
    import transformers  # pylint: disable=import-outside-toplevel
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "transformers_path": os.path.dirname(transformers.__file__)}


def _error(stage: str, exc: BaseException) -> Dict[str, Any]:
    return {"stage": stage, "error": f"{type(exc).__name__}: {exc}"[:4000], "traceback": traceback.format_exc()[-8000:]}


def checkpoint_function(selective: bool, sets: Dict[str, Any], kernels: Any, notes: Dict[str, Any],
                        allow_mutation: bool = False):
    """What each decoder layer's GradientCheckpointingLayer calls: torch's non-reentrant checkpoint (+ SAC policy)."""
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts  # pylint: disable=C0415
    notes.setdefault("checkpoint_calls", 0)
    notes.setdefault("policies_created", 0)
    decisions: Dict[str, Dict[str, int]] = notes.setdefault("policy_forward_decisions", {}) if selective else {}

    def context_fn():
        policy = O.HyperParallelPolicy(sets, kernels)
        policy.decisions = decisions  # accumulated over all layers' forward decisions
        notes["policies_created"] += 1
        if allow_mutation:
            return create_selective_checkpoint_contexts(policy, allow_cache_entry_mutation=True)
        return create_selective_checkpoint_contexts(policy)

    def run(function, *args, **kwargs):
        notes["checkpoint_calls"] += 1
        extra = dict(use_reentrant=False)
        if selective:
            extra["context_fn"] = context_fn
        return checkpoint(function, *args, **extra, **kwargs)

    return run


def run_case(group: Dict[str, Any], case: Dict[str, Any], sets: Dict[str, Any], kernels: Any) -> Dict[str, Any]:
    family, seq = group["family"], group["seq"]
    real = group.get("real")  # None: fake tensors; "cpu" / "cuda": real tensors on that device
    # the allocator's numbers on cuda (a test may force them on, with torch.cuda's readers replaced)
    on_cuda = bool(real) and bool(group.get("allocator_stats", torch.device(real).type == "cuda"))
    dev = dict(device=real) if real else {}
    kind = case["kind"]
    m = case.get("m", 1)
    batch = int(case.get("batch", 1))
    p, r = case.get("p", 1), case.get("r", 0)
    result: Dict[str, Any] = {
        "oracle": ORACLE, "schema": SCHEMA, "case": case["id"], "family": family, "size": group["size"],
        "checkpoint": group.get("checkpoint"), "kind": kind, "seq": seq, "batch": batch, "m": m, "p": p, "r": r,
        "dtype": "bfloat16",
        "device": f"real tensors on {real}" if real else "FakeTensorMode (shapes only), cpu", "real": real,
        "attention_kernel": f"{O.FLASH_OP} (saves q, k, v, out, 2 x fp32 [b,h,s,{O.FLASH_STATS}])",
        "config_kwargs": group["config_kwargs"], "errors": [], "stage_seconds": {}}
    result["versions"] = _versions()
    timings = result["stage_seconds"]
    notes: Dict[str, Any] = {}
    began = time.perf_counter()
    O.ATTENTION_CALLS.clear()
    cuda_baseline = None
    if on_cuda:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        cuda_baseline = torch.cuda.memory_allocated()
        result["cuda_before_build"] = cuda_numbers()
    with (contextlib.nullcontext() if real else O._fake_mode()):  # pylint: disable=protected-access
        model, config, build_notes = build_model(family, group["config_kwargs"], real)
        notes.update(build_notes)
        result["config"] = {"class": type(config).__name__, "model_type": getattr(config, "model_type", None),
                            "fields": O._config_summary(model.config)}  # pylint: disable=protected-access
        timings["build"] = round(time.perf_counter() - began, 3)
        text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        vocab = int(text_config.vocab_size)
        hidden = int(text_config.hidden_size)
        if kind == "pipeline":
            used, stage = stage_modules(model, p, r, family)
            result["stage"] = stage
            schedule = schedule_1f1b(p, r, m)
        else:
            # Qwen3-VL: the text model and the head (the vision tower never runs on text, and is not tracked)
            used = [model.model.language_model, model.lm_head] if family == "qwen3_vl_moe" else [model]
            stage = {"layers": [0, len(backbone(model).layers)], "first": True, "last": True}
            schedule = [(x, i) for i in range(m) for x in ("F", "B")]
        result["schedule"] = [f"{x}{i}" for x, i in schedule]
        if kind == "pipeline":
            result["schedule_rule"] = (f"1F1B: warm-up min(p-r-1, m) = {min(p - r - 1, m)} forwards, "
                                       f"{m - min(p - r - 1, m)} steady F/B pairs, cool-down backwards")
        params = unique_tensors([q for module in used for q in module.parameters()])
        buffers = unique_tensors([b for module in used for b in module.buffers()])
        named = {id(q): n for n, q in model.named_parameters()}
        count = sum(q.numel() for q in params)
        by_dtype: Dict[str, int] = {}
        for q in params:
            d = str(q.dtype).replace("torch.", "")
            by_dtype[d] = by_dtype.get(d, 0) + q.numel() * q.element_size()
        result["parameters"] = {"count": count, "tensors": len(params), "bytes_by_dtype": by_dtype,
                                "bytes": sum(q.untyped_storage().nbytes() for q in params),
                                "buffers_bytes": sum(b.untyped_storage().nbytes() for b in buffers),
                                "buffers": len(buffers),
                                "names_not_bf16": sorted(named.get(id(q), "?") for q in params
                                                         if q.dtype != torch.bfloat16)}
        checkpointing = kind in ("sac_selective", "ac_full")
        if checkpointing:
            fn = checkpoint_function(kind == "sac_selective", sets, kernels, notes,
                                     allow_mutation=bool(case.get("allow_mutation")))
            if case.get("allow_mutation"):
                notes["allow_cache_entry_mutation"] = True
                notes["first_attempt_error"] = case.get("first_attempt_error")
            from transformers.modeling_layers import GradientCheckpointingLayer  # pylint: disable=C0415
            plain = [type(layer).__name__ for layer in backbone(model).layers
                     if not isinstance(layer, GradientCheckpointingLayer)]
            if plain:
                raise TypeError(f"decoder layers {plain} are not GradientCheckpointingLayer: no checkpoint hook")
            for layer in backbone(model).layers:
                layer.gradient_checkpointing = True
                layer._gradient_checkpointing_func = fn  # pylint: disable=protected-access
        optimizer = None
        if kind == "accum_adamw":
            optimizer = torch.optim.AdamW(params, lr=1e-4, foreach=False, fused=False)
            notes["optimizer"] = "torch.optim.AdamW(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, " \
                                 "foreach=False, fused=False)"
        recorder = CudaPhases() if on_cuda else None
        if on_cuda:
            torch.cuda.synchronize()
            result["cuda_after_build"] = cuda_numbers()
        step = Step(params, buffers, on_mark=recorder.mark if recorder else None)
        modeling = O.modeling_module(family)
        mamba_before = dict(O.MAMBA_PATH.get("calls", {})) if O.MAMBA_PATH else {}
        stage_inputs: List[bool] = []
        hook = None
        if kind == "pipeline" and not stage["first"]:
            # the received hidden state must reach the stage's first layer as it is (same storage): a model
            # forward that transforms inputs_embeds first cannot be split honestly
            def first_layer_input(_module: Any, args: Any, kwargs: Any) -> None:
                hidden = args[0] if args else kwargs.get("hidden_states")
                if isinstance(hidden, torch.Tensor) and "x" in current:
                    stage_inputs.append(O._address(hidden) == O._address(current["x"]))  # pylint: disable=W0212
            hook = backbone(model).layers[0].register_forward_pre_hook(first_layer_input, with_kwargs=True)
        current: Dict[str, Any] = {}
        gc.collect()
        gc_enabled = gc.isenabled()
        gc.disable()
        began = time.perf_counter()
        graphs: Dict[int, Dict[str, Any]] = {}
        scale = m > 1

        def forward(i: int) -> Dict[str, Any]:
            held: Dict[str, Any] = {}
            if stage["last"]:
                labels = step.note_input(torch.randint(0, vocab, (batch, seq), **dev))
            if stage["first"]:
                ids = step.note_input(torch.randint(0, vocab, (batch, seq), **dev))
                kwargs = dict(input_ids=ids)
            else:
                x = step.note_input(torch.randn(batch, seq, hidden, dtype=torch.bfloat16, requires_grad=True, **dev))
                held["x"] = x
                current["x"] = x
                kwargs = dict(inputs_embeds=x)
            if stage["last"]:
                out = model(**kwargs, labels=labels)
                loss = out.loss
                del out  # the logits go with the output object, as the HF Trainer's compute_loss drops them
                held["loss"] = loss / m if scale else loss
                del loss
            else:
                held["out"] = model.model(**kwargs).last_hidden_state
            current.clear()
            return held

        def backward(held: Dict[str, Any]) -> None:
            if "loss" in held:
                held.pop("loss").backward()
            else:
                out = held.pop("out")
                grad = step.note_input(torch.randn(out.shape, dtype=out.dtype, device=out.device))
                out.backward(grad)
                del out, grad
            if "x" in held:
                x = held.pop("x")
                if x.grad is not None:
                    step.keys["inputs"].add(step.live.key(x.grad))
                del x
            held.clear()
            step.note_grads()

        try:
            if real:
                torch.manual_seed(1)
            if recorder and group.get("empty_cache_before_step"):
                gc.collect()
                torch.cuda.synchronize()
                torch.cuda.empty_cache()  # this copy: the build's and warm-up's cached blocks given back
                result["cuda_after_empty_cache"] = cuda_numbers()
            if recorder:
                recorder.start()  # reset_peak_memory_stats at the step's start
            with O._checkpoints_on(torch.device(real).type if real else "cpu"), \
                    O.delta_rule(modeling, model, O.GDN_EAGER) as gdn, step.live:  # pylint: disable=protected-access
                step.start()
                for x, i in schedule:
                    step.mark(f"{x}{i}")
                    if x == "F":
                        graphs[i] = forward(i)
                    else:
                        backward(graphs.pop(i))
                with_grad = {id(q) for q in params if q.grad is not None}
                if optimizer is not None:
                    grads_before = {q: step.live.key(q.grad) for q in params if q.grad is not None}
                    result["gradients_before_step_bytes"] = sum(step.live.sizes.get(k, 0) for k in grads_before.values())
                    step.mark("optimizer_step")
                    step.live.scalar_value = 1
                    optimizer.step()
                    step.live.scalar_value = 0
                    states = {"exp_avg": 0, "exp_avg_sq": 0, "step": 0, "other": 0}
                    tracked = {"exp_avg": 0, "exp_avg_sq": 0, "step": 0, "other": 0}
                    counted = set()
                    for q in params:
                        for name, value in optimizer.state[q].items():
                            if isinstance(value, torch.Tensor):
                                key = step.live.key(value)
                                slot = name if name in states else "other"
                                if key not in counted:
                                    counted.add(key)
                                    states[slot] += value.untyped_storage().nbytes()
                                    tracked[slot] += int(key in step.live.sizes)
                                step.keys["optimizer_states"].add(key)
                    step_dtype = [str(v["step"].dtype) for v in optimizer.state.values() if "step" in v][:1]
                    result["optimizer"] = {"state_bytes": sum(states.values()), "by_state": states,
                                           "tracked_storages_by_state": tracked, "state_storages": len(counted),
                                           "step_tensor_dtype": step_dtype[0] if step_dtype else None,
                                           "step_tensors_are_tracked_storages": tracked["step"] == len(params),
                                           "scalar_reads_answered_1": step.live.scalar_reads.get("optimizer_step", 0)}
                    step.mark("zero_grad")
                    optimizer.zero_grad(set_to_none=True)
                    del grads_before
                step.mark("end")
                graphs.clear()
                result["gradients"] = {
                    "bytes_live_at_end": sum(step.live.sizes.get(step.live.key(q.grad), 0) for q in params
                                             if q.grad is not None),
                    "params_with_grad": sum(1 for q in params if q.grad is not None)}
                if family not in ORIGINAL_FAMILIES or batch != 1:
                    result["gradients"]["params_without_grad"] = sorted(
                        named.get(id(q), "?") for q in params if id(q) not in with_grad)
                if recorder:
                    result["cuda"] = recorder.stop(len(step.live.events))
            O.check_rule_reached(gdn)
            if gdn.get("gdn_modules"):
                notes["gdn"] = {k: gdn.get(k) for k in ("gdn_modules", "rule", "calls", "conv")}
            if stage_inputs:
                notes["stage_input_reaches_first_layer"] = all(stage_inputs)
                if not all(stage_inputs):
                    raise RuntimeError("pipeline split not honest: the model forward transformed the received "
                                       "hidden state (inputs_embeds) before the stage's first layer")
            if O.MAMBA_PATH:
                calls = {k: v - mamba_before.get(k, 0) for k, v in O.MAMBA_PATH.get("calls", {}).items()}
                notes["mamba_path"] = {"calls": calls, "patched": O.MAMBA_PATH.get("patched"),
                                       "fused_returned_none": O.MAMBA_PATH.get("fused_returned_none")}
                if any(O._has_mamba(layer) for layer in backbone(model).layers) and \
                        not calls.get("mamba2_chunk_scan") and not calls.get("mamba2_split_conv1d_scan_combined"):
                    notes["mamba_path"]["warning"] = "no Mamba-2 kernel entry point was called"
        finally:
            if hook is not None:
                hook.remove()
            step.stop()
            timings["step"] = round(time.perf_counter() - began, 3)
            before = sum(step.live.sizes.values())
            gc.collect()
            notes["bytes_freed_by_gc_after_step"] = before - sum(step.live.sizes.values())
            if gc_enabled:
                gc.enable()
        began = time.perf_counter()
        analysis = step.analyse()
        if real:
            series = step.device_series(torch.device(real).type)
            result["tracked_on_device"] = series
            if "cuda" in result:
                result["cuda_vs_tracked"] = compare_cuda(result["cuda"], series, analysis["phases"], cuda_baseline)
                result["cuda_vs_tracked"]["events_after_step_end"] = len(step.live.events) - \
                    result["cuda"]["phases"][-1]["events_to"] if result["cuda"]["phases"] else None
        timings["analysis"] = round(time.perf_counter() - began, 3)
    phases = analysis["phases"]
    result["events"] = analysis["events"]
    result["allocations_by_op"] = analysis["allocations_by_op"]
    result["peak"] = analysis["peak"]
    result["other_peak"] = analysis["other_peak"]
    result["forward_peak"] = _phase_max(phases, r"F\d+")
    result["backward_peak"] = _phase_max(phases, r"B\d+")
    result["optimizer_step_peak"] = _phase_max(phases, r"optimizer_step")
    peak_phase = result["peak"]["phase"] or ""
    result["peak"]["micro_batch"] = int(peak_phase[1:]) if re.fullmatch(r"[FB]\d+", peak_phase) else None
    result["peak"]["pass"] = {"F": "forward", "B": "backward"}.get(peak_phase[:1], peak_phase) if peak_phase else None
    result["phases"] = phases
    # gradient bytes after the first backward / after the last (before any optimizer step)
    backs = [ph for ph in phases if ph["name"].startswith("B")]
    if backs:
        result["gradients"]["bytes_after_first_backward"] = backs[0]["split_at_end"]["gradients"]
        result["gradients"]["bytes_after_last_backward"] = backs[-1]["split_at_end"]["gradients"]
    result["live_at_end"] = phases[-1]["split_at_end"]
    result["untracked_param_grads"] = step.untracked_grads
    result["scalar_reads"] = dict(step.live.scalar_reads)
    result["ops"] = dict(sorted(step.live.op_counts.items(), key=lambda kv: (-kv[1], kv[0])))
    notes["attention_calls"] = {k: v["calls"] for k, v in O.ATTENTION_CALLS.items()}
    notes["grouped_mm_ops"] = step.live.op_counts.get("aten._grouped_mm.default", 0)
    notes["grouped_mm_check_answered_for_fake"] = O.GroupedMmGuard.answered
    result["notes"] = notes
    result["checks"] = checks(result, family, group["config_kwargs"], stage)
    return result


def llama_parameter_count(kw: Dict[str, Any], stage: Dict[str, Any]) -> int:
    """Llama's parameters by hand: embedding, per layer q,k,v,o + gate,up,down + 2 norms, final norm, head."""
    return hand_parameter_count("llama", kw, stage)


# Families whose parameters are counted by hand (dense: Llama-like attention + gated MLP; MoE: Qwen3-MoE).
HAND_COUNTED = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe")


def hand_parameter_count(family: str, kw: Dict[str, Any], stage: Dict[str, Any]) -> Optional[int]:
    """Parameters by hand: embedding, per layer attention (q,k,v,o; Qwen2's q/k/v biases; Qwen3's q/k norms of
    head_dim) + MLP (gate, up, down) or Qwen3-MoE's router (h x E) + E experts (gate_up, down) + 2 norms, the
    final norm and the untied head. None for a family not counted by hand."""
    if family not in HAND_COUNTED:
        return None
    h, v = kw["hidden_size"], kw["vocab_size"]
    d = kw.get("head_dim") or h // kw["num_attention_heads"]
    a, kv = kw["num_attention_heads"], kw["num_key_value_heads"]
    layer = h * a * d + 2 * h * kv * d + a * d * h + 2 * h
    if family == "qwen2":
        layer += a * d + 2 * kv * d
    if family in ("qwen3", "qwen3_moe"):
        layer += 2 * d
    if family == "qwen3_moe":
        experts, width = kw["num_experts"], kw["moe_intermediate_size"]
        layer += h * experts + experts * 3 * h * width
    else:
        layer += 3 * h * kw["intermediate_size"]
    lo, hi = stage["layers"]
    total = (hi - lo) * layer
    if stage["first"]:
        total += v * h
    if stage["last"]:
        total += h + v * h
    return total


def checks(result: Dict[str, Any], family: str, kw: Dict[str, Any], stage: Dict[str, Any]) -> Dict[str, Any]:
    par = result["parameters"]
    out: Dict[str, Any] = {"parameter_bytes_eq_2x_count": par["bytes"] == 2 * par["count"]}
    if family == "llama":
        hand = llama_parameter_count(kw, stage)
        out["llama_hand_count"] = hand
        out["parameter_count_eq_hand_count"] = par["count"] == hand
    elif family in HAND_COUNTED:
        hand = hand_parameter_count(family, kw, stage)
        out["hand_count"] = hand
        out["parameter_count_eq_hand_count"] = par["count"] == hand
    if result.get("batch", 1) != 1 or family not in ORIGINAL_FAMILIES:
        # gradients are the parameters' shapes whatever the batch; parameters never receiving a gradient named
        out["params_without_grad_after_step"] = result.get("gradients", {}).get("params_without_grad")
    grads = result.get("gradients", {})
    if "bytes_after_first_backward" in grads:
        out["gradient_bytes_after_backward_eq_parameter_bytes"] = grads["bytes_after_first_backward"] == par["bytes"]
        out["gradient_bytes_after_last_backward_eq_parameter_bytes"] = grads["bytes_after_last_backward"] == par["bytes"]
    opt = result.get("optimizer")
    if opt:
        out["exp_avg_plus_exp_avg_sq_eq_2x_parameter_bytes"] = \
            opt["by_state"]["exp_avg"] + opt["by_state"]["exp_avg_sq"] == 2 * par["bytes"]
        out["state_bytes_eq_2x_parameter_bytes_plus_4_per_tensor"] = \
            opt["state_bytes"] == 2 * par["bytes"] + 4 * par["tensors"]
    return out


# ---------------------------------------------------------------------------
# Worker and orchestrator
# ---------------------------------------------------------------------------

def _log(message: str) -> None:
    print(f"[{time.perf_counter() - _STARTED:7.1f}s] {message}", flush=True)


def _progress(out_dir: str, group_id: str, line: str) -> None:
    os.makedirs(os.path.join(out_dir, "progress"), exist_ok=True)
    with open(os.path.join(out_dir, "progress", f"{group_id}.txt"), "a", encoding="utf-8") as handle:
        handle.write(f"{time.time():.3f} {line}\n")


def worker(group_path: str, out_dir: str) -> int:
    with open(group_path, encoding="utf-8") as handle:
        group = json.load(handle)
    os.makedirs(os.path.join(out_dir, "cases"), exist_ok=True)
    real = group.get("real")
    if real:
        os.environ["USE_HUB_KERNELS"] = "0"  # no hub kernel may replace a module's forward (before the import)
    setup: Dict[str, Any] = {}
    sets: Dict[str, Any] = {}
    kernels: Any = frozenset()
    setup_error = None
    try:
        if real and torch.device(real).type == "cuda":
            setup["cuda_environment"] = cuda_environment()
            if not setup["cuda_environment"].get("cuda_available"):
                raise RuntimeError(f"--real {real}: torch.cuda.is_available() is False "
                                   f"(torch {torch.__version__}, cuda {torch.version.cuda})")
        setup["kernels"] = O.register_kernels()
        O._import_transformers()  # pylint: disable=protected-access
        modeling = O.modeling_module(group["family"])
        setup["attention_registration"] = O.register_attention(O.FLASH_NAME, O._flash_attention, modeling)  # pylint: disable=protected-access
        setup["grouped_mm_guard"] = O.guard_grouped_mm_check()
        if O.FAMILIES.get(group["family"], {}).get("mamba"):
            # Mamba-2 mixers on Transformers' torch path only (no hub kernel, mamba_ssm or causal_conv1d)
            path = O.install_mamba_torch_path(modeling)
            setup["mamba_torch_path"] = {"patched": path.get("patched"), "importable": path.get("importable")}
        sets = O.sac_op_sets()
        kernels = O._ops((O.FLASH_OP + ".default",))  # pylint: disable=protected-access
        setup["policy_sets"] = {"compute_intensive_source": sets["compute_intensive_source"],
                                "matmul": sorted(str(op) for op in sets["matmul"]),
                                "force_recompute": sorted(str(op) for op in sets["force_recompute"]),
                                "must_save": sorted(str(op) for op in sets["must_save"]),
                                "kernels_saved": sorted(str(op) for op in kernels)}
        setup["hub_kernels"] = {"USE_HUB_KERNELS": os.environ.get("USE_HUB_KERNELS"),
                                "kernels_package_importable": O._find_spec("kernels")}  # pylint: disable=W0212
    except Exception as exc:  # pylint: disable=broad-except
        setup_error = _error("setup", exc)
        _log(f"setup error: {setup_error['error'][:500]}")
    for case in group["cases"]:
        began = time.perf_counter()
        _progress(out_dir, group["id"], f"start {case['id']}")
        if setup_error:
            result = {"oracle": ORACLE, "schema": SCHEMA, "case": case["id"], "real": real, "errors": [setup_error]}
        else:
            try:
                try:
                    result = run_case(group, case, sets, kernels)
                except RuntimeError as exc:
                    # as the torch2 oracle does: a layer that mutates a tensor the selective policy cached (GPT-OSS's
                    # experts add their bias in place) fails under torch's default; rerun with
                    # allow_cache_entry_mutation=True and say so (notes.allow_cache_entry_mutation)
                    if case.get("kind") != "sac_selective" or "has been mutated" not in str(exc):
                        raise
                    _log(f"{case['id']}: {exc}; rerunning with allow_cache_entry_mutation=True")
                    result = run_case(group, dict(case, allow_mutation=True,
                                                  first_attempt_error=f"{type(exc).__name__}: {exc}"), sets, kernels)
            except Exception as exc:  # pylint: disable=broad-except
                result = {"oracle": ORACLE, "schema": SCHEMA, "case": case["id"], "family": group["family"],
                          "seq": group["seq"], "real": real, **{k: case.get(k) for k in ("kind", "m", "p", "r")},
                          "config_kwargs": group["config_kwargs"], "errors": [_error("run_case", exc)]}
                try:
                    result["versions"] = _versions()
                    if real and torch.device(real).type == "cuda":
                        result["cuda_at_error"] = cuda_numbers()
                except Exception:  # pylint: disable=broad-except
                    pass
        result["setup"] = setup
        result["case_seconds"] = round(time.perf_counter() - began, 3)
        if group.get("compare_fake"):
            try:
                result["fake_comparison"] = compare_to_fake_dirs(result, group["compare_fake"])
            except Exception as exc:  # pylint: disable=broad-except
                result["fake_comparison"] = {"error": _error("compare_fake", exc)}
        O.write_json(os.path.join(out_dir, "cases", f"{case['id']}.json"), result)
        peak = result.get("peak", {})
        line = f"{case['id']}: {'ok' if not result.get('errors') else 'ERROR ' + result['errors'][0]['error'][:300]} " \
               f"peak={peak.get('bytes')} at {peak.get('phase')} ({result['case_seconds']}s)"
        if "cuda_vs_tracked" in result:
            cvt = result["cuda_vs_tracked"]
            line += f" cuda max_allocated={cvt['max_allocated']} tracked_gpu_peak={cvt['tracked_device_peak']}"
        if isinstance(result.get("fake_comparison"), dict) and "equal" in result["fake_comparison"]:
            line += f" fake_equal={result['fake_comparison']['equal']}"
        _log(line)
        if result.get("errors"):
            _log(result["errors"][0].get("traceback", "")[-3000:])
        _progress(out_dir, group["id"], f"done {case['id']}")
        del result
        gc.collect()
        if real and torch.device(real).type == "cuda":
            try:
                torch.cuda.empty_cache()
            except Exception:  # pylint: disable=broad-except
                pass
    return 0


# ---------------------------------------------------------------------------
# A real run beside the fake JSONs
# ---------------------------------------------------------------------------

def _dig(data: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(data, dict):
            data = data.get(part)
        else:
            return None
    return data


COMPARED = ("peak.bytes", "peak.phase", "peak.event", "peak.op", "peak.split", "other_peak.bytes", "other_peak.phase",
            "other_peak.op", "other_peak.event", "forward_peak.bytes", "backward_peak.bytes",
            "optimizer_step_peak.bytes", "parameters.bytes", "parameters.count", "parameters.tensors",
            "parameters.buffers_bytes", "gradients", "gradients_before_step_bytes", "optimizer.state_bytes",
            "optimizer.by_state", "live_at_end", "events", "untracked_param_grads", "scalar_reads",
            "peak.other_by_op_and_phase")


def compare_to_fake(real: Dict[str, Any], fake: Dict[str, Any]) -> Dict[str, Any]:
    """Field by field: the real run's tracked numbers beside the fake run's (equal or both values)."""
    diffs: Dict[str, Any] = {}
    for path in COMPARED:
        a, b = _dig(real, path), _dig(fake, path)
        if a != b:
            diffs[path] = {"real": a, "fake": b}
    rp, fp = real.get("phases") or [], fake.get("phases") or []
    if [p["name"] for p in rp] != [p["name"] for p in fp]:
        diffs["phases.names"] = {"real": [p["name"] for p in rp], "fake": [p["name"] for p in fp]}
    else:
        for a, b in zip(rp, fp):
            for k in ("live_at_start", "peak_bytes", "peak_op", "live_at_end", "split_at_peak", "split_at_end",
                      "events_from", "events_to"):
                if a.get(k) != b.get(k):
                    diffs[f"phases.{a['name']}.{k}"] = {"real": a.get(k), "fake": b.get(k)}
    ra, fa = real.get("ops") or {}, fake.get("ops") or {}
    ops = {k: {"real": ra.get(k, 0), "fake": fa.get(k, 0)} for k in sorted(set(ra) | set(fa))
           if ra.get(k, 0) != fa.get(k, 0)}
    out = {"equal": not diffs, "compared": list(COMPARED) + ["phases.*"], "differences": diffs,
           "op_count_differences": ops,
           "note": "prim.device counts differ by design (a fake tensor's .device dispatches, a real one's does not)"}
    if "allocations_by_op" in real and "allocations_by_op" in fake:
        ra, fa = real["allocations_by_op"], fake["allocations_by_op"]
        out["allocation_differences_by_op"] = {k: {"real": ra.get(k), "fake": fa.get(k)}
                                               for k in sorted(set(ra) | set(fa)) if ra.get(k) != fa.get(k)}
    return out


def compare_dir(real_dir: str, dirs: Sequence[str], out_path: str) -> int:
    """Compare every case JSON in *real_dir* with the fake JSON of the same id in *dirs*; write *out_path*."""
    rows, cases = [], {}
    for name in sorted(os.listdir(real_dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(real_dir, name), encoding="utf-8") as handle:
            result = json.load(handle)
        if result.get("errors") or "peak" not in result:
            rows.append({"case": result.get("case", name[:-5]), "equal": None,
                         "note": "real case has errors or no peak: " + "; ".join(
                             str(e.get("error"))[:200] for e in result.get("errors") or [])})
            continue
        comparison = compare_to_fake_dirs(result, dirs)
        cases[result["case"]] = comparison
        row = {"case": result["case"], "equal": comparison.get("equal"),
               "fake_json": comparison.get("fake_json"), "note": comparison.get("note")}
        if comparison.get("differences"):
            row["differences"] = sorted(comparison["differences"])[:30]
            row["allocation_differences_by_op"] = comparison.get("allocation_differences_by_op")
        rows.append(row)
    compared = [r for r in rows if isinstance(r["equal"], bool)]
    report = {"oracle": ORACLE, "real_dir": os.path.abspath(real_dir), "fake_dirs": [os.path.abspath(d) for d in dirs],
              "compared": len(compared), "equal": sum(1 for r in compared if r["equal"]),
              "unequal": [r["case"] for r in compared if not r["equal"]],
              "without_fake_json_or_failed": [r["case"] for r in rows if not isinstance(r["equal"], bool)],
              "rows": rows, "cases": cases}
    O.write_json(out_path, report)
    _log(f"compared {len(compared)} cases with fake JSONs: {report['equal']} equal, unequal {report['unequal']}; "
         f"{len(report['without_fake_json_or_failed'])} without a fake JSON or failed; report at {out_path}")
    return 0


def compare_to_fake_dirs(result: Dict[str, Any], dirs: Sequence[str]) -> Dict[str, Any]:
    for folder in dirs:
        path = os.path.join(folder, f"{result['case']}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                fake = json.load(handle)
            out = compare_to_fake(result, fake)
            out["fake_json"] = os.path.abspath(path)
            out["fake_versions"] = fake.get("versions")
            return out
    return {"note": f"no fake JSON for {result['case']} in {list(dirs)}"}


# ---------------------------------------------------------------------------
# Orchestrator
# ---------------------------------------------------------------------------

def brief(result: Dict[str, Any]) -> Dict[str, Any]:
    peak = result.get("peak") or {}
    row = {k: result.get(k) for k in ("case", "family", "kind", "seq", "m", "p", "r", "events", "real")}
    row["status"] = result.get("status") or ("ok" if not result.get("errors") else "error")
    row["peak_bytes"] = peak.get("bytes")
    row["peak_phase"] = peak.get("phase")
    row["peak_split"] = {k: v for k, v in (peak.get("split") or {}).items() if k != "other_detail"}
    row["other_peak"] = {k: (result.get("other_peak") or {}).get(k) for k in ("bytes", "phase", "op")}
    row["forward_peak"] = (result.get("forward_peak") or {}).get("bytes")
    row["backward_peak"] = (result.get("backward_peak") or {}).get("bytes")
    row["optimizer_step_peak"] = (result.get("optimizer_step_peak") or {}).get("bytes")
    row["parameter_bytes"] = (result.get("parameters") or {}).get("bytes")
    row["optimizer_state_bytes"] = (result.get("optimizer") or {}).get("state_bytes")
    row["checks"] = result.get("checks")
    if result.get("cuda_vs_tracked"):
        cvt, overall = result["cuda_vs_tracked"], result["cuda"]["overall"]
        row["cuda"] = {"max_allocated": cvt["max_allocated"], "max_allocated_phase": overall["max_allocated_phase"],
                       "tracked_device_peak": cvt["tracked_device_peak"],
                       "tracked_device_peak_rounded": cvt["tracked_device_peak_rounded"],
                       "max_allocated_minus_tracked_peak": cvt["max_allocated_minus_tracked_peak"],
                       "max_reserved": overall["max_reserved"], "active_peak": overall["active_peak"],
                       "num_alloc_retries": overall["num_alloc_retries"], "num_ooms": overall["num_ooms"],
                       "baseline_before_build": cvt["baseline_before_build"],
                       "untracked_after_setup": cvt["untracked_after_setup"]}
    if isinstance(result.get("fake_comparison"), dict):
        fc = result["fake_comparison"]
        row["fake_equal"] = fc.get("equal", fc.get("note") or fc.get("error"))
        if fc.get("differences"):
            row["fake_differences"] = sorted(fc["differences"])[:20]
    if result.get("errors"):
        row["errors"] = [e["error"][:300] for e in result["errors"]]
    return row


def _done_cases(out: str, group_id: str) -> Tuple[List[str], Optional[Tuple[str, float]]]:
    """Cases the group's worker finished, and the one it is in (id, start time), from its progress file."""
    done, current = [], None
    path = os.path.join(out, "progress", f"{group_id}.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) != 3:
                    continue
                if parts[1] == "start":
                    current = (parts[2], float(parts[0]))
                elif parts[1] == "done":
                    done.append(parts[2])
                    current = None
    return done, current


def _stub(out: str, case_id: str, status: str, message: str) -> None:
    O.write_json(os.path.join(out, "cases", f"{case_id}.json"),
                 {"oracle": ORACLE, "schema": SCHEMA, "case": case_id, "status": status,
                  "errors": [{"stage": status, "error": message}]})


def orchestrate(args: argparse.Namespace) -> int:
    families = [f for f in args.families.split(",") if f]
    seqs = [int(s) for s in args.seqs.split(",") if s]
    groups = build_matrix(families, seqs, args.llama8b, added_only=args.added)
    if args.only:
        for group in groups:
            group["cases"] = [c for c in group["cases"] if re.search(args.only, c["id"])]
        groups = [g for g in groups if g["cases"]]
    if args.real:
        for group in groups:
            group["real"] = args.real
    if args.compare_fake:
        for group in groups:
            group["compare_fake"] = [os.path.abspath(d) for d in args.compare_fake.split(",") if d]
    if args.empty_cache_before_step:
        for group in groups:
            group["empty_cache_before_step"] = True
    if args.list:
        for group in groups:
            for case in group["cases"]:
                print(case.get("split", group["split"]), case["id"])
        return 0
    out = os.path.abspath(args.out)
    for sub in ("groups", "logs", "cases", "progress"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    _log(f"{ORACLE}: {sum(len(g['cases']) for g in groups)} cases in {len(groups)} groups, "
         f"{'real ' + args.real if args.real else 'fake'}; torch {torch.__version__}; case timeout "
         f"{args.case_timeout}s, group timeout {args.group_timeout}s, deadline {args.deadline}s")
    pending = list(groups)
    running: List[Tuple[Any, Dict[str, Any], float, Any]] = []
    status: Dict[str, str] = {}
    started_at = time.perf_counter()
    while pending or running:
        past_deadline = args.deadline and time.perf_counter() - started_at > args.deadline
        while pending and len(running) < args.workers and not past_deadline:
            group = pending.pop(0)
            path = os.path.join(out, "groups", f"{group['id']}.json")
            O.write_json(path, group)
            progress = os.path.join(out, "progress", f"{group['id']}.txt")
            if os.path.exists(progress):
                os.remove(progress)
            log = open(os.path.join(out, "logs", f"{group['id']}.log"), "w", encoding="utf-8")  # pylint: disable=R1732
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", path, "--out", out],
                                    stdout=log, stderr=subprocess.STDOUT)
            running.append((proc, group, time.perf_counter(), log))
            _log(f"started {group['id']} ({len(group['cases'])} cases)")
        if past_deadline and pending:
            for group in pending:
                status[group["id"]] = "not started (deadline)"
                for case in group["cases"]:
                    _stub(out, case["id"], "not_run", f"not started: past the {args.deadline}s deadline")
            pending = []
        time.sleep(0.5)
        for item in list(running):
            proc, group, started, log = item
            reason = None
            if proc.poll() is None:
                done, current = _done_cases(out, group["id"])
                if time.perf_counter() - started > args.group_timeout:
                    reason = f"group timeout {args.group_timeout}s"
                elif current and args.case_timeout and time.time() - current[1] > args.case_timeout:
                    reason = f"case timeout {args.case_timeout}s"
                elif past_deadline:
                    reason = f"deadline {args.deadline}s"
                if reason:
                    proc.kill()
                    proc.wait()
                    status[group["id"]] = reason
                    if current:
                        _stub(out, current[0], "timeout", f"{reason}: killed while running this case")
                    rest = [c for c in group["cases"] if c["id"] not in done and (not current or c["id"] != current[0])]
                    _log(f"killed {group['id']} ({reason}) in {current[0] if current else '?'}; "
                         f"{len(rest)} cases left")
                    if rest and reason.startswith("case timeout"):
                        again = dict(group, id=f"{group['id']}_r{len(status)}", cases=rest)
                        pending.insert(0, again)
                    else:
                        for case in rest:
                            _stub(out, case["id"], "not_run", f"not run: {reason}")
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                status.setdefault(group["id"], f"exit {proc.returncode}")
                done, current = _done_cases(out, group["id"])
                if current and not reason:  # the worker died inside a case (a crash, not a Python error)
                    _stub(out, current[0], "crashed", f"worker exited {proc.returncode} while running this case "
                                                      f"(see logs/{group['id']}.log)")
                _log(f"finished {group['id']}: {status[group['id']]} ({time.perf_counter() - started:.1f}s)")
    rows = []
    for group in groups:
        for case in group["cases"]:
            path = os.path.join(out, "cases", f"{case['id']}.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    rows.append(brief(json.load(handle)))
            else:
                rows.append({"case": case["id"], "status": f"missing (group {status.get(group['id'])})"})
    summary = {"oracle": ORACLE, "schema": SCHEMA, "real": args.real, "cases": len(rows),
               "ok": sum(1 for r in rows if r["status"] == "ok"), "groups": status,
               "seconds": round(time.perf_counter() - started_at, 1), "rows": rows}
    if args.compare_fake:
        compared = [r for r in rows if isinstance(r.get("fake_equal"), bool)]
        summary["fake_equal"] = {"compared": len(compared), "equal": sum(1 for r in compared if r["fake_equal"]),
                                 "unequal": [r["case"] for r in compared if not r["fake_equal"]]}
    for row in rows:  # the environment once, from the first case that has it
        path = os.path.join(out, "cases", f"{row['case']}.json")
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
            if data.get("versions"):
                summary["versions"] = data["versions"]
                summary["cuda_environment"] = (data.get("setup") or {}).get("cuda_environment")
                break
        except Exception:  # pylint: disable=broad-except
            continue
    O.write_json(os.path.join(out, "summary.json"), summary)
    _log(f"{summary['ok']} of {summary['cases']} ok; summary at {os.path.join(out, 'summary.json')}")
    return 0 if summary["ok"] == summary["cases"] else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--out", default="step_results")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--seqs", default=",".join(str(s) for s in TOY_SEQS))
    parser.add_argument("--llama8b", action="store_true",
                        help="add the Llama-3-8B-shape cases (4 layers at seq 4096, 2 layers at seq 8192)")
    parser.add_argument("--only", default=None, help="regex on case ids")
    parser.add_argument("--real", default=None, metavar="DEVICE",
                        help="run on real tensors on DEVICE (cpu or cuda) instead of fake ones")
    parser.add_argument("--compare-fake", default=None, metavar="DIRS",
                        help="comma-separated folders of fake case JSONs to compare each real case with")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--group-timeout", type=float, default=1800.0)
    parser.add_argument("--case-timeout", type=float, default=0.0, help="kill a case running longer (s); 0: none")
    parser.add_argument("--deadline", type=float, default=0.0,
                        help="start no group after this many seconds, and kill what still runs then; 0: none")
    parser.add_argument("--compare-dir", default=None, metavar="CASES",
                        help="only compare the case JSONs in CASES with --compare-fake's; write the report to --out")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--added", action="store_true",
                        help="only the cases added after the first run: the original families' b2 kinds and "
                             "the added families' 7 kinds")
    parser.add_argument("--empty-cache-before-step", action="store_true",
                        help="(this copy) torch.cuda.empty_cache() right before the step, after the build")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.out)
    if args.compare_dir:
        return compare_dir(args.compare_dir, [d for d in (args.compare_fake or "").split(",") if d], args.out)
    if args.real and args.real.split(":")[0] not in ("cpu", "cuda"):
        parser.error("--real takes cpu or cuda")
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
