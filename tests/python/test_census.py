"""The census Python module: equal to the command line, drop-in signatures, records and refusals."""
import json
import os
import pathlib
import subprocess

import pytest

import census

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "oracle"
BINARY = os.environ.get("CENSUS_BINARY", "census")


def cli(*args):
    """The command line's JSON answer."""
    return json.loads(subprocess.run([BINARY, *args, "--format", "json"], check=True,
                                     capture_output=True, text=True).stdout)


@pytest.mark.parametrize("name", census.shipped_models())
def test_equals_the_command_line_for_every_shipped_model(name):
    config = census.shipped_config(name)
    try:
        saved, working = census.census_layer(config, 0, 4096)
    except census.CensusUnavailable:
        # A layer that runs only inside its model's forward (DeepSeek-V4's): refused by both front doors,
        # and priced through the stack (activations, below).
        refused = subprocess.run([BINARY, "layer", name], capture_output=True, text=True)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1
        lone = False
    else:
        lone = True
        assert cli("layer", name) == {"saved": saved, "working": working}
        assert cli("flops", name) == census.census_flops(config, 0, 4096)
        traffic = census.census_traffic(config, 0, 4096)
        assert cli("traffic", name) == {"moved": traffic.moved, "parameter": traffic.parameter,
                                         "launches": traffic.launches}
    parameters = cli("parameters", name)
    assert parameters["parts"] == census.census_parameters(config, 0)
    assert parameters["final_norm"] == census.census_final_norm(config)
    stack = list(census.layer_stack(config))
    assert cli("layers", name) == stack
    # A kind priced through the stack states no selective part and no per-op split: both leave them out.
    records = {kind: record.to_dict() for kind, record in census.census_activations(config, stack).items()}
    assert cli("activations", name) == records
    output = cli("output", name)
    assert census.census_output(config, 4096) == (output["vocab"]["saved"], output["vocab"]["working"])
    assert census.census_output_activations(config).to_dict() == output["record"]
    if lone:
        by_op = cli("saved-ops", name)
        assert census.census_saved_ops(config, 0, 4096) == {op: value for op, value in by_op.items() if value}


@pytest.mark.parametrize("case", ["llama_h256_s128", "qwen2_h256_s64", "qwen3_h256_s256", "mistral_h256_s128"])
def test_equals_the_oracle(case):
    oracle = json.loads((DATA / f"{case}.json").read_text())
    config, seq = oracle["config"], oracle["seq_length"]
    ops = {}
    assert census.census_layer(config, 0, seq, ops=ops) == (oracle["census_layer"]["saved_bytes"],
                                                            oracle["census_layer"]["peak_backward_bytes"])
    assert ops == oracle["census_layer"]["saved_ops"]
    two = census.tp_config(config, 2)
    assert census.census_layer(two, 0, seq)[0] == oracle["census_layer_tp2"]["saved_bytes"]
    record = census.census_activations(config, [{"kind": "decoder", "count": 2}], seq)["decoder"]
    assert record.to_dict() == oracle["census_activations"]
    assert census.census_output(config, seq) == (oracle["output_vocab"]["saved_bytes"],
                                                 oracle["output_vocab"]["peak_backward_bytes"])
    assert census.census_output_activations(config, seq).to_dict() == oracle["census_output_activations"]
    assert census.census_layer(config, 0, seq, selective=True) == (oracle["selective_tp1"]["kept_bytes"],
                                                                   oracle["selective_tp1"]["peak_backward_bytes"])
    assert census.census_recomputed(config, 0, seq) == (oracle["recomputed"]["attention_mm_share"],
                                                        oracle["recomputed"]["ffn_mm_share"])


