"""census_step(allocator=True) and census_plan(reserved=True): PyTorch's caching allocator simulated over
the step, the same fields as ``census step --allocator --format json``, and its refusals."""
import json
import os
import subprocess

import pytest

import census

HERE = os.path.dirname(os.path.abspath(__file__))
STEP_CASES = os.path.join(HERE, "..", "data", "step")
FIELDS = ("reserved_peak", "allocated_peak", "largest_inactive_split", "num_alloc_retries", "out_of_memory")


def _case(name):
    with open(os.path.join(STEP_CASES, name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_step_allocator_fields():
    # The oracle's accum_m4_adamw peak less AdamW's 39 host step counts (4 B each): the bytes the
    # device's allocator is asked for at its peak (tests/step/step_alloc_test.cpp derives it).
    oracle = _case("llama_toy_L4_s128_accum_m4_adamw")
    step = census.census_step(oracle["config"], seq_length=128, micro_batches=4, allocator=True, first_step=True,
                              optimizer_impl="for-loop")
    allocator = step["allocator"]
    for field in FIELDS:
        assert field in allocator
    assert allocator["requested_peak"] == oracle["peak"]["bytes"] - 39 * 4
    assert allocator["reserved_peak"] >= allocator["allocated_peak"] >= allocator["requested_peak"]
    assert allocator["out_of_memory"] is None
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    plain = census.census_step(oracle["config"], seq_length=128, micro_batches=4)
    assert "allocator" not in plain


def test_step_allocator_is_the_command_lines(tmp_path):
    binary = os.environ.get("CENSUS_BINARY")
    if not binary:
        pytest.skip("CENSUS_BINARY is not set (ctest sets it)")
    oracle = _case("llama_toy_L4_s128_pp2_m4_r0")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(oracle["config"]), encoding="utf-8")
    args = ["--seq-length", "128", "--micro-batches", "4", "--pp", "2", "--stage", "0", "--optimizer", "none",
            "--allocator", "--alloc-conf", "expandable_segments:True", "--gpu-memory", "64MiB"]
    cli = json.loads(subprocess.run([binary, "step", str(path), *args, "--format", "json"], check=True,
                                    capture_output=True, text=True).stdout)
    step = census.census_step(oracle["config"], seq_length=128, micro_batches=4, pp=2, stage=0, optimizer="none",
                              allocator=True, alloc_conf="expandable_segments:True", gpu_memory="64MiB")
    assert step["allocator"] == cli["allocator"]
    assert step["allocator"]["out_of_memory"] is False
    assert census.census_step(oracle["config"], seq_length=128, micro_batches=4, pp=2, stage=0, optimizer="none",
                              allocator=True, alloc_conf="expandable_segments:True",
                              gpu_memory=64 << 20)["allocator"] == cli["allocator"]


@pytest.mark.parametrize("kwargs", [dict(allocator=True, alloc_conf="max_split_size_mb:16"),
                                    dict(allocator=True, alloc_conf="max_split_size_mb:-1"),
                                    dict(allocator=True, alloc_conf="unknown_key:1"),
                                    dict(allocator=True, alloc_conf=7),
                                    dict(allocator="yes"),
                                    dict(alloc_conf="expandable_segments:True"),
                                    dict(allocator=True, gpu_memory="a lot"),
                                    dict(allocator=True, gpu_memory=1.5),
                                    dict(allocator=True, fragmentation=100)])
def test_bad_allocator_values_raise_value_error(kwargs):
    config = _case("llama_toy_L4_s128_single")["config"]
    with pytest.raises(ValueError):
        census.census_step(config, seq_length=128, **kwargs)


def test_plan_ranks_on_reserved():
    config = _case("llama_toy_L4_s128_single")["config"]
    allocated = census.census_plan(config, gpus=2, gpu_memory="1GiB", seq_length=128, device="h100", top=2)
    reserved = census.census_plan(config, gpus=2, gpu_memory="1GiB", seq_length=128, device="h100", top=2,
                                  reserved=True, alloc_conf="expandable_segments:True")
    assert allocated["memory"] == "allocated"
    assert reserved["memory"] == "reserved"
    assert reserved["alloc_conf"] == "expandable_segments:True"
    assert reserved["layouts"]
    for layout in reserved["layouts"]:
        # the layout's `census step` arguments, as keyword arguments of census_step
        args, kwargs = list(layout["step_args"]), {}
        while args:
            flag = args.pop(0)[2:].replace("-", "_")
            if flag == "allocator":
                kwargs[flag] = True
            else:
                value = args.pop(0)
                kwargs[flag] = int(value) if value.isdigit() else value
        assert kwargs["allocator"] and kwargs["alloc_conf"] == "expandable_segments:True"
        step = census.census_step(config, **kwargs)
        assert layout["peak_bytes"] == step["allocator"]["reserved_peak"]
    with pytest.raises(ValueError):
        census.census_plan(config, gpus=2, gpu_memory="1GiB", seq_length=128, device="h100", alloc_conf="x:1")
    with pytest.raises(ValueError):
        census.census_plan(config, gpus=2, gpu_memory="1GiB", seq_length=128, device="h100", reserved=True,
                           alloc_conf="max_split_size_mb:3")
