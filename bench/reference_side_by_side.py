"""Times the same layer censuses the reference's way and Census's way, side by side in one run.

The reference's way is the torch-2 oracle (the reference census's method on PyTorch 2: the real
Transformers 5 layer on fake tensors, forward and backward under saved-tensor hooks and a live-bytes
dispatch mode), run in the Debian sid chroot that the oracle's setup_sid_chroot.sh lays out. Census's
way is `census layer` on the host. For each case it prints both medians, their ratio, and whether the
two agree on the layer's saved bytes and backward peak. Run it as root (chroot) after building
`census`, from the repository root:

    python3 bench/reference_side_by_side.py --oracle-root /path/to/sid-root \
        --oracle-script /opt/oracle/census_oracle_torch2.py

(or set CENSUS_ORACLE_ROOT and CENSUS_ORACLE_SCRIPT). The oracle script path is as the chroot sees
it, or a host path inside the root. Where valgrind is installed, Census's instruction counts come
from callgrind too (--no-callgrind to skip); --callgrind-reference also counts the reference's
(valgrind inside the chroot, and slow: minutes a case). Exit status 1 when the two disagree on a
case's bytes, 2 on bad input.
"""
import argparse
import atexit
import datetime
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "reference_census_worker.py")
RESULT_MARKER = "CENSUS-REFERENCE-RESULT "  # the worker's result line
CHROOT_PYTHONPATH = "/opt/tf5"  # where setup_sid_chroot.sh lays out Transformers 5's sources


class Case:
    """One layer census: a shipped config, the layer, and the gated delta rule where the layer has one."""

    def __init__(self, name, config, layer_index, gdn_backend=None):
        self.name, self.config, self.gdn_backend = name, config, gdn_backend
        self.layer_index = layer_index  # an int, or a function of the config's fields


def first_moe_layer(config):
    return int(config.get("first_k_dense_replace", 0))


CASES = (
    Case("llama-3.1-8b decoder", "configs/llama-3.1-8b.json", 0),
    Case("deepseek-v3 MoE", "configs/deepseek-v3.json", first_moe_layer),
    # Layer 0 of Qwen3-Next is a linear-attention (gated delta net) layer; every 4th is full attention.
    Case("qwen3-next linear, eager rule", "configs/qwen3-next-80b-a3b.json", 0, "eager"),
    Case("qwen3-next linear, kernel", "configs/qwen3-next-80b-a3b.json", 0, "kernel"),
)


def refuse(message):
    print(f"reference_side_by_side: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle-root", default=os.environ.get("CENSUS_ORACLE_ROOT"),
                        help="the oracle's chroot (setup_sid_chroot.sh's ROOT); or CENSUS_ORACLE_ROOT")
    parser.add_argument("--oracle-script", default=os.environ.get("CENSUS_ORACLE_SCRIPT"),
                        help="census_oracle_torch2.py as the chroot sees it; or CENSUS_ORACLE_SCRIPT")
    parser.add_argument("--census", default=os.path.join(REPO, "build", "census"), help="the census binary")
    parser.add_argument("--seq-length", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5, help="reference censuses timed per case")
    parser.add_argument("--census-repeats", type=int, default=30, help="census processes timed per case")
    parser.add_argument("--cases", default="",
                        help="only the cases whose name contains one of these comma-separated texts")
    parser.add_argument("--no-callgrind", action="store_true", help="skip Census's callgrind counts")
    parser.add_argument("--callgrind-reference", action="store_true",
                        help="count the reference's instructions under callgrind too (valgrind in the chroot)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds a reference case may take")
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args(argv)
    if not args.oracle_root:
        refuse("the oracle's chroot is not given: pass --oracle-root or set CENSUS_ORACLE_ROOT "
               "(lay it out with the oracle's setup_sid_chroot.sh)")
    if not args.oracle_script:
        refuse("the oracle script is not given: pass --oracle-script or set CENSUS_ORACLE_SCRIPT "
               "(census_oracle_torch2.py inside the chroot, e.g. /opt/oracle/census_oracle_torch2.py)")
    root = os.path.abspath(args.oracle_root)
    if not os.path.isfile(os.path.join(root, "usr", "bin", "python3")):
        refuse(f"{root} holds no usr/bin/python3: it is not the oracle's chroot (see setup_sid_chroot.sh)")
    script = os.path.abspath(args.oracle_script)
    if script.startswith(root + os.sep):
        script = script[len(root):]  # a host path inside the root: the chroot sees it from its /
    if not os.path.isfile(root + script):
        refuse(f"{args.oracle_script} is not a file inside {root}: give census_oracle_torch2.py's path in the chroot")
    if args.repeats < 1 or args.census_repeats < 1:
        refuse("--repeats and --census-repeats must be at least 1")
    if not os.access(args.census, os.X_OK):
        refuse(f"{args.census} is not an executable census: build it (cmake --build build --target census)")
    if os.geteuid() != 0:
        refuse("entering the oracle's chroot needs root: run this as root")
    args.oracle_root, args.oracle_script = root, script
    return args


