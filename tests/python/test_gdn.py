"""The census Python module on gated delta nets: the backend taken as the reference takes it."""
import json
import pathlib

import pytest

import census

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "oracle"


def oracle(name):
    return json.loads((DATA / f"{name}.json").read_text())


@pytest.mark.parametrize("backend", ["eager", "triton"])
def test_layer_and_activations_equal_the_oracle_in_each_backend(backend):
    case = oracle(f"qwen3_next_dense_h256_s64_linear_attention0_gdn-{backend}")
    ops = {}
    saved, working = census.census_layer(case["config"], 0, 64, ops=ops, gdn_backend=backend)
    assert (saved, working) == (case["census_layer"]["saved_bytes"], case["census_layer"]["peak_backward_bytes"])
    assert ops == case["census_layer"]["saved_ops"]
    layers = [{"kind": "linear_attention", "count": 1}, {"kind": "full_attention", "count": 1}]
    record = census.census_activations(case["config"], layers, 64, gdn_backend=backend)["linear_attention"]
    assert record.saved_tp == case["census_activations"]["saved_tp"]
    assert record.selective_tp == case["census_activations"]["selective_tp"]


def test_tp_config_divides_the_linear_heads_too():
    config = census.tp_config(oracle("qwen3_next_dense_h256_s64_full_attention1")["config"], 2)
    assert (config["linear_num_key_heads"], config["linear_num_value_heads"]) == (2, 4)


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="GDN backend"):
        census.census_layer(oracle("qwen3_next_dense_h256_s64_full_attention1")["config"], 0, 64, gdn_backend="fla")


def test_kernel_names_the_same_contract_as_the_oracle_does():
    case = oracle("qwen3_next_h256_s64_linear_attention0_gdn-kernel")
    config = case["config"]["fields"]
    saved, working = census.census_layer(config, 0, 64, gdn_backend="kernel")
    assert (saved, working) == (case["census_layer"]["saved_bytes"], case["census_layer"]["peak_backward_bytes"])
    assert (saved, working) == census.census_layer(config, 0, 64, gdn_backend="triton")


def test_a_kernel_backend_on_a_model_without_gated_delta_nets_is_refused():
    with pytest.raises(ValueError, match="gdn_backend.*linear_attention"):
        census.census_layer(census.shipped_config("llama-3.1-8b"), 0, 64, gdn_backend="triton")
