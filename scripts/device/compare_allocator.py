#!/usr/bin/env python3
"""Census's simulated caching allocator beside PyTorch's, case by case.

Reads the case JSONs of one or more runs of the step oracle's extended copy (device-oracle/, a real-CUDA
run: ``cuda`` holds torch.cuda.memory_stats() at every phase boundary) and runs, for each case, the same
step through ``census step --allocator`` under the run's PYTORCH_CUDA_ALLOC_CONF. It writes
``allocator_comparison.json`` (every figure of both, per case and per phase) and prints a table:

  reserved    PyTorch's max_memory_reserved() over the step    Census's reserved_peak
  allocated   max_memory_allocated()                           allocated_peak
  requested   the oracle's tracked peak on the device          requested_peak (equal by construction:
              (tracked_on_device.peak)                         the same storages; a difference is a bug;
                                                               on the CPU: the step's own peak)
  split       inactive_split_bytes' peak                       largest_inactive_split
  retries     num_alloc_retries during the step                num_alloc_retries

PyTorch's figures include what the step did not make: the CUDA context is not in them, but the cuBLAS
workspaces (allocated before the step) and, without --empty-cache-before-step, the cached blocks of
the model's build are; `start` is PyTorch's reserved bytes as the step starts, Census's after its setup
phase (the parameters and buffers). A case the step oracle ran on the CPU (--cpu-fallback) has no
allocator figures: Census's are printed beside the tracked bytes alone.

  python3 scripts/device/compare_allocator.py --census build/census \\
      --run default=OUT/real_default/cases --run expandable=OUT/real_expandable/cases --out OUT
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple


def step_args(case: Dict[str, Any]) -> Optional[List[str]]:
    """`census step` arguments for the oracle's case, or None where census step does not run it."""
    if int(case.get("batch") or 1) != 1:
        return None  # census step runs micro-batches of one sequence
    kind = case["kind"]
    args = ["--seq-length", str(case["seq"]), "--micro-batches", str(case["m"]), "--pp", str(case["p"]),
            "--optimizer", "adamw" if kind == "accum_adamw" else "none"]
    if int(case["p"]) > 1:
        args += ["--stage", str(case["r"])]
    if kind == "sac_selective":
        args += ["--recompute", "selective"]
    if kind == "ac_full":
        args += ["--recompute", "full"]
    return args


def config_of(case: Dict[str, Any]) -> Dict[str, Any]:
    config = case["config"]
    if "fields" in config:  # the oracle's JSON: the config as Transformers built it
        return dict(config["fields"], model_type=config["model_type"])
    return config  # a test-data case: the config itself


def census_step_json(census: str, case: Dict[str, Any], args: List[str],
                     alloc_conf: str) -> Tuple[Optional[Dict[str, Any]], str, str]:
    """`census step --allocator` on the case's config: its JSON (None where refused), its refusal, and the
    command as a reader would type it (the config's path as CONFIG)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(config_of(case), handle)
        path = handle.name
    try:
        command = [census, "step", path, *args, "--allocator", "--format", "json"]
        if alloc_conf:
            command += ["--alloc-conf", alloc_conf]
        run = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        os.unlink(path)
    shown = " ".join(["census", "step", "CONFIG", *command[3:]])
    if run.returncode != 0:
        return None, run.stderr.strip()[-2000:], shown
    return json.loads(run.stdout), "", shown


def census_allocator(census: str, case: Dict[str, Any], alloc_conf: str) -> Dict[str, Any]:
    args = step_args(case)
    if args is None:
        return {"skipped": "census step runs micro-batches of one sequence (batch %s)" % case.get("batch")}
    step, refusal, shown = census_step_json(census, case, args, alloc_conf)
    if step is None:
        return {"refused": refusal, "command": shown}
    return dict(step["allocator"], step_peak=step["peak"]["bytes"], command=shown)


def pytorch_allocator(case: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    cuda = case.get("cuda")
    if not cuda:
        return None
    overall = cuda["overall"]
    start = cuda["at_step_start"]
    phases = [{"name": p["name"], "max_reserved": p["end"]["max_reserved"], "max_allocated": p["end"]["max_allocated"],
               "reserved_at_end": p["end"]["reserved"], "inactive_split_peak": p["end"].get("inactive_split_peak")}
              for p in cuda["phases"]]
    return {"reserved_peak": overall["max_reserved"], "allocated_peak": overall["max_allocated"],
            "active_peak": overall["active_peak"], "requested_peak": overall.get("requested_peak"),
            "largest_inactive_split": overall.get("inactive_split_peak"),
            "segments_peak": overall.get("segments_peak"), "num_alloc_retries": overall["num_alloc_retries"],
            "num_ooms": overall["num_ooms"], "reserved_at_step_start": start["reserved"],
            "allocated_at_step_start": start["allocated"], "alloc_conf": start.get("alloc_conf", ""),
            "phases": phases}


def row(label: str, case: Dict[str, Any], census: str, alloc_conf: str) -> Dict[str, Any]:
    mine = census_allocator(census, case, alloc_conf)
    theirs = pytorch_allocator(case)
    tracked = (case.get("tracked_on_device") or {}).get("peak", {}).get("bytes")
    out = {"run": label, "case": case["case"], "alloc_conf": alloc_conf, "status": case.get("status", "ok"),
           "tracked_device_peak": tracked, "census": mine, "pytorch": theirs}
    if "reserved_peak" in mine:
        setup = next((p for p in mine["phases"] if p["name"] == "setup"), None)
        out["census_reserved_after_setup"] = setup["reserved_at_end"] if setup else None
        if tracked is not None:
            # on cuda the tracked storages on the device are the allocator's requests; on the CPU (a fallback
            # run) every storage is on that device, AdamW's step counts too: the step's own peak
            on_cuda = case["tracked_on_device"].get("device_type") == "cuda"
            out["tracked_equals_census"] = (mine["requested_peak"] if on_cuda else mine["step_peak"]) == tracked
        if theirs:
            out["reserved_difference"] = theirs["reserved_peak"] - mine["reserved_peak"]
            out["allocated_difference"] = theirs["allocated_peak"] - mine["allocated_peak"]
    return out


def mib(value: Optional[int]) -> str:
    return "-" if value is None else "%.1f" % (value / 2**20)


def print_lines(lines: List[Tuple[str, ...]]) -> None:
    """The table's lines (the header first), each column as wide as its widest cell."""
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)))


