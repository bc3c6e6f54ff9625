#!/usr/bin/env python3
"""Copy the numbers the stack golden test reads from one stack case of the torch-2 oracle into tests/data/oracle/.

Usage: scripts/oracle_stack_case.py CASE.json NAME   (writes tests/data/oracle/NAME.json)

Keeps the config's fields, the layer kinds, each layer's kept and held bytes at TP 1 and TP 2, each
kind's record (the mean of its layers, split), and what the single-layer census did on each kind.
"""
import json
import pathlib
import sys


def main(source, name):
    case = json.loads(pathlib.Path(source).read_text())
    out = {
        "case": name,
        "seq_length": case["seq_length"],
        "config": case["config"]["fields"],
        "layer_kinds": case["layer_kinds"],
        "census_stack_tp1": {key: case["census_stack_tp1"][key] for key in ("kept", "held")},
        "census_stack_tp2": {key: case["census_stack_tp2"][key] for key in ("kept", "held")},
        "census_activations": {kind: {key: value for key, value in record.items() if key not in ("tp1_mean", "tp2_mean")}
                               for kind, record in case["census_activations"].items()},
        "single_layer_census": case.get("single_layer_census", {}),
    }
    target = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "oracle" / f"{name}.json"
    target.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
