"""The reference side of bench/reference_side_by_side.py: runs inside the torch-2 oracle's chroot.

The host passes this file's text to the chroot's python3 with `-c`, then one JSON argument:

    {"oracle": "/opt/oracle/census_oracle_torch2.py", "family": "llama", "config": {...},
     "layer_index": 0, "seq_length": 4096, "gdn_backend": null, "repeats": 5, "warmup": 1}

It loads the oracle script from that path (the oracle is not part of this repository), builds the
real Transformers 5 layer from the config as the oracle builds every case (fake tensors, bf16, the
flash stand-in, grouped_mm experts) and times the oracle's plain census of the layer at TP 1 (build
the layer, then its measure: forward and backward under the saved-tensor hooks and the live-bytes
dispatch mode). Nothing is collected between runs beyond what the measure itself collects. It prints
one line, RESULT_MARKER and a JSON object, after whatever the oracle logs.

Standard library and the oracle only: it runs on the chroot's python, not the host's.
"""
import importlib.util
import json
import statistics
import sys
import time
import traceback

RESULT_MARKER = "CENSUS-REFERENCE-RESULT "

# Config.json fields that describe the checkpoint file, not the layer: the oracle builds every layer in
# bf16 on fake tensors, so the checkpoint's stored dtype and its weight quantization do not enter.
CHECKPOINT_ONLY_FIELDS = ("architectures", "auto_map", "transformers_version", "torch_dtype", "dtype",
                          "quantization_config")


def load_oracle(path):
    spec = importlib.util.spec_from_file_location("census_oracle_torch2", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the custom ops and dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def prepare(oracle, family):
    """What the oracle sets up once per process before a layer case of *family*."""
    if family not in oracle.FAMILIES:
        raise ValueError(f"the oracle has no family {family!r} (it knows {', '.join(sorted(oracle.FAMILIES))})")
    oracle.register_kernels()
    oracle._import_transformers()  # pylint: disable=protected-access
    modeling = oracle.modeling_module(family)
    oracle.register_attention(oracle.FLASH_NAME, oracle._flash_attention, modeling)  # pylint: disable=protected-access
    oracle.guard_grouped_mm_check()
    if oracle.FAMILIES[family].get("mamba"):
        oracle.install_mamba_torch_path(modeling)


def one_census(oracle, ctx):
    began_wall, began_cpu = time.perf_counter(), time.process_time()
    result = oracle.census_layer(ctx, 1, False)
    return result, time.perf_counter() - began_wall, time.process_time() - began_cpu


def run(request):
    started = time.perf_counter()
    oracle = load_oracle(request["oracle"])
    if oracle.torch is None:
        raise RuntimeError(f"torch does not import in the chroot: {oracle._TORCH_ERROR}")  # pylint: disable=protected-access
    family = request["family"]
    prepare(oracle, family)
    kwargs = {key: value for key, value in request["config"].items() if key not in CHECKPOINT_ONLY_FIELDS}
    config, _ = oracle.make_config(family, kwargs)
    layer_types = getattr(config, "layer_types", None)
    index = request["layer_index"]
    ctx = oracle.Context(family, config, index, request["seq_length"], request.get("gdn_backend"), detail=False)
    setup_seconds = time.perf_counter() - started

    # The first census of a process also pays for lazy imports and first-call dispatch caches.
    warm = [one_census(oracle, ctx) for _ in range(request["warmup"])]
    runs = [one_census(oracle, ctx) for _ in range(request["repeats"])]
    last = (runs or warm)[-1][0] if (runs or warm) else None
    report = {
        "torch": oracle.torch.__version__,
        "transformers": sys.modules["transformers"].__version__,
        "setup_seconds": setup_seconds,
        "layer_type": layer_types[index] if layer_types and index < len(layer_types) else None,
        "warmup": [{"wall": wall, "cpu": cpu} for _, wall, cpu in warm],
        "runs": [{"wall": wall, "cpu": cpu, "forward": result.get("forward_seconds"),
                  "backward": result.get("backward_seconds")} for result, wall, cpu in runs],
    }
    if runs:
        report["median_wall"] = statistics.median(r["wall"] for r in report["runs"])
        report["median_cpu"] = statistics.median(r["cpu"] for r in report["runs"])
    if last is not None:
        report["saved_bytes"] = last["saved_bytes"]
        report["peak_backward_bytes"] = last["peak_backward_bytes"]
        report["gdn_rule"] = last.get("gdn", {}).get("rule")
    return report


def main():
    request = json.loads(sys.argv[1])
    try:
        report = run(request)
    except Exception as exc:  # pylint: disable=broad-except
        report = {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()[-4000:]}
    print(RESULT_MARKER + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
