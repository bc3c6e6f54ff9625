// The census Python extension (_census): the C++ census, called with a config as a Python mapping.
// python/census/__init__.py builds the reference's public functions on top of it.
#include <pybind11/pybind11.h>
#include <algorithm>
#include <sstream>
#include <optional>
#include <tuple>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "census/activations.h"
#include "census/layer_census.h"
#include "census/output_census.h"
#include "census/selective_census.h"
#include "census/stack_census.h"
#include "census/parts.h"
#include "cli/report.h"
#include "step/step_census.h"
#include "cli/step_command.h"
#include "cli/options.h"
#include "cli/plan_command.h"
#include "cli/request.h"
#include "cli/shipped_models.h"
#include "cli/train_yaml.h"
#include "models/registry.h"
#include "run/read_trainer_file.h"
#include "util/checked.h"
#include "util/escape.h"

namespace py = pybind11;

namespace census::python {
namespace {

// How deep a config's values may nest: a config.json's nest two or three levels; a deeper value (or
// a mapping that holds itself) is refused before it could exhaust the stack converting it.
constexpr int kDeepestConfigValue = 64;

// A Python value as a refusal shows it: its repr, escaped and cut (util/escape.h).
std::string shown(const py::handle& value) { return echoed(py::repr(value).cast<std::string>()); }

// `field`'s Python int as JSON, or ValueError naming the field: past 64 bits no size can be exact.
nlohmann::json integer_json(const py::handle& value, const std::string& field) {
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0)
    throw py::value_error("config field " + echoed(field) + ": " + shown(value) +
                          " is beyond 64-bit integers; give the size the model has");
  if (n == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<int64_t>(n);
}

// A Python value of a config.json (mapping, sequence, str, bool, int, float, None) as JSON; `field`
// is where it sits in the config ("rope_parameters.factor"), for a refusal to name.
nlohmann::json to_json(const py::handle& value, const std::string& field, int depth) {
  if (depth > kDeepestConfigValue)
    throw py::value_error("config field " + echoed(field) + ": nests values more than 64 levels deep (or holds itself); " +
                          "give a config.json's values");
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return integer_json(value, field);
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  const std::string prefix = field.empty() ? "" : field + ".";
  if (py::isinstance<py::dict>(value)) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [key, item] : value.cast<py::dict>()) {
      const std::string name = py::str(key).cast<std::string>();
      object[name] = to_json(item, prefix + name, depth + 1);
    }
    return object;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    nlohmann::json array = nlohmann::json::array();
    size_t index = 0;
    for (const auto& item : value) array.push_back(to_json(item, field + "[" + std::to_string(index++) + "]", depth + 1));
    return array;
  }
  try {
    return py::str(value).cast<std::string>();  // a field the census does not read
  } catch (py::error_already_set&) {
    throw py::value_error("config field " + echoed(field) + ": holds a " + std::string(Py_TYPE(value.ptr())->tp_name) +
                          " that cannot be shown as text; give a config.json's values");
  }
}

// The ModelConfig of a mapping, or ValueError with the census's one-line refusal.
ModelConfig config_of(const py::dict& mapping) {
  auto config = read_config(to_json(mapping, "", 0));
  if (!config) throw py::value_error(config.refusal().message());
  return config.take();
}

// A Python integer argument, or ValueError naming it: a bool, float, str or None is refused, never
// truncated or converted, and so is an int past 64 bits.
int64_t integer(const py::handle& value, const char* name) {
  if (py::isinstance<py::bool_>(value) || !PyIndex_Check(value.ptr()))
    throw py::value_error(std::string(name) + ": must be an integer, not " + shown(value));
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) throw py::value_error(std::string(name) + ": " + shown(value) + " is beyond 64-bit integers");
  return static_cast<int64_t>(n);
}

// A tensor-parallel degree: a positive integer.
int64_t tp_degree(const py::handle& value) {
  const int64_t tp = integer(value, "tp");
  if (tp <= 0) throw py::value_error("tp: " + std::to_string(tp) + " is not a positive degree; give one");
  return tp;
}

// A config handle parsed once (census.load_config), or a mapping parsed now.
ModelConfig config_of(const py::object& config) {
  if (py::isinstance<ModelConfig>(config)) return config.cast<ModelConfig>();
  if (!py::isinstance<py::dict>(config))
    throw py::value_error("config: must be a mapping or a census.Config, not " + shown(config));
  return config_of(config.cast<py::dict>());
}

