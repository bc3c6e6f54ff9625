#include "plan/plan_device.h"

namespace census {

const std::vector<Device>& device_presets() {
  constexpr int64_t kGB = 1000LL * 1000 * 1000;
  constexpr int64_t kGiB = 1024LL * 1024 * 1024;
  // The link figure is half the vendor's bidirectional total (NVLink 4: 900 GB/s, so 450 each way);
  // the NIC figure is one NIC per device at its line rate (400 Gb/s = 50 GB/s).
  static const std::vector<Device> presets = {
      {"h100", 989, 3350, 450, 50, 80 * kGiB,
       "NVIDIA H100 Tensor Core GPU datasheet (SXM5: 989 TFLOPS dense BF16, 3.35 TB/s HBM3, 80 GB, NVLink 900 GB/s); "
       "DGX H100: one ConnectX-7 400 Gb/s per GPU"},
      {"h200", 989, 4800, 450, 50, 141 * kGB,
       "NVIDIA H200 Tensor Core GPU datasheet (SXM: 989 TFLOPS dense BF16, 4.8 TB/s HBM3e, 141 GB, NVLink 900 GB/s); "
       "one 400 Gb/s NIC per GPU"},
      {"a100", 312, 2039, 300, 25, 80 * kGiB,
       "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB: 312 TFLOPS dense BF16, 2,039 GB/s HBM2e, NVLink 600 GB/s); "
       "DGX A100: one ConnectX-6 200 Gb/s per GPU"},
      {"b200", 2250, 8000, 900, 50, 180 * kGB,
       "NVIDIA HGX B200 datasheet (per GPU: 2.25 PFLOPS dense BF16, 8 TB/s HBM3e, 180 GB, NVLink 5 1.8 TB/s); "
       "DGX B200: one ConnectX-7 400 Gb/s per GPU"},
      {"910b", 313, 1600, 196, 25, 64 * kGiB,
       "Huawei Ascend 910B as published for the Atlas 800T A2 (313 TFLOPS FP16, 1.6 TB/s HBM2e, 64 GB; HCCS 392 GB/s; "
       "one 200 Gb/s RoCE port per NPU): vendor and press figures, not a datasheet table"},
      {"910c", 781, 3200, 392, 50, 128 * kGiB,
       "Huawei Ascend 910C as reported for CloudMatrix 384 (two 910B-class dies: 781 TFLOPS BF16, 3.2 TB/s, 128 GB; "
       "one 400 Gb/s port per NPU): published reports, not a datasheet table"},
  };
  return presets;
}

const Device* find_device(const std::string& name) {
  for (const Device& d : device_presets())
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace census
