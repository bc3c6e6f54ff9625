#!/usr/bin/env python3
"""Census's steady-state step and simulated caching allocator beside PyTorch's, case by case.

Reads the case JSONs of one or more runs of the steady-state oracle's extended copy
(device-oracle/steady/, laid out by prepare_steady_check.sh; a real-CUDA run: the top level is STEP 2,
with ``cuda`` holding torch.cuda.memory_stats() at its start and at every phase boundary, peaks reset
at step 2's start; ``step1`` holds step 1's in the same layout) and runs, for each case,
``census step --allocator`` for the same model, tokens and micro-batches with AdamW in the case's form
(``--optimizer-impl for-loop | foreach | fused``) under the run's PYTORCH_CUDA_ALLOC_CONF: the steady
state (Census's default: it simulates step 1, then step 2 from the cache step 1 left, and reports step
2) beside PyTorch's step 2, and ``--first-step`` beside PyTorch's step 1. It writes
``steady_comparison.json`` (every figure of both, per case, per step and per phase) and prints a table:

  reserved    max_memory_reserved() over step 2 alone        Census's reserved_peak
  allocated   max_memory_allocated() over step 2 alone       allocated_peak
  tracked     the oracle's tracked peak on the device         requested_peak (equal by construction: the
              (tracked_on_device.peak, step 2)                same storages; a difference is a bug; on the
                                                              CPU: every storage, so Census's step peak)
  start       reserved as step 2 starts (step 1's cache)      reserved after step 2's setup phase
  split       inactive_split_bytes' peak over step 2          largest_inactive_split
  retries     num_alloc_retries during step 2                 num_alloc_retries

The same for step 1 is in the JSON (``step1``) and in the table's second block. ``phases`` (per step)
puts each phase's own maxima (PyTorch resets the peaks at every phase boundary) beside Census's phase
figures, so that where the two part is visible. With ``--fake DIRS`` each case's tracked numbers
(both steps) are also compared field by field with the fake-tensor steady oracle's JSON of the same id
(the step oracle's ``compare_to_fake`` fields and every phase), as the step oracle's real mode does.

  python3 scripts/device/compare_steady.py --census build/census \\
      --run default=OUT/steady_default/cases --run expandable=OUT/steady_expandable/cases --out OUT
"""
import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from compare_allocator import census_step_json, mib, print_lines, run_arguments  # the same run, options and table

# the kind's AdamW form, as `census step --optimizer-impl` names it
IMPL = {"single_adamw_steady": "for-loop", "accum_m4_adamw_steady": "for-loop", "single_b2_adamw_steady": "for-loop",
        "single_adamw_foreach_steady": "foreach", "single_adamw_fused_steady": "fused"}

# the step oracle's real-vs-fake fields (census_oracle_step.COMPARED), and every phase's
COMPARED = ("peak.bytes", "peak.phase", "peak.event", "peak.op", "peak.split", "other_peak.bytes", "other_peak.phase",
            "other_peak.op", "other_peak.event", "forward_peak.bytes", "backward_peak.bytes",
            "optimizer_step_peak.bytes", "parameters.bytes", "parameters.count", "parameters.tensors",
            "parameters.buffers_bytes", "gradients", "gradients_before_step_bytes", "optimizer.state_bytes",
            "optimizer.by_state", "live_at_end", "events", "untracked_param_grads", "scalar_reads",
            "peak.other_by_op_and_phase")
PHASE_FIELDS = ("live_at_start", "peak_bytes", "peak_op", "live_at_end", "split_at_peak", "split_at_end",
                "events_from", "events_to")


def step_args(case: Dict[str, Any]) -> Optional[List[str]]:
    """`census step` arguments for the oracle's case (steady state), or None where there is no AdamW form."""
    impl = IMPL.get(case.get("kind", ""))
    if impl is None:
        return None
    args = ["--seq-length", str(case["seq"]), "--micro-batches", str(case.get("m", 1)),
            "--optimizer", "adamw", "--optimizer-impl", impl]
    if int(case.get("batch") or 1) != 1:
        args += ["--micro-batch-size", str(case["batch"])]
    return args


