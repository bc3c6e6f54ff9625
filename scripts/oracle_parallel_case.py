#!/usr/bin/env python3
"""Copy the numbers the parallel step tests read from cases of the parallel step oracle into
tests/data/step/parallel/.

Usage: scripts/oracle_parallel_case.py CASE.json [CASE.json ...]   (writes tests/data/step/parallel/<case>.json)

Keeps what scripts/oracle_step_case.py keeps for a step case (the config's fields, the schedule, the
parameter, gradient and optimizer-state bytes, the peak with its phase, op and split, other_peak, each
phase's bytes, the forward / backward / optimizer-step peaks), with FSDP2's parts of `other`
(fsdp_unsharded_params, fsdp_all_gather_buffers, fsdp_unsharded_grads, fsdp_reduce_scatter_buffers) in
each split, and the case's `parallel` record as its options name it: world size, FSDP2 shard degree,
TP degree, sequence parallelism, loss parallelism, the sharded dtype and the mixed-precision policy.

A case of the parallel oracle run for two steps (its kind ends in `_steady`, step 1 in its `step1` block)
is written twice, as scripts/oracle_step_case.py writes a steady case: step 2, and step 1 as `..._first`.
A case PyTorch itself refused (it records an error) keeps the error's first line and its family's config.
"""
import json
import pathlib
import sys

from oracle_step_case import finite, first_step_of  # the config's unbounded limits; a steady case's step 1

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "step" / "parallel"
DETAIL = ("buffers", "inputs", "param_grad_inflight", "fsdp_unsharded_params", "fsdp_all_gather_buffers",
          "fsdp_unsharded_grads", "fsdp_reduce_scatter_buffers", "activations")


def split(record):
    keep = {key: record[key] for key in ("parameters", "gradients", "optimizer_states", "other")}
    keep["other_detail"] = {key: record["other_detail"][key] for key in DETAIL}
    return keep


def moment(record):
    if record is None:
        return None
    keep = {key: record[key] for key in ("bytes", "phase", "op") if key in record}
    if "split" in record:
        keep["split"] = split(record["split"])
    return keep


def refused(case, folder):
    """A case PyTorch itself refused: its layout as the oracle's layout table states it (the case stopped before
    recording its `parallel`), its error's first line, and the config of a case of its family that ran."""
    p = case["parallel"]
    out = {key: case[key] for key in ("case", "family", "layout", "kind", "seq")}
    out.update(m=1, batch=1, adamw=True)
    out["parallel"] = {"world_size": p["world"], "dp_shard": p["dp"], "tp": p["tp"], "sequence_parallel": p["sp"],
                       "loss_parallel": p["loss_parallel"], "param_dtype": p["param_dtype"], "mixed_precision": p["mp"]}
    out["error"] = case["errors"][0]["error"].splitlines()[0]
    ran = next(json.loads(other.read_text()) for other in sorted(folder.glob(case["family"] + "_toy_*.json"))
               if json.loads(other.read_text()).get("config"))
    out["config"] = ran["config"]["fields"]
    return out


def trimmed(case, folder):
    if case.get("errors"):
        return refused(case, folder)
    out = {key: case[key] for key in ("case", "family", "layout", "kind", "seq", "m", "adamw")}
    out["batch"] = case.get("batch") or 1
    p = case["parallel"]
    out["parallel"] = {key: p[key] for key in ("world_size", "dp_shard", "tp", "sequence_parallel", "loss_parallel",
                                               "param_dtype", "mixed_precision")}
    if p.get("fp8"):  # census_oracle_parallel_fp8.py: torchao's Float8Linear, the recipe and what it converted
        out["parallel"]["fp8"] = p["fp8"]
        out["parallel"]["recompute"] = p.get("recompute", "none")
        out["parallel"]["fp8_filter_fqns"] = p.get("fp8_filter_fqns", [])
        out["fp8"] = case["fp8"]
    if p.get("loss"):  # census_oracle_parallel_loss.py: torchtune's chunked loss
        out["parallel"]["loss"] = p["loss"]
    if p.get("fsdp_wrap"):  # census_oracle_parallel_units.py: torchtitan v0.2's FSDP2 units
        out["parallel"]["fsdp_wrap"] = p["fsdp_wrap"]
    if p.get("cpu_offload"):  # census_oracle_parallel_cpu_offload.py: CPUOffloadPolicy, the host's record
        out["parallel"]["cpu_offload"] = True
        out["parallel"]["recompute"] = p.get("recompute", "none")
        out["host"] = case["host"]
    out["config"] = case["config"]["fields"]
    out["schedule"] = case["schedule"]
    parameters = case["parameters"]
    out["parameters"] = {key: parameters[key] for key in ("count", "local_count", "tensors", "bytes", "buffers_bytes")}
    gradients = case["gradients"]
    out["gradients"] = {key: gradients[key]
                        for key in ("bytes_after_first_backward", "bytes_after_last_backward", "bytes_live_at_end")}
    optimizer = case.get("optimizer")
    out["optimizer"] = None if optimizer is None else {"state_bytes": optimizer["state_bytes"]}
    out["peak"] = moment(case["peak"])
    out["other_peak"] = moment(case["other_peak"])
    out["phases"] = [{"name": phase["name"], "live_at_start": phase["live_at_start"], "peak_bytes": phase["peak_bytes"],
                      "peak_op": phase["peak_op"], "split_at_peak": split(phase["split_at_peak"]),
                      "live_at_end": phase["live_at_end"]} for phase in case["phases"]]
    for key in ("forward_peak", "backward_peak", "optimizer_step_peak"):
        record = case.get(key)
        out[key] = None if record is None else {"bytes": record["bytes"], "phase": record["phase"]}
    if case.get("liger"):  # census_oracle_parallel_liger.py: Liger's patch, Transformers' loss
        out["liger"] = {key: case["liger"][key] for key in ("liger_commit", "sm_count", "kernels",
                                                          "fused_linear_cross_entropy")}
    return out


def write(case, folder):
    target = OUT / (case["case"] + ".json")
    target.write_text(json.dumps(finite(trimmed(case, folder)), indent=1, allow_nan=False) + "\n")
    print(target)


def main(paths):
    OUT.mkdir(parents=True, exist_ok=True)
    for path in paths:
        case = json.loads(pathlib.Path(path).read_text())
        folder = pathlib.Path(path).parent
        write(case, folder)
        if "step1" in case and not case.get("errors"):  # a steady-state case: its first step beside it
            write(first_step_of(case), folder)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
