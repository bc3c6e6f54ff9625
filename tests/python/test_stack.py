"""census.census_stack against the oracle's stack cases, and the refusals of layers that cannot run alone."""
import json
import pathlib

import pytest

import census

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "oracle"


def oracle(name):
    return json.loads((DATA / f"{name}.json").read_text())


@pytest.mark.parametrize("name", ["llama_stack_h256_s64", "glm_moe_dsa_stack_h256_s64"])
def test_census_stack_matches_the_oracle(name):
    case = oracle(name)
    stack = census.census_stack(case["config"], case["seq_length"])
    expected = list(zip(case["census_stack_tp1"]["kept"], case["census_stack_tp1"]["held"]))
    assert stack == expected
    half = census.census_stack(census.tp_config(case["config"], 2), case["seq_length"])
    assert half == list(zip(case["census_stack_tp2"]["kept"], case["census_stack_tp2"]["held"]))


def test_a_shared_indexer_layer_alone_is_unavailable():
    config = oracle("glm_moe_dsa_stack_h256_s64")["config"]
    with pytest.raises(census.CensusUnavailable, match="census_stack"):
        census.census_layer(config, 2, 64)
    census.census_layer(config, 1, 64)


def test_activations_prices_the_shared_kind_through_the_stack():
    config = oracle("glm_moe_dsa_stack_h256_s64")["config"]
    records = census.census_activations(config, [{"kind": "full_dense", "count": 1}, {"kind": "full_moe", "count": 1},
                                                 {"kind": "shared_moe", "count": 1}], 64)
    assert records["shared_moe"].saved == 8966.5
    assert records["shared_moe"].working == 17679.0625
    assert records["shared_moe"].selective is None
