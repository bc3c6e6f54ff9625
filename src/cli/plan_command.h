// File: plan_command.h
// `census plan CONFIG --gpus N --gpu-memory 80GiB ...`: the parallel layouts that fit (plan/plan.h),
// ranked by an estimated step time, or one layout (--layout), as a table or as JSON whose layouts carry
// the `census step` arguments that reproduce each one's most-loaded rank.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "models/config.h"
#include "run/run.h"
#include "util/result.h"

namespace census::cli {

struct PlanArgs {
  std::string model;
  int64_t gpus = 0;
  std::optional<int64_t> gpu_memory;  // bytes; not given: the device preset's
  int64_t gpus_per_node = 8;
  int64_t seq_length = 4096;
  int64_t global_batch = 0;  // 0: one sequence a device
  std::string device;
  // Not given: the preset's figure.
  std::optional<double> peak_tflops, hbm_gbs, link_gbs, nic_gbs;
  std::optional<double> compute_efficiency;  // not given: the calibration's gemm_efficiency
  std::string calibration;                   // a calibration file (plan/plan_device.h); empty: the preset's
  std::string overlap;                       // the overlap switches on (plan/plan_time.h); empty: the defaults
  std::string layout;                        // one layout to price (plan/plan_layout.h); empty: the search
  int64_t top = 5;
  std::string master_weights = "bf16";
  std::string grad_dtype = "bf16";
  std::string optimizer = "adamw";  // the optimizer, as census step takes it (step/optimizer_choice.h)
  std::string optimizer_impl;  // its form, as census step takes it; empty: the optimizer's default
  bool first_step = false;     // fit and rank on the first step; else the steady state
  std::string loss;            // the trainer's loss, as census step takes it (nn/loss.h); empty: its default
  bool liger = false;          // Liger's kernels in the layers, as census step --liger
  // Fine-tuning: PEFT's adapters, a 4-bit base, the HF Trainer's autocast, as census step's flags set them
  // (cli/fine_tuning_options.h); the Run's other fields are not read.
  Run fine_tuning;
  std::string kernels;    // the kernel profile, as census step --kernels takes it; empty: npu
  std::string fsdp_wrap;  // FSDP2's units in the FSDP2 layouts, as census step --fsdp-wrap; empty: layers
  // --from TRAINER FILE: the run a trainer's own file states (run/trainer_file.h), planned: its model,
  // sequence length, sequences a step, optimizer, loss, kernels, precision and fine-tuning; the layout, the
  // micro-batch and the checkpointing are the plan's to search.
  std::vector<std::string> from;
  bool seq_length_given = false;  // --seq-length was given (beside --from, for a file that leaves it open)
  std::string search;          // what is searched beside the layouts: "loss", "optimizer", or both, comma-separated
  int64_t cuda_context = 0, nccl_buffers = 0, fragmentation = 0;
  std::string format = "table";
  bool explain = false;
  bool reserved = false;   // rank on the simulated caching allocator's reserved peak
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF for it
};

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
// Run a parsed `census plan`: 0 (a plan, or the answer that nothing fits), or 2 with one line on `err`.
int run_plan_command(const PlanArgs& args, std::ostream& out, std::ostream& err);
// Beside --from, a flag given that describes the run is refused: the file states it (the flags of the
// devices, the search and how to show it are taken).
Status check_plan_flags_beside_from(const CLI::App& plan, const PlanArgs& args);

// The plan of `config` as `--format json` prints it (args.model only names it).
Result<nlohmann::ordered_json> plan_report_json(const PlanArgs& args, const ModelConfig& config);

}  // namespace census::cli
