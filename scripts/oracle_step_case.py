#!/usr/bin/env python3
"""Copy the numbers the step tests read from cases of the step oracle into tests/data/step/.

Usage: scripts/oracle_step_case.py CASE.json [CASE.json ...]   (writes tests/data/step/<case>.json)

A case of the steady-state oracle (two steps, the second recorded; it has a `step1` block) goes to
tests/data/step/steady/: its step 2 as <case>.json (kind `..._steady`) and its step 1 as a case of its
own, <case with _first for _steady>.json (kind `..._first`).

Keeps what tests/step/step_oracle_test.cpp compares: the config as the oracle built it (its fields,
which carry the family's defaults), the micro-batch size, the schedule, the parameter, gradient and
optimizer-state bytes, the peak with its phase, op and split, other_peak, each phase's bytes and the
forward / backward / optimizer-step peaks; a case of the offloading oracle, its record of the pinned host
memory and of the packs as `host`, as census step reports them. A case that records an error (the oracle could not run that
kind for that family) keeps its error's first line instead of the numbers.
"""
import json
import math
import pathlib
import re
import sys

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "step"


def moment(record):
    if record is None:
        return None
    keep = {key: record[key] for key in ("bytes", "phase", "op") if key in record}
    if "split" in record:
        split = record["split"]
        keep["split"] = {key: split[key] for key in ("parameters", "gradients", "optimizer_states", "other")}
        keep["split"]["other_detail"] = {key: split["other_detail"][key]
                                         for key in ("buffers", "inputs", "param_grad_inflight", "activations")}
    return keep


def config_of(case, folder):
    """The config the oracle built; a case that failed before building one takes its family's single case's, or
    (a steady-state oracle's) that of another case beside it of the same family, tokens and config_kwargs."""
    if case.get("config") is not None:
        return case["config"]["fields"]
    single = re.sub(r"_L4_s(\d+)_.*", r"_L4_s\1_single.json", case["case"])
    if (folder / single).exists():
        return json.loads((folder / single).read_text())["config"]["fields"]
    prefix = re.sub(r"(_L4_s\d+_).*", r"\1", case["case"])
    for other in sorted(folder.glob(prefix + "*.json")) + [p for p in GIVEN if p.name.startswith(prefix)]:
        built = json.loads(other.read_text())
        if built.get("config") is not None and built.get("config_kwargs") == case.get("config_kwargs"):
            return built["config"]["fields"]
    raise SystemExit(f"{case['case']}: no case beside it (or given with it) built its config")


