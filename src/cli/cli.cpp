#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/report.h"
#include "cli/request.h"
#include "census/stack_census.h"
#include "cli/stack_command.h"
#include "cli/stack_file.h"
#include "util/escape.h"
#include "cli/step_command.h"
#include "cli/plan_command.h"

namespace census::cli {
namespace {

constexpr const char* kDefaultModel = "llama-3.1-8b";

constexpr const char* kCommands[][2] = {
    {"layer", "bytes one layer saves for its backward, and the most its backward holds"},
    {"saved-ops", "saved bytes per token by the op whose backward takes them"},
    {"flops", "forward FLOPs by part of the layer"},
    {"traffic", "forward bytes moved, parameter bytes and op launches by part"},
    {"parameters", "parameters by part, and the final norm's"},
    {"activations", "every layer kind at TP 1 and TP 2, per token (the planner's record)"},
    {"explain", "every storage a layer saves: bytes, dtype, shape, module, op"},
    {"tp-config", "heads and widths as one tensor-parallel rank holds them"},
    {"output", "the output layer (final norm, LM head, loss) at the vocabulary and half of it"},
    {"layers", "the model's layer stack, as groups of one kind"},
    {"stack", "the whole decoder forward and backward: each layer's kept and held bytes, each kind's mean"},
}; 

// Every refusal leaves here: one line, whatever user text it echoes (escaped again, for CLI11's own).
int refuse_line(std::ostream& err, const std::string& message) {
  err << "census: " << escaped(message) << '\n';
  return 2;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"Census: what each layer of an LLM costs in training (memory, FLOPs, bytes moved), measured\n"
               "by re-running the layer through a shape-only model of PyTorch's autograd.\n"
               "With no arguments: census activations " + std::string(kDefaultModel)};
  app.name("census");
  app.require_subcommand(0, 1);
  Request request;
  std::string format = "table";
  std::string model;
  std::string layers_file;
  std::string gdn_backend = "eager";
  std::string mamba_backend = "torch";

  for (const auto& [name, description] : kCommands) {
    CLI::App* sub = app.add_subcommand(name, description);
    sub->add_option("config", model, "a config.json path, or a shipped model name (census models)")->required();
    if (std::string_view(name) != "stack")
      add_integer_option(*sub, kLayerIndexRule, request.layer_index, "the layer to census (default 0)");
    add_integer_option(*sub, kSeqLengthRule, request.seq_length, "tokens of each sequence (default 4096)");
    add_integer_option(*sub, kMicroBatchSizeRule, request.micro_batch_size, "sequences of the micro-batch (default 1)");
    add_integer_option(*sub, kTensorParallelRule, request.tp, "tensor-parallel degree of the rank censused (default 1)");
    add_choice_option(*sub, "--format", format, {"table", "json"}, "table or json (default table)");
    add_text_option(*sub, "--experts-implementation", request.experts_implementation,
                    "how a MoE layer runs its experts: grouped_mm (default) or eager (the loop over experts)",
                    "give grouped_mm or eager, or leave the option out");
    const std::string_view command(name);
    if (command != "tp-config" && command != "layers" && command != "parameters")
      add_text_option(*sub, "--kernels", request.kernels,
                      "the kernel profile: npu (the default, the reference's flash contract) or cuda (FlashAttention-2/3)",
                      "give npu or cuda, or leave the option out");
    if (command == "layer" || command == "saved-ops" || command == "explain" || command == "activations" ||
        command == "output" || command == "parameters")
      add_text_option(*sub, "--train-yaml", request.train_yaml,
                      "a HyperParallel train.yaml: its plan_overrides' fused modules replace Transformers' own",
                      "give the path of a train.yaml, or leave the option out");
    // Not on the commands that print the selective policy's figures (activations, report): that policy
    // around Liger's functions is not priced.
    if (command == "layer" || command == "saved-ops" || command == "explain")
      sub->add_flag("--liger", request.liger,
                    "Liger's RMSNorm, SwiGLU and rotary kernels in the layers, as its patch applies them (llama, "
                    "mistral, qwen2, qwen3, smollm3, gemma, gemma2, gemma3_text)");
    if (std::string_view(name) == "layer" || std::string_view(name) == "explain")
      sub->add_flag("--selective", request.selective, "under HyperParallel's selective activation checkpointing");
    if (std::string_view(name) != "flops" && std::string_view(name) != "parameters" &&
        std::string_view(name) != "tp-config" && std::string_view(name) != "layers")
      add_choice_option(*sub, "--gdn-backend", gdn_backend, {"eager", "triton", "kernel"},
                        "gated delta rule of linear-attention layers: eager (Transformers' chunked rule, the "
                        "default) or triton (the chunked kernel's contract; kernel is another name for it)");
    if (std::string_view(name) != "flops" && std::string_view(name) != "parameters" &&
        std::string_view(name) != "tp-config" && std::string_view(name) != "layers")
      add_choice_option(*sub, "--mamba-backend", mamba_backend, {"torch", "kernel"},
                        "Mamba-2 mixer: torch (Transformers' torch path, the default) or kernel (mamba_ssm's fused "
                        "mamba_split_conv1d_scan_combined contract)");
    if (std::string_view(name) == "activations") {
      sub->add_flag("--output", request.output, "the output layer's record too (at the vocabulary and half of it)");
      add_text_option(*sub, "--layers", layers_file, "the layer stack: a JSON or YAML list of {kind, count, mtp} groups",
                      "give the path of a stack file, or leave the option out");
    }
  }
  ReportOptions report_options;
  CLI::App* report = add_report_command(app, request, model, gdn_backend, report_options);
  StepArgs step_args;
  CLI::App* step = add_step_command(app, step_args);
  PlanArgs plan_args;
  CLI::App* plan = add_plan_command(app, plan_args);
  CLI::App* models = app.add_subcommand("models", "the model configs shipped with Census");
  add_choice_option(*models, "--format", format, {"table", "json"}, "table or json (default table)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const OptionRefused& e) {
    return refuse_line(err, e.what());  // the rule's refusal says what to give
  } catch (const CLI::ParseError& e) {
    return refuse_line(err, first_line(e.what()) + "; see census --help");
  }
  request.format = format == "json" ? Format::kJson : Format::kTable;

