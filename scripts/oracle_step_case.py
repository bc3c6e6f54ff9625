#!/usr/bin/env python3
"""Copy the numbers the step tests read from cases of the step oracle into tests/data/step/.

Usage: scripts/oracle_step_case.py CASE.json [CASE.json ...]   (writes tests/data/step/<case>.json)

Keeps what tests/census/step_oracle_test.cpp compares: the config as the oracle built it (its fields,
which carry the family's defaults), the micro-batch size, the schedule, the parameter, gradient and
optimizer-state bytes, the peak with its phase, op and split, other_peak, each phase's bytes and the
forward / backward / optimizer-step peaks. A case that records an error (the oracle could not run that
kind for that family) keeps its error's first line instead of the numbers.
"""
import json
import pathlib
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


def trimmed(case):
    out = {key: case[key] for key in ("case", "kind", "seq", "m", "p", "r")}
    out["batch"] = case.get("batch") or 1
    out["config"] = case["config"]["fields"]
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
    for key in ("forward_peak", "backward_peak", "optimizer_step_peak"):
        record = case.get(key)
        out[key] = None if record is None else {"bytes": record["bytes"], "phase": record["phase"]}
    return out


def main(paths):
    for path in paths:
        case = json.loads(pathlib.Path(path).read_text())
        target = OUT / (case["case"] + ".json")
        target.write_text(json.dumps(trimmed(case), indent=1) + "\n")
        print(target)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
