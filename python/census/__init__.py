"""Census from Python: the layer census of a Transformers model, measured by the C++ census.

A drop-in for the reference layer census: the same function names, arguments, defaults and results.
A config may be a mapping (a parsed config.json), the path of a config.json, or any object with
``to_dict()`` (a Transformers ``PretrainedConfig``), or a handle from :func:`load_config`, which a
caller censusing one model many times passes to skip parsing its config on every call.

    import census
    census.census_layer("config.json", 0, 4096)           # (saved bytes, working bytes)
    census.census_activations(config, [{"kind": "decoder", "count": 32}])

Module replacements (a HyperParallel train.yaml's fused modules, :func:`replacement_specs`) are priced
on the Llama-like layers through the census's NPU kernel contracts. A family Census does not price is
refused with ``ValueError`` naming the known model types.
"""
from census._api import (
    CensusUnavailable,
    Config,
    LayerTraffic,
    ReplacementSpec,
    census_activations,
    census_final_norm,
    census_flops,
    census_layer,
    census_output,
    census_output_activations,
    census_parameters,
    census_plan,
    census_recomputed,
    census_saved_ops,
    census_stack,
    census_step,
    census_traffic,
    layer_stack,
    load_config,
    replacement_specs,
    report,
    shipped_config,
    shipped_models,
    tp_config,
    trainer_run,
)
from census._records import OPS, KindActivations, activations_from_dict

__all__ = [
    "CensusUnavailable", "Config", "KindActivations", "LayerTraffic", "ReplacementSpec", "replacement_specs", "OPS", "activations_from_dict",
    "census_activations", "census_final_norm", "census_flops", "census_layer", "census_output",
    "census_output_activations", "census_parameters", "census_plan", "census_recomputed",
    "census_saved_ops", "census_stack", "census_step", "census_traffic", "layer_stack", "load_config", "report",
    "shipped_config", "shipped_models", "tp_config", "trainer_run",
]
