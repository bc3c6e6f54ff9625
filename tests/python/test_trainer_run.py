"""census.trainer_run: the run a trainer's file states, priced by census_step as census step --from prices it."""
import json
import os
import subprocess

import pytest

import census

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHTITAN = os.path.join(HERE, "..", "data", "trainers", "torchtitan")
LLAMA3_8B = os.path.join(TORCHTITAN, "v0.2.0-llama3_8b.toml")


def test_torchtitans_llama3_8b_is_the_commands():
    run = census.trainer_run("torchtitan", LLAMA3_8B, world=8)
    assert run["format"] == "torchtitan's TOML job config, v0.2"
    assert run["flags"][:3] == ["llama-3.1-8b", "--seq-length", "8192"]
    arguments = run["arguments"]
    assert arguments["config"] == census.shipped_config("llama-3.1-8b")
    assert (arguments["fsdp"], arguments["dp"], arguments["master_weights"]) == (True, 8, "fp32")
    assert {"field": "training.max_norm",
            "why": "not priced (the gradient clip's fp32 norm of each gradient, a few hundred bytes a tensor)"} \
        in run["ignored"]
    step = census.census_step(**arguments)
    command = os.environ.get("CENSUS_BINARY")
    if command is None:
        pytest.skip("CENSUS_BINARY names no census command")
    answer = json.loads(subprocess.run([command, "step", "--from", "torchtitan", LLAMA3_8B, "--world", "8",
                                        "--format", "json"], check=True, capture_output=True, text=True).stdout)
    assert answer.pop("from")["flags"] == run["flags"]
    assert step == answer


def test_a_config_for_a_model_census_does_not_ship(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text('[model]\nname = "llama3"\nflavor = "405B"\n[training]\nseq_len = 1024\n')
    with pytest.raises(ValueError, match="model.flavor"):
        census.trainer_run("torchtitan", job, world=8)
    config = census.shipped_config("llama-3.1-70b")
    run = census.trainer_run("torchtitan", job, world=8, config=config)
    assert run["arguments"]["config"] is config
    assert run["arguments"]["seq_length"] == 1024


@pytest.mark.parametrize("trainer, path, world, named", [
    ("axolotl", LLAMA3_8B, 8, "trainer: 'axolotl'"),
    ("torchtitan", LLAMA3_8B, None, "data_parallel_shard_degree"),
    ("torchtitan", LLAMA3_8B, 0.5, "world"),
    ("torchtitan", LLAMA3_8B, 1 << 21, "world"),
    ("torchtitan", 3, 8, "path"),
    (None, LLAMA3_8B, 8, "trainer"),
])
def test_refusals_name_the_argument(trainer, path, world, named):
    with pytest.raises(ValueError, match=named):
        census.trainer_run(trainer, path, world=world)


def test_torchtunes_recipe_takes_the_sequence_length_it_leaves_open():
    recipe = os.path.join(HERE, "..", "data", "trainers", "torchtune", "v0.6.1-llama3_1-8B_full_single_device.yaml")
    with pytest.raises(ValueError, match="max_seq_len"):
        census.trainer_run("torchtune", recipe)
    run = census.trainer_run("torchtune", recipe, seq_length=2048)
    arguments = run["arguments"]
    assert (arguments["optimizer"], arguments["loss"], arguments["optimizer_in_backward"]) == \
        ("paged-adamw8bit", "torchtune-chunked", True)
    step = census.census_step(**arguments)
    flags = census.census_step(census.shipped_config("llama-3.1-8b"), seq_length=2048, micro_batch_size=2,
                               recompute="full", optimizer="paged-adamw8bit", optimizer_in_backward=True,
                               loss="torchtune-chunked", kernels="cuda")
    assert step == flags
    with pytest.raises(ValueError, match="seq_length"):
        census.trainer_run("torchtune", recipe, seq_length=0.5)


def test_fsdp_wrap_is_the_commands():
    config = census.shipped_config("llama-3.1-8b")
    wrapped = census.census_step(config, seq_length=1024, fsdp=True, dp=8, fsdp_wrap="torchtitan")
    assert wrapped["parallel"]["fsdp"]["units"].startswith("fully_shard of the embedding")
    assert wrapped["peak"]["bytes"] < census.census_step(config, seq_length=1024, fsdp=True, dp=8)["peak"]["bytes"]
    with pytest.raises(ValueError, match="fsdp_wrap"):
        census.census_step(config, seq_length=1024, fsdp=True, dp=8, fsdp_wrap=3)
    with pytest.raises(ValueError, match="fsdp_wrap"):
        census.census_step(config, seq_length=1024, fsdp_wrap="torchtitan")


@pytest.mark.parametrize("arguments", [
    dict(optimizer="adam"),
    dict(optimizer="adafactor", optimizer_impl="fused"),
    dict(master_weights="fp16"),
    dict(grad_dtype="fp8"),
    dict(loss="foo"),
])
def test_step_and_plan_refuse_a_bad_run_alike(arguments):
    config = census.shipped_config("llama-3.1-8b")
    with pytest.raises(ValueError) as stepped:
        census.census_step(config, seq_length=128, **arguments)
    with pytest.raises(ValueError) as planned:
        census.census_plan(config, gpus=8, gpu_memory="80GiB", seq_length=128, **arguments)
    assert str(stepped.value) == str(planned.value)
    assert str(stepped.value).startswith(next(iter(arguments)))


def test_a_trl_file_with_modules_to_save_is_census_steps(tmp_path):
    """TRL's lora_modules_to_save reaches census_step's modules_to_save: the arguments price what census step
    --from prices."""
    path = tmp_path / "sft.yaml"
    path.write_text("model_name_or_path: Qwen/Qwen3-8B\nuse_peft: true\nlora_modules_to_save: [embed_tokens, lm_head]\n"
                    "max_length: 256\nper_device_train_batch_size: 1\n")
    run = census.trainer_run("trl", str(path))
    assert run["arguments"]["modules_to_save"] == "embed_tokens,lm_head"
    step = census.census_step(**run["arguments"])
    assert step["lora"]["modules_to_save"] == ["embed_tokens", "lm_head"]
    command = os.environ.get("CENSUS_BINARY")
    if command is None:
        pytest.skip("CENSUS_BINARY names no census command")
    answer = json.loads(subprocess.run([command, "step", "--from", "trl", str(path), "--format", "json"], check=True,
                                       capture_output=True, text=True).stdout)
    answer.pop("from")
    assert step == answer
