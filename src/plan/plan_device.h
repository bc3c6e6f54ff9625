// File: plan_device.h
// The accelerators `census plan` prices a step on. A device is two kinds of data, each naming its source:
//
//   datasheet figures   peak dense bf16 (fp16 on the Ascend parts) tensor throughput, HBM bandwidth, the
//                       scale-up link (NVLink, HCCS) and the scale-out NIC per device and direction, the
//                       memory it carries
//   a calibration       what real kernels and collectives reach of those figures (plan/plan_cost.h uses
//                       each field): the largest GEMMs' share of the peak and the size at which a GEMM
//                       reaches half of it, the attention kernel's share forward and backward, a memory-
//                       bound kernel's share of HBM, the shortest a kernel takes, the links' share and
//                       per-message latency. One calibration per preset, fitted once against published
//                       runs (docs/plan.md's anchor table), never per case; a preset no published run
//                       checks borrows the calibration of its nearest kin and says so.
//
// A planner's own figures replace a preset's (--peak-tflops, --hbm-gbs, --link-gbs, --nic-gbs), and a
// calibration file replaces its calibration (--calibration FILE: every field of Calibration, by name).
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace census {

struct Calibration {
  double gemm_efficiency = 0;            // share of the peak the largest GEMMs reach
  double gemm_half_gflop = 0;            // a GEMM of this many GFLOP reaches half of gemm_efficiency
  double attention_forward_efficiency = 0;   // the flash kernel's share of the peak, forward
  double attention_backward_efficiency = 0;  // and backward (its 2.5x FLOPs)
  double memory_efficiency = 0;          // share of the HBM bandwidth a memory-bound kernel reaches
  double kernel_floor_us = 0;            // the shortest a kernel takes, launch and tail
  double link_efficiency = 0;            // share of the link bandwidth a collective reaches (bus bandwidth)
  double link_latency_us = 0;            // per message (a ring step) inside a node
  double nic_efficiency = 0;             // the same across nodes
  double nic_latency_us = 0;
  std::string source;                    // where the figures come from
};

struct Device {
  std::string name;
  double peak_tflops = 0;  // dense bf16 tensor throughput, 10^12 FLOP/s
  double hbm_gbs = 0;      // HBM bandwidth, 10^9 B/s
  double link_gbs = 0;     // scale-up link inside a node, each direction, 10^9 B/s
  double nic_gbs = 0;      // scale-out network per device, each direction, 10^9 B/s
  int64_t memory_bytes = 0;
  std::string source;      // where the figures come from
  Calibration calibration;
};

const std::vector<Device>& device_presets();
// The preset named `name` (h100, h200, a100, b200, 910b, 910c), or nullptr.
const Device* find_device(const std::string& name);
// The preset a plan uses when none is named.
inline constexpr const char* kDefaultDevice = "h100";

// A calibration as a JSON object with every field of Calibration by name (source included); refused,
// naming `file`, for a missing or unknown field or a value out of range.
Result<Calibration> read_calibration(const nlohmann::json& json, const std::string& file);
// Refuse a calibration with a figure out of range (an efficiency outside (0, 1], a negative latency).
Status check_calibration(const Calibration& calibration, const std::string& where);

}  // namespace census
