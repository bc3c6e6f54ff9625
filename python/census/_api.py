"""The reference census's public functions, over the C++ census."""
from __future__ import annotations

import copy
import json
import numbers
import os
import stat
from typing import Any, Dict, Iterable, List, Mapping, MutableMapping, NamedTuple, Sequence, Tuple

from census import _census
from census._records import KindActivations

# The gated delta rules a run can take; dense layers run neither, and either is accepted for them.
_GDN_BACKENDS = ("eager", "triton", "kernel")

# The config fields a tensor-parallel rank holds a share of, as the C++ census declares them.
_TP_FIELDS = tuple(_census.tp_fields())


# A census cannot price this here: an option or module Census does not model yet (a RuntimeError).
CensusUnavailable = _census.CensusUnavailable


class LayerTraffic(NamedTuple):
    """What one forward of a layer moves, by part: its bytes, the parameters among them, and its ops."""

    moved: Dict[str, float]
    parameter: Dict[str, float]
    launches: Dict[str, int]


Config = _census.Config


def load_config(config: Any) -> "Config":
    """*config* parsed once: pass the handle to every call that follows to skip parsing it again."""
    return config if isinstance(config, Config) else Config(_mapping(config))


def _mapping(config: Any) -> Any:
    """The config as a plain mapping (itself, the file at its path, or its ``to_dict()``), or a Config handle."""
    if isinstance(config, Config):
        return config
    if isinstance(config, Mapping):
        return dict(config)
    if isinstance(config, (str, os.PathLike)):
        text = _read_regular_file(config, "give a config.json path")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{_shown(config)}: is not valid JSON ({exc.msg}); give a Transformers config.json") from exc
        except RecursionError as exc:
            raise ValueError(f"{_shown(config)}: nests its values too deep; give a Transformers config.json") from exc
    to_dict = getattr(config, "to_dict", None)
    if callable(to_dict):
        out = to_dict()
        if not isinstance(out, Mapping):
            raise ValueError(f"config: its to_dict() returned {_shown(out)}, not a mapping; give a Transformers config, "
                             "whose to_dict() is a dict of its fields")
        out = dict(out)
        # A trainer's choice of experts implementation lives in a private attribute to_dict() leaves out.
        experts = getattr(config, "_experts_implementation", None)
        if isinstance(experts, str):
            out["_experts_implementation"] = experts
        return out
    raise ValueError(f"a config must be a mapping, a config.json path or have to_dict(), not {type(config).__name__}")


# The largest file read, as the command line reads files: far above any config.json.
_LARGEST_FILE = 16 << 20


def _shown(value: Any) -> str:
    """A user's value as a refusal shows it: its repr, cut, on one line (repr escapes control characters)."""
    text = repr(os.fspath(value) if isinstance(value, os.PathLike) else value)
    return text if len(text) <= 66 else text[:63] + "..."


def _read_regular_file(path: Any, advice: str) -> str:
    """The text of the regular file at *path*; a directory, device, FIFO or socket is refused unread."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise ValueError(f"{_shown(path)}: is a directory, not a file; {advice}")
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{_shown(path)}: is not a regular file (a device, FIFO or socket); {advice}")
        if info.st_size > _LARGEST_FILE:
            raise ValueError(f"{_shown(path)}: is larger than 16 MiB; {advice}")
        # O_NONBLOCK: should the path become a FIFO after the stat, opening it does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise ValueError(f"{_shown(path)}: is not a regular file; {advice}")
            data = file.read(_LARGEST_FILE + 1)
    except OSError as exc:
        raise ValueError(f"{_shown(path)}: cannot be read ({exc.strerror}); {advice}") from exc
    if len(data) > _LARGEST_FILE:
        raise ValueError(f"{_shown(path)}: is larger than 16 MiB; {advice}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{_shown(path)}: is not UTF-8 text; {advice}") from exc


def _integer(name: str, value: Any, positive: bool = False) -> int:
    """*value* as an int, or ValueError naming *name*: a bool, float or str is refused, not converted."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: must be an integer, not {_shown(value)}")
    if positive and value <= 0:
        raise ValueError(f"{name}: must be a positive integer, not {_shown(value)}")
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"{name}: {_shown(value)} is beyond 64-bit integers")
    return int(value)


def _path(name: str, value: Any) -> str:
    """*value* (a str or an os.PathLike of one) as a str, or ValueError naming *name*."""
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    raise ValueError(f"{name}: must be a path (a str or os.PathLike), not {_shown(value)}")


def _text(name: str, value: Any) -> str:
    """*value* as a str, or ValueError naming *name*: no other object is turned into its text."""
    if not isinstance(value, str):
        raise ValueError(f"{name}: must be a string, not {_shown(value)}")
    return value


def _switch(name: str, value: Any) -> bool:
    """*value* as a bool, or ValueError naming *name*: no other object is read as a switch."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: must be True or False, not {_shown(value)}")
    return value


def _name_or_none(name: str, value: Any, choices: str, none: str) -> str:
    """A choice option as the command line takes it: None for *none* (its empty text), else a name, which the
    step checks against *choices*."""
    if value is None:
        return ""
    if not isinstance(value, str) or value == "":
        raise ValueError(f"{name}: must be {choices} (or None for {none}), not {_shown(value)}")
    return value


def _optimizer_impl(value: Any) -> str:
    """*optimizer_impl* as the command line's --optimizer-impl takes it: None for the optimizer's default (PyTorch's
    on CUDA), else a form's name, which the step checks."""
    if value is None:
        return ""
    if not isinstance(value, str) or value == "":
        raise ValueError(f"optimizer_impl: must be foreach, fused or for-loop (or None for the optimizer's default), "
                         f"not {_shown(value)}")
    return value