def mount_proc(root):
    """torch reads /proc inside the chroot; bind it for this run where nothing has, and unbind it after."""
    if os.path.exists(os.path.join(root, "proc", "self")):
        return
    subprocess.run(["mount", "--bind", "/proc", os.path.join(root, "proc")], check=True)
    atexit.register(subprocess.run, ["umount", os.path.join(root, "proc")], check=False)


# ---------------------------------------------------------------------------
# The reference, in the chroot
# ---------------------------------------------------------------------------

def chroot_command(args, request, prefix=()):
    with open(WORKER, encoding="utf-8") as handle:
        source = handle.read()
    return ["chroot", args.oracle_root, "env", f"PYTHONPATH={CHROOT_PYTHONPATH}", *prefix,
            "python3", "-c", source, json.dumps(request)]


def run_reference(args, request, prefix=()):
    """The worker's report, or {"error": why}."""
    try:
        done = subprocess.run(chroot_command(args, request, prefix), capture_output=True, text=True,
                              timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"over --timeout {args.timeout} s"}, ""
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):]), done.stderr
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return {"error": f"the chroot's python exited {done.returncode} without a result: {' | '.join(tail)}"}, done.stderr


def reference_instructions(args, request):
    """Instructions of the chroot's python doing the warm-up census and one more, and the warm-up alone.

    Their difference is one warm census; the import of torch and Transformers cancels out."""
    if not os.path.isfile(os.path.join(args.oracle_root, "usr", "bin", "valgrind")):
        return None, "valgrind is not installed in the chroot (chroot ROOT apt-get install valgrind)"
    counts = []
    for repeats in (1, 0):
        out = f"/tmp/census-reference-callgrind.{os.getpid()}.{repeats}"
        prefix = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}")
        report, stderr = run_reference(args, dict(request, repeats=repeats, warmup=1), prefix)
        try:
            os.remove(args.oracle_root + out)
        except OSError:
            pass
        if "error" in report:
            return None, report["error"]
        count = collected(stderr)
        if count is None:
            return None, "callgrind printed no instruction count"
        counts.append(count)
    return counts, None


# ---------------------------------------------------------------------------
# Census, on the host
# ---------------------------------------------------------------------------

def timed_process(command):
    """Wall and CPU seconds of one process (its rusage as a reaped child), and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def collected(stderr):
    """callgrind's total instruction count ("Collected : N") from its stderr."""
    found = re.findall(r"Collected\s*:\s*(\d+)", stderr or "")
    return int(found[-1]) if found else None


def callgrind_count(command):
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/out", *command],
                              capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"callgrind of {' '.join(command)} exited {done.returncode}")
    return collected(done.stderr)


def run_census(args, config_path, layer_index, gdn_backend):
    layer = [args.census, "layer", config_path, "--layer-index", str(layer_index),
             "--seq-length", str(args.seq_length)]
    if gdn_backend:
        layer += ["--gdn-backend", gdn_backend]
    startup = [args.census, "tp-config", config_path]
    heading = timed_process(layer)[2].splitlines()[0]  # names the layer's kind, as a check on the case
    numbers = json.loads(timed_process(layer + ["--format", "json"])[2])
    layer_times, startup_times = [], []
    for _ in range(args.census_repeats):  # interleaved, so both see the same load on a shared machine
        layer_times.append(timed_process(layer + ["--format", "json"])[:2])
        startup_times.append(timed_process(startup)[:2])
    report = {
        "heading": heading, "saved_bytes": numbers["saved"], "peak_backward_bytes": numbers["working"],
        "process_wall": statistics.median(wall for wall, _ in layer_times),
        "process_cpu": statistics.median(cpu for _, cpu in layer_times),
        "startup_wall": statistics.median(wall for wall, _ in startup_times),
        "startup_cpu": statistics.median(cpu for _, cpu in startup_times),
    }
    report["work_wall"] = report["process_wall"] - report["startup_wall"]
    report["work_cpu"] = report["process_cpu"] - report["startup_cpu"]
    if not args.no_callgrind and shutil.which("valgrind"):
        report["instructions"] = callgrind_count(layer + ["--format", "json"])
        report["startup_instructions"] = callgrind_count(startup)
        report["work_instructions"] = report["instructions"] - report["startup_instructions"]
    return report


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def milliseconds(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.3f}" if seconds < 0.01 else f"{seconds * 1e3:.1f}"


def ratio(numerator, denominator):
    if numerator is None or denominator is None:
        return "-"
    if denominator <= 0:
        return "n/a (census under the timing noise)"
    return f"{numerator / denominator:,.0f}x"


def agreement(case, reference, census):
    """One line per figure; a disagreement is printed loudly and counted."""
    lines, bad = [], 0
    for label, key in (("saved", "saved_bytes"), ("backward peak", "peak_backward_bytes")):
        want, got = reference.get(key), census.get(key)
        if want == got:
            lines.append(f"  agree     {case.name}: {label} {want:,} bytes (reference) = {got:,} (census)")
        else:
            bad += 1
            lines.append(f"  DISAGREE  {case.name}: {label} {want:,} bytes (reference) != {got:,} (census), "
                         f"census off by {got - want:+,}")
    return lines, bad


