"""Hostile input from Python: every misuse raises ValueError (naming the argument or the config field)
or census.CensusUnavailable; none kills the interpreter, hangs, or is silently accepted."""
import json
import math
import os
import pathlib
import subprocess

import pytest

import census

TOY = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
       "head_dim": 32, "intermediate_size": 512, "num_hidden_layers": 2, "vocab_size": 4096}
# The field a family's config class reads its norms' epsilon from, where it is not rms_norm_eps.
NORM_EPSILON = {"nemotron_h": "layer_norm_epsilon"}
BINARY = os.environ.get("CENSUS_BINARY", "census")
MODEL_TYPES = sorted({census.shipped_config(name).get("text_config", census.shipped_config(name))["model_type"]
                      for name in census.shipped_models()})


def refused(call, *names):
    """*call* raises ValueError whose one-line message names each of *names*."""
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and "\r" not in message and "\0" not in message, message
    for name in names:
        assert name in message, message


# 12. The interpreter survives values nested deep or holding themselves, and a tp of 0.
def test_a_deep_or_self_containing_config_is_refused():
    deep = 1
    for _ in range(100000):
        deep = [deep]
    refused(lambda: census.load_config({**TOY, "hidden_size": deep}), "hidden_size")
    looped = dict(TOY)
    looped["extra"] = looped
    refused(lambda: census.load_config(looped), "extra.extra")
    nested = {}
    nested["x"] = nested
    refused(lambda: census.census_layer({**TOY, "rope_parameters": nested}, 0, 64), "rope_parameters")


@pytest.mark.parametrize("tp", [0, -2, 2.5, "2", True, None, 2 ** 64])
def test_a_tp_that_is_not_a_positive_integer(tp):
    refused(lambda: census.load_config(TOY).tp(tp), "tp")
    refused(lambda: census.tp_config(TOY, tp), "tp")
    refused(lambda: census.tp_config(census.load_config(TOY), tp), "tp")


@pytest.mark.parametrize("count", [-1, 0, 1.5, True, "2", None, 2 ** 63, 2 ** 70])
def test_group_counts_that_are_not_positive_integers(count):
    refused(lambda: census.census_activations(TOY, [{"kind": "decoder", "count": count}], 64), "layers[0].count")


def test_groups_that_overflow_or_pass_the_model():
    refused(lambda: census.census_activations(TOY, [{"kind": "decoder", "count": 2 ** 62}] * 3, 64), "layers")
    refused(lambda: census.census_activations(TOY, [{"kind": "decoder", "count": 3}], 64), "layers")
    refused(lambda: census.census_activations(TOY, [{"count": 2}], 64), "layers[0].kind")
    refused(lambda: census.census_activations(TOY, [{"kind": "decoder", "count": 2, "mtp": "yes"}], 64), "mtp")
    refused(lambda: census.census_activations(TOY, [{"kind": "decoder", "count": 2, "size": 1}], 64), "unknown keys")
    refused(lambda: census.census_activations(TOY, [3], 64), "layers[0]")
    refused(lambda: census.census_activations(TOY, 5, 64), "layers")
    refused(lambda: census.census_activations(TOY, {"kind": "decoder"}, 64), "layers")


# 13. No hang: a layer count past the limit is refused at once.
@pytest.mark.parametrize("model_type", MODEL_TYPES)
@pytest.mark.parametrize("layers", [2 ** 21, 2 ** 32, 2 ** 40])
def test_a_huge_layer_count_is_refused(model_type, layers):
    refused(lambda: census.layer_stack({"model_type": model_type, "num_hidden_layers": layers}), "num_hidden_layers")


# 14. Nothing silently truncated or accepted.
@pytest.mark.parametrize("value", [1.5, 1.0, True, False, None, "1", 2 ** 63, -2 ** 64, float("nan")])
def test_integer_arguments_are_integers(value):
    refused(lambda: census.census_layer(TOY, value, 64), "layer_index")
    refused(lambda: census.census_layer(TOY, 0, value), "seq_length")
    refused(lambda: census.census_flops(TOY, value, 64), "layer_index")
    refused(lambda: census.census_traffic(TOY, 0, value), "seq_length")
    refused(lambda: census.census_parameters(TOY, value), "layer_index")
    refused(lambda: census.census_output(TOY, value), "seq_length")
    refused(lambda: census.census_layer(TOY, 0, value, selective=True), "seq_length")
    refused(lambda: census.census_recomputed(TOY, value, 64), "layer_index")


def test_out_of_range_arguments_name_the_python_argument():
    refused(lambda: census.census_layer(TOY, 2, 64), "layer_index")
    refused(lambda: census.census_layer(TOY, 0, 0), "seq_length")
    refused(lambda: census.census_layer(TOY, 0, 2 ** 40), "seq_length")