// What the census cannot build here (census.CensusUnavailable in Python), as against a bad argument.
struct Unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A refusal as Python raises it: each command-line option its field names (--seq-length, "--micro-batches
// x --virtual-stages") named as the Python argument is (seq_length, micro_batches x virtual_stages).
py::value_error argument_error(Refusal refusal) {
  std::string& field = refusal.field;
  for (size_t at = field.find("--"); at != std::string::npos; at = field.find("--", at)) {
    field.erase(at, 2);
    for (size_t i = at; i < field.size() && (std::isalnum(static_cast<unsigned char>(field[i])) || field[i] == '-'); ++i)
      if (field[i] == '-') field[i] = '_';
  }
  return py::value_error(refusal.message());
}

// The request's checks, refusals naming the Python argument (seq_length) where the command line's
// name its option (--seq-length).
// `runs_layer`: the call runs the layer (its parameters alone are counted without running it, as the
// command line's `parameters` counts them).
void check(const ModelConfig& config, int64_t layer_index, int64_t seq_length, bool runs_layer = true) {
  cli::Request request;
  request.config = config;
  request.layer_index = layer_index;
  request.seq_length = seq_length;
  // A layer that reads what an earlier layer wrote in the same forward has no census of its own.
  if (runs_layer && config.family->stack_only != nullptr && layer_index >= 0 && layer_index < config.num_hidden_layers)
    if (const char* why = config.family->stack_only(config, layer_index))
      throw Unavailable("no census of layer " + std::to_string(layer_index) + " of this " + config.model_type +
                        " model alone: " + why + ". census_stack and census_activations price it through the stack");
  if (Status status = cli::check_request(request); !status) throw argument_error(status.refusal());
}

// The layer index and sequence length of a call, each an integer the config can take, or ValueError.
std::pair<int64_t, int64_t> checked(const ModelConfig& config, const py::handle& layer_index_arg,
                                    const py::handle& seq_length_arg, bool runs_layer = true) {
  const int64_t layer_index = integer(layer_index_arg, "layer_index");
  const int64_t seq_length = integer(seq_length_arg, "seq_length");
  check(config, layer_index, seq_length, runs_layer);
  return {layer_index, seq_length};
}

// The config with the gated delta rule `gdn_backend` names (eager or triton), or ValueError.
ModelConfig with_backend(ModelConfig config, const std::string& gdn_backend) {
  const std::optional<nn::GdnBackend> backend = nn::parse_gdn_backend(gdn_backend);
  if (!backend)
    throw py::value_error("gdn_backend: " + echoed(gdn_backend) + " is not a gated delta rule backend; give eager or triton");
  if (*backend != nn::GdnBackend::kEager && config.linear_num_key_heads == 0)
    throw py::value_error("gdn_backend: " + echoed(gdn_backend) + ": " + config.model_type +
                          " has no gated-delta-net (linear_attention) layers; leave it eager");
  config.gdn_backend = *backend;
  return config;
}

using SpecTuple = std::tuple<std::vector<std::string>, std::string, std::string>;  // match, module_type, factory

// The config with HyperParallel's fused modules where the specs select them, or ValueError.
ModelConfig with_replacements(ModelConfig config, const std::vector<SpecTuple>& specs) {
  config.replacements.clear();
  for (const auto& [match, module_type, factory] : specs) {
    std::string why;
    const std::optional<FusedModule> module = known_factory(factory, why);
    if (!module) throw Unavailable("replacement factory " + echoed(factory) + (why.empty() ? " is not known to the census" : " " + why));
    if (match.empty()) throw py::value_error("replacement for " + echoed(factory) + " matches no module name pattern");
    config.replacements.push_back({match, module_type, factory, *module});
  }
  if (!config.replacements.empty() && config.family->class_prefix == nullptr)
    throw Unavailable(config.model_type + "'s layers take no module replacements yet");
  return config;
}

// A train.yaml's replacements, as (match, module_type, factory), or ValueError.
std::vector<SpecTuple> replacement_specs(const py::object& path_arg) {
  if (!py::isinstance<py::str>(path_arg))
    throw py::value_error("train_yaml: must be the path of a train.yaml, not " + shown(path_arg));
  auto specs = cli::read_train_yaml(path_arg.cast<std::string>());
  if (!specs) throw py::value_error(specs.refusal().message());
  std::vector<SpecTuple> out;
  for (const ReplacementSpec& spec : *specs) out.emplace_back(spec.match, spec.module_type, spec.factory);
  return out;
}

py::dict ops_of(const LayerCensus& c) {
  py::dict ops;
  for (size_t i = 0; i < kSavedOpCount; ++i)
    if (c.saved_by_op[i]) ops[py::str(std::string(saved_op_name(static_cast<SavedOp>(i))))] = c.saved_by_op[i];
  return ops;
}

// The config as a micro-batch of `micro_batch_size` sequences of `seq_length` tokens runs it: every
// input's batch dimension (ModelConfig::micro_batch_size), as `--micro-batch-size` sets it.
ModelConfig with_micro_batch(ModelConfig config, int64_t micro_batch_size, int64_t seq_length) {
  // The command line's rule and checks: B within its range, and B x S tokens within the config's counts.
  cli::Request request;
  request.config = config;
  request.seq_length = seq_length;
  request.micro_batch_size = micro_batch_size;
  if (Status status = cli::check_request(request); !status) throw argument_error(status.refusal());
  config.micro_batch_size = micro_batch_size;
  return config;
}

py::tuple layer(const py::object& mapping, const py::object& layer_index_arg, const py::object& seq_length_arg,
                const py::object& tp_arg, const std::string& gdn_backend, int64_t micro_batch_size) {
  const int64_t tp = tp_degree(tp_arg);
  const ModelConfig config = with_backend(config_of(mapping), gdn_backend);
  const auto [layer_index, seq_length] = checked(config, layer_index_arg, seq_length_arg);
  const LayerCensus c =
      census_layer(tp_config(with_micro_batch(config, micro_batch_size, seq_length), tp), layer_index, seq_length);
  return py::make_tuple(c.saved_bytes, c.working_bytes, ops_of(c));
}

PartCounts flops(const py::object& mapping, const py::object& layer_index_arg, const py::object& seq_length_arg) {
  const ModelConfig config = config_of(mapping);
  const auto [layer_index, seq_length] = checked(config, layer_index_arg, seq_length_arg);
  return census_flops(config, layer_index, seq_length);
}

py::tuple traffic(const py::object& mapping, const py::object& layer_index_arg, const py::object& seq_length_arg, const std::string& gdn_backend) {
  const ModelConfig config = with_backend(config_of(mapping), gdn_backend);
  const auto [layer_index, seq_length] = checked(config, layer_index_arg, seq_length_arg);
  const LayerTraffic t = census_traffic(config, layer_index, seq_length);
  return py::make_tuple(t.moved, t.parameter, t.launches);
}

py::tuple selective(const py::object& mapping, const py::object& layer_index_arg, const py::object& seq_length_arg,
                    const std::string& gdn_backend, int64_t micro_batch_size) {
  const ModelConfig config = with_backend(config_of(mapping), gdn_backend);
  const auto [layer_index, seq_length] = checked(config, layer_index_arg, seq_length_arg);
  const SelectiveCensus c =
      census_selective(with_micro_batch(config, micro_batch_size, seq_length), layer_index, seq_length);
  return py::make_tuple(c.kept_bytes, c.working_bytes);
}

py::tuple recomputed(const py::object& mapping, const py::object& layer_index_arg, const py::object& seq_length_arg) {
  const ModelConfig config = config_of(mapping);
  const auto [layer_index, seq_length] = checked(config, layer_index_arg, seq_length_arg);
  const RecomputeShares shares = census_recomputed(config, layer_index, seq_length);
  return py::make_tuple(shares.attention_mm, shares.ffn_mm);
}

// Each kind's record as a mapping, the kinds and their first layers taken from `groups`.
py::dict activations(const py::object& mapping, const std::vector<std::tuple<std::string, int64_t, bool>>& groups,
                     const py::object& seq_length_arg, const std::string& gdn_backend, int64_t micro_batch_size) {
  ModelConfig config = with_backend(config_of(mapping), gdn_backend);
  const int64_t seq_length = checked(config, py::int_(0), seq_length_arg, /*runs_layer=*/false).second;
  // A kind that cannot run alone is priced through the whole model.
  if (config.family->stack_only != nullptr)
    if (Status depth = check_stack_depth(config); !depth) throw py::value_error(depth.refusal().message());
  config = with_micro_batch(std::move(config), micro_batch_size, seq_length);
  // Each group's first layer is censused: the counts must be positive and stay within the model.
  std::vector<LayerGroup> stack;
  Checked layers = 0;
  for (const auto& [kind, count, mtp] : groups) {
    if (count <= 0)
      throw py::value_error("layers[" + std::to_string(stack.size()) + "].count: " + std::to_string(count) +
                            " is not a positive number of layers; give one");
    stack.push_back({kind, count, mtp});
    if (!mtp) layers = layers + count;
  }
  if (layers.overflows(config.num_hidden_layers))
    throw py::value_error("layers: the groups count " + (layers.overflows() ? "more than 2^63" : std::to_string(layers.value())) +
                          " layers, the model has " + std::to_string(config.num_hidden_layers));
  py::dict out;
  for (const auto& [kind, k] : census_activations(config, seq_length, stack)) {
    py::dict record;
    record["saved"] = k.saved;
    record["saved_tp"] = k.saved_tp;
    record["working"] = k.working;
    record["working_tp"] = k.working_tp;
    record["seq_length"] = k.seq_length;
    // None where the kind has no selective part (a kind priced through the stack).
    auto optional = [](const std::optional<double>& value) { return value ? py::object(py::float_(*value)) : py::object(py::none()); };
    record["selective"] = optional(k.selective);
    record["selective_tp"] = optional(k.selective_tp);
    record["selective_attention_mm"] = optional(k.selective_attention_mm);
    record["selective_ffn_mm"] = optional(k.selective_ffn_mm);
    // None where the kind states no bytes by op (one priced through the stack), as the JSON leaves them out.
    record["ops"] = k.ops.empty() ? py::object(py::none()) : py::object(py::cast(k.ops));
    record["ops_tp"] = k.ops.empty() ? py::object(py::none()) : py::object(py::cast(k.ops_tp));
    out[py::str(kind)] = record;
  }
  return out;
}

py::tuple output(const py::object& mapping, const py::object& seq_length_arg, const py::object& vocab_size_arg) {
  const ModelConfig config = config_of(mapping);
  const int64_t seq_length = checked(config, py::int_(0), seq_length_arg, /*runs_layer=*/false).second;
  const int64_t vocab_size = integer(vocab_size_arg, "vocab_size");
  if (vocab_size <= 0 || vocab_size > config.vocab_size)
    throw py::value_error("vocab_size: must be a positive integer, at most the model's vocabulary");
  const OutputCensus c = census_output(config, seq_length, vocab_size);
  return py::make_tuple(c.saved_bytes, c.working_bytes);
}

// The output layer's record at the vocabulary and half of it, as a mapping.
py::dict output_activations(const py::object& mapping, const py::object& seq_length_arg) {
  const ModelConfig config = config_of(mapping);
  const int64_t seq_length = checked(config, py::int_(0), seq_length_arg, /*runs_layer=*/false).second;
  const KindActivations k = census_output_activations(config, seq_length);
  py::dict record;
  record["saved"] = k.saved;
  record["saved_tp"] = k.saved_tp;
  record["working"] = k.working;
  record["working_tp"] = k.working_tp;
  record["seq_length"] = k.seq_length;
  return record;
}

py::tuple parameters(const py::object& mapping, const py::object& layer_index_arg) {
  const ModelConfig config = config_of(mapping);
  const int64_t layer_index = checked(config, layer_index_arg, py::int_(1), /*runs_layer=*/false).first;
  const LayerParameters p = census_parameters(config, layer_index);
  return py::make_tuple(p.parts, p.final_norm);
}

// The sizes the census reads, with the family's defaults filled in: those a TP rank divides (where the
// model has them), head_dim and the shape of the stack.
py::dict resolved(const py::object& mapping) {
  const ModelConfig c = config_of(mapping);
  py::dict out;
  out["hidden_size"] = c.hidden_size;
  out["num_hidden_layers"] = c.num_hidden_layers;
  out["head_dim"] = c.head_dim;
  out["vocab_size"] = c.vocab_size;
  for (const TpDividedField& field : tp_divided_fields())
    if (const int64_t value = field.get(c); value > 0) out[field.name] = value;
  return out;
}

std::vector<std::string> tp_fields() {
  std::vector<std::string> names;
  for (const TpDividedField& field : tp_divided_fields()) names.emplace_back(field.name);
  return names;
}

std::vector<std::tuple<std::string, int64_t, bool>> stack(const py::object& mapping) {
  std::vector<std::tuple<std::string, int64_t, bool>> groups;
  for (const LayerGroup& group : layer_stack(config_of(mapping))) groups.emplace_back(group.kind, group.count, group.mtp);
  return groups;
}

// `census report` from Python: the page at `path` (and each chart in `svg_dir`), or ValueError with the
// command's one-line refusal. `name` is the model's name in the page's header.
std::string report(const py::object& mapping, const std::string& path, int64_t layer_index, int64_t seq_length,
                   int64_t tp, bool selective, const std::string& gdn_backend, const std::string& svg_dir,
                   const std::string& name) {
  cli::Request request;
  request.command = "report";
  request.model_name = name;
  request.config = with_backend(config_of(mapping), gdn_backend);
  request.layer_index = layer_index;
  request.seq_length = seq_length;
  request.tp = tp;
  request.selective = selective;
  if (Status status = cli::check_request(request); !status) throw argument_error(status.refusal());
  std::ostringstream out, err;
  if (cli::run_report(request, cli::ReportOptions{path, svg_dir}, out, err) != 0) {
    std::string line = err.str();
    if (line.rfind("census: ", 0) == 0) line.erase(0, 8);
    while (!line.empty() && line.back() == '\n') line.pop_back();
    throw py::value_error(line);
  }
  return path;
}

std::vector<std::pair<std::string, std::string>> shipped() {
  std::vector<std::pair<std::string, std::string>> models;
  for (const cli::ShippedModel& model : cli::shipped_models())
    models.emplace_back(std::string(model.name), std::string(model.json));
  return models;
}

// Each decoder layer's (kept, held) from one pass of the whole stack (census/stack_census.h).
// Checked as `census stack` checks its request: the whole model runs, so a layer that cannot run alone
// (DeepSeek-V4's, GLM-5's shared-indexer layers) is priced, and the stack's depth is bounded.
std::vector<std::pair<int64_t, int64_t>> stack_census(const py::object& mapping, int64_t seq_length, int64_t tp,
                                                      int64_t micro_batch_size) {
  ModelConfig config = config_of(mapping);
  cli::Request request;
  request.command = "stack";
  request.config = config;
  request.seq_length = seq_length;
  request.micro_batch_size = micro_batch_size;
  request.tp = tp;
  if (Status status = cli::check_request(request); !status) throw argument_error(status.refusal());
  config.micro_batch_size = micro_batch_size;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const StackLayerCensus& layer : census_stack(tp_config(config, tp), seq_length)) out.emplace_back(layer.kept, layer.held);
  return out;
}