def trimmed(case, folder):
    out = {key: case[key] for key in ("case", "kind", "seq", "m", "p", "r")}
    if out["p"] is None:  # a steady-state case that failed before recording its stage: the whole model
        out["p"], out["r"] = 1, 0
    out["batch"] = case.get("batch") or 1
    out["config"] = config_of(case, folder)
    if case.get("errors"):
        out["error"] = case["errors"][0]["error"].splitlines()[0]
        return out
    out["schedule"] = case["schedule"]
    parameters = case["parameters"]
    out["parameters"] = {key: parameters[key] for key in ("count", "tensors", "bytes", "buffers_bytes")}
    gradients = case["gradients"]
    out["gradients"] = {key: gradients[key]
                        for key in ("bytes_after_first_backward", "bytes_after_last_backward", "bytes_live_at_end")}
    optimizer = case.get("optimizer")
    out["optimizer"] = None if optimizer is None else {"state_bytes": optimizer["state_bytes"]}
    out["peak"] = moment(case["peak"])
    out["other_peak"] = moment(case["other_peak"])
    out["phases"] = [{key: phase[key] for key in ("name", "live_at_start", "peak_bytes", "live_at_end")}
                     for phase in case["phases"]]
    # The optimizer step's peak op (the allocator's tests place its last allocations by it).
    for phase, original in zip(out["phases"], case["phases"]):
        if phase["name"] == "optimizer_step" and "peak_op" in original:
            phase["peak_op"] = original["peak_op"]
    for key in ("forward_peak", "backward_peak", "optimizer_step_peak"):
        record = case.get(key)
        out[key] = None if record is None else {"bytes": record["bytes"], "phase": record["phase"]}
    lora = case.get("lora")
    if lora:  # PEFT's LoraConfig and what get_peft_model made (census_oracle_steady_lora.py)
        out["lora"] = {key: lora[key] for key in ("r", "alpha", "dropout", "target_modules", "adapter_dtype")}
        if lora.get("use_dora"):
            out["lora"]["use_dora"] = True
        if lora.get("modules_to_save"):
            out["lora"]["modules_to_save"] = lora["modules_to_save"]
        # as asked: "default" (the model type's), "all-linear", or names (PEFT's record has the names it resolved)
        asked = lora.get("target_modules_asked")
        if asked is None:  # the first runs' records: the LoraConfig's arguments
            asked = ("all-linear" if "'target_modules': 'all-linear'" in lora["peft"]
                     else "default" if "'target_modules'" not in lora["peft"] else lora["target_modules"])
        out["lora"]["target_modules"] = asked
        out["lora"]["adapted_linears"] = len(lora["adapted_modules"])
        out["lora"]["trainable_parameters"] = {"count": lora["trainable_parameters"], "bytes": lora["trainable_bytes"]}
        out["lora"]["frozen_parameters"] = {"count": lora["frozen_parameters"], "bytes": lora["frozen_bytes"]}
        quant = lora.get("quantization")
        if quant:  # Transformers' bitsandbytes 4-bit base under the adapters (census_oracle_steady_qlora.py)
            prepared = quant.get("prepare_model_for_kbit_training")
            out["quantization"] = {
                "quant_type": quant["quant_type"], "double_quant": quant["double_quant"],
                "compute_dtype": quant["compute_dtype"], "quant_storage": quant["quant_storage"],
                "bitsandbytes": quant["bitsandbytes"].split(" ")[0], "prepare_kbit": bool(prepared),
                "prepare_kbit_checkpointing": bool(prepared) and "use_gradient_checkpointing=True" in prepared,
                "quantized_linears": quant["converted_linears"], "packed_weight_bytes": quant["packed_bytes"],
                "quantization_state_bytes": quant["state_bytes"]}
    offload = case.get("offload")
    if offload and offload.get("enabled"):  # the offloading oracle's record of the step (census step's "host")
        out["host"] = {
            "pinned_peak_bytes": offload["host_peak_bytes"], "offloaded_bytes": offload["offloaded_bytes"],
            "brought_back_bytes": offload["brought_back_bytes"],
            "saves": {"packed": offload["packs"], "offloaded": offload["offloaded"],
                      "copied_before_offload": offload["offloaded_cloned"] + offload["offloaded_made_contiguous"],
                      "kept_deduplicated": offload["deduplicated"], "kept_small": offload["kept_small"],
                      "kept_parameter": offload["kept_parameter"], "brought_back": offload["brought_back"]}}
    return out


def finite(value):
    """JSON has no infinity: an unbounded limit of the config (time_step_limit's [0.0, inf]) is written as the
    largest double, which reads as the same unbounded limit."""
    if isinstance(value, float) and math.isinf(value):
        return math.copysign(sys.float_info.max, value)
    if isinstance(value, list):
        return [finite(item) for item in value]
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    return value


def first_step_of(case):
    """A steady-state case's step 1 (its `step1` block, in the top level's layout) as a case of its own: kind
    `..._first` in place of `..._steady`, the config, schedule and parameters the two steps share."""
    first = dict(case)
    first.update(case["step1"])
    if isinstance(case.get("offload"), dict) and "step1" in case["offload"]:
        first["offload"] = dict(case["offload"], **case["offload"]["step1"])
    first["case"] = case["case"].replace("_steady", "_first")
    first["kind"] = case["kind"].replace("_steady", "_first")
    return first


def write(case, folder, out):
    target = out / (case["case"] + ".json")
    target.write_text(json.dumps(finite(trimmed(case, folder)), indent=1, allow_nan=False) + "\n")
    print(target)


GIVEN = []  # every case given, where a failed one finds a config its family's toy was built with


def main(paths):
    GIVEN.extend(pathlib.Path(path) for path in paths)
    for path in paths:
        case = json.loads(pathlib.Path(path).read_text())
        folder = pathlib.Path(path).parent
        if "step1" in case:  # the steady-state oracle's: step 2, and its step 1 beside it
            write(case, folder, OUT / "steady")
            write(first_step_of(case), folder, OUT / "steady")
        elif case.get("kind", "").endswith("_steady"):  # one that failed before its step 1 ended: its error
            write(case, folder, OUT / "steady")
        else:
            write(case, folder, OUT)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