def _refuse_unpriced(replacements: Sequence[Any] = (), gdn_backend: str = "eager") -> None:
    if gdn_backend not in _GDN_BACKENDS:
        raise ValueError(f"unsupported GDN backend {gdn_backend!r}; expected one of {sorted(_GDN_BACKENDS)}.")


class ReplacementSpec(NamedTuple):
    """One module replacement of a train.yaml's plan_overrides: the module-name patterns it matches, the
    factory building the fused module (its dotted path), and the Transformers class it replaces."""

    match: Tuple[str, ...]
    factory: str
    module_type: str


def _dotted(value: Any) -> str:
    """A factory or class as its dotted path; a string as it is."""
    if isinstance(value, str):
        return value
    return f"{value.__module__}.{value.__qualname__}"


def replacement_specs(train_yaml: Any) -> Tuple[ReplacementSpec, ...]:
    """The module replacements a HyperParallel train.yaml installs (plan_overrides with replace_module).

    Entries with only a sharding action, or a ``when`` condition, are skipped; an entry the census
    cannot install (no module_type, a match of another type, an unknown factory) raises ValueError.
    """
    if not isinstance(train_yaml, (str, os.PathLike)):
        raise ValueError(f"train_yaml: must be the path of a train.yaml, not {_shown(train_yaml)}")
    path = os.fspath(train_yaml)
    if not isinstance(path, str):
        raise ValueError(f"train_yaml: must be a path as text, not {_shown(path)}")
    return tuple(ReplacementSpec(tuple(match), factory, module_type)
                 for match, module_type, factory in _census.replacement_specs(path))


def _priced(config: Any, replacements: Sequence[Any] = ()) -> Any:
    """*config* with HyperParallel's fused modules where *replacements* select them (specs with
    ``match``, ``factory`` and ``module_type``, strings or the objects themselves)."""
    replacements = _items("replacements", replacements)
    if not replacements:
        return config if isinstance(config, Config) else _mapping(config)
    specs = []
    for spec in replacements:
        try:
            match = spec.match if isinstance(spec.match, (list, tuple)) else (spec.match,)
            module_type, factory = _dotted(spec.module_type), _dotted(spec.factory)
        except AttributeError as exc:
            raise ValueError(f"a replacement needs match, factory and module_type, not {_shown(spec)}") from exc
        if not all(isinstance(pattern, str) for pattern in match):
            raise ValueError(f"a replacement's match must be module-name patterns (strings), not {_shown(spec.match)}")
        specs.append((list(match), module_type, factory))
    # A module the census cannot build here (a factory it does not model, a family whose layers take no
    # replacement yet) raises CensusUnavailable.
    return load_config(config).with_replacements(specs)


def census_layer(config: Any, layer_index: int, seq_length: int, selective: bool = False,
                 ops: Dict[str, int] | None = None, replacements: Sequence[Any] = (),
                 gdn_backend: str = "eager", micro_batch_size: int = 1) -> Tuple[int, int]:
    """Bytes layer *layer_index* keeps for its backward, and the most its backward holds, on a micro-batch
    of *micro_batch_size* sequences of *seq_length* tokens.

    Where *selective*, the layer runs under HyperParallel's selective activation checkpointing and the
    bytes kept are its input and the outputs the policy saves. Where *ops* is given (and the layer
    runs without checkpointing), it takes the bytes saved by the op whose backward takes them.
    """
    if ops is not None and not isinstance(ops, MutableMapping):
        raise ValueError(f"ops: must be a dict to fill with bytes by op, not {_shown(ops)}")
    _refuse_unpriced(replacements, gdn_backend)
    priced = _priced(config, replacements)
    micro_batch_size = _integer("micro_batch_size", micro_batch_size, positive=True)
    if selective:
        return _census.selective(priced, layer_index, seq_length, gdn_backend, micro_batch_size)
    saved, working, by_op = _census.layer(priced, layer_index, seq_length, 1, gdn_backend, micro_batch_size)
    if ops is not None:
        ops.update(by_op)
    return saved, working


def report(config: Any, path: Any = "report.html", layer_index: int = 0, seq_length: int = 4096, tp: int = 1,
           selective: bool = False, replacements: Sequence[Any] = (), gdn_backend: str = "eager",
           svg_dir: Any = None, name: str | None = None) -> str:
    """Write ``census report``'s page for layer *layer_index* to *path* (and each chart as an SVG file into
    *svg_dir*, where given); return *path*. *name* heads the page (a shipped model's name, say); by
    default the config's path, or its ``_name_or_path`` or ``model_type``. A path that cannot be written
    raises ValueError and leaves no file behind.
    """
    _refuse_unpriced(replacements, gdn_backend)
    priced = _priced(config, replacements)
    if name is None:
        if isinstance(config, (str, os.PathLike)):
            name = os.fspath(config)
        elif isinstance(config, Mapping):
            name = str(config.get("_name_or_path") or config.get("model_type") or "config")
        else:
            name = str(getattr(config, "_name_or_path", None) or getattr(config, "model_type", None) or "config")
    svg = "" if svg_dir is None else _path("svg_dir", svg_dir)
    if svg_dir is not None and svg == "":
        raise ValueError("svg_dir: is empty; give the directory to write the charts into, or None")
    if not isinstance(selective, bool):
        raise ValueError(f"selective: must be True or False, not {_shown(selective)}")
    return _census.report(priced, _path("path", path), _integer("layer_index", layer_index),
                          _integer("seq_length", seq_length), _integer("tp", tp), selective, gdn_backend, svg,
                          _text("name", name))