def print_table(rows: List[Dict[str, Any]]) -> None:
    header = ("run", "case", "reserved MiB (torch / census)", "allocated MiB", "start MiB", "split MiB", "retries",
              "tracked = census")
    lines = [header]
    for r in rows:
        c, t = r["census"], r["pytorch"] or {}
        if "reserved_peak" not in c:
            lines.append((r["run"], r["case"], c.get("skipped") or c.get("refused", "?"), "", "", "", "", ""))
            continue
        lines.append((r["run"], r["case"],
                      "%s / %s" % (mib(t.get("reserved_peak")), mib(c["reserved_peak"])),
                      "%s / %s" % (mib(t.get("allocated_peak")), mib(c["allocated_peak"])),
                      "%s / %s" % (mib(t.get("reserved_at_step_start")), mib(r.get("census_reserved_after_setup"))),
                      "%s / %s" % (mib(t.get("largest_inactive_split")), mib(c["largest_inactive_split"])),
                      "%s / %s" % (t.get("num_alloc_retries", "-"), c["num_alloc_retries"]),
                      str(r.get("tracked_equals_census", "-"))))
    print_lines(lines)


def run_arguments(doc: str) -> argparse.ArgumentParser:
    """The options both comparisons take: the census binary and each run's cases and allocator settings."""
    parser = argparse.ArgumentParser(description=doc.split("\n", maxsplit=1)[0])
    parser.add_argument("--census", required=True, help="the census binary")
    parser.add_argument("--run", action="append", default=[], metavar="LABEL=CASES",
                        help="a run's label and its cases/ folder; its PYTORCH_CUDA_ALLOC_CONF is read from the cases")
    parser.add_argument("--alloc-conf", action="append", default=[], metavar="LABEL=TEXT",
                        help="a run's PYTORCH_CUDA_ALLOC_CONF where its cases do not record it (a CPU run)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = run_arguments(__doc__)
    parser.add_argument("--out", default=".", help="where allocator_comparison.json goes")
    args = parser.parse_args(argv)
    confs = dict(item.split("=", 1) for item in args.alloc_conf)
    rows = []
    for item in args.run:
        label, folder = item.split("=", 1)
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                case = json.load(handle)
            if case.get("errors") or "kind" not in case or "peak" not in case:
                rows.append({"run": label, "case": name[:-5], "census": {"skipped": "the oracle's case has errors"},
                             "pytorch": None})
                continue
            recorded = (case.get("cuda") or {}).get("at_step_start", {}).get("alloc_conf")
            rows.append(row(label, case, args.census, recorded if recorded is not None else confs.get(label, "")))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "allocator_comparison.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"rows": rows}, handle, indent=1)
    print_table(rows)
    bad = [r["case"] for r in rows if r.get("tracked_equals_census") is False]
    print("\n%d cases; the tracked device peak is Census's in every case that has both: %s; %s" %
          (len(rows), "no: " + ", ".join(bad) if bad else "yes", path))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