@pytest.mark.parametrize("model_type", MODEL_TYPES)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused_for_every_family(model_type, value):
    epsilon = NORM_EPSILON.get(model_type, "rms_norm_eps")
    refused(lambda: census.load_config({"model_type": model_type, epsilon: value}), epsilon)
    refused(lambda: census.load_config({"model_type": model_type, "hidden_size": value}), "hidden_size")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, "1", True, None])
def test_kind_activations_ops_are_finite_numbers(value):
    record = {"saved": 1.0, "saved_tp": 1.0, "working": 1.0, "working_tp": 1.0, "seq_length": 64,
              "ops": {"ffMM": value}, "ops_tp": {"ffMM": 1.0}}
    refused(lambda: census.KindActivations.from_dict(record), "ops")
    refused(lambda: census.KindActivations.from_dict({**record, "ops": {"ffMM": 1.0}, "ops_tp": 5}), "ops_tp")
    refused(lambda: census.KindActivations.from_dict({**record, "ops": {"ffMM": 1.0}, "saved": float("nan")}), "saved")
    census.KindActivations.from_dict({**record, "ops": {"ffMM": 10 ** 400}})  # a huge int is no OverflowError


# 15. ValueError naming the field, not TypeError, KeyError, OverflowError or RuntimeError.
@pytest.mark.parametrize("model_type", MODEL_TYPES)
@pytest.mark.parametrize("field", ["hidden_size", "unread_field", "rope_parameters"])
def test_an_int_past_64_bits_anywhere_names_its_field(model_type, field):
    refused(lambda: census.load_config({"model_type": model_type, field: 2 ** 63}), field)
    refused(lambda: census.load_config({"model_type": model_type, field: [1, {"x": -2 ** 64}]}), field)


def test_misused_keyword_arguments():
    refused(lambda: census.census_layer(TOY, 0, 64, replacements=5), "replacements")
    refused(lambda: census.census_layer(TOY, 0, 64, replacements=[None]), "replacement")
    refused(lambda: census.census_layer(TOY, 0, 64, ops=5), "ops")
    refused(lambda: census.census_layer(TOY, 0, 64, gdn_backend=None))
    refused(lambda: census.Config(5), "config")

    class Unprintable:
        def __str__(self):
            raise RuntimeError("no")

    refused(lambda: census.load_config({**TOY, "extra": Unprintable()}), "extra")


def test_tp_config_of_an_object_that_is_not_a_config():
    refused(lambda: census.tp_config(5, 2), "config")
    refused(lambda: census.tp_config(object(), 2), "config")


def test_misused_arguments_raise_value_error():
    refused(lambda: census.census_layer(TOY, None, 64), "layer_index")
    refused(lambda: census.replacement_specs(None), "train_yaml")
    refused(lambda: census.replacement_specs(5), "train_yaml")
    refused(lambda: census.load_config(5), "config")
    refused(lambda: census.census_layer(TOY, 0, 64, gdn_backend="eager\n"))
    refused(lambda: census.shipped_config("no\nsuch"))
    refused(lambda: census.load_config({"model_type": "llama", "hidden_act": "sil\u00e9" * 30}), "hidden_act")


