"""census.census_step: the step oracle's numbers through Python, and its refusals."""
import json
import os

import pytest

import census

HERE = os.path.dirname(os.path.abspath(__file__))
STEP_CASES = os.path.join(HERE, "..", "data", "step")


def _case(name):
    with open(os.path.join(STEP_CASES, name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_accumulated_adamw_step_is_the_oracles():
    oracle = _case("llama_toy_L4_s128_accum_m4_adamw")  # the first step, its for-loop AdamW
    step = census.census_step(oracle["config"], seq_length=128, micro_batches=4, first_step=True,
                              optimizer_impl="for-loop")
    assert step["step"] == "first"
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["peak"]["phase"] == oracle["peak"]["phase"]
    assert step["peak"]["split"] == oracle["peak"]["split"]
    assert step["other_peak"]["bytes"] == oracle["other_peak"]["bytes"]
    assert step["optimizer"]["state_bytes"] == oracle["optimizer"]["state_bytes"]
    assert [p["peak_bytes"] for p in step["phases"]] == [p["peak_bytes"] for p in oracle["phases"]]


def test_every_stage_of_a_pipeline():
    oracle = _case("qwen3_moe_toy_L4_s128_pp2_m4_r1")
    step = census.census_step(oracle["config"], seq_length=128, micro_batches=4, pp=2, optimizer="none")
    assert len(step["stages"]) == 2
    assert step["stages"][1]["peak"]["bytes"] == oracle["peak"]["bytes"]
    one = census.census_step(oracle["config"], seq_length=128, micro_batches=4, pp=2, stage=1, optimizer="none")
    assert one["peak"] == step["stages"][1]["peak"]


def test_the_steady_state_is_the_steady_oracles():
    with open(os.path.join(STEP_CASES, "steady", "llama_toy_L4_s128_single_adamw_foreach_steady.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128)  # the defaults: steady state, foreach AdamW
    assert step["step"] == "steady"
    assert step["optimizer"]["implementation"] == "foreach"
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["peak"]["op"] == oracle["peak"]["op"]
    assert [p["peak_bytes"] for p in step["phases"]] == [p["peak_bytes"] for p in oracle["phases"]]


@pytest.mark.parametrize("kind,optimizer,impl", [("single_sgd_fused_steady", "sgd", "fused"),
                                                ("single_adafactor_steady", "adafactor", None),
                                                ("single_adamw8bit_first", "adamw8bit", None)])
def test_other_optimizers_are_the_steady_oracles(kind, optimizer, impl):
    with open(os.path.join(STEP_CASES, "steady", "llama_toy_L4_s128_" + kind + ".json"), encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, optimizer=optimizer, optimizer_impl=impl,
                              first_step=kind.endswith("_first"))
    assert step["optimizer"]["name"] == optimizer
    assert step["optimizer"]["state_bytes"] == oracle["optimizer"]["state_bytes"]
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["optimizer_step_peak"]["bytes"] == oracle["optimizer_step_peak"]["bytes"]


def test_the_optimizer_in_the_backward_is_the_steady_oracles():
    with open(os.path.join(STEP_CASES, "steady", "qwen3_moe_toy_L4_s128_single_adamw8bit_in_bwd_steady.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, optimizer="adamw8bit", optimizer_in_backward=True)
    assert step["optimizer"]["in_backward"] is True
    assert step["optimizer"]["state_bytes"] == oracle["optimizer"]["state_bytes"]
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    with pytest.raises(ValueError, match="optimizer_in_backward with micro_batches 2"):
        census.census_step(oracle["config"], seq_length=128, micro_batches=2, optimizer_in_backward=True)


@pytest.mark.parametrize("kind,loss", [("single_adamw_trl_chunked_nll_steady", "trl-chunked-nll"),
                                       ("single_adamw_liger_flce_steady", "liger-flce"),
                                       ("single_adamw_torchtune_chunked_steady", "torchtune-chunked"),
                                       ("single_adamw_torchtune_linear_steady", "torchtune-linear")])
def test_the_losses_are_the_steady_oracles(kind, loss):
    with open(os.path.join(STEP_CASES, "steady", "llama_toy_L4_s600_" + kind + ".json"), encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=600, optimizer_impl="for-loop", loss=loss)
    assert step["loss"] == loss
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["forward_peak"]["bytes"] == oracle["forward_peak"]["bytes"]
    with pytest.raises(ValueError, match="loss " + loss + " with tp"):
        census.census_step(oracle["config"], seq_length=600, tp=2, loss=loss)


def test_cpu_offload_is_the_parallel_oracles():
    with open(os.path.join(STEP_CASES, "parallel", "qwen3_moe_toy_L4_s128_fsdp4_cpu_offload_accum_m4_adamw.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, micro_batches=4, optimizer_impl="for-loop",
                              first_step=True, fsdp=True, dp=4, master_weights="fp32", cpu_offload=True)
    assert step["parallel"]["fsdp"]["cpu_offload"] is True
    assert {key: step["host"][key] for key in oracle["host"]} == oracle["host"]
    assert step["host"]["saves"] is None
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["peak"]["split"]["parameters"] == 0
    with pytest.raises(ValueError, match="cpu_offload"):
        census.census_step(oracle["config"], seq_length=128, cpu_offload=True)
    with pytest.raises(ValueError, match="cpu_offload"):
        census.census_step(oracle["config"], seq_length=128, fsdp=True, dp=4, cpu_offload="yes")


def test_fp8_is_the_parallel_oracles():
    with open(os.path.join(STEP_CASES, "parallel", "llama_toy_L4_s128_control_fp8_rowwise_single.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, optimizer="none", fp8="rowwise")
    assert step["fp8"] == {"recipe": "rowwise", "head": "fp8"}
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert census.census_step(oracle["config"], seq_length=128, optimizer="none")["fp8"] is None
    skipped = census.census_step(oracle["config"], seq_length=128, optimizer="none", fp8="rowwise", fp8_skip_head=True)
    assert skipped["fp8"]["head"] == "bf16"
    with pytest.raises(ValueError, match="fp8_skip_head"):
        census.census_step(oracle["config"], seq_length=128, fp8_skip_head=True)
    with pytest.raises(ValueError, match="fp8"):
        census.census_step(oracle["config"], seq_length=128, fp8="mxfp8")
    with pytest.raises(ValueError, match="fp8"):
        census.census_step(oracle["config"], seq_length=128, fp8=True)


def test_offloading_is_the_steady_oracles():
    with open(os.path.join(STEP_CASES, "steady", "qwen3_moe_toy_L4_s600_accum_m4_adamw_offload_steady.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=600, micro_batches=4, optimizer_impl="for-loop",
                              offload_activations="trl")
    assert step["offload_activations"] == "trl"
    assert {key: step["host"][key] for key in oracle["host"]} == oracle["host"]
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["forward_peak"]["bytes"] == oracle["forward_peak"]["bytes"]
    assert census.census_step(oracle["config"], seq_length=600)["host"] is None
    with pytest.raises(ValueError, match="offload_activations trl with pp"):
        census.census_step(oracle["config"], seq_length=600, pp=2, offload_activations="trl")
    with pytest.raises(ValueError, match="offload_activations"):
        census.census_step(oracle["config"], seq_length=600, offload_activations="yes")
    with pytest.raises(ValueError, match="offload_activations"):
        census.census_step(oracle["config"], seq_length=600, offload_activations=True)


@pytest.mark.parametrize("kind, loss", [("single_adamw_liger_steady", None), ("single_adamw_liger_hf_steady", "hf")])
def test_ligers_kernels_are_the_steady_oracles(kind, loss):
    with open(os.path.join(STEP_CASES, "steady", "qwen3_toy_L4_s600_" + kind + ".json"), encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=600, optimizer_impl="for-loop", liger=True, loss=loss)
    assert step["liger"] is True
    assert step["loss"] == (loss or "liger-flce")
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["forward_peak"]["bytes"] == oracle["forward_peak"]["bytes"]
    with pytest.raises(ValueError, match="liger with tp"):
        census.census_step(oracle["config"], seq_length=600, tp=2, liger=True)
    with pytest.raises(ValueError, match="liger"):
        census.census_step(oracle["config"], seq_length=600, liger="yes")


def test_a_plan_with_ligers_kernels_lays_out_what_census_step_takes():
    with open(os.path.join(STEP_CASES, "steady", "llama_toy_L4_s600_single_adamw_liger_steady.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    planned = census.census_plan(oracle["config"], gpus=2, gpu_memory="1TiB", seq_length=600, liger=True, top=50)
    assert planned["liger"] is True and planned["loss"] == "liger-flce"
    assert planned["layouts"] and all(l["tp"] == 1 and l["cp"] == 1 for l in planned["layouts"])
    assert all("--liger" in l["step_args"] for l in planned["layouts"])
    with pytest.raises(ValueError, match="liger"):
        census.census_plan(oracle["config"], gpus=2, liger="yes")


def test_a_form_the_optimizer_does_not_have_is_refused():
    oracle = _case("llama_toy_L4_s128_accum_m4_adamw")
    with pytest.raises(ValueError, match="optimizer_impl fused with optimizer adafactor"):
        census.census_step(oracle["config"], seq_length=128, optimizer="adafactor", optimizer_impl="fused")


def test_composed_terms_and_overheads():
    oracle = _case("llama_toy_L4_s128_accum_m4_adamw")
    step = census.census_step(oracle["config"], seq_length=128, micro_batches=4, dp=4, zero=1, cuda_context=1000)
    # ZeRO-1 over 4: the peak at B1, 29,260,424 in the first step, with the rank's quarter of the states,
    # 17,310,876 / 4 = 4,327,719, alive in the steady state; the CUDA context is added on its own.
    assert step["composed"]["peak"]["bytes"] == 29_260_424 + 4_327_719
    assert step["overheads"]["cuda_context"] == 1000
    assert step["total_bytes"] == 29_260_424 + 4_327_719 + 1000


@pytest.mark.parametrize("kwargs", [dict(pp=3), dict(pp=2, stage=2), dict(recompute="sometimes"),
                                    dict(zero=4, dp=2), dict(zero=1), dict(master_weights="fp8"), dict(tp=3),
                                    dict(cp=3), dict(ep=2), dict(optimizer_impl="adam8bit"), dict(optimizer_impl=""),
                                    dict(optimizer_impl=1), dict(first_step=1),
                                    dict(optimizer="none", first_step=True),
                                    dict(optimizer="none", optimizer_impl="fused")])
def test_bad_values_raise_value_error(kwargs):
    config = _case("llama_toy_L4_s128_single")["config"]
    with pytest.raises(ValueError):
        census.census_step(config, seq_length=128, **kwargs)


def test_what_is_not_priced_raises_census_unavailable():
    config = _case("llama_toy_L4_s128_single")["config"]
    with pytest.raises(ValueError):
        census.census_step(config, seq_length=128, micro_batches=3, pp=2, schedule="interleaved", virtual_stages=2)


def test_a_tied_head_shares_the_embeddings_weight():
    config = _case("llama_toy_L4_s128_single")["config"]
    tied = census.census_step(dict(config, tie_word_embeddings=True), seq_length=128, optimizer="none")
    assert tied["parameters"]["count"] == 4_327_680 - 1_048_576
    assert tied["peak"]["bytes"] == 20_605_064 - 2_097_152


def test_context_and_expert_parallel_degrees():
    # CP 2 at 256 tokens: the rank's 128 tokens, the oracle's 128-token step, and the ring's K/V,
    # (2 - 1) x 128 x 2 x 2 KV heads x 32 x 2 B = 32,768, composed during every pass.
    config = _case("llama_toy_L4_s128_single")["config"]
    step = census.census_step(config, seq_length=256, cp=2, optimizer="none")
    assert step["peak"]["bytes"] == _case("llama_toy_L4_s128_single")["peak"]["bytes"]
    assert step["composed"]["peak"]["bytes"] == step["peak"]["bytes"] + 32_768
    # EP 2 on the Qwen3-MoE toy: 4 of the 8 experts a layer, 786,432 parameters fewer each.
    moe = _case("qwen3_moe_toy_L4_s128_single")
    sharded = census.census_step(moe["config"], seq_length=128, ep=2, optimizer="none")
    assert sharded["parameters"]["count"] == moe["parameters"]["count"] - 4 * 786_432


PARALLEL_CASES = os.path.join(HERE, "..", "data", "step", "parallel")


def test_fsdp2_on_the_rank_is_the_parallel_oracles():
    with open(os.path.join(PARALLEL_CASES, "llama_toy_L4_s128_fsdp4_accum_m4_adamw.json"), encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, micro_batches=4, dp=4, fsdp=True,
                              master_weights="fp32", first_step=True, optimizer_impl="for-loop")
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["peak"]["phase"] == oracle["peak"]["phase"]
    assert step["peak"]["split"] == oracle["peak"]["split"]
    assert step["optimizer"]["state_bytes"] == oracle["optimizer"]["state_bytes"]
    assert step["parallel"]["data_parallel"]["semantics"] == "fsdp2"


def test_parallel_refusals_are_value_errors():
    oracle = _case("llama_toy_L4_s128_accum_m4_adamw")
    with pytest.raises(ValueError, match="--fsdp"):
        census.census_step(oracle["config"], seq_length=128, dp=4, zero=3, fsdp=True)
    with pytest.raises(ValueError, match="fsdp"):
        census.census_step(oracle["config"], seq_length=128, dp=4, fsdp="yes")


def test_sequence_and_loss_parallel_are_the_parallel_oracles():
    with open(os.path.join(PARALLEL_CASES, "llama_toy_L4_s128_tp2_sp_single.json"), encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, tp=2, sequence_parallel=True, loss_parallel=True,
                              optimizer="none")
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["gradients"]["bytes_live_at_end"] == oracle["gradients"]["bytes_live_at_end"]
    with pytest.raises(ValueError, match="^sequence_parallel: shards over the tensor-parallel ranks"):
        census.census_step(oracle["config"], seq_length=128, sequence_parallel=True)
    with pytest.raises(ValueError, match="^world 8: the mesh"):
        census.census_step(oracle["config"], seq_length=128, tp=2, world=8, sequence_parallel=True)
    with pytest.raises(ValueError, match="^sequence_parallel with cp 2:"):
        census.census_step(oracle["config"], seq_length=128, tp=2, cp=2, sequence_parallel=True)
    assert census.census_step(oracle["config"], seq_length=128, tp=2, world=2, sequence_parallel=True,
                              loss_parallel=True, optimizer="none")["peak"] == step["peak"]


def test_qlora_is_the_qlora_oracles():
    with open(os.path.join(STEP_CASES, "steady", "qwen3_toy_L4_s128_single_adamw_qlora_all_kbit_steady.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, optimizer_impl="for-loop", lora_rank=16,
                              lora_alpha=32, lora_targets="all-linear", quantize="nf4", double_quant=True,
                              compute_dtype="bf16", prepare_kbit=True, recompute="full-reentrant")
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["quantization"]["quantized_linears"] == oracle["quantization"]["quantized_linears"] == 28
    assert step["quantization"]["packed_weight_bytes"] == oracle["quantization"]["packed_weight_bytes"]
    assert step["quantization"]["quantization_state_bytes"] == oracle["quantization"]["quantization_state_bytes"]
    assert step["lora"]["frozen_parameters"] == oracle["lora"]["frozen_parameters"]
    assert census.census_step(oracle["config"], seq_length=128, lora=True)["quantization"] is None
    for bad, name in ((dict(quantize="nf4"), "quantize"), (dict(lora=True, quantize="int4"), "quantize"),
                      (dict(lora=True, quantize=4), "quantize"), (dict(lora=True, double_quant=True), "double_quant"),
                      (dict(lora=True, quantize="nf4", compute_dtype="fp16"), "compute"),
                      (dict(lora=True, quantize="nf4", quant_storage=""), "quant_storage"),
                      (dict(lora=True, quantize="nf4", prepare_kbit="yes"), "prepare_kbit")):
        with pytest.raises(ValueError, match=name):
            census.census_step(oracle["config"], seq_length=128, **bad)


def test_lora_is_the_lora_oracles():
    with open(os.path.join(STEP_CASES, "steady", "llama_toy_L4_s128_single_adamw_lora_all_dropout_steady.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, optimizer_impl="for-loop", lora_rank=16,
                              lora_alpha=32, lora_dropout=0.1, lora_targets="all-linear")
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["lora"]["adapted_linears"] == oracle["lora"]["adapted_linears"]
    assert step["lora"]["trainable_parameters"] == oracle["lora"]["trainable_parameters"]
    assert step["lora"]["frozen_parameters"] == oracle["lora"]["frozen_parameters"]
    assert step["lora"]["scaling"] == 2.0
    listed = census.census_step(oracle["config"], seq_length=128, optimizer_impl="for-loop", lora_rank=16,
                                lora_alpha=32, lora_dropout=0.1,
                                lora_targets=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj"])
    assert listed["peak"] == step["peak"]
    assert census.census_step(oracle["config"], seq_length=128)["lora"] is None
    assert census.census_step(oracle["config"], seq_length=128, lora=True)["lora"]["targets"] == ["q_proj", "v_proj"]
    for bad in (dict(lora_rank=0), dict(lora_rank=1.5), dict(lora_alpha="8"), dict(lora_dropout=1.0),
                dict(lora_targets=""), dict(lora_targets=["q_proj", 3]), dict(lora_targets="embed_tokens"),
                dict(lora_dtype="fp16"), dict(lora=1)):
        with pytest.raises(ValueError, match="lora"):
            census.census_step(oracle["config"], seq_length=128, **bad)
    dora = census.census_step(oracle["config"], seq_length=128, optimizer_impl="for-loop", lora_rank=16, lora_alpha=32,
                              lora_targets="all-linear", use_dora=True)
    assert dora["lora"]["use_dora"] is True
    assert dora["lora"]["trainable_parameters"]["count"] > step["lora"]["trainable_parameters"]["count"]
    with pytest.raises(ValueError, match="use_dora"):
        census.census_step(oracle["config"], seq_length=128, use_dora="yes")
    with pytest.raises(ValueError, match="lora with tp"):
        census.census_step(oracle["config"], seq_length=128, lora=True, tp=2)


def test_autocast_is_the_autocast_oracles():
    with open(os.path.join(STEP_CASES, "steady", "qwen3_toy_L4_s128_single_adamw_lora_all_autocast_ac_full_steady.json"),
              encoding="utf-8") as handle:
        oracle = json.load(handle)
    step = census.census_step(oracle["config"], seq_length=128, optimizer_impl="for-loop", lora_rank=16,
                              lora_alpha=32, lora_targets="all-linear", recompute="full", autocast="bf16")
    assert step["peak"] == census.census_step(oracle["config"], seq_length=128, optimizer_impl="for-loop",
                                              lora_rank=16, lora_alpha=32, lora_targets="all-linear",
                                              recompute="full", autocast="bf16")["peak"]
    assert step["peak"]["bytes"] == oracle["peak"]["bytes"]
    assert step["autocast"]["weights"] == "float32"
    assert step["lora"]["frozen_parameters"]["bytes"] == 4 * step["lora"]["frozen_parameters"]["count"]
    assert census.census_step(oracle["config"], seq_length=128)["autocast"] is None
    for bad in (dict(autocast="fp16"), dict(autocast=""), dict(autocast=True)):
        with pytest.raises(ValueError, match="^autocast"):
            census.census_step(oracle["config"], seq_length=128, **bad)
    with pytest.raises(ValueError, match="^autocast with fsdp"):
        census.census_step(oracle["config"], seq_length=128, autocast="bf16", fsdp=True, dp=2)
    loaded = census.census_step(oracle["config"], seq_length=128, autocast="bf16", load_dtype="bf16")
    assert loaded["autocast"]["weights"] == "bfloat16"
    with pytest.raises(ValueError, match="^load_dtype fp32 without autocast"):
        census.census_step(oracle["config"], seq_length=128, load_dtype="fp32")


def test_a_trl_config_is_its_flags():
    path = os.path.join(HERE, "..", "data", "trainers", "trl", "census-qwen3-8b-lora.yaml")
    run = census.trainer_run("trl", path)
    arguments = run["arguments"]
    assert (arguments["autocast"], arguments["load_dtype"], arguments["loss"]) == ("bf16", None, "trl-chunked-nll")
    assert (arguments["lora_rank"], arguments["lora_alpha"], arguments["lora_dropout"]) == (32, 16.0, 0.05)
    step = census.census_step(**arguments)
    flags = census.census_step(census.shipped_config("qwen3-8b"), seq_length=2048, micro_batch_size=2,
                               micro_batches=8, recompute="full", optimizer_impl="fused", loss="trl-chunked-nll",
                               autocast="bf16", kernels="cuda", lora=True, lora_rank=32, lora_alpha=16,
                               lora_dropout=0.05, lora_targets="all-linear")
    assert step == flags
    with pytest.raises(ValueError, match="world 8 with from trl"):
        census.trainer_run("trl", path, world=8)


def test_modules_to_save_train_a_copy_beside_the_frozen_original():
    """PEFT's modules_to_save on the Llama toy: the head's 4,096 x 256 copy trains (bf16) beside the default
    adapters (26,624 fp32 parameters); a list and a comma-separated str are the same argument."""
    toy = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 32, "intermediate_size": 512, "num_hidden_layers": 4, "vocab_size": 4096,
           "max_position_embeddings": 8192}
    step = census.census_step(toy, seq_length=128, modules_to_save=["lm_head"])
    assert step["lora"]["modules_to_save"] == ["lm_head"]
    assert step["lora"]["trainable_parameters"] == {"count": 26_624 + 4096 * 256, "bytes": 4 * 26_624 + 2 * 4096 * 256}
    assert census.census_step(toy, seq_length=128, modules_to_save="embed_tokens,lm_head")["lora"]["modules_to_save"] == [
        "embed_tokens", "lm_head"]
    with pytest.raises(ValueError, match="modules_to_save"):
        census.census_step(toy, seq_length=128, modules_to_save=[3])