def test_config_may_be_a_path_or_an_object_with_to_dict(tmp_path):
    config = census.shipped_config("qwen3-8b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))

    class PretrainedConfigLike:
        def to_dict(self):
            return dict(config)

    expected = census.census_layer(config, 0, 512)
    assert census.census_layer(str(path), 0, 512) == expected
    assert census.census_layer(path, 0, 512) == expected
    assert census.census_layer(PretrainedConfigLike(), 0, 512) == expected


def test_tp_config_divides_each_underlying_attribute_once():
    class AliasedConfig:
        attribute_map = {"intermediate_size": "moe_intermediate_size"}

        def __init__(self):
            self.hidden_size, self.num_attention_heads, self.num_key_value_heads = 1024, 16, 4
            self.moe_intermediate_size = 512

        @property
        def intermediate_size(self):
            return self.moe_intermediate_size

        @intermediate_size.setter
        def intermediate_size(self, value):
            self.moe_intermediate_size = value

    rank = census.tp_config(AliasedConfig(), 2)
    assert rank.moe_intermediate_size == 256  # halved once, not twice
    assert (rank.num_attention_heads, rank.num_key_value_heads, rank.head_dim) == (8, 2, 64)
    qwen3 = census.tp_config({"model_type": "qwen3", "num_key_value_heads": 8}, 4)
    assert (qwen3["num_attention_heads"], qwen3["num_key_value_heads"], qwen3["head_dim"]) == (8, 2, 128)


def test_records_round_trip():
    data = {"saved": 2036.25, "saved_tp": 3812.5, "working": 2162.375, "working_tp": 3812.5, "seq_length": 64,
            "selective": 512.0, "selective_tp": 1024.5, "selective_attention_mm": 0.25, "selective_ffn_mm": 0.625,
            "ops": {"attMM": 1000.25, "other": 1036.0}, "ops_tp": {"attBMM": 3812.5}}
    record = census.KindActivations.from_dict(data)
    assert record.to_dict() == data
    assert census.activations_from_dict({"decoder": data})["decoder"] == record
    plain = census.KindActivations(1.0, 2.0, 3.0, 4.0, 8)
    assert census.KindActivations.from_dict(plain.to_dict()) == plain
    with pytest.raises(Exception):
        plain.saved = 3.0  # frozen


@pytest.mark.parametrize("change, message", [
    ({"colour": 1}, "unknown keys"),
    ({"saved": -1.0}, "cannot be negative"),
    ({"selective": 1.0}, "without the other"),
    ({"selective_attention_mm": 1.5, "selective_ffn_mm": 0.5}, "cannot exceed 1"),
    ({"ops": {"attMM": 1.0}}, "without the other"),
    ({"ops": {"fusion": 1.0}, "ops_tp": {}}, "unknown ops"),
    ({"seq_length": 0}, "positive integer"),
])
def test_records_refuse_bad_fields(change, message):
    data = {"saved": 1.0, "saved_tp": 2.0, "working": 3.0, "working_tp": 4.0, "seq_length": 16, **change}
    with pytest.raises(ValueError, match=message):
        census.KindActivations.from_dict(data)


def test_missing_field_is_refused():
    with pytest.raises(ValueError, match="lacks"):
        census.KindActivations.from_dict({"saved": 1.0})


def test_refusals_are_the_command_lines():
    with pytest.raises(ValueError, match="known: .*llama"):
        census.census_layer({"model_type": "gpt2"}, 0, 128)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        census.census_layer({"model_type": "llama", "num_attention_heads": 8, "num_key_value_heads": 3}, 0, 128)
    with pytest.raises(ValueError, match="layer_index"):  # the Python argument, not the option
        census.census_layer(census.shipped_config("llama-3.1-8b"), 32, 128)
    with pytest.raises(ValueError, match="cannot be read"):
        census.census_layer("/no/such/config.json", 0, 128)
    with pytest.raises(ValueError, match="unsupported GDN backend"):
        census.census_layer(census.shipped_config("llama-3.1-8b"), 0, 128, gdn_backend="cuda")


RECIPE = pathlib.Path(__file__).resolve().parents[1] / "data" / "recipes" / "qwen3_moe_train.yaml"


def test_a_train_yaml_replaces_modules_with_fused_ones():
    specs = census.replacement_specs(RECIPE)
    assert [spec.factory.rsplit(".", 1)[1] for spec in specs] == [
        "replace_qwen3_moe_rms_norm", "replace_qwen3_moe_flash_attention", "replace_qwen3_moe_grouped_experts"]
    assert specs[0].match == ("*.input_layernorm", "*.post_attention_layernorm", "model.norm")
    config = census.shipped_config("qwen3-30b-a3b")
    fused = census.census_layer(config, 0, 1024, replacements=specs)
    plain = census.census_layer(config, 0, 1024)
    assert fused[0] < plain[0] and fused[1] < plain[1]
    assert census.census_parameters(config, 0, replacements=specs) == census.census_parameters(config, 0)
    assert census.census_layer(config, 0, 1024, replacements=specs) == cli_layer(config, RECIPE)


def cli_layer(config, recipe):
    path = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / "census_qwen3_moe.json"
    path.write_text(json.dumps(config))
    out = subprocess.run([os.environ.get("CENSUS_BINARY", "census"), "layer", str(path), "--seq-length", "1024",
                          "--format", "json", "--train-yaml", str(recipe)], capture_output=True, text=True, check=True)
    answer = json.loads(out.stdout)
    return answer["saved"], answer["working"]


def test_what_is_not_priced_yet_is_unavailable():
    config = census.shipped_config("llama-3.1-8b")
    assert issubclass(census.CensusUnavailable, RuntimeError)
    with pytest.raises(ValueError, match="needs match, factory and module_type"):
        census.census_parameters(config, 0, replacements=[object()])
    unknown = census.ReplacementSpec(("*.self_attn",), "my.own.replace_attention", "x.LlamaAttention")
    with pytest.raises(census.CensusUnavailable, match="not known to the census"):
        census.census_layer(config, 0, 128, replacements=[unknown])
    with pytest.raises(census.CensusUnavailable, match="no module replacements"):
        census.census_layer(census.shipped_config("deepseek-v3"), 0, 128, replacements=census.replacement_specs(RECIPE))


def test_a_config_handle_gives_the_same_answers():
    config = census.shipped_config("qwen3-32b")
    handle = census.load_config(config)
    assert handle.model_type == "qwen3"
    assert census.census_layer(handle, 1, 2048) == census.census_layer(config, 1, 2048)
    assert census.census_layer(census.tp_config(handle, 4), 0, 2048) == \
        census.census_layer(census.tp_config(config, 4), 0, 2048)
    stack = [{"kind": "decoder", "count": 64}]
    assert census.census_activations(handle, stack, 1024) == census.census_activations(config, stack, 1024)


def test_moe_layer_stack_and_experts_implementation():
    stack = census.layer_stack(census.shipped_config("deepseek-v3"))
    assert stack == ({"kind": "dense", "count": 3}, {"kind": "moe", "count": 58}, {"kind": "moe", "count": 1, "mtp": True})
    config = census.shipped_config("qwen3-30b-a3b")
    grouped = census.census_layer(config, 0, 1024)
    eager = census.census_layer({**config, "_experts_implementation": "eager"}, 0, 1024)
    # The eager loop also keeps each expert's index_add_ source; its backward holds whole-weight buffers.
    assert eager[0] > grouped[0] and eager[1] > grouped[1]
    with pytest.raises(ValueError, match="_experts_implementation"):
        census.census_layer({**config, "_experts_implementation": "sonicmoe"}, 0, 1024)
    assert census.tp_config(config, 2)["moe_intermediate_size"] == config["moe_intermediate_size"] // 2


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-30b-a3b"])
def test_micro_batches_of_several_sequences_equal_the_command_line(name):
    config = census.shipped_config(name)
    saved, working = census.census_layer(config, 0, 1024, micro_batch_size=2)
    assert cli("layer", name, "--seq-length", "1024", "--micro-batch-size", "2") == {"saved": saved, "working": working}
    # Two sequences of 1024 tokens are not one of 2048: attention works per sequence.
    assert (saved, working) != census.census_layer(config, 0, 2048)
    stack = list(census.layer_stack(config))
    records = {kind: record.to_dict()
               for kind, record in census.census_activations(config, stack, 1024, micro_batch_size=2).items()}
    assert cli("activations", name, "--seq-length", "1024", "--micro-batch-size", "2") == records
    rows = cli("stack", name, "--seq-length", "1024", "--micro-batch-size", "2")["layers"]
    assert census.census_stack(config, 1024, micro_batch_size=2) == [(row["kept"], row["held"]) for row in rows]


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2", 1 << 64])
def test_a_bad_micro_batch_size_raises_value_error(bad):
    config = census.shipped_config("llama-3.1-8b")
    for call in (lambda: census.census_layer(config, 0, 1024, micro_batch_size=bad),
                 lambda: census.census_stack(config, 1024, micro_batch_size=bad),
                 lambda: census.census_activations(config, census.layer_stack(config), 1024, micro_batch_size=bad)):
        with pytest.raises(ValueError, match="micro_batch_size"):
            call()
