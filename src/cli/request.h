// File: request.h
// A parsed and checked command line: which measurement, of which model, at which sizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/config.h"
#include "util/result.h"

namespace census::cli {

enum class Format { kTable, kJson };

struct Request {
  std::string command;  // layer, saved-ops, flops, traffic, parameters, activations, explain, tp-config, models
  std::string model_name;  // as given: a shipped name or a path
  ModelConfig config;
  int64_t layer_index = 0;
  int64_t seq_length = 4096;
  int64_t micro_batch_size = 1;  // sequences of the micro-batch
  int64_t tp = 1;
  Format format = Format::kTable;
  bool selective = false;             // layer, explain: under HyperParallel's selective checkpointing
  bool output = false;                // activations: the output layer's record too
  std::vector<LayerGroup> stack;      // activations: the stack --layers states (the model's if empty)
  std::string experts_implementation;  // --experts-implementation as given; empty: grouped_mm
  std::string train_yaml;              // --train-yaml: a recipe whose plan_overrides replace modules
  std::string kernels;                 // --kernels: the kernel profile (npu, cuda); empty: npu
  bool liger = false;                  // --liger: Liger's RMSNorm, SwiGLU and rotary kernels in the layers
};

// The ModelConfig named by `source`: a shipped model's name, else a path to a config.json.
Result<ModelConfig> resolve_model(const std::string& source);

// Refuse sizes the census cannot price exactly: a layer index out of range, a non-positive sequence,
// a TP degree that does not divide the heads and widths, byte or FLOP counts beyond 64 bits, an
// experts implementation the census does not know or a model without experts.
Status check_request(const Request& request);

// The request's config with its options applied (the experts implementation, a train.yaml's module
// replacements).
Status apply_options(Request& request);

}  // namespace census::cli