// One rank's training step as `census step --format json` reports it, as JSON text.
std::string step(const py::object& config_in, int64_t seq_length, int64_t micro_batches, int64_t pp,
                 std::optional<int64_t> stage, const std::string& schedule, int64_t virtual_stages,
                 const std::string& recompute,
                 const std::string& optimizer, int64_t tp, int64_t dp, int64_t zero, const std::string& master_weights,
                 const std::string& grad_dtype, int64_t cuda_context, int64_t nccl_buffers, int64_t fragmentation,
                 int64_t cp, int64_t ep, int64_t micro_batch_size, int64_t first_stage_layers, int64_t last_stage_layers,
                 bool embedding_as_layer, bool loss_as_layer, int64_t expert_tp, bool allocator,
                 const std::string& alloc_conf, const std::string& gpu_memory, bool fsdp,
                 const std::string& reshard_after_forward, bool sequence_parallel, bool loss_parallel,
                 int64_t world, const std::string& optimizer_impl, bool first_step, bool optimizer_in_backward,
                 const std::string& loss, const std::string& offload_activations, bool liger, bool cpu_offload,
                 const std::string& fp8, bool fp8_skip_head, bool lora, std::optional<int64_t> lora_rank,
                 std::optional<double> lora_alpha, std::optional<double> lora_dropout,
                 const std::string& lora_targets, const std::string& lora_dtype, bool use_dora,
                 const std::string& quantize, bool double_quant, const std::string& quant_storage,
                 const std::string& compute_dtype, const std::string& bnb_version, bool prepare_kbit,
                 const std::string& kernels, const std::string& fsdp_wrap, const std::string& autocast,
                 const std::string& load_dtype, const std::string& modules_to_save) {
  const ModelConfig config = config_of(config_in);
  cli::StepArgs a;
  a.modules_to_save = modules_to_save;
  a.kernels = kernels;
  a.autocast = autocast;
  a.load_dtype = load_dtype;
  a.fsdp_wrap = fsdp_wrap;
  a.quantize = quantize;
  a.double_quant = double_quant;
  a.quant_storage = quant_storage;
  a.compute_dtype = compute_dtype;
  a.bnb_version = bnb_version;
  a.prepare_kbit = prepare_kbit;
  a.lora = lora;
  a.lora_rank = lora_rank;
  a.lora_alpha = lora_alpha;
  a.lora_dropout = lora_dropout;
  a.lora_targets = lora_targets;
  a.lora_dtype = lora_dtype;
  a.use_dora = use_dora;
  a.fp8 = fp8;
  a.fp8_skip_head = fp8_skip_head;
  a.cpu_offload = cpu_offload;
  a.loss = loss;
  a.offload_activations = offload_activations;
  a.liger = liger;
  a.optimizer_impl = optimizer_impl;
  a.first_step = first_step;
  a.optimizer_in_backward = optimizer_in_backward;
  a.model = config.model_type;
  a.seq_length = seq_length;
  a.micro_batch_size = micro_batch_size;
  a.micro_batches = micro_batches;
  a.pp = pp;
  a.stage = stage;  // None: every stage; -1 is refused as out of range
  a.schedule = schedule;
  a.virtual_stages = virtual_stages;
  a.recompute = recompute;
  a.optimizer = optimizer;
  a.tp = tp;
  a.dp = dp;
  a.zero = zero;
  a.master_weights = master_weights;
  a.grad_dtype = grad_dtype;
  a.cuda_context = cuda_context;
  a.nccl_buffers = nccl_buffers;
  a.fragmentation = fragmentation;
  a.cp = cp;
  a.ep = ep;
  a.first_stage_layers = first_stage_layers;
  a.last_stage_layers = last_stage_layers;
  a.embedding_as_layer = embedding_as_layer;
  a.loss_as_layer = loss_as_layer;
  a.expert_tp = expert_tp;
  a.allocator = allocator;
  a.alloc_conf = alloc_conf;
  a.gpu_memory = gpu_memory;
  a.fsdp = fsdp;
  a.reshard_after_forward = reshard_after_forward;
  a.sequence_parallel = sequence_parallel;
  a.loss_parallel = loss_parallel;
  a.world = world;
  auto report = cli::step_report_json(a, config);
  if (!report) throw argument_error(report.refusal());
  return report->dump();
}

