#!/usr/bin/env python3
"""Copy the numbers a golden test reads from one case of the torch-2 oracle into tests/data/oracle/.

Usage: scripts/oracle_case.py CASE.json NAME   (writes tests/data/oracle/NAME.json)

Keeps the config's fields, the layer's saved/working/kept bytes and saves by op at TP 1 and TP 2,
every saved storage (bytes, dtype, shape, module, op class), FLOPs, traffic and parameters by part,
the selective census and the activations record, and the output layer's census where the case
recorded it, as the other cases there hold them.
"""
import json
import pathlib
import sys


def layer(record):
    return {key: record[key] for key in ("saved_bytes", "peak_backward_bytes", "saved_ops", "kept_bytes")}


def main(source, name):
    case = json.loads(pathlib.Path(source).read_text())
    out = {
        "case": name,
        "seq_length": case["seq_length"],
        "layer_index": case["layer_index"],
        "gdn_backend": {"kernel": "triton"}.get(case.get("gdn_backend"), case.get("gdn_backend")),
        "config": case["config"]["fields"],
        "census_layer": layer(case["census_layer"]),
        "census_layer_tp2": layer(case["census_layer_tp2"]),
        "flops": case["flops"]["flops"],
        "traffic": {key: case["traffic"][key] for key in ("moved", "parameter", "launches")},
        "parameters": {key: case["parameters"][key] for key in ("parts", "total", "final_norm")},
        "census_activations": {key: value for key, value in case["census_activations"].items()
                               if key not in ("tp1", "tp2", "selective_working", "selective_working_tp")},
        "saved_tensors": [{key: t[key] for key in ("bytes", "op", "dtype", "shape", "module")}
                          for t in case["census_layer"]["saved_tensors"]],
        "selective_tp1": {key: case["selective_tp1"][key] for key in ("kept_bytes", "peak_backward_bytes")},
        "selective_tp2": {key: case["selective_tp2"][key] for key in ("kept_bytes", "peak_backward_bytes")},
        "recomputed": {key: case["recomputed"][key] for key in ("attention_mm_share", "ffn_mm_share")},
    }
    for key in ("output_vocab", "output_half_vocab"):
        if isinstance(case.get(key), dict) and "saved_bytes" in case[key]:
            out[key] = {k: case[key][k] for k in ("saved_bytes", "peak_backward_bytes", "kept_bytes", "vocab_size")}
    if isinstance(case.get("census_output_activations"), dict):
        out["census_output_activations"] = case["census_output_activations"]
    target = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "oracle" / f"{name}.json"
    target.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