def census_saved_ops(config: Any, layer_index: int, seq_length: int,
                     replacements: Sequence[Any] = ()) -> Dict[str, float]:
    """``{op: bytes per token}`` the layer keeps, by the op saving them; they sum to what it keeps."""
    ops: Dict[str, int] = {}
    census_layer(config, layer_index, seq_length, ops=ops, replacements=replacements)
    return {op: size / seq_length for op, size in ops.items()}


def census_recomputed(config: Any, layer_index: int, seq_length: int) -> Tuple[float, float]:
    """The shares of the layer's attention-projection and other matmul FLOPs its selective backward runs again."""
    return _census.recomputed(_mapping(config), layer_index, seq_length)


def census_flops(config: Any, layer_index: int, seq_length: int) -> Dict[str, int]:
    """Forward FLOPs of the layer on one sequence, by part."""
    return dict(_census.flops(_mapping(config), layer_index, seq_length))


def census_traffic(config: Any, layer_index: int, seq_length: int, gdn_backend: str = "eager") -> LayerTraffic:
    """Bytes one forward of the layer moves by part, the parameters' among them, and its ops launched."""
    _refuse_unpriced(gdn_backend=gdn_backend)
    moved, parameter, launches = _census.traffic(_mapping(config), layer_index, seq_length, gdn_backend)
    return LayerTraffic({k: float(v) for k, v in moved.items()}, {k: float(v) for k, v in parameter.items()},
                        dict(launches))


def census_parameters(config: Any, layer_index: int, replacements: Sequence[Any] = ()) -> Dict[str, int]:
    """The layer's parameters by part."""
    parts, _ = _census.parameters(_priced(config, replacements), layer_index)
    return dict(parts)


def census_final_norm(config: Any, replacements: Sequence[Any] = ()) -> int:
    """The parameters of the model's final norm, of the class of a layer's input norm."""
    _, final_norm = _census.parameters(_priced(config, replacements), 0)
    return final_norm


def census_output(config: Any, seq_length: int, replacements: Sequence[Any] = ()) -> Tuple[int, int]:
    """Bytes the output layer (final norm, LM head, causal-LM loss) keeps for its backward, and the most its backward holds."""
    handle = load_config(_priced(config, replacements))
    vocab = _census.resolved(handle)["vocab_size"]
    return _census.output(handle, seq_length, vocab)


def census_stack(config: Any, seq_length: int, replacements: Sequence[Any] = (),
                 micro_batch_size: int = 1) -> List[Tuple[int, int]]:
    """What each decoder layer keeps for its backward, and the most its backward holds, from one pass of the whole stack.

    The embedding, every layer in model order and the final norm run forward on a micro-batch of
    *micro_batch_size* sequences, then
    backward from the last hidden state; each save counts toward the layer whose forward makes it
    first. Layers that read what an earlier layer wrote (GLM-5's shared-indexer layers) run as the
    model runs them. Raises CensusUnavailable for a model forward the stack census does not build.
    """
    return [tuple(pair) for pair in _census.stack_census(load_config(_priced(config, replacements)),
                                                         _integer("seq_length", seq_length),
                                                         micro_batch_size=_integer("micro_batch_size", micro_batch_size))]


def census_output_activations(config: Any, seq_length: int = 4096,
                              replacements: Sequence[Any] = ()) -> KindActivations:
    """The output layer's record per token, with its vocabulary and half of it (a vocabulary-parallel loss's split)."""
    return KindActivations.from_dict(_census.output_activations(load_config(_priced(config, replacements)),
                                                                seq_length))