// The run a trainer's file states, as JSON text: {"format", "flags", "arguments", "ignored", "notes"};
// "arguments" are census_step's keyword arguments for the run (its model's name as "model").
std::string trainer_run(const std::string& trainer, const std::string& path, int64_t world, bool model_given,
                        int64_t seq_length) {
  if (world != 0) {
    if (Status status = cli::check_integer(cli::degree_rule("world"), world); !status) throw argument_error(status.refusal());
  }
  const auto names = trainer_names();
  if (std::find(names.begin(), names.end(), trainer) == names.end())
    throw py::value_error("trainer: " + echoed(trainer) +
                          " is not a trainer whose files Census reads; give torchtitan, torchtune or trl");
  if (seq_length != 0) {
    if (Status status = cli::check_integer(cli::kSeqLengthRule, seq_length); !status) throw argument_error(status.refusal());
  }
  auto file = read_trainer_file(trainer, path, {world, model_given, seq_length});
  if (!file) throw argument_error(file.refusal());
  const Run& r = file->run;
  nlohmann::ordered_json arguments = {
      {"model", r.model}, {"seq_length", r.seq_length}, {"micro_batch_size", r.micro_batch_size},
      {"micro_batches", r.micro_batches}, {"recompute", r.recompute}, {"optimizer", r.optimizer},
      {"optimizer_impl", r.optimizer_impl.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.optimizer_impl)},
      {"optimizer_in_backward", r.optimizer_in_backward},
      {"fp8", r.fp8.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.fp8)},
      {"loss", r.loss.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.loss)},
      {"offload_activations",
       r.offload_activations.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.offload_activations)},
      {"fp8_skip_head", r.fp8_skip_head},
      {"kernels", r.kernels.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.kernels)}, {"tp", r.tp}, {"dp", r.dp}, {"fsdp", r.fsdp}, {"cpu_offload", r.cpu_offload},
      {"sequence_parallel", r.sequence_parallel}, {"loss_parallel", r.loss_parallel}, {"world", r.world},
      {"reshard_after_forward", r.reshard_after_forward},
      {"fsdp_wrap", r.fsdp_wrap.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.fsdp_wrap)},
      {"master_weights", r.master_weights}, {"liger", r.liger},
      {"autocast", r.autocast.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.autocast)},
      {"load_dtype", r.load_dtype.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.load_dtype)}, {"lora", r.lora},
      {"lora_rank", r.lora_rank ? nlohmann::ordered_json(*r.lora_rank) : nlohmann::ordered_json(nullptr)},
      {"lora_alpha", r.lora_alpha ? nlohmann::ordered_json(*r.lora_alpha) : nlohmann::ordered_json(nullptr)},
      {"lora_dropout", r.lora_dropout ? nlohmann::ordered_json(*r.lora_dropout) : nlohmann::ordered_json(nullptr)},
      {"lora_targets", r.lora_targets.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.lora_targets)}, {"use_dora", r.use_dora},
      {"modules_to_save", r.modules_to_save.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.modules_to_save)},
      {"quantize", r.quantize.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.quantize)}, {"double_quant", r.double_quant},
      {"quant_storage", r.quant_storage.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.quant_storage)},
      {"compute_dtype", r.compute_dtype.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.compute_dtype)}};
  // What a reader leaves at its default is left out of the arguments; a field one sets must be listed above.
  Run listed = r;
  const Run d;
  listed.model = d.model;
  listed.seq_length = d.seq_length, listed.micro_batch_size = d.micro_batch_size, listed.micro_batches = d.micro_batches;
  listed.recompute = d.recompute, listed.optimizer = d.optimizer, listed.optimizer_impl = d.optimizer_impl;
  listed.optimizer_in_backward = d.optimizer_in_backward, listed.fp8 = d.fp8, listed.fp8_skip_head = d.fp8_skip_head;
  listed.loss = d.loss, listed.offload_activations = d.offload_activations, listed.kernels = d.kernels;
  listed.tp = d.tp, listed.dp = d.dp, listed.fsdp = d.fsdp, listed.cpu_offload = d.cpu_offload;
  listed.sequence_parallel = d.sequence_parallel, listed.loss_parallel = d.loss_parallel, listed.world = d.world;
  listed.reshard_after_forward = d.reshard_after_forward, listed.master_weights = d.master_weights;
  listed.fsdp_wrap = d.fsdp_wrap, listed.liger = d.liger, listed.autocast = d.autocast, listed.load_dtype = d.load_dtype;
  listed.lora = d.lora, listed.lora_rank = d.lora_rank, listed.lora_alpha = d.lora_alpha;
  listed.lora_dropout = d.lora_dropout, listed.lora_targets = d.lora_targets, listed.use_dora = d.use_dora;
  listed.modules_to_save = d.modules_to_save;
  listed.quantize = d.quantize, listed.double_quant = d.double_quant, listed.quant_storage = d.quant_storage;
  listed.compute_dtype = d.compute_dtype;
  if (const std::vector<std::string> unlisted = step_flags(listed); unlisted.size() > 1)
    throw std::logic_error("trainer_run: the reader set " + unlisted[1] + ", which census_step's arguments here leave out");
  nlohmann::ordered_json ignored = nlohmann::ordered_json::array();
  for (const IgnoredField& f : file->ignored) ignored.push_back({{"field", f.field}, {"why", std::string(f.why)}});
  return nlohmann::ordered_json{{"format", file->format},
                                {"flags", step_flags(r)},
                                {"arguments", arguments},
                                {"ignored", ignored},
                                {"notes", file->notes}}
      .dump();
}

