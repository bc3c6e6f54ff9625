// File: plan_command.h
// `census plan CONFIG --gpus N --gpu-memory 80GiB ...`: the parallel layouts that fit (plan/plan.h),
// ranked by an estimated step time, or one layout (--layout), as a table or as JSON whose layouts carry
// the `census step` arguments that reproduce each one's most-loaded rank.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <ostream>
#include <string>

#include "models/config.h"
#include "util/result.h"

namespace census::cli {

inline constexpr double kNotGiven = __builtin_nan("");

struct PlanArgs {
  std::string model;
  int64_t gpus = 0;
  std::string gpu_memory;  // "80GiB", "141GB", or bytes; empty: the device preset's
  int64_t gpus_per_node = 8;
  int64_t seq_length = 4096;
  int64_t global_batch = 0;
  std::string device;
  // NaN: not given (the preset's figure)
  double peak_tflops = kNotGiven, hbm_gbs = kNotGiven, link_gbs = kNotGiven, nic_gbs = kNotGiven;
  double compute_efficiency = kNotGiven;  // NaN: the calibration's gemm_efficiency
  std::string calibration;                 // a calibration file (plan/plan_device.h); empty: the preset's
  std::string overlap;                     // the overlap switches on (plan/plan_time.h); empty: the defaults
  std::string layout;                      // one layout to price (plan/plan_layout.h); empty: the search
  int64_t top = 5;
  std::string master_weights = "bf16";
  std::string grad_dtype = "bf16";
  std::string cuda_context = "0", nccl_buffers = "0", fragmentation = "0";
  std::string format = "table";
  bool explain = false;
  bool reserved = false;   // rank on the simulated caching allocator's reserved peak
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF for it
};

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
// Run a parsed `census plan`: 0 (a plan, or the answer that nothing fits), or 2 with one line on `err`.
int run_plan_command(const PlanArgs& args, std::ostream& out, std::ostream& err);

// The plan of `config` as `--format json` prints it (args.model only names it).
Result<nlohmann::ordered_json> plan_report_json(const PlanArgs& args, const ModelConfig& config);

// "80GiB" -> 85899345920; "141GB" -> 141000000000; "1024" -> 1024 (B, KB, MB, GB, TB powers of 1000;
// KiB, MiB, GiB, TiB of 1024; a decimal number before the unit).
Result<int64_t> parse_bytes(const std::string& flag, const std::string& text);

}  // namespace census::cli
