"""census.census_plan: layouts that census_step reproduces from their step_args, and its refusals."""
import json
import os

import pytest

import census

TOY = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
       "head_dim": 32, "intermediate_size": 512, "num_hidden_layers": 4, "vocab_size": 4096,
       "max_position_embeddings": 8192}


def _step_kwargs(step_args):
    """census step's command-line arguments as census_step's keywords."""
    names = {"--seq-length": "seq_length", "--micro-batches": "micro_batches", "--pp": "pp", "--stage": "stage",
             "--schedule": "schedule", "--virtual-stages": "virtual_stages", "--recompute": "recompute",
             "--tp": "tp", "--dp": "dp", "--zero": "zero", "--master-weights": "master_weights",
             "--grad-dtype": "grad_dtype", "--cuda-context": "cuda_context", "--nccl-buffers": "nccl_buffers",
             "--fragmentation": "fragmentation", "--micro-batch-size": "micro_batch_size",
             "--first-stage-layers": "first_stage_layers", "--last-stage-layers": "last_stage_layers",
             "--cp": "cp", "--ep": "ep", "--expert-tp": "expert_tp", "--loss": "loss", "--optimizer": "optimizer",
             "--optimizer-impl": "optimizer_impl", "--lora-rank": "lora_rank", "--lora-targets": "lora_targets",
             "--quantize": "quantize", "--compute-dtype": "compute_dtype", "--autocast": "autocast",
             "--load-dtype": "load_dtype", "--kernels": "kernels", "--fsdp-wrap": "fsdp_wrap",
             "--modules-to-save": "modules_to_save"}
    switches = {"--embedding-as-layer": "embedding_as_layer", "--loss-as-layer": "loss_as_layer", "--fsdp": "fsdp",
                "--sequence-parallel": "sequence_parallel", "--loss-parallel": "loss_parallel", "--lora": "lora",
                "--double-quant": "double_quant"}
    text = {"schedule", "recompute", "master_weights", "grad_dtype", "loss", "optimizer", "optimizer_impl",
            "lora_targets", "quantize", "compute_dtype", "autocast", "load_dtype", "kernels", "fsdp_wrap",
            "modules_to_save"}
    kwargs = {}
    args = list(step_args)
    while args:
        flag = args.pop(0)
        if flag in switches:
            kwargs[switches[flag]] = True
            continue
        name, value = names[flag], args.pop(0)
        kwargs[name] = value if name in text else int(value)
    return kwargs


def test_every_layout_is_census_steps():
    plan = census.census_plan(TOY, gpus=4, gpu_memory="1TiB", seq_length=128, device="h100", top=6,
                              cuda_context=4096)
    assert plan["layouts"]
    for layout in plan["layouts"]:
        step = census.census_step(TOY, **_step_kwargs(layout["step_args"]))
        assert step["total_bytes"] == layout["peak_bytes"]
        assert layout["headroom_bytes"] == 2 ** 40 - layout["peak_bytes"]


def test_a_plan_with_trls_loss_lays_out_census_steps_with_it():
    plan = census.census_plan(TOY, gpus=2, gpu_memory="1TiB", seq_length=600, device="h100", top=4,
                              loss="trl-chunked-nll")
    assert plan["loss"] == "trl-chunked-nll"
    assert plan["layouts"]
    for layout in plan["layouts"]:
        assert layout["tp"] == 1 and layout["cp"] == 1
        step = census.census_step(TOY, **_step_kwargs(layout["step_args"]))
        assert step["loss"] == "trl-chunked-nll"
        assert step["total_bytes"] == layout["peak_bytes"]


def test_a_plan_with_an_8bit_optimizer_lays_out_census_steps_with_it():
    plan = census.census_plan(TOY, gpus=2, gpu_memory="1TiB", seq_length=128, device="h100", top=4,
                              optimizer="adamw8bit")
    assert plan["optimizer"] == {"name": "adamw8bit"}
    assert plan["layouts"]
    for layout in plan["layouts"]:
        assert layout["zero"] == 0 and not layout["fsdp"]
        step = census.census_step(TOY, **_step_kwargs(layout["step_args"]))
        assert step["optimizer"]["name"] == "adamw8bit"
        assert step["total_bytes"] == layout["peak_bytes"]
    with pytest.raises(ValueError, match="optimizer muon"):
        census.census_plan(TOY, gpus=2, gpu_memory="1TiB", device="h100", optimizer="muon")