// A size argument of census_plan ("80GiB", or bytes as text), read by the command line's byte rule
// (cli/options.h), or ValueError.
int64_t size_argument(const char* name, const std::string& text) {
  auto bytes = cli::parse_bytes(name, text);
  if (!bytes) throw argument_error(bytes.refusal());
  return *bytes;
}

// The parallel layouts that fit, as `census plan --format json` reports them, as JSON text. A size or
// figure that is None is not given (the device preset's, the calibration's).
std::string plan(const py::object& config_in, int64_t gpus, const std::optional<std::string>& gpu_memory,
                 int64_t seq_length, int64_t global_batch, const std::string& device, std::optional<double> peak_tflops,
                 std::optional<double> hbm_gbs, std::optional<double> link_gbs, std::optional<double> nic_gbs,
                 int64_t gpus_per_node, std::optional<double> compute_efficiency, int64_t top,
                 const std::string& master_weights, const std::string& grad_dtype, const std::string& cuda_context,
                 const std::string& nccl_buffers, const std::string& fragmentation, const std::string& layout,
                 const std::string& overlap, const std::string& calibration, bool reserved,
                 const std::string& alloc_conf, const std::string& optimizer_impl, bool first_step,
                 const std::string& loss, const std::string& optimizer, const std::string& search, bool liger,
                 bool lora, std::optional<int64_t> lora_rank, std::optional<double> lora_alpha,
                 std::optional<double> lora_dropout, const std::string& lora_targets, const std::string& lora_dtype,
                 bool use_dora, const std::string& quantize, bool double_quant, const std::string& quant_storage,
                 const std::string& compute_dtype, const std::string& bnb_version, bool prepare_kbit,
                 const std::string& autocast, const std::string& load_dtype, const std::string& modules_to_save,
                 const std::string& kernels, const std::string& fsdp_wrap) {
  const ModelConfig config = config_of(config_in);
  cli::PlanArgs a;
  a.kernels = kernels;
  a.fsdp_wrap = fsdp_wrap;
  Run& t = a.fine_tuning;
  t.modules_to_save = modules_to_save;
  t.lora = lora, t.lora_rank = lora_rank, t.lora_alpha = lora_alpha, t.lora_dropout = lora_dropout;
  t.lora_targets = lora_targets, t.lora_dtype = lora_dtype, t.use_dora = use_dora;
  t.quantize = quantize, t.double_quant = double_quant, t.quant_storage = quant_storage;
  t.compute_dtype = compute_dtype, t.bnb_version = bnb_version, t.prepare_kbit = prepare_kbit;
  t.autocast = autocast, t.load_dtype = load_dtype;
  a.search = search;
  a.liger = liger;
  a.optimizer = optimizer;
  a.optimizer_impl = optimizer_impl;
  a.first_step = first_step;
  a.loss = loss;
  a.model = config.model_type;
  a.gpus = gpus;
  if (gpu_memory) a.gpu_memory = size_argument("gpu_memory", *gpu_memory);
  a.seq_length = seq_length;
  a.global_batch = global_batch;
  a.device = device;
  a.peak_tflops = peak_tflops;
  a.hbm_gbs = hbm_gbs;
  a.link_gbs = link_gbs;
  a.nic_gbs = nic_gbs;
  a.gpus_per_node = gpus_per_node;
  a.compute_efficiency = compute_efficiency;
  a.top = top;
  a.master_weights = master_weights;
  a.grad_dtype = grad_dtype;
  a.cuda_context = size_argument("cuda_context", cuda_context);
  a.nccl_buffers = size_argument("nccl_buffers", nccl_buffers);
  a.fragmentation = size_argument("fragmentation", fragmentation);
  a.layout = layout;
  a.overlap = overlap;
  a.calibration = calibration;
  a.reserved = reserved;
  a.alloc_conf = alloc_conf;
  auto report = cli::plan_report_json(a, config);
  if (!report) throw argument_error(report.refusal());
  return report->dump();
}

}  // namespace
}  // namespace census::python

