#!/usr/bin/env python3
"""Census steady-state step oracle, EXTENDED: more kinds on the steady oracle's two-step machinery.

This file imports ``census_oracle_steady.py`` (beside it, with ``census_oracle_step.py`` and
``census_oracle_torch2.py``) and edits nothing in it. The steady oracle's own kinds (``SD.KINDS``) run
through ``SD.run_steady_case`` unchanged. The kinds added here run through :func:`run_steady_case_ext`, a
copy of ``SD.run_steady_case`` whose changed lines are marked ``# EXT``:

* the optimizer of the case: ``AdamW(lr=1e-4, foreach=False, fused=False)`` (the steady oracle's),
  ``AdamW(lr=1e-4, foreach=True)`` or ``AdamW(lr=1e-4, fused=True)``; each JSON records the flags in
  ``optimizer_config`` (asked, and the param group as constructed) and which path's ops ran
  (``notes.optimizer_path_ops_step2``);
* pipeline stages (``p > 1``): the step oracle's ``stage_modules``, ``schedule_1f1b``, a fake bf16 leaf ``x``
  received by a non-first stage, ``out.backward(g)`` on a non-last stage, ``(loss / m)`` on the last, and the
  optimizer over the stage's parameters, run twice, step 2 recorded.

Added kinds (``KINDS_EXT``): ``single_adamw_fused_steady``, ``accum_m4_adamw_foreach_steady``,
``single_b2_adamw_foreach_steady``, ``pp2_m4_r{0,1}_adamw_steady``, ``pp2_m4_r{0,1}_adamw_foreach_steady``.

``--force-ext`` runs the steady oracle's own kinds through :func:`run_steady_case_ext` too (validation:
the copy must reproduce the stored JSONs). See README.md beside this file.
"""
import argparse
import gc
import json
import os
import re
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_oracle_steady as SD  # noqa: E402  pylint: disable=wrong-import-position
from census_oracle_steady import (  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
    HELD, PHASE_FIELDS, SCHEMA, STEPS, _state_tensors, _versions, step_block, steady_checks, steady_comparison)

S = SD.S
O = S.O
torch = S.torch
ORACLE = SD.ORACLE  # the JSON layout is the steady oracle's (existing tooling reads it); see oracle_extension
EXT = "census_oracle_steady_ext"
LR = SD.LR
FAMILIES = SD.FAMILIES
SEQS = SD.SEQS

KINDS_EXT: Dict[str, Dict[str, Any]] = {
    "single_adamw_fused_steady": dict(m=1, batch=1, foreach=False, fused=True),
    "accum_m4_adamw_foreach_steady": dict(m=S.ACCUM_M, batch=1, foreach=True),
    "single_b2_adamw_foreach_steady": dict(m=1, batch=S.B2, foreach=True),
    "pp2_m4_r0_adamw_steady": dict(m=4, batch=1, foreach=False, p=2, r=0),
    "pp2_m4_r1_adamw_steady": dict(m=4, batch=1, foreach=False, p=2, r=1),
    "pp2_m4_r0_adamw_foreach_steady": dict(m=4, batch=1, foreach=True, p=2, r=0),
    "pp2_m4_r1_adamw_foreach_steady": dict(m=4, batch=1, foreach=True, p=2, r=1),
}
KINDS: Dict[str, Dict[str, Any]] = dict(SD.KINDS, **KINDS_EXT)
# the families each added kind runs for (the brief's matrix); --families / --kinds narrow it further
EXT_FAMILIES = {
    "single_adamw_fused_steady": FAMILIES,
    "accum_m4_adamw_foreach_steady": ("llama", "qwen3_moe"),
    "single_b2_adamw_foreach_steady": ("llama", "qwen3_moe"),
    "pp2_m4_r0_adamw_steady": ("llama", "qwen3_moe"),
    "pp2_m4_r1_adamw_steady": ("llama", "qwen3_moe"),
    "pp2_m4_r0_adamw_foreach_steady": ("llama", "qwen3_moe"),
    "pp2_m4_r1_adamw_foreach_steady": ("llama", "qwen3_moe"),
}
# step 1's twin in the step oracle (its setup / F / B phases are what step 1 must reproduce)
STEP_ORACLE_TWIN: Dict[str, str] = dict(SD.STEP_ORACLE_TWIN, **{
    "single_adamw_fused_steady": "single", "accum_m4_adamw_foreach_steady": "accum_m4_adamw",
    "single_b2_adamw_foreach_steady": "single_b2",
    "pp2_m4_r0_adamw_steady": "pp2_m4_r0", "pp2_m4_r1_adamw_steady": "pp2_m4_r1",
    "pp2_m4_r0_adamw_foreach_steady": "pp2_m4_r0", "pp2_m4_r1_adamw_foreach_steady": "pp2_m4_r1"})
