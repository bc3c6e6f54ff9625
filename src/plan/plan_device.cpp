#include "plan/plan_device.h"

#include <cmath>

namespace census {
namespace {

// Note [Calibrations]
// Each field is one kind of fact, and only gemm_efficiency and memory_efficiency are fitted, once per
// preset, against the published runs of docs/plan.md (H100: torchtitan's Llama 3.1 8B on 8 and 128
// GPUs and Megatron-Bridge's GPT-OSS-120B on 64; A100: torchtitan's Llama 3 8B and 70B on 64); the rest
// are read from public measurements and kept as read:
//   gemm_half_gflop      where a cuBLAS bf16 GEMM reaches half its large-size rate: about a 1024^3 GEMM
//                        (2.1 GFLOP) on H100, a 768^3 one (0.9 GFLOP) on A100 (the shape of the
//                        throughput-by-size curves NVIDIA publishes for cuBLAS 12 on Hopper and Ampere)
//   attention_*          FlashAttention-2's causal rates at head width 128 (Dao, "FlashAttention-2", 2023):
//                        A100 about 220 TFLOPS forward, 170 backward; H100 about 335 forward, 250 backward
//                        (the FA2 kernels PyTorch's SDPA runs; FlashAttention-3 is faster on Hopper)
//   kernel_floor_us      an eager op's launch and tail, about 4 us (PyTorch's per-op overhead)
//   link_*, nic_*        NCCL's bus bandwidth against the line rate (nccl-tests: about 80 % on NVLink,
//                        90 % on InfiniBand) and its per-step latency (a few us inside a node, more across)
constexpr const char* kHopperCalibration =
    "fitted once to H100 runs (torchtitan Llama 3.1 8B FSDP2 on 8 and 128 GPUs, Megatron-Bridge GPT-OSS-120B on 64: "
    "docs/plan.md); GEMM half-size, FlashAttention-2 rates, kernel floor and NCCL figures from public measurements "
    "(Note [Calibrations])";
constexpr const char* kAmpereCalibration =
    "fitted once to A100 runs (torchtitan Llama 3 8B and 70B FSDP on 64 GPUs: docs/plan.md); GEMM half-size, "
    "FlashAttention-2 rates, kernel floor and NCCL figures from public measurements (Note [Calibrations])";

Calibration hopper() {
  return {0.56, 2.1, 0.34, 0.25, 0.80, 4.0, 0.80, 3.0, 0.90, 10.0, kHopperCalibration};
}

Calibration ampere() {
  return {0.80, 0.9, 0.70, 0.55, 0.85, 4.0, 0.80, 3.0, 0.90, 10.0, kAmpereCalibration};
}

Calibration borrowed(Calibration c, const std::string& from, const std::string& to) {
  c.source = "no published run checks the " + to + " preset: the " + from + "'s calibration, unchecked";
  return c;
}

}  // namespace

const std::vector<Device>& device_presets() {
  constexpr int64_t kGB = 1000LL * 1000 * 1000;
  constexpr int64_t kGiB = 1024LL * 1024 * 1024;
  // The link figure is half the vendor's bidirectional total (NVLink 4: 900 GB/s, so 450 each way);
  // the NIC figure is one NIC per device at its line rate (400 Gb/s = 50 GB/s).
  static const std::vector<Device> presets = {
      {"h100", 989, 3350, 450, 50, 80 * kGiB,
       "NVIDIA H100 Tensor Core GPU datasheet (SXM5: 989 TFLOPS dense BF16, 3.35 TB/s HBM3, 80 GB, NVLink 900 GB/s); "
       "DGX H100: one ConnectX-7 400 Gb/s per GPU",
       hopper()},
      {"h200", 989, 4800, 450, 50, 141 * kGB,
       "NVIDIA H200 Tensor Core GPU datasheet (SXM: 989 TFLOPS dense BF16, 4.8 TB/s HBM3e, 141 GB, NVLink 900 GB/s); "
       "one 400 Gb/s NIC per GPU",
       borrowed(hopper(), "h100", "h200")},
      {"a100", 312, 2039, 300, 25, 80 * kGiB,
       "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB: 312 TFLOPS dense BF16, 2,039 GB/s HBM2e, NVLink 600 GB/s); "
       "DGX A100: one ConnectX-6 200 Gb/s per GPU",
       ampere()},
      {"b200", 2250, 8000, 900, 50, 180 * kGB,
       "NVIDIA HGX B200 datasheet (per GPU: 2.25 PFLOPS dense BF16, 8 TB/s HBM3e, 180 GB, NVLink 5 1.8 TB/s); "
       "DGX B200: one ConnectX-7 400 Gb/s per GPU",
       borrowed(hopper(), "h100", "b200")},
      {"910b", 313, 1600, 196, 25, 64 * kGiB,
       "Huawei Ascend 910B as published for the Atlas 800T A2 (313 TFLOPS FP16, 1.6 TB/s HBM2e, 64 GB; HCCS 392 GB/s; "
       "one 200 Gb/s RoCE port per NPU): vendor and press figures, not a datasheet table",
       borrowed(ampere(), "a100", "910b")},
      {"910c", 781, 3200, 392, 50, 128 * kGiB,
       "Huawei Ascend 910C as reported for CloudMatrix 384 (two 910B-class dies: 781 TFLOPS BF16, 3.2 TB/s, 128 GB; "
       "one 400 Gb/s port per NPU): published reports, not a datasheet table",
       borrowed(ampere(), "a100", "910c")},
  };
  return presets;
}

const Device* find_device(const std::string& name) {
  for (const Device& d : device_presets())
    if (d.name == name) return &d;
  return nullptr;
}

namespace {

struct Field {
  const char* name;
  double Calibration::*member;
  bool share;  // an efficiency: in (0, 1]; else a size or latency: >= 0 (a half-size > 0)
};

constexpr Field kFields[] = {
    {"gemm_efficiency", &Calibration::gemm_efficiency, true},
    {"gemm_half_gflop", &Calibration::gemm_half_gflop, false},
    {"attention_forward_efficiency", &Calibration::attention_forward_efficiency, true},
    {"attention_backward_efficiency", &Calibration::attention_backward_efficiency, true},
    {"memory_efficiency", &Calibration::memory_efficiency, true},
    {"kernel_floor_us", &Calibration::kernel_floor_us, false},
    {"link_efficiency", &Calibration::link_efficiency, true},
    {"link_latency_us", &Calibration::link_latency_us, false},
    {"nic_efficiency", &Calibration::nic_efficiency, true},
    {"nic_latency_us", &Calibration::nic_latency_us, false},
};

}  // namespace

Status check_calibration(const Calibration& c, const std::string& where) {
  for (const Field& f : kFields) {
    const double value = c.*f.member;
    if (f.share ? !(value > 0 && value <= 1) : !(std::isfinite(value) && value >= 0))
      return refuse(where, std::string(f.name) + " " + std::to_string(value) + " is out of range; give " +
                               (f.share ? "a share above 0 and at most 1" : "0 or more"));
  }
  if (!(c.gemm_half_gflop > 0)) return refuse(where, "gemm_half_gflop must be above 0");
  return {};
}

Result<Calibration> read_calibration(const nlohmann::json& json, const std::string& file) {
  if (!json.is_object()) return refuse(file, "is not a JSON object of calibration fields");
  Calibration c;
  for (const auto& [key, value] : json.items()) {
    bool known = key == "source";
    for (const Field& f : kFields) known = known || key == f.name;
    if (!known) return refuse(file, "has an unknown field '" + echoed(key) + "'; a calibration has exactly the fields of docs/plan.md");
  }
  for (const Field& f : kFields) {
    if (!json.contains(f.name)) return refuse(file, std::string("is missing the field ") + f.name + "; give every field");
    const nlohmann::json& value = json.at(f.name);
    if (!value.is_number()) return refuse(file, std::string(f.name) + " must be a number");
    c.*f.member = value.get<double>();
  }
  if (!json.contains("source") || !json.at("source").is_string() || json.at("source").get<std::string>().empty())
    return refuse(file, "is missing the field source; say where the figures come from");
  c.source = json.at("source").get<std::string>();
  CENSUS_TRY(check_calibration(c, file));
  return c;
}

}  // namespace census