  if (step->parsed()) {
    if (Status beside = check_flags_beside_from(*step, step_args); !beside) return refuse_line(err, beside.refusal().message());
    step_args.seq_length_given = step->get_option("--seq-length")->count() > 0;
    return run_step_command(step_args, out, err);
  }
  if (plan->parsed()) {
    if (Status beside = check_plan_flags_beside_from(*plan, plan_args); !beside) return refuse_line(err, beside.refusal().message());
    plan_args.seq_length_given = plan->get_option("--seq-length")->count() > 0;
    return run_plan_command(plan_args, out, err);
  }
  if (models->parsed()) {
    list_models(request.format, out);
    return 0;
  }
  const auto subcommands = app.get_subcommands();
  if (subcommands.empty()) {
    request.command = "activations";
    model = kDefaultModel;
  } else {
    request.command = subcommands.front()->get_name();
  }
  request.model_name = model;
  auto config = resolve_model(model);
  if (!config) return refuse_line(err, config.refusal().message());
  request.config = config.take();
  // A backend option names a kind of layer; on a model without one it would change nothing, silently.
  if (gdn_backend != "eager" && request.config.linear_num_key_heads == 0)
    return refuse_line(err, "--gdn-backend " + gdn_backend + ": " + request.config.model_type +
                                " has no gated-delta-net (linear_attention) layers; drop the option");
  if (mamba_backend != "torch" && !request.config.mamba)
    return refuse_line(err, "--mamba-backend " + mamba_backend + ": " + request.config.model_type +
                                " has no Mamba-2 layers; drop the option");
  request.config.gdn_backend = *nn::parse_gdn_backend(gdn_backend);
  if (request.config.mamba) request.config.mamba->backend = *nn::parse_mamba_backend(mamba_backend);
  if (Status checked = check_request(request); !checked) return refuse_line(err, checked.refusal().message());
  if (Status applied = apply_options(request); !applied) return refuse_line(err, applied.refusal().message());
  if (report->parsed()) return run_report(request, report_options, out, err);
  if (!layers_file.empty()) {
    auto stack = read_stack_file(layers_file, request.config);
    if (!stack) return refuse_line(err, stack.refusal().message());
    request.stack = stack.take();
  }

  std::ostringstream answer;  // printed whole or not at all
  if (request.command == "stack") command_stack(request, answer);
  else run_command(request, answer);
  out << answer.str();
  return 0;
}

}  // namespace census::cli
