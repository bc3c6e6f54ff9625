"""Census from Python: the layer census of a Transformers model, measured by the C++ census.

A drop-in for the reference layer census: the same function names, arguments, defaults and results.
A config may be a mapping (a parsed config.json), the path of a config.json, or any object with
``to_dict()`` (a Transformers ``PretrainedConfig``), or a handle from :func:`load_config`, which a
caller censusing one model many times passes to skip parsing its config on every call.

    import census
    census.census_layer("config.json", 0, 4096)           # (saved bytes, working bytes)
    census.census_activations(config, [{"kind": "decoder", "count": 32}])

Not priced yet (refused with :class:`CensusUnavailable`): module replacements, and families beyond llama, mistral, qwen2 and qwen3 (those are
refused with ``ValueError`` naming the known model types).
"""
from census._api import (
    CensusUnavailable,
    Config,
    LayerTraffic,
    census_activations,
    census_final_norm,
    census_flops,
    census_layer,
    census_output,
    census_output_activations,
    census_parameters,
    census_recomputed,
    census_saved_ops,
    census_traffic,
    layer_stack,
    load_config,
    shipped_config,
    shipped_models,
    tp_config,
)
from census._records import OPS, KindActivations, activations_from_dict

__all__ = [
    "CensusUnavailable", "Config", "KindActivations", "LayerTraffic", "OPS", "activations_from_dict",
    "census_activations", "census_final_norm", "census_flops", "census_layer", "census_output",
    "census_output_activations", "census_parameters", "census_recomputed",
    "census_saved_ops", "census_traffic", "layer_stack", "load_config", "shipped_config", "shipped_models", "tp_config",
]
