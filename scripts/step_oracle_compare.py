#!/usr/bin/env python3
"""Run `census step` on cases of the step oracle or the parallel step oracle and print every number that differs.

Usage: scripts/step_oracle_compare.py [--census build/census] [--only REGEX] [--all] CASE.json|DIR ...

For each case (a step oracle JSON, or a trimmed one of tests/data/step/), runs the census binary with
the case's config, sequence, micro-batch size, micro-batches, pipeline stage and kind, and compares the
numbers tests/step/step_oracle_test.cpp compares: the schedule, parameters, gradients, optimizer
states, the peak (bytes, phase, op, split), other_peak, each phase's bytes and the forward, backward
and optimizer-step peaks. A case the oracle could not run (it records an error) must be refused in one
line with exit code 2. Prints one line per case (ok, refused as expected, or the first differences) and
a count; exit status 1 when any case differs.

A case of the parallel step oracle (one with a `parallel` record, or a trimmed one of
tests/data/step/parallel/) has that record mapped onto census step's options one to one (FSDP2 over
dp_shard ranks: --fsdp --dp N, with --master-weights fp32 where the shards are fp32 under
MixedPrecisionPolicy(bf16, fp32); --tp T, --sequence-parallel, --loss-parallel), and is compared as
tests/step/step_parallel_oracle_test.cpp compares it: FSDP2's parts of `other` in every split, each
phase's peak op and split besides.
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


def parallel_options(case):
    p = case["parallel"]
    args = ["--seq-length", str(case["seq"]), "--micro-batch-size", str(case.get("batch") or 1),
            "--micro-batches", str(case["m"]), "--format", "json"]
    args += optimizer_options(case["kind"]) if case["kind"].endswith(("_steady", "_first")) else \
        (["--optimizer", "adamw", "--optimizer-impl", "for-loop", "--first-step"] if case["adamw"] else ["--optimizer", "none"])
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
    if p.get("fp8"):  # torchao's Float8Linear (census_oracle_parallel_fp8.py)
        args += ["--fp8", {"rowwise_with_gw_hp": "rowwise-gw-hp"}.get(p["fp8"], p["fp8"])]
        if "lm_head" in p.get("fp8_filter_fqns", []):
            args += ["--fp8-skip-head"]
    if p.get("recompute", "none") != "none":  # every decoder layer checkpointed (census_oracle_parallel_fp8.py)
        args += ["--recompute", p["recompute"]]
    if p.get("loss"):  # torchtune's chunked loss (census_oracle_parallel_loss.py)
        args += ["--loss", p["loss"]]
    if p.get("fsdp_wrap"):  # torchtitan v0.2's units (census_oracle_parallel_units.py)
        args += ["--fsdp-wrap", p["fsdp_wrap"]]
    if p.get("cpu_offload"):  # CPUOffloadPolicy (census_oracle_parallel_cpu_offload.py)
        args += ["--cpu-offload"]
    if case.get("liger"):  # Liger's patch, Transformers' loss (census_oracle_parallel_liger.py)
        args += ["--liger", "--loss", "hf"]
    return args


def optimizer_options(kind):
    """The step oracle's AdamW runs its first step as a for-loop (foreach=False, fused=False); the steady-state
    oracle's kinds record the second step (`*_steady`) or, trimmed from its step 1, the first (`*_first`), of
    the optimizer and form the kind names (`single_sgd_foreach_steady`; no form word: the for-loop)."""
    if kind.endswith("_steady") or kind.endswith("_first"):
        name = next(n for n in ("torchao_adamw8bit", "torchao_adamw4bit", "adamw8bit", "adafactor", "sgd", "muon", "adamw")
                    if f"_{n}_" in f"_{kind}").replace("_", "-")
        args = ["--optimizer", name]
        if name in ("adamw", "sgd", "adafactor"):
            args += ["--optimizer-impl", "foreach" if "_foreach" in kind else "fused" if "_fused" in kind else "for-loop"]
        if "_in_bwd" in kind:
            args += ["--optimizer-in-backward"]
        if "_trl_chunked_nll" in kind:
            args += ["--loss", "trl-chunked-nll"]
        if "_liger_flce" in kind:
            args += ["--loss", "liger-flce"]
        elif "_liger_" in kind:  # Liger's patch: its kernels and, but for _liger_hf, its fused loss
            args += ["--liger"] + (["--loss", "hf"] if "_liger_hf" in kind else [])
        for loss in ("torchtune-chunked", "torchtune-linear"):
            if "_" + loss.replace("-", "_") in kind:
                args += ["--loss", loss]
        if "_offload" in kind:
            args += ["--offload-activations", "torchtune" if "_offload_torchtune" in kind else "trl"]
        if "_ac_full" in kind:
            args += ["--recompute", "full-reentrant" if "_ac_full_reentrant" in kind else "full"]
        if "_sac_selective" in kind:
            args += ["--recompute", "selective"]
        if "_autocast" in kind:  # the HF Trainer's bf16=True on fp32 weights (census_oracle_steady_autocast.py)
            args += ["--autocast", "bf16"] + (["--load-dtype", "bf16"] if "_load_bf16" in kind else [])
        return args + (["--first-step"] if kind.endswith("_first") else [])
    if kind == "accum_adamw" or kind.endswith("_adamw"):
        return ["--optimizer", "adamw", "--optimizer-impl", "for-loop", "--first-step"]
    return ["--optimizer", "none"]


def options(case):
    if "parallel" in case:
        return parallel_options(case)
    kind = case["kind"]
    args = ["--seq-length", str(case["seq"]), "--micro-batch-size", str(case.get("batch") or 1),
            "--micro-batches", str(case["m"]), "--pp", str(case["p"]), "--stage", str(case["r"]), "--format", "json"]
    args += optimizer_options(kind)
    recompute = {"sac_selective": "selective", "ac_full": "full", "ac_full_reentrant": "full-reentrant",
                 "sac_torchtitan_op": "torchtitan-op", "sac_torchtitan_op_b2": "torchtitan-op",
                 "ac_torchtitan_layer2": "torchtitan-layer:2"}.get(kind)
    if recompute:
        args += ["--recompute", recompute]
    return args + lora_options(case.get("lora")) + quantize_options(case.get("quantization"))


def quantize_options(quant):
    """The BitsAndBytesConfig and PEFT helper the QLoRA oracle ran (census_oracle_steady_qlora.py), as options."""
    if not quant:
        return []
    names = {"bfloat16": "bf16", "float32": "fp32", "uint8": "uint8"}
    args = ["--quantize", quant["quant_type"], "--compute-dtype", names[quant["compute_dtype"]],
            "--quant-storage", names[quant["quant_storage"]],
            "--bnb-version", "0.49" if quant["bitsandbytes"].startswith("0.49") else "0.50"]
    args += ["--double-quant"] if quant["double_quant"] else []
    args += ["--prepare-kbit"] if quant["prepare_kbit"] else []
    # PEFT's helper enables checkpointing by default: torch.utils.checkpoint without use_reentrant, reentrant
    return args + (["--recompute", "full-reentrant"] if quant.get("prepare_kbit_checkpointing") else [])


def lora_options(lora):
    """PEFT's LoraConfig as the LoRA oracle recorded it (census_oracle_steady_lora.py), as census step's options."""
    if not lora:
        return []
    targets = lora["target_modules"]
    return ["--lora-rank", str(lora["r"]), "--lora-alpha", str(lora["alpha"]), "--lora-dropout", str(lora["dropout"]),
            "--lora-targets", targets if isinstance(targets, str) else ",".join(targets),
            "--lora-dtype", "bf16" if lora["adapter_dtype"] == "bfloat16" else "fp32"] + \
        (["--use-dora"] if lora.get("use_dora") else []) + \
        (["--modules-to-save", ",".join(lora["modules_to_save"])] if lora.get("modules_to_save") else [])


def config_of(case, folder):
    """The config the oracle built; a case that failed before building one takes its family's single case's."""
    config = case.get("config")
    if config is None:
        single = re.sub(r"_L4_s(\d+)_.*", r"_L4_s\1_single.json", case["case"])
        config = json.loads((folder / single).read_text())["config"]
    return config["fields"] if "fields" in config else config


def split_of(split):
    """FSDP2's parts count 0 where a record does not list them (the step oracle's, census step's without --fsdp)."""
    detail = split["other_detail"]
    return [split["parameters"], split["gradients"], split["optimizer_states"], split["other"]] + \
        [detail[key] if not key.startswith("fsdp_") else detail.get(key, 0) for key in DETAIL]


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
    parallel = "parallel" in case
    for key in ("peak", "other_peak"):
        for field in ("bytes", "phase", "op"):
            same(f"{key}.{field}", case[key][field], got[key][field])
        if key == "peak" or parallel:
            same(f"{key}.split", split_of(case[key]["split"]), split_of(got[key]["split"]))
    for key in ("forward_peak", "backward_peak", "optimizer_step_peak"):
        want, have = case.get(key), got.get(key)
        same(key, None if want is None else (want["bytes"], want["phase"]),
             None if have is None else (have["bytes"], have["phase"]))
    if "lora" in case:  # the adapters PEFT made and what they and the frozen base hold
        want, have = case["lora"], got.get("lora") or {}
        same("lora.adapted_linears", want["adapted_linears"], have.get("adapted_linears"))
        for key in ("trainable_parameters", "frozen_parameters"):
            same(f"lora.{key}", want[key], have.get(key))
    if "quantization" in case:  # the packed weights and their quantization state
        want, have = case["quantization"], got.get("quantization") or {}
        for key in ("quantized_linears", "packed_weight_bytes", "quantization_state_bytes"):
            same(f"quantization.{key}", want[key], have.get(key))
    if "host" in case:  # what the oracle records of it (not the caching host allocator's blocks)
        same("host", case["host"], {key: (got.get("host") or {}).get(key) for key in case["host"]})
    same("phases", [p["name"] for p in case["phases"]], [p["name"] for p in got["phases"]])
    for want, have in zip(case["phases"], got["phases"]):
        for field in ("live_at_start", "peak_bytes", "live_at_end") + (("peak_op",) if parallel else ()):
            same(f"{want['name']}.{field}", want[field], have[field])
        if parallel:
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
            config.write_text(json.dumps(config_of(case, file.parent)))
            run = subprocess.run([args.census, "step", str(config)] + options(case), capture_output=True, text=True)
            error = case.get("error") or (case.get("errors") or [{}])[0].get("error")
            if error:
                ok = run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1
                print(f"{case['case']}: {'refused, as the oracle' if ok else 'NOT REFUSED'}: {run.stderr.strip()}")
                good, bad = good + ok, bad + (not ok)
                continue
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