# the steady case with the same model and schedule but AdamW(foreach=False, fused=False): both steps' setup / F / B
# phases must be equal (only the optimizer step differs)
STEADY_SIBLING = {
    "single_adamw_fused_steady": "single_adamw_steady", "accum_m4_adamw_foreach_steady": "accum_m4_adamw_steady",
    "single_b2_adamw_foreach_steady": "single_b2_adamw_steady",
    "pp2_m4_r0_adamw_foreach_steady": "pp2_m4_r0_adamw_steady",
    "pp2_m4_r1_adamw_foreach_steady": "pp2_m4_r1_adamw_steady"}
FLAG_NAMES = ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach", "capturable", "differentiable",
              "fused", "decoupled_weight_decay")


def make_optimizer_ext(params: Sequence[Any], foreach: bool, fused: bool) -> Tuple[Any, str]:
    """The steady oracle's make_optimizer, plus fused=True."""
    if fused:
        return (torch.optim.AdamW(params, lr=LR, fused=True),
                "torch.optim.AdamW(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, fused=True) "
                "(_fused_adam: per (device, dtype) group one _foreach_add_ of the steps and one "
                "torch._fused_adamw_; state['step'] = torch.zeros((), float32, device=p.device))")
    return SD.make_optimizer(params, foreach)


def optimizer_config(case: Dict[str, Any]) -> Dict[str, Any]:
    foreach, fused = bool(case.get("foreach")), bool(case.get("fused"))
    if fused:
        call, path = "torch.optim.AdamW(params, lr=1e-4, fused=True)", "_fused_adam (torch._fused_adamw_)"
    elif foreach:
        call, path = "torch.optim.AdamW(params, lr=1e-4, foreach=True)", "_multi_tensor_adam (_foreach_*)"
    else:
        call, path = ("torch.optim.AdamW(params, lr=1e-4, foreach=False, fused=False)",
                      "_single_tensor_adam (per parameter)")
    return {"optimizer": "torch.optim.AdamW", "call": call, "asked": {"lr": LR, "foreach": foreach, "fused": fused},
            "path": path, "zero_grad": "optimizer.zero_grad(set_to_none=True)"}


def param_group_flags(optimizer: Any) -> Dict[str, Any]:
    group = optimizer.param_groups[0]
    return {k: (list(group[k]) if isinstance(group.get(k), tuple) else group.get(k)) for k in FLAG_NAMES
            if k in group}


def optimizer_path_ops(ops: Dict[str, int]) -> Dict[str, Any]:
    """Which AdamW implementation ran, from the ops dispatched inside optimizer.step() (optimizer_step_ops)."""
    fused = {k: v for k, v in ops.items() if "_fused_adam" in k}
    foreach = {k: v for k, v in ops.items() if "_foreach_" in k}
    path = ("fused (_fused_adamw_)" if fused else "foreach (_multi_tensor_adam)" if foreach
            else "single-tensor (_single_tensor_adam)")
    return {"path": path, "fused_ops": fused, "foreach_ops": foreach}


