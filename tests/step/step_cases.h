// The step oracle's cases copied into tests/data/step/ (step/step_census.h against PyTorch's whole
// step on fake tensors): one case's JSON by name, every case's name, sorted, and the step it ran.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/registry.h"
#include "step/step_census.h"

namespace census::testing {

inline nlohmann::json step_case(const std::string& name, const std::string& folder = "step") {
  std::ifstream file(std::string(CENSUS_TEST_DATA) + "/" + folder + "/" + name + ".json");
  return nlohmann::json::parse(file);
}

// `folder`: "step", or a folder of its own under it ("step/steady").
inline std::vector<std::string> step_case_names(const std::string& folder = "step") {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CENSUS_TEST_DATA) + "/" + folder))
    if (entry.is_regular_file() && entry.path().extension() == ".json")  // parallel/ is its own test's
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Liger's patch (`_liger_` kinds but `_liger_flce`, its fused loss alone): its kernels in the model, and its
// fused loss but where the kind says `_liger_hf`.
inline bool liger_kind(const std::string& kind) {
  return kind.find("_liger_") != std::string::npos && kind.find("_liger_flce") == std::string::npos;
}

// The step the oracle ran: its tokens, sequences a micro-batch ("batch", 1 where the case predates
// it), micro-batches, pipeline stage, optimizer and checkpointing.
inline StepOptions options_of(const nlohmann::json& oracle) {
  StepOptions o;
  o.seq_length = oracle.at("seq");
  o.micro_batch_size = oracle.value("batch", 1);
  o.micro_batches = oracle.at("m");
  o.pipeline_stages = oracle.at("p");
  o.stage = oracle.at("r");
  const std::string kind = oracle.at("kind");
  if (kind == "accum_adamw") {  // the step oracle's first step, its for-loop AdamW
    o.optimizer = StepOptimizer::kAdamW;
    o.first_step = true;
    o.optimizer_impl = nn::OptimizerImpl::kForLoop;
  }
  // The steady-state oracle's (tests/data/step/steady/): step 2 (`*_steady`) or step 1 (`*_first`), of the
  // optimizer and form the kind names ("single_sgd_foreach_steady"; no form word: the for-loop).
  const bool steady = kind.ends_with("_steady"), first = kind.ends_with("_first");
  if (steady || first) {
    const std::string words = "_" + kind;
    for (std::string name : {"torchao_adamw8bit", "torchao_adamw4bit", "adamw8bit", "adafactor", "sgd", "muon", "adamw"})
      if (words.find("_" + name + "_") != std::string::npos) {
        std::replace(name.begin(), name.end(), '_', '-');
        o.optimizer = *optimizer_named(name);
        break;
      }
    o.first_step = first;
    o.optimizer_in_backward = kind.find("_in_bwd") != std::string::npos;
    if (kind.find("_trl_chunked_nll") != std::string::npos) o.loss = nn::CausalLMLoss::kTrlChunkedNll;
    if (kind.find("_liger_flce") != std::string::npos) o.loss = nn::CausalLMLoss::kLigerFlce;
    if (liger_kind(kind) && kind.find("_liger_hf") == std::string::npos) o.loss = nn::CausalLMLoss::kLigerFlce;
    if (kind.find("_torchtune_chunked") != std::string::npos) o.loss = nn::CausalLMLoss::kTorchtuneChunked;
    if (kind.find("_torchtune_linear") != std::string::npos) o.loss = nn::CausalLMLoss::kTorchtuneLinear;
    if (kind.find("_offload") != std::string::npos)
      o.offload_activations =
          kind.find("_offload_torchtune") != std::string::npos ? OffloadPolicy::kTorchtune : OffloadPolicy::kTrl;
    if (kind.find("_ac_full") != std::string::npos)
      o.recompute = kind.find("_ac_full_reentrant") != std::string::npos ? Recompute::kFullReentrant : Recompute::kFull;
    if (kind.find("_sac_selective") != std::string::npos) o.recompute = Recompute::kSelective;
    o.autocast = kind.find("_autocast") != std::string::npos;  // the HF Trainer's bf16=True on fp32 weights
    if (kind.find("_load_bf16") != std::string::npos) o.load_dtype = DType::kBFloat16;  // or on bf16 ones
    if (!optimizer_forms(o.optimizer).empty())
      o.optimizer_impl = kind.find("_foreach") != std::string::npos ? nn::OptimizerImpl::kForEach
                         : kind.find("_fused") != std::string::npos ? nn::OptimizerImpl::kFused
                                                                    : nn::OptimizerImpl::kForLoop;
  }
  if (kind == "sac_selective") o.recompute = Recompute::kSelective;
  if (kind == "ac_full") o.recompute = Recompute::kFull;
  // The checkpointing policies real runs use (oracle/step, extended): reentrant, torchtitan's per-op policy
  // and its per-layer one with selective_ac_option "2".
  if (kind == "ac_full_reentrant") o.recompute = Recompute::kFullReentrant;
  if (kind.starts_with("sac_torchtitan_op")) o.recompute = Recompute::kTorchtitanOp;
  if (kind == "ac_torchtitan_layer2") o.recompute_every_nth_layer = 2;
  // The LoRA oracle's LoraConfig (scripts/oracle/census_oracle_steady_lora.py): its targets as asked.
  if (oracle.contains("lora")) {
    const nlohmann::json& l = oracle.at("lora");
    nn::LoraConfig lora;
    lora.r = l.at("r");
    lora.alpha = l.at("alpha");
    lora.dropout = l.at("dropout");
    const nlohmann::json& targets = l.at("target_modules");
    lora.all_linear = targets == "all-linear";
    if (targets.is_array()) lora.target_modules = targets.get<std::vector<std::string>>();
    lora.dtype = l.at("adapter_dtype") == "bfloat16" ? DType::kBFloat16 : DType::kFloat32;
    lora.use_dora = l.value("use_dora", false);
    lora.modules_to_save = l.value("modules_to_save", std::vector<std::string>{});
    o.lora = lora;
  }
  // The QLoRA oracle's BitsAndBytesConfig and PEFT helper (scripts/oracle/census_oracle_steady_qlora.py).
  if (oracle.contains("quantization")) {
    const nlohmann::json& q = oracle.at("quantization");
    const auto dtype = [](const std::string& name) {
      return name == "bfloat16" ? DType::kBFloat16 : name == "float32" ? DType::kFloat32 : DType::kUInt8;
    };
    nn::Bnb4bitConfig quantize;
    quantize.quant_type = q.at("quant_type") == "nf4" ? nn::Bnb4bitType::kNf4 : nn::Bnb4bitType::kFp4;
    quantize.double_quant = q.at("double_quant");
    quantize.compute_dtype = dtype(q.at("compute_dtype"));
    quantize.quant_storage = dtype(q.at("quant_storage"));
    quantize.version = q.at("bitsandbytes").get<std::string>().starts_with("0.49") ? ops::BnbVersion::k0_49
                                                                                  : ops::BnbVersion::k0_50;
    quantize.prepare_kbit = q.at("prepare_kbit");
    // PEFT's helper enables checkpointing by default: reentrant (use_reentrant left unset).
    if (q.value("prepare_kbit_checkpointing", false)) o.recompute = Recompute::kFullReentrant;
    o.quantize = quantize;
  }
  return o;
}

// The config an oracle case in `folder` was built from, or the test's failure with its refusal.
inline ModelConfig case_config(const std::string& name, const std::string& folder) {
  auto config = read_config(step_case(name, folder).at("config"));
  if (!config) throw std::runtime_error(config.refusal().message());
  return config.take();
}

// The step census_step prices, or the test's failure with its refusal.
inline StepCensus step_or_throw(const ModelConfig& config, const StepOptions& options) {
  auto step = census_step(config, options);
  if (!step) throw std::runtime_error(step.refusal().message());
  return step.take();
}

}  // namespace census::testing
