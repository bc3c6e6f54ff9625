#include "nn/linear4bit.h"

#include "ops/ops.h"

namespace census::nn {
namespace {

thread_local const Bnb4bitConfig* g_bnb_config = nullptr;
thread_local std::vector<Tensor> g_bnb_state;  // the quantization state of the Linears quantized under the scope
thread_local std::vector<Tensor> g_bnb_packed;  // their packed weights
thread_local bool g_dynamic_map_made = false;

constexpr int64_t kBnbBlocksize = 64;        // Params4bit's, which Transformers keeps
constexpr int64_t kNestedBlocksize = 256;  // quantize_blockwise's, for the absmax
constexpr int64_t kCodeValues = 16;        // get_4bit_type: the 16 values of nf4 or fp4
constexpr int64_t kDynamicMapValues = 256;

int64_t blocks_of(int64_t a, int64_t b) { return (a + b - 1) / b; }

Tensor new_state_tensor(const Dims& sizes, DType dtype) {
  g_bnb_state.push_back(make_tensor(sizes, dtype));
  return g_bnb_state.back();
}

}  // namespace

std::string_view bnb_4bit_type_name(Bnb4bitType type) { return type == Bnb4bitType::kNf4 ? "nf4" : "fp4"; }

std::string_view bnb_version_name(ops::BnbVersion version) {
  return version == ops::BnbVersion::k0_49 ? "0.49" : "0.50";
}

const Bnb4bitConfig* bnb_4bit_config() { return g_bnb_config; }

// get_keys_to_not_convert: the output embeddings (and the last parameter's module, tied keys: the head, or
// with tied embeddings the embedding, no nn.Linear).
bool bnb_quantizes(std::string_view path) { return g_bnb_config != nullptr && path != "lm_head"; }

Bnb4bitScope::Bnb4bitScope(const Bnb4bitConfig* config) : previous_(g_bnb_config) {
  g_bnb_config = config;
  g_bnb_state.clear();
  g_bnb_packed.clear();
  g_dynamic_map_made = false;
}

Bnb4bitScope::~Bnb4bitScope() {
  g_bnb_config = previous_;
  g_bnb_state.clear();
  g_bnb_packed.clear();
  g_dynamic_map_made = false;
}

const std::vector<Tensor>& Bnb4bitScope::state_tensors() const { return g_bnb_state; }
const std::vector<Tensor>& Bnb4bitScope::packed_weights() const { return g_bnb_packed; }
int64_t Bnb4bitScope::quantized_linears() const { return static_cast<int64_t>(g_bnb_packed.size()); }

Linear4bitWeight make_linear4bit_weight(const std::string& path, int64_t in_features, int64_t out_features,
                                        ParameterList& params) {
  const Bnb4bitConfig& config = *g_bnb_config;
  Linear4bitWeight w;
  const int64_t n = in_features * out_features;
  {
    // quantize_4bit's fake contract: out ((n + 1) // (itemsize * 2), 1) of the storage dtype.
    const ParametersKeepDtype keep;
    const int64_t rows = (n + 1) / (element_size(config.quant_storage) * 2);
    w.packed = register_parameter(params, path, "weight", Dims{rows, 1}, config.quant_storage);
    w.packed.impl()->requires_grad = false;  // Params4bit(requires_grad=False)
    g_bnb_packed.push_back(w.packed);
  }
  ops::QuantState4bit& s = w.state;
  s.shape = Dims{out_features, in_features};
  s.dtype = DType::kBFloat16;  // the loaded weight's, before prepare_model_for_kbit_training
  s.blocksize = kBnbBlocksize;
  const int64_t blocks = blocks_of(n, kBnbBlocksize);
  if (!config.double_quant) {
    s.absmax = new_state_tensor(Dims{blocks}, DType::kFloat32);
    s.code = new_state_tensor(Dims{kCodeValues}, DType::kFloat32);
    return w;
  }
  // quantize_4bit with compress_statistics: the offset (absmax.mean()), then quantize_blockwise of
  // absmax - offset: uint8 absmax, and a state of its own (fp32 absmax, a copy of the dynamic map).
  if (!g_dynamic_map_made) {
    new_state_tensor(Dims{kDynamicMapValues}, DType::kFloat32);  // name2qmap["dynamic"], on the device once
    g_dynamic_map_made = true;
  }
  s.code = new_state_tensor(Dims{kCodeValues}, DType::kFloat32);
  s.offset = new_state_tensor(Dims{}, DType::kFloat32);
  s.absmax = new_state_tensor(Dims{blocks}, DType::kUInt8);
  s.state2_absmax = new_state_tensor(Dims{blocks_of(blocks, kNestedBlocksize)}, DType::kFloat32);
  s.state2_code = new_state_tensor(Dims{kDynamicMapValues}, DType::kFloat32);
  return w;
}

Tensor linear4bit_forward(const Tensor& input, const Linear4bitWeight& weight, const Tensor& bias) {
  const Bnb4bitConfig& config = *g_bnb_config;
  const DType input_dtype = input.dtype();
  const Tensor x = ops::to(input, config.compute_dtype);
  return ops::to(ops::bnb_matmul_4bit(x, weight.packed, bias, weight.state, config.version), input_dtype);
}

}  // namespace census::nn