def test_a_searched_plan_names_each_layouts_loss_and_optimizer():
    plan = census.census_plan(TOY, gpus=2, gpu_memory="60MiB", seq_length=600, global_batch=4, device="h100", top=4,
                              search="loss,optimizer")
    assert plan["search"]["losses"][0] == "hf" and plan["search"]["optimizers"][0] == "adamw"
    assert plan["layouts"]
    for layout in plan["layouts"]:
        step = census.census_step(TOY, **_step_kwargs(layout["step_args"]))
        assert step["loss"] == layout["loss"]
        assert step["optimizer"]["name"] == layout["optimizer"]
        assert step["total_bytes"] == layout["peak_bytes"]
    with pytest.raises(ValueError, match="search schedule"):
        census.census_plan(TOY, gpus=2, gpu_memory="1TiB", device="h100", search="schedule")


MOE = dict(TOY, model_type="qwen3_moe", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=256)


@pytest.mark.parametrize("tuning", [dict(lora_rank=16, lora_targets="all-linear"),
                                    dict(lora=True, quantize="nf4", double_quant=True, compute_dtype="bf16"),
                                    dict(autocast="bf16")])
def test_a_fine_tuning_plan_on_one_device_lays_out_census_steps_with_it(tuning):
    plan = census.census_plan(TOY, gpus=1, gpu_memory="1TiB", seq_length=128, global_batch=4, device="h100",
                              top=100, **tuning)
    assert plan["counts"]["fit"] == 6  # b 1, 2, 4 under no and full checkpointing
    for layout in plan["layouts"]:
        kwargs = _step_kwargs(layout["step_args"])
        assert {name: kwargs[name] for name in tuning} == tuning
        assert census.census_step(TOY, **kwargs)["total_bytes"] == layout["peak_bytes"]


def test_a_plans_kernels_and_fsdp_units_are_every_layouts():
    plan = census.census_plan(TOY, gpus=2, gpu_memory="1TiB", seq_length=128, device="h100", top=100,
                              kernels="cuda", fsdp_wrap="torchtitan")
    fsdp = [layout for layout in plan["layouts"] if layout["fsdp"]]
    assert fsdp
    for layout in fsdp:
        kwargs = _step_kwargs(layout["step_args"])
        assert (kwargs["kernels"], kwargs["fsdp_wrap"]) == ("cuda", "torchtitan")
        assert census.census_step(TOY, **kwargs)["total_bytes"] == layout["peak_bytes"]


def test_a_fine_tuning_plan_takes_one_device():
    with pytest.raises(ValueError, match="lora with gpus 2"):
        census.census_plan(TOY, gpus=2, gpu_memory="1TiB", device="h100", lora=True)
    with pytest.raises(ValueError, match="lora_rank"):
        census.census_plan(TOY, gpus=1, gpu_memory="1TiB", device="h100", lora_rank="sixteen")


def test_context_and_expert_parallel_layouts_are_census_steps():
    plan = census.census_plan(MOE, gpus=2, gpu_memory="1TiB", seq_length=128, device="h100", top=100)
    sample = [l for l in plan["layouts"] if l["cp"] > 1 or l["ep"] > 1][::5]
    assert any(l["cp"] == 2 for l in sample) and any(l["ep"] == 2 for l in sample)
    for layout in sample:
        step = census.census_step(MOE, **_step_kwargs(layout["step_args"]))
        assert step["total_bytes"] == layout["peak_bytes"]


def test_layers_that_cannot_run_alone_are_planned():
    # DeepSeek-V4's layers take the model's residual streams and input ids: the plan times them through
    # the model's forward, and each layout it shows is still census_step's peak.
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "data", "step", "deepseek_v4_toy_L4_s128_single.json"), encoding="utf-8") as f:
        config = json.load(f)["config"]
    plan = census.census_plan(config, gpus=4, gpu_memory="1TiB", seq_length=128, device="h100", top=6)
    assert plan["layouts"]
    for layout in plan["layouts"]:
        assert layout["step_seconds_estimate"] > 0 and layout["time_estimate"]["forward"] > 0
        step = census.census_step(config, **_step_kwargs(layout["step_args"]))
        assert step["total_bytes"] == layout["peak_bytes"]


def test_nothing_fits_is_an_answer():
    plan = census.census_plan(TOY, gpus=2, gpu_memory=1 << 20, seq_length=128, device="b200")
    assert plan["layouts"] == []
    assert plan["nothing_fits"]["smallest_memory_bytes"] > 1 << 20


def test_default_device_is_h100():
    plan = census.census_plan(TOY, gpus=2, seq_length=128, top=1)
    assert plan["device"]["name"] == "h100"


@pytest.mark.parametrize("kwargs", [dict(gpus=0, device="h100"), dict(gpus=8, device="tpu"),
                                    dict(gpus=8, layout="tp=2,foo=3"), dict(gpus=8, overlap="warp_drive"),
                                    dict(gpus=8, device="h100", gpu_memory="80XB"), dict(gpus=True, device="h100"),
                                    dict(gpus=8, device="h100", peak_tflops="fast"),
                                    dict(gpus=8, device="h100", top=0)])
def test_bad_values_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        census.census_plan(TOY, seq_length=128, **kwargs)