def run_steady_case_ext(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
    """SD.run_steady_case generalized (the ``# EXT`` lines): the optimizer of the case (foreach / fused), and
    pipeline stages (p > 1: the step oracle's stage_modules, schedule_1f1b, received leaf ``x``,
    ``out.backward(g)``), run twice; step 2 recorded. Every other line is the steady oracle's."""
    del sets, kernels  # no checkpointing kinds here
    if group.get("real"):
        raise ValueError("the steady-state oracle runs on fake tensors only")
    family, seq = group["family"], group["seq"]
    kind = case["kind"]
    m = int(case.get("m", 1))
    batch = int(case.get("batch", 1))
    foreach = bool(case.get("foreach"))
    fused = bool(case.get("fused"))  # EXT
    p, r = int(case.get("p", 1)), int(case.get("r", 0))  # EXT: pipeline stage r of p
    pipeline = p > 1  # EXT
    result: Dict[str, Any] = {
        "oracle": ORACLE, "schema": SCHEMA, "case": case["id"], "family": family, "size": group["size"],
        "checkpoint": group.get("checkpoint"), "kind": kind, "seq": seq, "batch": batch, "m": m, "p": p, "r": r,
        "steps": STEPS, "recorded_step": 2, "dtype": "bfloat16", "device": "FakeTensorMode (shapes only), cpu",
        "real": None,
        "attention_kernel": f"{O.FLASH_OP} (saves q, k, v, out, 2 x fp32 [b,h,s,{O.FLASH_STATS}])",
        "config_kwargs": group["config_kwargs"], "errors": [], "stage_seconds": {}}
    if kind in STEP_ORACLE_TWIN:
        result["step1_step_oracle_twin"] = STEP_ORACLE_TWIN[kind]
    result["optimizer_config"] = optimizer_config(case)  # EXT: which optimizer and flags ran
    result["versions"] = _versions()
    timings = result["stage_seconds"]
    notes: Dict[str, Any] = {}
    began = time.perf_counter()
    O.ATTENTION_CALLS.clear()
    with O._fake_mode():  # pylint: disable=protected-access
        model, config, build_notes = S.build_model(family, group["config_kwargs"], None)
        notes.update(build_notes)
        result["config"] = {"class": type(config).__name__, "model_type": getattr(config, "model_type", None),
                            "fields": O._config_summary(model.config)}  # pylint: disable=protected-access
        timings["build"] = round(time.perf_counter() - began, 3)
        text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        vocab = int(text_config.vocab_size)
        hidden = int(text_config.hidden_size)  # EXT
        if pipeline:  # EXT: the step oracle's pipeline stage (run_case, kind "pipeline")
            used, stage = S.stage_modules(model, p, r, family)
            result["stage"] = stage
            schedule = S.schedule_1f1b(p, r, m)
        else:
            used = [model.model.language_model, model.lm_head] if family == "qwen3_vl_moe" else [model]
            stage = {"layers": [0, len(S.backbone(model).layers)], "first": True, "last": True}
            schedule = [(x, i) for i in range(m) for x in ("F", "B")]
        result["schedule"] = [f"{x}{i}" for x, i in schedule]
        if pipeline:  # EXT
            result["schedule_rule"] = (f"1F1B: warm-up min(p-r-1, m) = {min(p - r - 1, m)} forwards, "
                                       f"{m - min(p - r - 1, m)} steady F/B pairs, cool-down backwards")
        params = S.unique_tensors([q for module in used for q in module.parameters()])
        if pipeline:  # EXT: the stage's parameters in the model's own order (the embedding first), as a stage
            # model's parameters() lists them and so its optimizer steps them (stage_modules lists the layers first)
            model_order = {id(q): i for i, q in enumerate(model.parameters())}
            params = sorted(params, key=lambda q: model_order[id(q)])
        buffers = S.unique_tensors([b for module in used for b in module.buffers()])
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
        optimizer, notes["optimizer"] = make_optimizer_ext(params, foreach, fused)  # EXT
        result["optimizer_config"]["param_group"] = param_group_flags(optimizer)  # EXT: as constructed
        modeling = O.modeling_module(family)
        scale = m > 1
        records: List[Dict[str, Any]] = []
        steps: List[Any] = []
        stage_inputs: List[bool] = []  # EXT
        current_x: Dict[str, Any] = {}  # EXT
        hook = None  # EXT
        if pipeline and not stage["first"]:  # EXT: as the step oracle, the received x must reach layer 0 as it is
            def first_layer_input(_module: Any, args: Any, kwargs: Any) -> None:
                hidden_in = args[0] if args else kwargs.get("hidden_states")
                if isinstance(hidden_in, torch.Tensor) and "x" in current_x:
                    stage_inputs.append(O._address(hidden_in) == O._address(current_x["x"]))  # pylint: disable=W0212
            hook = S.backbone(model).layers[0].register_forward_pre_hook(first_layer_input, with_kwargs=True)
        gc.collect()
        gc_enabled = gc.isenabled()
        gc.disable()
        try:
            with O._checkpoints_on("cpu"), O.delta_rule(modeling, model, O.GDN_EAGER) as gdn:  # pylint: disable=W0212
                for number in range(1, STEPS + 1):
                    step = S.Step(params, buffers)
                    steps.append(step)
                    record: Dict[str, Any] = {"step": number}
                    records.append(record)
                    current: Dict[str, Any] = {}
                    graphs: Dict[int, Dict[str, Any]] = {}
                    began = time.perf_counter()

                    # the step oracle's forward / backward of a whole-model (first and last stage) case
                    def forward(i: int, step: Any = step, current: Dict[str, Any] = current) -> Dict[str, Any]:
                        del i
                        held: Dict[str, Any] = {}
                        labels = step.note_input(torch.randint(0, vocab, (batch, seq)))
                        ids = step.note_input(torch.randint(0, vocab, (batch, seq)))
                        out = model(input_ids=ids, labels=labels)
                        loss = out.loss
                        del out  # the logits go with the output object, as the HF Trainer's compute_loss drops them
                        held["loss"] = loss / m if scale else loss
                        del loss
                        current.clear()
                        return held

                    def backward(held: Dict[str, Any], step: Any = step) -> None:
                        held.pop("loss").backward()
                        held.clear()
                        step.note_grads()

                    # EXT: the step oracle's forward / backward of a pipeline stage (run_case, kind "pipeline")
                    def stage_forward(i: int, step: Any = step) -> Dict[str, Any]:
                        del i
                        held: Dict[str, Any] = {}
                        if stage["last"]:
                            labels = step.note_input(torch.randint(0, vocab, (batch, seq)))
                        if stage["first"]:
                            ids = step.note_input(torch.randint(0, vocab, (batch, seq)))
                            kwargs = dict(input_ids=ids)
                        else:
                            x = step.note_input(torch.randn(batch, seq, hidden, dtype=torch.bfloat16,
                                                            requires_grad=True))
                            held["x"] = x
                            current_x["x"] = x
                            kwargs = dict(inputs_embeds=x)
                        if stage["last"]:
                            out = model(**kwargs, labels=labels)
                            loss = out.loss
                            del out  # the logits go with the output object, as the HF Trainer's compute_loss drops them
                            held["loss"] = loss / m if scale else loss
                            del loss
                        else:
                            held["out"] = model.model(**kwargs).last_hidden_state
                        current_x.clear()
                        return held

                    def stage_backward(held: Dict[str, Any], step: Any = step) -> None:
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

                    if pipeline:
                        forward, backward = stage_forward, stage_backward  # noqa: F811

                    try:
                        with step.live:
                            step.start()
                            if number > 1:
                                # what is live at this step's start besides parameters and buffers: AdamW's states
                                carried = _state_tensors(optimizer, params)
                                for _, value in carried:
                                    step.live.track(value)
                                    step.keys["optimizer_states"].add(step.live.key(value))
                                record["carried_state_keys"] = {step.live.key(v) for _, v in carried}
                                del carried
                            for x, i in schedule:
                                step.mark(f"{x}{i}")
                                if x == "F":
                                    graphs[i] = forward(i)
                                else:
                                    backward(graphs.pop(i))
                            with_grad = {id(q) for q in params if q.grad is not None}
                            grads_before = {q: step.live.key(q.grad) for q in params if q.grad is not None}
                            record["gradients_before_step_bytes"] = sum(step.live.sizes.get(k, 0)
                                                                        for k in grads_before.values())
                            step.mark("optimizer_step")
                            # AdamW reads step.item() (bias corrections 1 - beta**step): answered with the step number
                            step.live.scalar_value = number
                            ops_before = dict(step.live.op_counts)  # EXT
                            optimizer.step()  # EXT note: the fused path reads no scalar (its step is a tensor)
                            record["optimizer_step_ops"] = {k: v - ops_before.get(k, 0) for k, v in  # EXT
                                                            sorted(step.live.op_counts.items())
                                                            if v != ops_before.get(k, 0)}
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
                            record["optimizer"] = {
                                "config": optimizer_config(case),  # EXT
                                "state_dtypes": sorted({f"{n}:{str(v.dtype).replace('torch.', '')}"  # EXT
                                                        for st in optimizer.state.values() for n, v in st.items()
                                                        if isinstance(v, torch.Tensor)}),
                                "state_bytes": sum(states.values()), "by_state": states,
                                "tracked_storages_by_state": tracked, "state_storages": len(counted),
                                "step_tensor_dtype": step_dtype[0] if step_dtype else None,
                                "step_tensors_are_tracked_storages": tracked["step"] == len(params),
                                "scalar_reads_answered": number,
                                "scalar_reads_in_step": step.live.scalar_reads.get("optimizer_step", 0),
                                "state_storages_created_in_this_step":
                                    len(counted - record.get("carried_state_keys", set())),
                                "parameters_with_state": sum(1 for q in params if optimizer.state[q])}
                            step.mark("zero_grad")
                            optimizer.zero_grad(set_to_none=True)
                            del grads_before
                            step.mark("end")
                            graphs.clear()
                            record["gradients"] = {
                                "bytes_live_at_end": sum(step.live.sizes.get(step.live.key(q.grad), 0)
                                                         for q in params if q.grad is not None),
                                "params_with_grad": sum(1 for q in params if q.grad is not None),
                                "params_without_grad": sorted(named.get(id(q), "?") for q in params
                                                              if id(q) not in with_grad)}
                    finally:
                        step.stop()
                        record["step_seconds"] = round(time.perf_counter() - began, 3)
                        # the step oracle's post-step collection (it frees nothing in any case run)
                        before = sum(step.live.sizes.values())
                        gc.collect()
                        record["bytes_freed_by_gc_after_step"] = before - sum(step.live.sizes.values())
                        record["events_at_step_end"] = len(step.live.events)
                        record["live_bytes_at_step_end"] = sum(step.live.sizes.values())
                        record["live_keys_at_step_end"] = set(step.live.sizes)
            O.check_rule_reached(gdn)
            if stage_inputs:  # EXT
                notes["stage_input_reaches_first_layer"] = all(stage_inputs)
                if not all(stage_inputs):
                    raise RuntimeError("pipeline split not honest: the model forward transformed the received "
                                       "hidden state (inputs_embeds) before the stage's first layer")
            if gdn.get("gdn_modules"):
                notes["gdn"] = {k: gdn.get(k) for k in ("gdn_modules", "rule", "calls", "conv")}
                notes["gdn"]["calls_are_over_both_steps"] = True
        finally:
            if hook is not None:  # EXT
                hook.remove()
            if gc_enabled:
                gc.enable()
        timings["step1"] = records[0]["step_seconds"]
        timings["step2"] = records[1]["step_seconds"]
        began = time.perf_counter()
        # step 1's tracker still holds finalizers on the storages it saw: cut its log at its own end
        first = steps[0]
        late = first.live.events[records[0]["events_at_step_end"]:]
        notes["step1_tracker_events_during_step2"] = len(late)
        notes["step1_tracker_bytes_freed_during_step2"] = -sum(d for _, d in late if d < 0)
        del first.live.events[records[0]["events_at_step_end"]:]
        del first.live.names[records[0]["events_at_step_end"]:]
        # storages live at step 1's end that step 2's setup cannot see (neither parameter, buffer nor state)
        cat1 = first.category_of()
        carried_other = [dict(zip(("op", "dtype", "shape", "phase"), first.live.info.get(k, ("?", "?", [], "?"))),
                              bytes=first.live.sizes.get(k, 0), category=cat1.get(k, "activations"))
                         for k in records[0]["live_keys_at_step_end"]
                         if cat1.get(k) not in ("parameters", "buffers", "optimizer_states")]
        analyses = [step.analyse() for step in steps]
        timings["analysis"] = round(time.perf_counter() - began, 3)

    blocks = [step_block(step, record, analysis) for step, record, analysis in zip(steps, records, analyses)]
    result["step1"] = blocks[0]
    result["step1"]["note"] = ("step 1 exactly as the step oracle runs it (AdamW's first step creates exp_avg, "
                               "exp_avg_sq and the scalar step inside optimizer_step); same layout as the top level")
    second = blocks[1]
    for key in ("events", "allocations_by_op", "peak", "other_peak", "forward_peak", "backward_peak",
                "optimizer_step_peak", "phases", "gradients", "live_at_end", "untracked_param_grads", "scalar_reads",
                "ops", "gradients_before_step_bytes", "optimizer"):
        result[key] = second[key]
    notes["attention_calls"] = {k: v["calls"] for k, v in O.ATTENTION_CALLS.items()}
    notes["attention_calls_are_over_both_steps"] = True
    notes["grouped_mm_ops"] = steps[1].live.op_counts.get("aten._grouped_mm.default", 0)
    notes["grouped_mm_ops_step1"] = steps[0].live.op_counts.get("aten._grouped_mm.default", 0)
    notes["grouped_mm_check_answered_for_fake"] = O.GroupedMmGuard.answered
    notes["bytes_freed_by_gc_after_step"] = records[1]["bytes_freed_by_gc_after_step"]
    notes["bytes_freed_by_gc_after_step1"] = records[0]["bytes_freed_by_gc_after_step"]
    notes["carried_over_untracked"] = carried_other
    result["notes"] = notes
    result["optimizer_step_ops"] = records[1]["optimizer_step_ops"]  # EXT: the ops dispatched inside optimizer.step()
    result["step1"]["optimizer_step_ops"] = records[0]["optimizer_step_ops"]  # EXT
    notes["optimizer_path_ops_step2"] = optimizer_path_ops(records[1]["optimizer_step_ops"])  # EXT: which path ran
    notes["optimizer_path_ops_step1"] = optimizer_path_ops(records[0]["optimizer_step_ops"])  # EXT
    result["steady"] = steady_comparison(result, records)
    result["checks"] = S.checks(result, family, group["config_kwargs"], stage)
    result["checks"].update(steady_checks(result, records))
    return result


# ---------------------------------------------------------------------------
# Step 1 beside its step-oracle twin; both steps beside the steady sibling
# ---------------------------------------------------------------------------

def _load(dirs: Sequence[str], case_id: str) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    for entry in dirs:
        label, _, folder = entry.rpartition("=")
        path = os.path.join(folder, f"{case_id}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                return json.load(handle), (label or "/".join(os.path.normpath(folder).split(os.sep)[-2:]))
    return None, None


def _fb_phase_diffs(mine: Sequence[Dict[str, Any]], theirs: Sequence[Dict[str, Any]], a: str, b: str,
                    fields: Sequence[str] = PHASE_FIELDS) -> Dict[str, Any]:
    """setup / F<i> / B<i> phases of two records, field by field (every phase of either side that has that name)."""
    diffs: Dict[str, Any] = {}
    mp = {p["name"]: p for p in mine if re.fullmatch(r"setup|[FB]\d+", p["name"])}
    tp = {p["name"]: p for p in theirs if re.fullmatch(r"setup|[FB]\d+", p["name"])}
    if list(mp) != list(tp):
        diffs["phase_names"] = {a: list(mp), b: list(tp)}
    for name in mp:
        for k in fields:
            if name in tp and mp[name].get(k) != tp[name].get(k):
                diffs[f"phases.{name}.{k}"] = {a: mp[name].get(k), b: tp[name].get(k)}
    return diffs


def compare_step1_ext(result: Dict[str, Any], dirs: Sequence[str]) -> Optional[Dict[str, Any]]:
    """An added kind's step 1 beside its step-oracle twin: setup, every F<i> / B<i> phase (every PHASE_FIELDS
    field), forward / backward peaks, parameters, gradient bytes after the first / last backward. The twin runs
    no optimizer (single, single_b2, pp*) or AdamW(foreach=False) (accum_m4_adamw), so the optimizer step is not
    compared. A steady oracle kind: SD.compare_step1, unchanged."""
    kind = result.get("kind")
    if kind in SD.KINDS:
        return SD.compare_step1(result, dirs)
    twin = STEP_ORACLE_TWIN.get(kind)
    if not twin or "step1" not in result:
        return None
    case_id = result["case"][: -len(kind)] + twin
    stored, found = _load(dirs, case_id)
    if stored is None:
        return {"step_oracle_case": case_id, "note": "no stored step-oracle JSON found"}
    view = dict(result["step1"], parameters=result["parameters"])
    diffs: Dict[str, Any] = {}
    paths = ["parameters.bytes", "parameters.count", "parameters.tensors", "parameters.buffers_bytes",
             "gradients.bytes_after_first_backward", "gradients.bytes_after_last_backward", "schedule"]
    if twin.startswith("pp"):
        paths += ["stage.layers", "stage.first", "stage.last"]
        view["schedule"], view["stage"] = result.get("schedule"), result.get("stage")
    fwd_bwd = [f"{n}.{f}" for n in ("forward_peak", "backward_peak") for f in ("bytes", "phase", "op")]
    for path_ in paths + fwd_bwd:
        a, b = S._dig(view, path_), S._dig(stored, path_)  # pylint: disable=protected-access
        if path_ == "schedule" and a is None:
            continue
        if a != b:
            diffs[path_] = {"steady_step1": a, "step_oracle": b}
    diffs.update(_fb_phase_diffs(view["phases"], stored.get("phases") or [], "steady_step1", "step_oracle",
                                 PHASE_FIELDS + ("peak_event",)))
    return {"equal": not diffs, "differences": diffs, "step_oracle_case": case_id, "found_in": found,
            "compared": "setup and every F<i>/B<i> phase (live_at_start, peak_bytes, peak_event, peak_op, "
                        "live_at_end, split_at_peak, split_at_end, event bounds), forward / backward peaks, "
                        "parameters, gradient bytes after the first / last backward (the twin's optimizer, if "
                        "any, differs from this case's and is not compared)",
            "stored_versions": {k: v for k, v in (stored.get("versions") or {}).items() if k != "transformers_path"}}


def compare_steady_sibling(result: Dict[str, Any], dirs: Sequence[str]) -> Optional[Dict[str, Any]]:
    """Both steps' setup / F<i> / B<i> phases beside the steady case that differs only by its optimizer flags."""
    kind = result.get("kind")
    sibling = STEADY_SIBLING.get(kind)
    if not sibling or "step1" not in result:
        return None
    case_id = result["case"][: -len(kind)] + sibling
    stored, found = _load(dirs, case_id)
    if stored is None or stored.get("errors"):
        return {"steady_case": case_id, "note": "no stored steady JSON found (or it erred)"}
    diffs: Dict[str, Any] = {}
    for label, mine, theirs in (("step2", result, stored), ("step1", result["step1"], stored.get("step1") or {})):
        for path_ in ("forward_peak.bytes", "forward_peak.phase", "backward_peak.bytes", "backward_peak.phase"):
            a, b = S._dig(mine, path_), S._dig(theirs, path_)  # pylint: disable=protected-access
            if a != b:
                diffs[f"{label}.{path_}"] = {"this": a, "sibling": b}
        for k, v in _fb_phase_diffs(mine["phases"], theirs.get("phases") or [], "this", "sibling",
                                    PHASE_FIELDS + ("peak_event",)).items():
            diffs[f"{label}.{k}"] = v
    a, b = result["optimizer"]["state_bytes"], (stored.get("optimizer") or {}).get("state_bytes")
    if a != b:
        diffs["optimizer.state_bytes"] = {"this": a, "sibling": b}
    return {"equal": not diffs, "differences": diffs, "steady_case": case_id, "found_in": found,
            "compared": "both steps' setup and F<i>/B<i> phases (every PHASE_FIELDS field + peak_event), forward / "
                        "backward peaks, optimizer state bytes: the two cases differ only by AdamW's flags",
            "optimizer_step_peak": {"this": result["optimizer_step_peak"]["bytes"],
                                    "sibling": (stored.get("optimizer_step_peak") or {}).get("bytes")},
            "peak": {"this": [result["peak"]["bytes"], result["peak"]["phase"], result["peak"]["op"]],
                     "sibling": [stored["peak"]["bytes"], stored["peak"]["phase"], stored["peak"]["op"]]}}


# ---------------------------------------------------------------------------
# Worker and orchestrator (the steady oracle's, with this file's kinds)
# ---------------------------------------------------------------------------

def worker(group_path: str, out_dir: str) -> int:
    """The step oracle's worker, running the steady oracle's kinds unchanged and the added kinds here."""
    with open(group_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    dirs = spec.get("compare_step") or []
    steady_dirs = spec.get("compare_steady") or []
    force_ext = bool(spec.get("force_ext"))

    def run(group: Dict[str, Any], case: Dict[str, Any], sets: Any, kernels: Any) -> Dict[str, Any]:
        if case["kind"] in SD.KINDS and not force_ext:
            result = SD.run_steady_case(group, case, sets, kernels)
        else:
            result = run_steady_case_ext(group, case, sets, kernels)
            result["oracle_extension"] = {"script": EXT, "function": "run_steady_case_ext",
                                          "forced_for_a_steady_oracle_kind": case["kind"] in SD.KINDS}
        if dirs:
            result["step1_vs_step_oracle"] = compare_step1_ext(result, dirs)
        if steady_dirs and case["kind"] in STEADY_SIBLING:
            result["vs_steady_sibling"] = compare_steady_sibling(result, steady_dirs)
        return result

    S.run_case = run
    S.ORACLE = ORACLE
    S._versions = _versions  # pylint: disable=protected-access
    return S.worker(group_path, out_dir)


def build_groups(families: Sequence[str], seqs: Sequence[int], kinds: Sequence[str],
                 matrix: bool = True) -> List[Dict[str, Any]]:
    groups = []
    for family in families:
        if family not in S.FAMILIES:
            raise ValueError(f"unknown family {family!r} (the step oracle's FAMILIES: {', '.join(S.FAMILIES)})")
        chosen = [k for k in kinds if not matrix or k not in EXT_FAMILIES or family in EXT_FAMILIES[k]]
        # a pipeline kind without foreach first: its foreach twin is compared with it (--compare-steady)
        chosen.sort(key=lambda k: (k not in SD.KINDS, "foreach" in k and k.startswith("pp")))
        for seq in seqs:
            cases = [dict(KINDS[k], kind=k, id=f"{family}_toy_L{S.LAYERS}_s{seq}_{k}", split="shared")
                     for k in chosen]
            if cases:
                groups.append(dict(id=f"{family}_toy_s{seq}_steady_ext", family=family, size="toy", seq=seq,
                                   config_kwargs=S.toy_config_kwargs(family), checkpoint=None, split="shared",
                                   cases=cases))
    slow = {"qwen3_next": 0, "deepseek_v3": 1, "gpt_oss": 2, "qwen3_moe": 3, "mixtral": 4}
    groups.sort(key=lambda g: slow.get(g["family"], 9))
    return groups


def brief(result: Dict[str, Any]) -> Dict[str, Any]:
    row = SD.brief(result)
    row["optimizer_path"] = (result.get("notes") or {}).get("optimizer_path_ops_step2", {}).get("path")
    row["optimizer_step_peak"] = (result.get("optimizer_step_peak") or {}).get("bytes")
    sib = result.get("vs_steady_sibling")
    if isinstance(sib, dict):
        row["vs_steady_sibling"] = sib.get("equal", sib.get("note"))
    return row


def orchestrate(args: argparse.Namespace) -> int:
    families = [f for f in args.families.split(",") if f]
    seqs = [int(s) for s in args.seqs.split(",") if s]
    kinds = [k for k in args.kinds.split(",") if k]
    for k in kinds:
        if k not in KINDS:
            raise SystemExit(f"unknown kind {k!r}; kinds: {', '.join(KINDS)}")
    groups = build_groups(families, seqs, kinds, matrix=not args.no_matrix)
    if args.only:
        for group in groups:
            group["cases"] = [c for c in group["cases"] if re.search(args.only, c["id"])]
        groups = [g for g in groups if g["cases"]]
    if args.list:
        for group in groups:
            for case in group["cases"]:
                print(case["split"], case["id"])
        return 0
    out = os.path.abspath(args.out)
    for group in groups:
        if args.compare_step:
            entries = [d.rpartition("=") for d in args.compare_step.split(",") if d]
            group["compare_step"] = [(label + "=" if label else "") + os.path.abspath(folder)
                                     for label, _, folder in entries]
        # the steady siblings: the given folders, then this run's own cases (the pp foreach kinds' siblings)
        entries = [d.rpartition("=") for d in (args.compare_steady or "").split(",") if d]
        group["compare_steady"] = [(label + "=" if label else "") + os.path.abspath(folder)
                                   for label, _, folder in entries] + [f"this_run={os.path.join(out, 'cases')}"]
        group["force_ext"] = bool(args.force_ext)
    S.ORACLE = ORACLE
    for sub in ("groups", "logs", "cases", "progress"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    S._log(f"{EXT}: {sum(len(g['cases']) for g in groups)} cases in {len(groups)} groups; "  # pylint: disable=W0212
           f"torch {torch.__version__}; {args.workers} workers")
    pending = list(groups)
    running: List[Tuple[Any, Dict[str, Any], float, Any]] = []
    status: Dict[str, str] = {}
    started_at = time.perf_counter()
    while pending or running:
        while pending and len(running) < args.workers:
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
            S._log(f"started {group['id']} ({len(group['cases'])} cases)")  # pylint: disable=protected-access
        time.sleep(0.5)
        for item in list(running):
            proc, group, started, log = item
            reason = None
            if proc.poll() is None:
                done, current = S._done_cases(out, group["id"])  # pylint: disable=protected-access
                if time.perf_counter() - started > args.group_timeout:
                    reason = f"group timeout {args.group_timeout}s"
                elif current and args.case_timeout and time.time() - current[1] > args.case_timeout:
                    reason = f"case timeout {args.case_timeout}s"
                if reason:
                    proc.kill()
                    proc.wait()
                    status[group["id"]] = reason
                    if current:
                        S._stub(out, current[0], "timeout", f"{reason}: killed while running this case")  # noqa
                    rest = [c for c in group["cases"] if c["id"] not in done and (not current or c["id"] != current[0])]
                    if rest and reason.startswith("case timeout"):
                        pending.insert(0, dict(group, id=f"{group['id']}_r{len(status)}", cases=rest))
                    else:
                        for case in rest:
                            S._stub(out, case["id"], "not_run", f"not run: {reason}")  # pylint: disable=W0212
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                status.setdefault(group["id"], f"exit {proc.returncode}")
                done, current = S._done_cases(out, group["id"])  # pylint: disable=protected-access
                if current and not reason:
                    S._stub(out, current[0], "crashed",  # pylint: disable=protected-access
                            f"worker exited {proc.returncode} while running this case")
                S._log(f"finished {group['id']}: {status[group['id']]} "  # pylint: disable=protected-access
                       f"({time.perf_counter() - started:.1f}s)")
    rows = []
    for group in groups:
        for case in group["cases"]:
            path = os.path.join(out, "cases", f"{case['id']}.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    rows.append(brief(json.load(handle)))
            else:
                rows.append({"case": case["id"], "status": f"missing (group {status.get(group['id'])})"})
    summary = {"oracle": EXT, "layout_of": ORACLE, "schema": SCHEMA, "cases": len(rows),
               "ok": sum(1 for r in rows if r.get("status") == "ok"), "groups": status,
               "seconds": round(time.perf_counter() - started_at, 1), "versions": _versions(), "rows": rows}
    O.write_json(os.path.join(out, "summary.json"), summary)
    S._log(f"{summary['ok']} of {summary['cases']} ok")  # pylint: disable=protected-access
    return 0 if summary["ok"] == summary["cases"] else 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--out", default="steady_ext_results")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--seqs", default=",".join(str(s) for s in SEQS))
    parser.add_argument("--kinds", default=",".join(KINDS_EXT))
    parser.add_argument("--only", default=None, help="regex on case ids")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--group-timeout", type=float, default=3600.0)
    parser.add_argument("--case-timeout", type=float, default=0.0, help="kill a case running longer (s); 0: none")
    parser.add_argument("--compare-step", default=None, metavar="DIRS",
                        help="folders of the step oracle's case JSONs (PATH or LABEL=PATH): step 1 beside its twin")
    parser.add_argument("--compare-steady", default=None, metavar="DIRS",
                        help="folders of the steady oracle's case JSONs: an added kind beside its sibling "
                             "(STEADY_SIBLING); this run's own cases are searched last")
    parser.add_argument("--no-matrix", action="store_true",
                        help="run every (family, kind) asked, not only the brief's matrix (EXT_FAMILIES)")
    parser.add_argument("--force-ext", action="store_true",
                        help="run the steady oracle's own kinds through run_steady_case_ext (validation)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.out)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