def describe_build(census):
    commit = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%h %cs"], capture_output=True, text=True,
                            check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no", "src"],
                           capture_output=True, text=True, check=False).stdout.strip()
    cache = os.path.join(os.path.dirname(os.path.abspath(census)), "CMakeCache.txt")
    build_type = "?"
    if os.path.isfile(cache):
        with open(cache, encoding="utf-8") as handle:
            found = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", handle.read(), re.M)
        build_type = found.group(1) if found and found.group(1) else "(none)"
    return f"{census}: commit {commit or '?'}{' (src modified)' if dirty else ''}, build type {build_type}"


def main(argv=None):
    args = parse_args(argv)
    wanted = [text for text in args.cases.split(",") if text] or [""]
    cases = [case for case in CASES if any(text in case.name for text in wanted)]
    if not cases:
        refuse(f"no case's name contains {args.cases!r}: the cases are {', '.join(c.name for c in CASES)}")
    mount_proc(args.oracle_root)
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f}; {args.seq_length} tokens; reference: median of {args.repeats} "
          f"after one warm-up, census: median of {args.census_repeats} processes")
    print(describe_build(args.census))
    rows, notes, figures, disagreements = [], [], [], 0
    for case in cases:
        config_path = os.path.join(REPO, case.config)
        with open(config_path, encoding="utf-8") as handle:
            config = json.load(handle)
        index = case.layer_index(config) if callable(case.layer_index) else case.layer_index
        request = {"oracle": args.oracle_script, "family": config.get("model_type"), "config": config,
                   "layer_index": index, "seq_length": args.seq_length, "gdn_backend": case.gdn_backend,
                   "repeats": args.repeats, "warmup": 1}
        print(f"{case.name}: layer {index} ...", flush=True)
        census = run_census(args, config_path, index, case.gdn_backend)
        reference, _ = run_reference(args, request)
        figures.append({"case": case.name, "layer_index": index, "reference": reference, "census": census})
        if "error" in reference:
            notes.append(f"  not run   {case.name}: the reference could not run it: {reference['error']}")
            rows.append((case.name, reference, census))
            continue
        print(f"  reference: torch {reference['torch']}, transformers {reference['transformers']}, layer type "
              f"{reference['layer_type'] or '-'}{', ' + reference['gdn_rule'] if reference.get('gdn_rule') else ''}; "
              f"warm-up {milliseconds(reference['warmup'][0]['cpu'])} ms CPU; forward+backward of the median "
              f"run's measure {milliseconds(_measure_seconds(reference))} ms")
        print(f"  census:    {census['heading']}")
        if args.callgrind_reference:
            counts, why = reference_instructions(args, request)
            if counts:
                reference["instructions"] = counts[0] - counts[1]
                reference["instructions_warm_up_and_one"], reference["instructions_warm_up_only"] = counts
            else:
                notes.append(f"  no count  {case.name}: the reference's instructions: {why}")
        lines, bad = agreement(case, reference, census)
        notes += lines
        disagreements += bad
        rows.append((case.name, reference, census))
    print_table(rows)
    print("\n".join(notes))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=1)
    return 1 if disagreements else 0


def _measure_seconds(reference):
    """Forward plus backward inside the oracle's measure, for the run of median CPU time."""
    runs = sorted(reference["runs"], key=lambda run: run["cpu"])
    middle = runs[len(runs) // 2]
    return (middle["forward"] or 0) + (middle["backward"] or 0)


def print_table(rows):
    header = ("case", "reference ms (wall/cpu)", "of it fwd+bwd ms", "census process ms (wall/cpu)", "startup cpu ms",
              "census work cpu ms", "ratio cpu (work)", "ratio cpu (process)", "reference Ir", "census Ir (work)",
              "ratio Ir")
    table = [header]
    for name, reference, census in rows:
        ref_wall, ref_cpu = reference.get("median_wall"), reference.get("median_cpu")
        table.append((
            name,
            "-" if ref_cpu is None else f"{milliseconds(ref_wall)} / {milliseconds(ref_cpu)}",
            "-" if ref_cpu is None else milliseconds(_measure_seconds(reference)),
            f"{milliseconds(census['process_wall'])} / {milliseconds(census['process_cpu'])}",
            milliseconds(census["startup_cpu"]),
            milliseconds(census["work_cpu"]),
            ratio(ref_cpu, census["work_cpu"]),
            ratio(ref_cpu, census["process_cpu"]),
            f"{reference['instructions']:,}" if reference.get("instructions") else "-",
            f"{census['work_instructions']:,}" if "work_instructions" in census else "-",
            ratio(reference.get("instructions"), census.get("work_instructions")),
        ))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    print()
    for row in table:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
    print()


if __name__ == "__main__":
    sys.exit(main())
