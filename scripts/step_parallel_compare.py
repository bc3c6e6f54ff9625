#!/usr/bin/env python3
"""Run `census step` on cases of the parallel step oracle and print every number that differs.

Usage: scripts/step_parallel_compare.py [--census build/census] [--only REGEX] [--all] CASE.json|DIR ...

For each case (a parallel oracle JSON, or a trimmed one of tests/data/step/parallel/), maps its `parallel`
record onto census step's options one to one (FSDP2 over dp_shard ranks: --fsdp --dp N, with --master-weights
fp32 where the shards are fp32 under MixedPrecisionPolicy(bf16, fp32); --tp T, --sequence-parallel,
--loss-parallel) and its kind onto --micro-batches and --optimizer, and compares what
scripts/step_oracle_compare.py compares, with FSDP2's parts of `other` in every split and each phase's
peak op and split.
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

DETAIL = ("buffers", "inputs", "param_grad_inflight", "fsdp_unsharded_params", "fsdp_all_gather_buffers",
          "fsdp_unsharded_grads", "fsdp_reduce_scatter_buffers", "activations")


def options(case):
    p = case["parallel"]
    args = ["--seq-length", str(case["seq"]), "--micro-batch-size", str(case.get("batch") or 1),
            "--micro-batches", str(case["m"]), "--optimizer", "adamw" if case["adamw"] else "none",
            "--format", "json"]
    if p["dp_shard"] > 1:
        args += ["--fsdp", "--dp", str(p["dp_shard"])]
    if p.get("mixed_precision"):
        args += ["--master-weights", "fp32"]
    if p["tp"] > 1:
        args += ["--tp", str(p["tp"])]
    if p.get("sequence_parallel"):
        args += ["--sequence-parallel"]
    if p.get("loss_parallel"):
        args += ["--loss-parallel"]
    return args


def split_of(split):
    return [split["parameters"], split["gradients"], split["optimizer_states"], split["other"]] + \
        [split["other_detail"].get(key, 0) for key in DETAIL]


def differences(case, got):
    out = []

    def same(name, want, have):
        if want != have:
            out.append(f"{name}: oracle {want} census {have}")

    same("schedule", case["schedule"], got["schedule"])
    for key in ("count", "tensors", "bytes", "buffers_bytes"):
        same("parameters." + key, case["parameters"][key], got["parameters"][key])
    for key in ("bytes_after_first_backward", "bytes_after_last_backward", "bytes_live_at_end"):
        same("gradients." + key, case["gradients"][key], got["gradients"][key])
    if case.get("optimizer"):
        same("optimizer.state_bytes", case["optimizer"]["state_bytes"], (got.get("optimizer") or {}).get("state_bytes"))
    for key in ("peak", "other_peak"):
        for field in ("bytes", "phase", "op"):
            same(f"{key}.{field}", case[key][field], got[key][field])
        same(f"{key}.split", split_of(case[key]["split"]), split_of(got[key]["split"]))
    for key in ("forward_peak", "backward_peak", "optimizer_step_peak"):
        want, have = case.get(key), got.get(key)
        same(key, None if want is None else (want["bytes"], want["phase"]),
             None if have is None else (have["bytes"], have["phase"]))
    same("phases", [p["name"] for p in case["phases"]], [p["name"] for p in got["phases"]])
    for want, have in zip(case["phases"], got["phases"]):
        for field in ("live_at_start", "peak_bytes", "live_at_end", "peak_op"):
            same(f"{want['name']}.{field}", want[field], have[field])
        same(f"{want['name']}.split_at_peak", split_of(want["split_at_peak"]), split_of(have["split_at_peak"]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--census", default="build/census")
    parser.add_argument("--only", default="")
    parser.add_argument("--all", action="store_true", help="print every difference, not the first four")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    files = []
    for path in map(pathlib.Path, args.paths):
        files += sorted(path.glob("*.json")) if path.is_dir() else [path]
    bad = good = 0
    with tempfile.TemporaryDirectory() as scratch:
        for file in files:
            case = json.loads(file.read_text())
            if "case" not in case or not re.search(args.only, case["case"]):
                continue
            config = pathlib.Path(scratch) / "config.json"
            fields = case["config"]["fields"] if "fields" in case["config"] else case["config"]
            config.write_text(json.dumps(fields))
            run = subprocess.run([args.census, "step", str(config)] + options(case), capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{case['case']}: REFUSED: {run.stderr.strip()}")
                bad += 1
                continue
            found = differences(case, json.loads(run.stdout))
            if found:
                shown = found if args.all else found[:4]
                print(f"{case['case']}: {len(found)} differ: " + "; ".join(shown))
                bad += 1
            else:
                print(f"{case['case']}: ok")
                good += 1
    print(f"{good} ok, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