PYBIND11_MODULE(_census, m) {
  using namespace census::python;
  m.doc() = "Census: the C++ layer census. Use the census package's functions, not these.";
  py::register_exception<Unavailable>(m, "CensusUnavailable", PyExc_RuntimeError);
  py::class_<census::ModelConfig>(m, "Config", "a config parsed once, for calls that must not parse it again")
      .def(py::init([](const py::object& mapping) { return config_of(mapping); }))
      .def_readonly("model_type", &census::ModelConfig::model_type)
      .def_readonly("num_hidden_layers", &census::ModelConfig::num_hidden_layers)
      .def("with_replacements", &with_replacements, "the config with fused modules where (match, module_type, factory) specs select them")
      .def("tp", [](const census::ModelConfig& c, const py::object& tp) { return census::tp_config(c, tp_degree(tp)); },
           "the config as one of `tp` tensor-parallel ranks holds its layers");
  m.def("layer", &layer, "(saved, working, {op: bytes}) of one layer as one rank of TP `tp` holds it",
        py::arg("config"), py::arg("layer_index"), py::arg("seq_length"), py::arg("tp"), py::arg("gdn_backend") = "eager",
        py::arg("micro_batch_size") = 1);
  m.def("flops", &flops, "forward FLOPs by part (a gated delta rule's as Transformers' eager rule runs it)");
  m.def("traffic", &traffic, "(moved, parameter, launches) by part", py::arg("config"), py::arg("layer_index"),
        py::arg("seq_length"), py::arg("gdn_backend") = "eager");
  m.def("selective", &selective, "(kept, working) of one layer under the selective policy", py::arg("config"),
        py::arg("layer_index"), py::arg("seq_length"), py::arg("gdn_backend") = "eager", py::arg("micro_batch_size") = 1);
  m.def("recomputed", &recomputed, "(attention share, rest share) of matmul FLOPs the selective backward re-runs");
  m.def("activations", &activations, "{kind: record} of the stack's kinds", py::arg("config"), py::arg("groups"),
        py::arg("seq_length"), py::arg("gdn_backend") = "eager", py::arg("micro_batch_size") = 1);
  m.def("output", &output, "(saved, working) of the output layer at `vocab_size`");
  m.def("output_activations", &output_activations, "the output layer's record, per token");
  m.def("parameters", &parameters, "({part: parameters}, final norm parameters)");
  m.def("resolved", &resolved, "the sizes the census reads, defaults filled in");
  m.def("tp_fields", &tp_fields, "the config fields a tensor-parallel rank holds a share of");
  m.def("stack_census", &stack_census, "(kept, held) of each decoder layer from one pass of the whole stack",
        py::arg("config"), py::arg("seq_length"), py::arg("tp") = 1, py::arg("micro_batch_size") = 1);
  m.def("stack", &stack, "the layer stack as (kind, count, mtp) groups");
  m.def("report", &report, "write `census report`'s page (and charts into svg_dir, where not empty)", py::arg("config"),
        py::arg("path"), py::arg("layer_index"), py::arg("seq_length"), py::arg("tp"), py::arg("selective"),
        py::arg("gdn_backend"), py::arg("svg_dir"), py::arg("name"));
  m.def("shipped_models", &shipped, "(name, config.json text) of each shipped model");
  m.def("trainer_run", &trainer_run, "the run a trainer's config file states (JSON text)", py::arg("trainer"),
        py::arg("path"), py::arg("world"), py::arg("model_given"), py::arg("seq_length"));
  m.def("step", &step, "one rank's training step, as census step --format json reports it (JSON text)",
        py::arg("config"), py::arg("seq_length"), py::arg("micro_batches"), py::arg("pp"), py::arg("stage"),
        py::arg("schedule"), py::arg("virtual_stages"), py::arg("recompute"), py::arg("optimizer"), py::arg("tp"), py::arg("dp"), py::arg("zero"),
        py::arg("master_weights"), py::arg("grad_dtype"), py::arg("cuda_context"), py::arg("nccl_buffers"),
        py::arg("fragmentation"), py::arg("cp") = 1, py::arg("ep") = 1, py::arg("micro_batch_size") = 1,
        py::arg("first_stage_layers") = 0, py::arg("last_stage_layers") = 0, py::arg("embedding_as_layer") = false,
        py::arg("loss_as_layer") = false, py::arg("expert_tp") = 0, py::arg("allocator") = false,
        py::arg("alloc_conf") = "", py::arg("gpu_memory") = "", py::arg("fsdp") = false,
        py::arg("reshard_after_forward") = "default", py::arg("sequence_parallel") = false,
        py::arg("loss_parallel") = false, py::arg("world") = 0, py::arg("optimizer_impl") = "",
        py::arg("first_step") = false, py::arg("optimizer_in_backward") = false, py::arg("loss") = "",
        py::arg("offload_activations") = "", py::arg("liger") = false, py::arg("cpu_offload") = false,
        py::arg("fp8") = "", py::arg("fp8_skip_head") = false, py::arg("lora") = false,
        py::arg("lora_rank") = std::nullopt, py::arg("lora_alpha") = std::nullopt,
        py::arg("lora_dropout") = std::nullopt, py::arg("lora_targets") = "", py::arg("lora_dtype") = "",
        py::arg("use_dora") = false, py::arg("quantize") = "", py::arg("double_quant") = false,
        py::arg("quant_storage") = "", py::arg("compute_dtype") = "", py::arg("bnb_version") = "",
        py::arg("prepare_kbit") = false, py::arg("kernels") = "", py::arg("fsdp_wrap") = "", py::arg("autocast") = "",
        py::arg("load_dtype") = "", py::arg("modules_to_save") = "");
  m.def("plan", &plan, "the parallel layouts that fit, as census plan --format json reports them (JSON text)",
        py::arg("config"), py::arg("gpus"), py::arg("gpu_memory"), py::arg("seq_length"), py::arg("global_batch"),
        py::arg("device"), py::arg("peak_tflops"), py::arg("hbm_gbs"), py::arg("link_gbs"), py::arg("nic_gbs"),
        py::arg("gpus_per_node"), py::arg("compute_efficiency"), py::arg("top"), py::arg("master_weights"),
        py::arg("grad_dtype"), py::arg("cuda_context"), py::arg("nccl_buffers"), py::arg("fragmentation"),
        py::arg("layout"), py::arg("overlap"), py::arg("calibration"), py::arg("reserved"), py::arg("alloc_conf"),
        py::arg("optimizer_impl") = "", py::arg("first_step") = false, py::arg("loss") = "",
        py::arg("optimizer") = "adamw", py::arg("search") = "", py::arg("liger") = false, py::arg("lora") = false,
        py::arg("lora_rank") = std::nullopt, py::arg("lora_alpha") = std::nullopt,
        py::arg("lora_dropout") = std::nullopt, py::arg("lora_targets") = "", py::arg("lora_dtype") = "",
        py::arg("use_dora") = false, py::arg("quantize") = "", py::arg("double_quant") = false,
        py::arg("quant_storage") = "", py::arg("compute_dtype") = "", py::arg("bnb_version") = "",
        py::arg("prepare_kbit") = false, py::arg("autocast") = "", py::arg("load_dtype") = "",
        py::arg("modules_to_save") = "", py::arg("kernels") = "", py::arg("fsdp_wrap") = "");
  m.def("replacement_specs", &replacement_specs, "a train.yaml's replacements as (match, module_type, factory)");
}