def tp_config(config: Any, tp: int) -> Any:
    """*config* as one of *tp* tensor-parallel ranks holds its layers: heads and widths divided, head_dim kept.

    Each underlying attribute is divided once, aliases of a config class's ``attribute_map`` included.
    A mapping gives a mapping; a config object a deep copy of it.
    """
    tp = _integer("tp", tp, positive=True)
    if isinstance(config, Config):
        return config.tp(tp)
    if isinstance(config, (str, os.PathLike)):
        config = _mapping(config)
    mapping = isinstance(config, Mapping)
    if not mapping and not hasattr(config, "num_attention_heads"):
        raise ValueError(f"a config must be a mapping, a config.json path or a config object, not {type(config).__name__}")
    if mapping and isinstance(config.get("text_config"), Mapping):
        return {**copy.deepcopy(dict(config)), "text_config": tp_config(config["text_config"], tp)}
    out = dict(copy.deepcopy(config)) if mapping else copy.deepcopy(config)
    if mapping:
        # A mapping states only what its config.json states: fill in the family's defaults first, as
        # a config class would, so that the fields divided are the ones the layer is built from.
        out.update(_census.resolved(out))

    def get(name: str) -> Any:
        return out.get(name) if mapping else getattr(out, name, None)

    def put(name: str, value: Any) -> None:
        if mapping:
            out[name] = value
        else:
            setattr(out, name, value)

    if not get("head_dim"):
        heads = _integer("num_attention_heads", get("num_attention_heads"), positive=True)
        put("head_dim", _integer("hidden_size", get("hidden_size"), positive=True) // heads)
    aliases = {} if mapping else (getattr(type(config), "attribute_map", None) or {})
    divided = set()
    for name in _TP_FIELDS:
        target = aliases.get(name, name)
        if target in divided:
            continue
        value = get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            put(name, max(1, value // tp))
            divided.add(target)
    return out


def _items(name: str, values: Any) -> list:
    """*values* as a list, or ValueError naming *name* where it is not iterable (a mapping or a string
    is not a list)."""
    if isinstance(values, (Mapping, str, bytes)):
        raise ValueError(f"{name}: must be a list, not {_shown(values)}")
    try:
        return list(values)
    except TypeError as exc:
        raise ValueError(f"{name}: must be a list, not {_shown(values)}") from exc


def _group(index: int, group: Any) -> Tuple[str, int, bool]:
    """One ``{"kind", "count", "mtp"}`` group of a stack, each key checked."""
    where = f"layers[{index}]"
    if not isinstance(group, Mapping):
        raise ValueError(f"{where}: must be a mapping {{kind, count, mtp}}, not {_shown(group)}")
    unknown = sorted(str(key) for key in group if key not in ("kind", "count", "mtp"))
    if unknown:
        raise ValueError(f"{where}: has unknown keys {unknown}; a group has kind, count and mtp")
    if not isinstance(group.get("kind"), str):
        raise ValueError(f"{where}.kind: must be a layer kind (a string), not {_shown(group.get('kind'))}")
    count = _integer(f"{where}.count", group.get("count"), positive=True)
    mtp = group.get("mtp", False)
    if not isinstance(mtp, bool):
        raise ValueError(f"{where}.mtp: must be True or False, not {_shown(mtp)}")
    return group["kind"], count, mtp


def census_activations(config: Any, layers: Iterable[Mapping[str, Any]], seq_length: int = 4096,
                       replacements: Sequence[Any] = (), gdn_backend: str = "eager",
                       micro_batch_size: int = 1) -> Dict[str, KindActivations]:
    """What a layer of each kind of *layers* keeps and holds, per token, at TP 1 and TP 2, plain and selective,
    on micro-batches of *micro_batch_size* sequences of *seq_length* tokens.

    *layers* is the stack's groups in model order (``{"kind", "count", "mtp"}``); MTP groups are left
    out, and each kind is censused on its first layer.
    """
    _refuse_unpriced(replacements=replacements, gdn_backend=gdn_backend)
    groups = [_group(i, group) for i, group in enumerate(_items("layers", layers))]
    micro_batch_size = _integer("micro_batch_size", micro_batch_size, positive=True)
    records = _census.activations(load_config(_priced(config, replacements)), groups, seq_length, gdn_backend,
                                  micro_batch_size)
    return {kind: KindActivations.from_dict(record) for kind, record in records.items()}


def layer_stack(config: Any) -> Tuple[Dict[str, Any], ...]:
    """The model's layer stack as groups ``{"kind", "count"}`` in model order, kinds as the census names them.

    Multi-token-prediction layers come last as a group with ``"mtp": True`` (the key is left out when false).
    """
    return tuple({"kind": kind, "count": count, **({"mtp": True} if mtp else {})}
                 for kind, count, mtp in _census.stack(load_config(config)))


def shipped_models() -> Tuple[str, ...]:
    """The names of the model configs shipped with Census."""
    return tuple(name for name, _ in _census.shipped_models())


def shipped_config(name: str) -> Dict[str, Any]:
    """The config.json of a shipped model, as a mapping."""
    for model, text in _census.shipped_models():
        if model == name:
            return json.loads(text)
    raise ValueError(f"{name!r} is not a shipped model; known: {', '.join(shipped_models())}")


def census_step(config: Any, seq_length: int = 4096, micro_batches: int = 1, pp: int = 1,
                stage: Any = None, schedule: str = "1f1b", virtual_stages: int = 1, recompute: str = "none",
                optimizer: str = "adamw",
                tp: int = 1, dp: int = 1, zero: int = 0, master_weights: str = "bf16", grad_dtype: str = "bf16",
                cuda_context: int = 0, nccl_buffers: int = 0, fragmentation: int = 0,
                cp: int = 1, ep: int = 1, micro_batch_size: int = 1, first_stage_layers: int = 0,
                last_stage_layers: int = 0, embedding_as_layer: bool = False,
                loss_as_layer: bool = False, expert_tp: int = 0, allocator: bool = False, alloc_conf: str = "",
                gpu_memory: Any = None, fsdp: bool = False, reshard_after_forward: str = "default",
                sequence_parallel: bool = False, loss_parallel: bool = False, world: int = 0,
                optimizer_impl: Any = None, first_step: bool = False,
                optimizer_in_backward: bool = False, loss: Any = None,
                offload_activations: Any = None, liger: bool = False, cpu_offload: bool = False,
                fp8: Any = None, fp8_skip_head: bool = False, lora: bool = False, lora_rank: Any = None,
                lora_alpha: Any = None, lora_dropout: Any = None, lora_targets: Any = None,
                lora_dtype: Any = None, use_dora: bool = False, quantize: Any = None, double_quant: bool = False,
                quant_storage: Any = None, compute_dtype: Any = None, bnb_version: Any = None,
                prepare_kbit: bool = False, kernels: Any = None, fsdp_wrap: Any = None,
                autocast: Any = None, load_dtype: Any = None, modules_to_save: Any = None) -> Dict[str, Any]:
    """One rank's whole training step, simulated, as ``census step --format json`` reports it.

    The stage *stage* of *pp* (every stage when None: ``{"stages": [...], "worst_stage", "total_bytes"}``),
    *micro_batches* micro-batches of *micro_batch_size* sequences of *seq_length* tokens under *schedule* (``1f1b``, ``gpipe``, or
    ``interleaved`` over *virtual_stages* model chunks a stage), every
    layer under *recompute* (``none``, ``selective``, ``full``), then *optimizer*'s step (``adamw``, ``sgd``,
    ``adafactor``, ``adamw8bit``, ``paged-adamw8bit``, ``torchao-adamw8bit``, ``torchao-adamw4bit``, ``muon`` or
    ``none``; docs/step.md) in the form *optimizer_impl*
    names (``foreach``, ``fused``, ``for-loop``; when None, PyTorch's default on CUDA: foreach, Adafactor's
    for-loop); with *optimizer_in_backward*, one optimizer a parameter stepped in its post-accumulate-grad hook,
    as torchtune's optimizer_in_bwd runs it. *loss* is the trainer's loss from the last hidden state: ``hf``
    (Transformers' own on the whole logits; the default, or ``liger-flce`` with *liger*), ``trl-chunked-nll`` (TRL's SFT default, in checkpointed chunks of
    256 tokens), ``liger-flce`` (Liger's fused linear cross-entropy), ``torchtune-chunked`` or
    ``torchtune-linear`` (torchtune's CEWithChunkedOutputLoss and LinearCrossEntropyLoss).
    *offload_activations* ``"trl"`` or ``"torchtune"`` offloads activations as that trainer does (``census step
    --offload-activations``), and ``"host"`` holds the pinned host memory it takes; None offloads nothing. With
    *liger*, Liger's kernels run as Transformers' Trainer and TRL apply them (``census step --liger``): its
    RMSNorm, SwiGLU and rotary in the layers, and its fused loss unless *loss* names another. *fp8*
    ``"tensorwise"``, ``"rowwise"`` or ``"rowwise-gw-hp"`` trains in FP8 as torchtitan converts the model with
    torchao, eager (``census step --fp8``); with *fp8_skip_head* the LM head stays bf16. With *lora* or any
    ``lora_*`` argument, PEFT's LoRA as get_peft_model builds it (``census step --lora``): the base frozen,
    adapters of rank *lora_rank* (8) and *lora_alpha* (8), *lora_dropout* (0), on *lora_targets* (None or
    ``"default"``: the model type's; ``"all-linear"``; or module names, a list or a comma-separated str),
    in *lora_dtype* ``"fp32"`` (PEFT's default) or ``"bf16"``, as DoRA with *use_dora*, with trained copies of
    *modules_to_save* (``"lm_head"``, ``"embed_tokens"``, a list or a comma-separated str; PEFT's
    modules_to_save); ``"lora"`` holds what they and the frozen base hold. *quantize* ``"nf4"`` or ``"fp4"`` loads the base in bitsandbytes' 4 bits, as
    BitsAndBytesConfig(load_in_4bit=True) does (``census step --quantize``), with *double_quant*, *quant_storage*
    (``"uint8"``, ``"bf16"``, ``"fp32"``), *compute_dtype* (``"fp32"``, ``"bf16"``), *bnb_version* (``"0.50"``,
    ``"0.49"``) and *prepare_kbit* (PEFT's prepare_model_for_kbit_training's casts); None or False is
    BitsAndBytesConfig's default; ``"quantization"`` holds the packed weights' and their state's bytes. The step is the steady state, every step from the second on, with the
    optimizer's states alive from the start (``"step": "steady"``); *first_step* prices the first, whose
    optimizer makes them (``"step": "first"``). The rank's layers at TP *tp*, its S / *cp* tokens of each sequence, each MoE layer's
    num_experts / *ep* experts. With *fsdp*, FSDP2 over *dp* ranks runs on the rank (fully_shard per
    decoder layer and the root, *reshard_after_forward* ``default``, ``true`` or ``false``; with
    *master_weights* ``fp32`` the shards are fp32 under MixedPrecisionPolicy(bf16, fp32); with *cpu_offload*, under
    its CPUOffloadPolicy, ``census step --cpu-offload``: the shards, their gradients and the optimizer's states on
    the host, whose bytes ``"host"`` holds). With
    *sequence_parallel* or *loss_parallel* (and *tp* > 1), DTensor's plan as torchtitan applies it runs on
    the rank (docs/parallelism.md). A *world* other than 0 must be *dp* x *tp* x *pp* x *cp*. Composed
    onto it: the K/V a ring attention receives under *cp*, ZeRO-*zero* over *dp* ranks,
    *master_weights* and *grad_dtype* (``bf16`` or ``fp32``), and the bytes of the CUDA context, NCCL's
    buffers and fragmentation the caller states. ValueError for a value it refuses. A config that ties the
    LM head to the embedding (``tie_word_embeddings``, with its config class's default) is stepped with one
    shared weight. *recompute* may name a mode per layer kind (``"none,moe=full"``); *first_stage_layers*
    and *last_stage_layers* (Megatron's num_layers_in_first/last_pipeline_stage), or *embedding_as_layer*
    and *loss_as_layer*, make uneven pipeline stages; *expert_tp* 1 keeps every rank's experts whole.

    *kernels* is the kernel profile (``census step --kernels``): ``"npu"`` (None, the reference's flash
    contract) or ``"cuda"`` (CUDA's flash attention's). *fsdp_wrap* names FSDP2's units under *fsdp*
    (``census step --fsdp-wrap``): ``"layers"`` (None: each decoder layer, then the root) or ``"torchtitan"``
    (torchtitan v0.2's: the embedding, each layer, the final norm with the head, then the root).
    *autocast* ``"bf16"`` (``census step --autocast``) prices the HF Trainer's ``bf16=True`` on a model
    loaded in fp32: fp32 weights, gradients and states, the forward under CUDA's autocast, and accelerate's
    fp32 copy of the logits; None: no autocast. *load_dtype* ``"bf16"`` loads the model in bf16 under it
    (``census step --load-dtype``; Transformers 5's ``dtype="auto"``); None: fp32.

    *allocator* simulates PyTorch's CUDA caching allocator over the step (``census step --allocator``):
    each stage's ``"allocator"`` holds ``reserved_peak``, ``allocated_peak``, ``largest_inactive_split``,
    ``num_alloc_retries``, ``out_of_memory`` (None without *gpu_memory*) and ``requested_peak``, under
    *alloc_conf* (``PYTORCH_CUDA_ALLOC_CONF`` as you set it) on a device of *gpu_memory* (bytes or a size
    such as ``"141GB"``).
    """
    if not isinstance(allocator, bool):
        raise ValueError(f"allocator: must be True or False, not {_shown(allocator)}")
    if not isinstance(alloc_conf, str):
        raise ValueError(f"alloc_conf: must be PYTORCH_CUDA_ALLOC_CONF's text, not {_shown(alloc_conf)}")
    memory = "" if gpu_memory is None else gpu_memory if isinstance(gpu_memory, str) else str(_integer("gpu_memory", gpu_memory))
    mapping = _mapping(config)
    text = _census.step(load_config(mapping), _integer("seq_length", seq_length), _integer("micro_batches", micro_batches),
                        _integer("pp", pp), None if stage is None else _integer("stage", stage),
                        _text("schedule", schedule), _integer("virtual_stages", virtual_stages),
                        _text("recompute", recompute), _text("optimizer", optimizer), _integer("tp", tp),
                        _integer("dp", dp), _integer("zero", zero), _text("master_weights", master_weights),
                        _text("grad_dtype", grad_dtype), _integer("cuda_context", cuda_context),
                        _integer("nccl_buffers", nccl_buffers), _integer("fragmentation", fragmentation),
                        _integer("cp", cp), _integer("ep", ep), _integer("micro_batch_size", micro_batch_size),
                        _integer("first_stage_layers", first_stage_layers),
                        _integer("last_stage_layers", last_stage_layers),
                        _switch("embedding_as_layer", embedding_as_layer), _switch("loss_as_layer", loss_as_layer),
                        _integer("expert_tp", expert_tp), allocator, alloc_conf, memory, _switch("fsdp", fsdp),
                        _text("reshard_after_forward", reshard_after_forward),
                        _switch("sequence_parallel", sequence_parallel), _switch("loss_parallel", loss_parallel),
                        _integer("world", world), _optimizer_impl(optimizer_impl), _switch("first_step", first_step),
                        _switch("optimizer_in_backward", optimizer_in_backward),
                        "" if loss is None else _text("loss", loss),
                        _name_or_none("offload_activations", offload_activations, "trl or torchtune", "none"),
                        _switch("liger", liger), _switch("cpu_offload", cpu_offload),
                        _name_or_none("fp8", fp8, "tensorwise, rowwise or rowwise-gw-hp", "bf16"),
                        _switch("fp8_skip_head", fp8_skip_head),
                        *_fine_tuning(lora, lora_rank, lora_alpha, lora_dropout, lora_targets, lora_dtype, use_dora,
                                      quantize, double_quant, quant_storage, compute_dtype, bnb_version, prepare_kbit),
                        _name_or_none("kernels", kernels, "npu or cuda", "npu"),
                        _name_or_none("fsdp_wrap", fsdp_wrap, "layers or torchtitan", "layers"),
                        _name_or_none("autocast", autocast, "bf16", "no autocast"),
                        _name_or_none("load_dtype", load_dtype, "fp32 or bf16", "the default"),
                        _module_names("modules_to_save", modules_to_save))
    return json.loads(text)


def _module_names(name: str, value: Any, what: str = "module names") -> str:
    """Module names as a comma-separated option takes them: None as not given, a str as it is, a list joined by
    commas; ValueError naming the argument (and *what* it takes) for anything else."""
    if value is None:
        return ""
    if isinstance(value, str):
        if value == "":
            raise ValueError(f"{name}: must be {what}, not ''")
        return value
    names = _items(name, value)
    if not names or not all(isinstance(item, str) and item and "," not in item for item in names):
        raise ValueError(f"{name}: must be module names (str), not {_shown(value)}")
    return ",".join(names)


def _fine_tuning(lora: Any, lora_rank: Any, lora_alpha: Any, lora_dropout: Any, lora_targets: Any,
                 lora_dtype: Any, use_dora: Any, quantize: Any, double_quant: Any, quant_storage: Any,
                 compute_dtype: Any, bnb_version: Any, prepare_kbit: Any) -> tuple:
    """The adapters' and the 4-bit base's arguments of census_step and census_plan, each checked by name,
    in the order the extension takes them."""
    return (_switch("lora", lora), None if lora_rank is None else _integer("lora_rank", lora_rank),
            _real_or_none("lora_alpha", lora_alpha), _real_or_none("lora_dropout", lora_dropout),
            _lora_targets(lora_targets),
            _name_or_none("lora_dtype", lora_dtype, "fp32 or bf16", "fp32"), _switch("use_dora", use_dora),
            _name_or_none("quantize", quantize, "nf4 or fp4", "a bf16 base"),
            _switch("double_quant", double_quant),
            _name_or_none("quant_storage", quant_storage, "uint8, bf16 or fp32", "uint8"),
            _name_or_none("compute_dtype", compute_dtype, "fp32 or bf16", "fp32"),
            _name_or_none("bnb_version", bnb_version, "0.50 or 0.49", "0.50"),
            _switch("prepare_kbit", prepare_kbit))


def trainer_run(trainer: str, path: Any, world: Any = None, config: Any = None,
                seq_length: Any = None) -> Dict[str, Any]:
    """The run a trainer's own config file states, as ``census step --from TRAINER FILE`` reads it.

    *trainer* is ``"torchtitan"`` (its TOML job config, v0.1 or v0.2), ``"torchtune"`` (a full-finetune
    recipe config, v0.6.1) or ``"trl"`` (a ``trl sft --config`` YAML, one GPU); *world* is the GPU count where the file leaves it to the launcher
    (``data_parallel_shard_degree = -1``, torchtune's ranks); *seq_length* the tokens a sequence has where the
    file leaves it to the data (a torchtune tokenizer's ``max_seq_len: null``). The result's ``"arguments"`` are
    :func:`census_step`'s keyword arguments for the run: ``census_step(**run["arguments"])`` prices it. Their
    ``"config"`` is the shipped model the file names, or *config* (a mapping, a config.json path or a
    Transformers config) where it names one Census does not ship. ``"flags"`` are the same run as ``census
    step``'s arguments, ``"ignored"`` the fields that move no memory (each ``{"field", "why"}``), ``"notes"``
    where the run Census prices differs from the trainer's. ValueError for a file or field it refuses.
    """
    if not isinstance(trainer, str):
        raise ValueError(f"trainer: must be a trainer's name (torchtitan), not {_shown(trainer)}")
    run = json.loads(_census.trainer_run(trainer, _path("path", path), 0 if world is None else _integer("world", world),
                                         config is not None,
                                         0 if seq_length is None else _integer("seq_length", seq_length)))
    arguments = run["arguments"]
    model = arguments.pop("model")
    arguments = {"config": shipped_config(model) if config is None else config, **arguments}
    return {"format": run["format"], "flags": run["flags"], "arguments": arguments, "ignored": run["ignored"],
            "notes": run["notes"]}


def _real_or_none(name: str, value: Any) -> Any:
    """A number as a float (the step holds it to its range), None as not given; ValueError naming *name*."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: must be a number, not {_shown(value)}")
    return float(value)


def _lora_targets(value: Any) -> str:
    """LoRA's targets as ``--lora-targets`` takes them: None as not given, a str as it is, a list of module
    names joined by commas; ValueError naming lora_targets for anything else."""
    return _module_names("lora_targets", value, "default, all-linear or module names")


def census_plan(config: Any, gpus: int, gpu_memory: Any = None, seq_length: int = 4096, global_batch: int = 0,
                device: str = "", peak_tflops: Any = None, hbm_gbs: Any = None, link_gbs: Any = None,
                nic_gbs: Any = None, gpus_per_node: int = 8, compute_efficiency: Any = None, top: int = 5,
                master_weights: str = "bf16", grad_dtype: str = "bf16", cuda_context: Any = 0,
                nccl_buffers: Any = 0, fragmentation: Any = 0, layout: str = "", overlap: str = "",
                calibration: str = "", reserved: bool = False, alloc_conf: str = "", optimizer_impl: Any = None,
                first_step: bool = False, loss: Any = None, optimizer: str = "adamw",
                search: str = "", liger: bool = False, lora: bool = False, lora_rank: Any = None,
                lora_alpha: Any = None, lora_dropout: Any = None, lora_targets: Any = None,
                lora_dtype: Any = None, use_dora: bool = False, quantize: Any = None, double_quant: bool = False,
                quant_storage: Any = None, compute_dtype: Any = None, bnb_version: Any = None,
                prepare_kbit: bool = False, autocast: Any = None, load_dtype: Any = None,
                modules_to_save: Any = None, kernels: Any = None, fsdp_wrap: Any = None) -> Dict[str, Any]:
    """The parallel layouts of *config* that fit on *gpus* devices of *gpu_memory*, as ``census plan
    --format json`` reports them: ``{"layouts": [{..., "peak_bytes", "step_args"}, ...], "counts", ...}``.

    *gpu_memory* and the overheads are bytes (an int) or a size such as ``"80GiB"``; *device* names a
    preset (``h100``, the default, ``h200``, ``a100``, ``b200``, ``910b``, ``910c``), or *peak_tflops*,
    *hbm_gbs*, *link_gbs* and *nic_gbs* are all given (beside a preset they replace its figures);
    *calibration* is the path of a calibration file. The step time is an estimate; each layout's peak is
    the simulated step's (``census_step`` with its ``step_args``). *layout* prices one layout
    (``"tp=2,ep=32,pp=8,vpp=4,mbs=1,recompute=selective"``), fitting or not; *overlap* names the overlap
    switches on (``"fsdp_prefetch,tp_async"``, or ``"none"``). ValueError for a value it refuses.

    *reserved* ranks on reserved memory (``census plan --reserved``): each stage's step with PyTorch's CUDA
    caching allocator simulated over it under *alloc_conf* (``PYTORCH_CUDA_ALLOC_CONF`` as you set it); a
    layout's ``peak_bytes`` is then its reserved peak and ``"memory"`` says ``"reserved"``.

    Layouts fit and rank on the steady state (every step from the second on, the optimizer's states alive
    from the start) with *optimizer* (as ``census_step`` takes it, but ``muon``; AdamW by default) in the
    form *optimizer_impl* names (the optimizer's default when None, ``fused``, ``for-loop``);
    *first_step* fits them on the first step instead. *search* (``"loss"``, ``"optimizer"`` or
    ``"loss,optimizer"``) searches those beside the layouts, as ``census plan --search`` does; each layout
    then names its own ``"optimizer"`` and ``"loss"``. *loss* is
    the trainer's loss, as ``census_step`` takes it (``hf``, ``trl-chunked-nll``, ``liger-flce``,
    ``torchtune-chunked``, ``torchtune-linear``; its default ``hf``, or ``liger-flce`` with *liger*). *liger* plans
    the run with Liger's kernels, as ``census plan --liger`` does (no TP or CP beside them).

    Fine-tuning is planned as ``census_step`` prices it, with the same arguments (*lora* and the ``lora_*``
    ones, *use_dora*, *modules_to_save*, *quantize* and the 4-bit base's, *autocast*, *load_dtype*): on one device (*gpus* 1),
    searching the micro-batch size and no or full checkpointing, every layout simulated; each layout's
    ``step_args`` carry them (``census plan --lora-rank 16 ...``). *kernels* (``"cuda"``) and *fsdp_wrap*
    (``"torchtitan"``) are ``census_step``'s, for every layout (its FSDP2 layouts' units, for the latter).
    """
    if not isinstance(reserved, bool):
        raise ValueError(f"reserved: must be True or False, not {_shown(reserved)}")
    if not isinstance(alloc_conf, str):
        raise ValueError(f"alloc_conf: must be PYTORCH_CUDA_ALLOC_CONF's text, not {_shown(alloc_conf)}")
    mapping = _mapping(config)

    def size(name: str, value: Any) -> Any:
        """A size as the command line's byte rule reads it: a str as it is (an empty one refused), an int
        as its digits; None stays None (not given)."""
        if value is None or isinstance(value, str):
            return value
        return str(_integer(name, value))

    def overhead(name: str, value: Any) -> str:
        return "0" if value is None else size(name, value)

    text = _census.plan(load_config(mapping), _integer("gpus", gpus), size("gpu_memory", gpu_memory),
                        _integer("seq_length", seq_length), _integer("global_batch", global_batch),
                        _text("device", device), _real_or_none("peak_tflops", peak_tflops),
                        _real_or_none("hbm_gbs", hbm_gbs), _real_or_none("link_gbs", link_gbs),
                        _real_or_none("nic_gbs", nic_gbs), _integer("gpus_per_node", gpus_per_node),
                        _real_or_none("compute_efficiency", compute_efficiency),
                        _integer("top", top), _text("master_weights", master_weights), _text("grad_dtype", grad_dtype),
                        overhead("cuda_context", cuda_context), overhead("nccl_buffers", nccl_buffers),
                        overhead("fragmentation", fragmentation), _text("layout", layout), _text("overlap", overlap),
                        _text("calibration", calibration), reserved, alloc_conf, _optimizer_impl(optimizer_impl),
                        _switch("first_step", first_step), "" if loss is None else _text("loss", loss),
                        _text("optimizer", optimizer), _text("search", search), _switch("liger", liger),
                        *_fine_tuning(lora, lora_rank, lora_alpha, lora_dropout, lora_targets, lora_dtype, use_dora,
                                      quantize, double_quant, quant_storage, compute_dtype, bnb_version, prepare_kbit),
                        _name_or_none("autocast", autocast, "bf16", "no autocast"),
                        _name_or_none("load_dtype", load_dtype, "fp32 or bf16", "the default"),
                        _module_names("modules_to_save", modules_to_save),
                        _name_or_none("kernels", kernels, "npu or cuda", "npu"),
                        _name_or_none("fsdp_wrap", fsdp_wrap, "layers or torchtitan", "layers"))
    return json.loads(text)
