// File: plan_device.h
// The accelerators `census plan` prices a step on: peak dense bf16 (fp16 on the Ascend parts) tensor
// throughput, HBM bandwidth, the scale-up link (NVLink, HCCS) and the scale-out NIC, per device and per
// direction, with the memory it carries. Presets are datasheet figures, each row naming its source; a
// planner's own numbers (--peak-tflops, --hbm-gbs, --link-gbs, --nic-gbs) replace them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace census {

struct Device {
  std::string name;
  double peak_tflops = 0;  // dense bf16 tensor throughput, 10^12 FLOP/s
  double hbm_gbs = 0;      // HBM bandwidth, 10^9 B/s
  double link_gbs = 0;     // scale-up link inside a node, each direction, 10^9 B/s
  double nic_gbs = 0;      // scale-out network per device, each direction, 10^9 B/s
  int64_t memory_bytes = 0;
  std::string source;      // where the figures come from
};

const std::vector<Device>& device_presets();
// The preset named `name` (h100, h200, a100, b200, 910b, 910c), or nullptr.
const Device* find_device(const std::string& name);

}  // namespace census
