// File: linear4bit.h
// bitsandbytes' 4-bit base, as Transformers loads a model with BitsAndBytesConfig(load_in_4bit=True, ...)
// (integrations/bitsandbytes.py replace_with_bnb_linear, over the quantizer's get_modules_to_not_convert):
// every nn.Linear but the output embedding (lm_head) becomes a bnb.nn.Linear4bit, frozen:
//   - its weight is the packed 4-bit data (functional.quantize_4bit, blocks of 64): (n + 1) / 2 bytes for n
//     elements, held as [(n + 1) // (2 * itemsize), 1] of the storage dtype (bnb_4bit_quant_storage, uint8 by
//     default; bf16 is what lets FSDP shard it);
//   - its QuantState, tensors beside the parameter: absmax fp32 [ceil(n / 64)] and the 4-bit type's code
//     fp32 [16]; with double quantization (bnb_4bit_use_double_quant) the absmax is uint8, and beside it an
//     fp32 offset (0-d), the second level's fp32 absmax [ceil(blocks / 256)] and its copy of the dynamic map
//     fp32 [256]; the map itself is cached once on the device (functional.name2qmap). Census counts them as
//     buffers;
//   - its bias, in the compute dtype (Linear4bit.forward casts bias.data to it at the first call);
//   - Linear4bit.forward: x.to(compute_dtype), bnb.matmul_4bit (ops::bnb_matmul_4bit), .to(the input's dtype).
// BitsAndBytesConfig's defaults: fp4, no double quantization, fp32 compute, uint8 storage.
// PEFT's prepare_model_for_kbit_training (prepare_kbit) casts every other bf16 parameter to fp32 (the
// embedding, the norms, the head): the residual stream then runs in fp32.
// Set for a step by its scope; Linear reads it (nn/linear.h).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "nn/module.h"
#include "ops/ops.h"

namespace census::nn {

enum class Bnb4bitType : uint8_t { kFp4, kNf4 };

struct Bnb4bitConfig {
  Bnb4bitType quant_type = Bnb4bitType::kFp4;  // bnb_4bit_quant_type
  bool double_quant = false;                    // bnb_4bit_use_double_quant
  DType compute_dtype = DType::kFloat32;        // bnb_4bit_compute_dtype
  DType quant_storage = DType::kUInt8;          // bnb_4bit_quant_storage
  ops::BnbVersion version = ops::BnbVersion::k0_50;
  bool prepare_kbit = false;                    // PEFT's prepare_model_for_kbit_training ran
};

std::string_view bnb_4bit_type_name(Bnb4bitType type);
// "0.49" or "0.50", as census step's --bnb-version names the release lines.
std::string_view bnb_version_name(ops::BnbVersion version);

// The 4-bit base the step's Linears get, or none; whether the Linear at `path` is quantized.
const Bnb4bitConfig* bnb_4bit_config();
bool bnb_quantizes(std::string_view path);

class Bnb4bitScope {
 public:
  explicit Bnb4bitScope(const Bnb4bitConfig* config);
  ~Bnb4bitScope();
  Bnb4bitScope(const Bnb4bitScope&) = delete;
  Bnb4bitScope& operator=(const Bnb4bitScope&) = delete;
  // The quantization state of the Linears quantized under the scope, with the device's dynamic map: the
  // step's buffers.
  const std::vector<Tensor>& state_tensors() const;
  // Their packed weights (parameters of theirs).
  const std::vector<Tensor>& packed_weights() const;
  int64_t quantized_linears() const;

 private:
  const Bnb4bitConfig* previous_;
};

// One Linear4bit's packed weight (a frozen parameter, registered as the Linear's weight) and its state.
struct Linear4bitWeight {
  Tensor packed;
  ops::QuantState4bit state;
};
Linear4bitWeight make_linear4bit_weight(const std::string& path, int64_t in_features, int64_t out_features,
                                        ParameterList& params);
// Linear4bit.forward.
Tensor linear4bit_forward(const Tensor& input, const Linear4bitWeight& weight, const Tensor& bias);

}  // namespace census::nn