def census_step(census: str, case: Dict[str, Any], alloc_conf: str, first: bool) -> Dict[str, Any]:
    args = step_args(case)
    if args is None:
        return {"skipped": "no AdamW form for kind %s" % case.get("kind")}
    step, refusal, shown = census_step_json(census, case, args + (["--first-step"] if first else []), alloc_conf)
    if step is None:
        return {"refused": refusal, "command": shown}
    return dict(step["allocator"], step_peak=step["peak"]["bytes"], step_peak_phase=step["peak"]["phase"],
                step_peak_op=step["peak"].get("op"), command=shown)


def pytorch_step(block: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """One step's allocator figures from the oracle's ``cuda`` record (None on a CPU run)."""
    cuda = block.get("cuda")
    if not cuda:
        return None
    overall, start = cuda["overall"], cuda["at_step_start"]
    phases = [{"name": p["name"], "max_allocated": p["end"]["max_allocated"], "max_reserved": p["end"]["max_reserved"],
               "allocated_at_end": p["end"]["allocated"], "reserved_at_end": p["end"]["reserved"],
               "inactive_split_peak": p["end"].get("inactive_split_peak"), "segments_at_end": p["end"].get("segments"),
               "num_alloc_retries": p["end"]["num_alloc_retries"] - p["start"]["num_alloc_retries"]}
              for p in cuda["phases"]]
    return {"reserved_peak": overall["max_reserved"], "allocated_peak": overall["max_allocated"],
            "active_peak": overall["active_peak"], "requested_peak": overall.get("requested_peak"),
            "largest_inactive_split": overall.get("inactive_split_peak"), "segments_peak": overall.get("segments_peak"),
            "num_alloc_retries": overall["num_alloc_retries"], "num_ooms": overall["num_ooms"],
            "max_allocated_phase": overall.get("max_allocated_phase"),
            "reserved_at_step_start": start["reserved"], "allocated_at_step_start": start["allocated"],
            "segments_at_step_start": start.get("segments"), "reserved_at_step_end": cuda["at_step_end"]["reserved"],
            "alloc_conf": start.get("alloc_conf", ""), "phases": phases}


def tracked_of(block: Dict[str, Any]) -> Tuple[Optional[int], Optional[str], Dict[str, int]]:
    """The oracle's tracked peak on the device (bytes), its device type, and each phase's tracked peak."""
    series = block.get("tracked_on_device") or {}
    phases = {p["name"]: p["peak_bytes"] for p in series.get("phases") or []}
    return (series.get("peak") or {}).get("bytes"), series.get("device_type"), phases


def join_phases(theirs: Optional[Dict[str, Any]], mine: Dict[str, Any], tracked: Dict[str, int]) -> List[Dict[str, Any]]:
    """Phase by phase: PyTorch's own maxima in the phase beside Census's, and the tracked peak."""
    census = {p["name"]: p for p in mine.get("phases") or []}
    names = [p["name"] for p in (theirs or {}).get("phases") or []] or list(census) or list(tracked)
    torch_phases = {p["name"]: p for p in (theirs or {}).get("phases") or []}
    rows = []
    for name in names:
        t, c = torch_phases.get(name, {}), census.get(name, {})
        row = {"name": name, "tracked_peak": tracked.get(name),
               "torch_max_allocated": t.get("max_allocated"), "census_allocated_peak": c.get("allocated_peak"),
               "census_requested_peak": c.get("requested_peak"),
               "torch_max_reserved": t.get("max_reserved"), "census_reserved_peak": c.get("reserved_peak"),
               "torch_reserved_at_end": t.get("reserved_at_end"), "census_reserved_at_end": c.get("reserved_at_end"),
               "torch_allocated_at_end": t.get("allocated_at_end"), "census_allocated_at_end": c.get("allocated_at_end")}
        for a, b, key in (("torch_max_reserved", "census_reserved_peak", "reserved_difference"),
                          ("torch_max_allocated", "census_allocated_peak", "allocated_difference"),
                          ("tracked_peak", "census_requested_peak", "tracked_minus_census_requested")):
            if row[a] is not None and row[b] is not None:
                row[key] = row[a] - row[b]
        rows.append(row)
    return rows


def compare_block(block: Dict[str, Any], census: str, case: Dict[str, Any], alloc_conf: str,
                  first: bool) -> Dict[str, Any]:
    mine = census_step(census, case, alloc_conf, first)
    theirs = pytorch_step(block)
    tracked, device_type, tracked_phases = tracked_of(block)
    out: Dict[str, Any] = {"census": mine, "pytorch": theirs, "tracked_device_peak": tracked,
                           "tracked_device_type": device_type, "oracle_step_peak": (block.get("peak") or {}).get("bytes")}
    if "reserved_peak" not in mine:
        return out
    setup = next((p for p in mine.get("phases") or [] if p["name"] == "setup"), None)
    out["census_reserved_after_setup"] = setup["reserved_at_end"] if setup else None
    if tracked is not None:
        # on cuda the tracked storages on the device are the allocator's requests (AdamW's host step counts are
        # not: for-loop and foreach keep them on the CPU); on the CPU every storage is there: the step's own peak
        out["tracked_equals_census"] = (mine["requested_peak"] if device_type == "cuda" else mine["step_peak"]) == tracked
    if theirs:
        out["reserved_difference"] = theirs["reserved_peak"] - mine["reserved_peak"]
        out["allocated_difference"] = theirs["allocated_peak"] - mine["allocated_peak"]
        out["allocated_minus_tracked"] = theirs["allocated_peak"] - tracked if tracked is not None else None
    out["phases"] = join_phases(theirs, mine, tracked_phases)
    return out


def dig(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def versus_fake(real: Dict[str, Any], fake: Dict[str, Any]) -> Dict[str, Any]:
    """The step oracle's compare_to_fake on a block (tracked numbers only; op counts apart from prim.device)."""
    diffs: Dict[str, Any] = {}
    for path in COMPARED:
        a, b = dig(real, path), dig(fake, path)
        if a != b:
            diffs[path] = {"real": a, "fake": b}
    rp, fp = real.get("phases") or [], fake.get("phases") or []
    if [p["name"] for p in rp] != [p["name"] for p in fp]:
        diffs["phases.names"] = {"real": [p["name"] for p in rp], "fake": [p["name"] for p in fp]}
    else:
        for a, b in zip(rp, fp):
            for k in PHASE_FIELDS:
                if a.get(k) != b.get(k):
                    diffs[f"phases.{a['name']}.{k}"] = {"real": a.get(k), "fake": b.get(k)}
    ra, fa = real.get("ops") or {}, fake.get("ops") or {}
    ops = {k: [ra.get(k, 0), fa.get(k, 0)] for k in sorted(set(ra) | set(fa))
           if ra.get(k, 0) != fa.get(k, 0) and k != "prim.device.default"}
    return {"equal": not diffs, "differences": diffs, "op_count_differences_besides_prim_device": ops}


def fake_comparison(case: Dict[str, Any], dirs: List[str]) -> Optional[Dict[str, Any]]:
    for folder in dirs:
        path = os.path.join(folder, case["case"] + ".json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as handle:
            fake = json.load(handle)
        step2 = versus_fake(case, fake)
        step1 = versus_fake(dict(case["step1"], parameters=case["parameters"]),
                            dict(fake["step1"], parameters=fake["parameters"]))
        return {"equal": step2["equal"] and step1["equal"], "step2": step2, "step1": step1, "fake_json": path,
                "fake_versions": fake.get("versions"), "real_versions": case.get("versions")}
    return None


def row(label: str, case: Dict[str, Any], census: str, alloc_conf: str, fakes: List[str]) -> Dict[str, Any]:
    out = {"run": label, "case": case["case"], "kind": case.get("kind"), "alloc_conf": alloc_conf,
           "status": case.get("status", "ok"), "device": case.get("device"),
           "step2": compare_block(case, census, case, alloc_conf, first=False),
           "step1": compare_block(case["step1"], census, case, alloc_conf, first=True)}
    if fakes:
        out["fake"] = fake_comparison(case, fakes)
    return out


def print_table(rows: List[Dict[str, Any]], step: str) -> None:
    header = ("run", "case", "reserved MiB (torch / census)", "allocated MiB (torch / census / tracked)",
              "start MiB", "split MiB", "retries", "tracked = census")
    lines = [header]
    for r in rows:
        b = r.get(step) or {}
        c, t = b.get("census") or {}, b.get("pytorch") or {}
        if "reserved_peak" not in c:
            lines.append((r["run"], r["case"], c.get("skipped") or c.get("refused", "?")[:80], "", "", "", "", ""))
            continue
        lines.append((r["run"], r["case"],
                      "%s / %s" % (mib(t.get("reserved_peak")), mib(c["reserved_peak"])),
                      "%s / %s / %s" % (mib(t.get("allocated_peak")), mib(c["allocated_peak"]),
                                        mib(b.get("tracked_device_peak"))),
                      "%s / %s" % (mib(t.get("reserved_at_step_start")), mib(b.get("census_reserved_after_setup"))),
                      "%s / %s" % (mib(t.get("largest_inactive_split")), mib(c.get("largest_inactive_split"))),
                      "%s / %s" % (t.get("num_alloc_retries", "-"), c.get("num_alloc_retries")),
                      str(b.get("tracked_equals_census", "-"))))
    print_lines(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = run_arguments(__doc__)
    parser.add_argument("--fake", default="", metavar="DIRS",
                        help="comma-separated folders of the fake steady oracle's case JSONs: the tracked numbers of "
                             "both steps compared with the same id's")
    parser.add_argument("--out", default=".", help="where steady_comparison.json goes")
    args = parser.parse_args(argv)
    confs = dict(item.split("=", 1) for item in args.alloc_conf)
    fakes = [d for d in args.fake.split(",") if d]
    rows = []
    for item in args.run:
        label, folder = item.split("=", 1)
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                case = json.load(handle)
            if case.get("errors") or "kind" not in case or "peak" not in case or "step1" not in case:
                reason = "; ".join(e.get("error", "")[:200] for e in case.get("errors") or []) or "no step 2 record"
                rows.append({"run": label, "case": name[:-5], "status": case.get("status", "error"),
                             "step2": {"census": {"skipped": "the oracle's case: " + reason}},
                             "step1": {"census": {"skipped": "the oracle's case: " + reason}}})
                continue
            recorded = (case.get("cuda") or {}).get("at_step_start", {}).get("alloc_conf")
            rows.append(row(label, case, args.census, recorded if recorded is not None else confs.get(label, ""),
                            fakes))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "steady_comparison.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"rows": rows}, handle, indent=1)
    print("step 2 (the steady state: census step --allocator --optimizer-impl <the case's form>)")
    print_table(rows, "step2")
    print("\nstep 1 (census step --allocator --first-step)")
    print_table(rows, "step1")
    bad = ["%s/%s step %s" % (r["run"], r["case"], s[-1]) for r in rows for s in ("step2", "step1")
           if (r.get(s) or {}).get("tracked_equals_census") is False]
    unequal = ["%s/%s" % (r["run"], r["case"]) for r in rows if (r.get("fake") or {}).get("equal") is False]
    compared = sum(1 for r in rows if r.get("fake"))
    checked = sum(1 for r in rows for s in ("step2", "step1") if "tracked_equals_census" in (r.get(s) or {}))
    print("\n%d cases; the tracked device peak is Census's in every step that has both: %s" %
          (len(rows), "no: " + ", ".join(bad) if bad else "yes" if checked else "nothing to check (no case ran)"))
    if fakes:
        print("real vs fake tracked numbers (both steps): %d compared, %s" %
              (compared, "unequal: " + ", ".join(unequal) if unequal else "all equal" if compared else "none"))
    print(path)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