def test_files_that_are_not_regular_are_refused_unread(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ["/dev/zero", "/dev/urandom", str(fifo), str(tmp_path)]:
        refused(lambda: census.load_config(path))
        refused(lambda: census.replacement_specs(path))
    deep = tmp_path / "deep.json"
    deep.write_text('{"model_type": "llama", "x": ' + "[" * 100000 + "]" * 100000 + "}")
    refused(lambda: census.load_config(str(deep)))


def test_recipe_with_an_unclosed_quote(tmp_path):
    recipe = tmp_path / "train.yaml"
    recipe.write_text('plan_overrides:\n  - match: "*.mlp\n    module_type: a.B\n    replace_module: x.y\n')
    refused(lambda: census.replacement_specs(str(recipe)), "not valid YAML")


# 16. A config object whose to_dict() gives anything but a mapping names the argument.
@pytest.mark.parametrize("returned", [[("model_type", "llama")], [1, 2], "llama", 5, None])
def test_to_dict_that_is_not_a_mapping(returned):
    class Config:
        def to_dict(self):
            return returned

    refused(lambda: census.load_config(Config()), "config", "to_dict()")
    refused(lambda: census.census_layer(Config(), 0, 64), "config", "to_dict()")


# 17. census_step's and census_plan's arguments: each is the type it names, within the command line's
# bounds; nothing is truncated (int(1.5)), converted (str(None)) or read as not given (NaN, "").
@pytest.mark.parametrize("name", ["seq_length", "micro_batch_size", "micro_batches", "pp", "stage", "virtual_stages",
                                  "tp", "dp", "zero", "cuda_context", "nccl_buffers", "fragmentation", "cp", "ep"])
@pytest.mark.parametrize("value", [1.5, "2", True, 2 ** 64, -(2 ** 63) - 1])
def test_step_integer_arguments(name, value):
    refused(lambda: census.census_step(TOY, **{name: value}), name)


@pytest.mark.parametrize("name", ["schedule", "recompute", "optimizer", "master_weights", "grad_dtype"])
def test_step_text_arguments(name):
    refused(lambda: census.census_step(TOY, **{name: None}), name)
    refused(lambda: census.census_step(TOY, **{name: ""}), name, "is empty")
    refused(lambda: census.census_step(TOY, **{name: "x\ny"}), name, "'x\\ny' is not known")


def test_step_bounds_are_the_command_lines():
    refused(lambda: census.census_step(TOY, seq_length=64, micro_batches=2 ** 31), "micro_batches")
    refused(lambda: census.census_step(TOY, seq_length=64, pp=2 ** 31), "pp")
    refused(lambda: census.census_step(TOY, seq_length=64, stage=-1), "stage -1")
    refused(lambda: census.census_step(TOY, seq_length=64, cuda_context=2 ** 62), "cuda_context")
    refused(lambda: census.census_step(TOY, seq_length=64, dp=2 ** 40), "dp")
    refused(lambda: census.census_step(TOY, seq_length=64, pp=2, schedule="interleaved", virtual_stages=2,
                                       micro_batches=4096), "micro_batches x virtual_stages")


# census_stack reads its arguments as `census stack` does: the same bounds, and the whole model runs, so
# a family whose layers cannot run alone (DeepSeek-V4's) is priced, not refused.
@pytest.mark.parametrize("value", [1.5, "64", True, None, 0, -1, 2 ** 33, 2 ** 64])
def test_stack_seq_length(value):
    refused(lambda: census.census_stack(TOY, value), "seq_length")


def test_stack_runs_a_family_whose_layers_cannot_run_alone(tmp_path):
    config = {"model_type": "deepseek_v4", "num_hidden_layers": 2}
    with pytest.raises(census.CensusUnavailable):
        census.census_layer(config, 0, 64)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    answer = json.loads(subprocess.run([BINARY, "stack", str(path), "--seq-length", "64", "--format", "json"],
                                       check=True, capture_output=True, text=True).stdout)
    assert census.census_stack(config, 64) == [(layer["kept"], layer["held"]) for layer in answer["layers"]]
    refused(lambda: census.census_stack({"model_type": "deepseek_v4", "hc_sinkhorn_iters": 2 ** 31}, 64),
            "hc_sinkhorn_iters")


def test_a_step_past_the_largest_step_bytes():
    wide = {**TOY, "hidden_size": 2 ** 28, "intermediate_size": 2 ** 28, "num_attention_heads": 8,
            "num_key_value_heads": 8, "head_dim": 2 ** 25, "num_hidden_layers": 1}
    refused(lambda: census.census_step(wide, seq_length=1), "config", "more than 2^59 bytes")


@pytest.mark.parametrize("name", ["peak_tflops", "hbm_gbs", "link_gbs", "nic_gbs", "compute_efficiency"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e-300, 1e400, -1.0, "900", True])
def test_plan_figures(name, value):
    refused(lambda: census.census_plan(TOY, gpus=2, seq_length=64, device="h100", **{name: value}), name)


@pytest.mark.parametrize("name", ["gpu_memory", "cuda_context", "nccl_buffers", "fragmentation"])
@pytest.mark.parametrize("value", ["", "1.5", "0.3KiB", "80 XB", 2 ** 62, -1, 1.5])
def test_plan_sizes(name, value):
    refused(lambda: census.census_plan(TOY, gpus=2, seq_length=64, device="h100", **{name: value}), name)


def test_plan_counts_and_names():
    refused(lambda: census.census_plan(TOY, gpus=2 ** 40, seq_length=64, device="h100"), "gpus")
    refused(lambda: census.census_plan(TOY, gpus=2, seq_length=64, device="h100", top=2 ** 63), "top")
    refused(lambda: census.census_plan(TOY, gpus=2, seq_length=64, device=None), "device")
    plan = census.census_plan(TOY, gpus=2, seq_length=64, device="h100", gpu_memory="1.5GiB")
    assert plan["gpu_memory_bytes"] == 3 << 29


def test_report_arguments(tmp_path):
    refused(lambda: census.report(TOY, tmp_path / "r.html", seq_length=64, svg_dir=""), "svg_dir")
    refused(lambda: census.report(TOY, 5, seq_length=64), "path")
    refused(lambda: census.report(TOY, tmp_path / "r.html", layer_index=0.5, seq_length=64), "layer_index")
    refused(lambda: census.report(TOY, tmp_path / "r.html", seq_length=64, selective="yes"), "selective")
    # A FIFO of the test's own stands for a device: were the refusal lost, a rename would replace it,
    # not a device of the machine's.
    fifo = tmp_path / "device"
    os.mkfifo(fifo)
    refused(lambda: census.report(TOY, fifo, seq_length=64), "device")
    assert pathlib.Path(fifo).is_fifo()
