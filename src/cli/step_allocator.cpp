#include "cli/step_allocator.h"

#include "cli/options.h"
#include "cli/plan_command.h"
#include "report/table.h"

namespace census::cli {
namespace {

using nlohmann::ordered_json;

ordered_json op_or_null(std::string_view op) { return op.empty() ? ordered_json(nullptr) : ordered_json(std::string(op)); }

std::string conf_shown(const StepArgs& a) { return a.alloc_conf.empty() ? "(defaults)" : "\"" + a.alloc_conf + "\""; }

int64_t total_reserved(const StepAllocatorCensus& s, const StepArgs& a) {
  return s.reserved_peak + a.cuda_context + a.nccl_buffers;
}

}  // namespace

void add_allocator_options(CLI::App* step, StepArgs& a) {
  step->add_flag("--allocator", a.allocator,
                 "simulate PyTorch's CUDA caching allocator over the step: peak reserved beside peak allocated");
  add_text_option(*step, "--alloc-conf", a.alloc_conf,
                  "PYTORCH_CUDA_ALLOC_CONF as you set it, e.g. \"expandable_segments:True,max_split_size_mb:128\"",
                  "give the allocator's settings, or leave the option out");
  // Read by the bytes rule where the allocator's options are built (allocator_options).
  add_text_option(*step, "--gpu-memory", a.gpu_memory,
                  "memory of one device (80GiB, 141GB, or bytes), for the allocator's out-of-memory verdict",
                  "give the memory of one device, such as 80GiB, or leave the option out");
}

Result<std::optional<StepAllocatorOptions>> allocator_options(const StepArgs& a) {
  if (!a.allocator) {
    if (!a.alloc_conf.empty()) return refuse("--alloc-conf", "configures the simulated caching allocator; give --allocator too");
    if (!a.gpu_memory.empty()) return refuse("--gpu-memory", "is the device the simulated allocator runs out of; give --allocator too");
    return std::optional<StepAllocatorOptions>();
  }
  if (a.fragmentation != 0)
    return refuse("--fragmentation", "is what --allocator simulates; give one of them, not both");
  StepAllocatorOptions options;
  CENSUS_ASSIGN(options.conf, alloc::parse_alloc_conf(a.alloc_conf));
  if (!a.gpu_memory.empty()) {
    CENSUS_ASSIGN(const int64_t memory, parse_bytes("--gpu-memory", a.gpu_memory));
    const int64_t named = a.cuda_context + a.nccl_buffers;
    if (named < 0 || memory <= named)
      return refuse("--gpu-memory", a.gpu_memory + " less --cuda-context and --nccl-buffers (" + std::to_string(named) +
                                        " B) leaves the allocator nothing; give the device's whole memory");
    options.device_limit = memory - named;
    options.device_total = memory;
  }
  return std::optional<StepAllocatorOptions>(std::move(options));
}

ordered_json allocator_json(const StepAllocatorCensus& s, const StepArgs& a) {
  ordered_json phases = ordered_json::array();
  for (const StepAllocatorPhase& p : s.phases)
    phases.push_back({{"name", p.name}, {"reserved_peak", p.reserved_peak}, {"allocated_peak", p.allocated_peak},
                      {"requested_peak", p.requested_peak}, {"reserved_at_end", p.reserved_at_end},
                      {"allocated_at_end", p.allocated_at_end}});
  ordered_json oom = nullptr;
  if (s.out_of_memory)
    oom = {{"phase", s.out_of_memory_phase}, {"op", op_or_null(s.out_of_memory_op)}, {"request_bytes", s.out_of_memory_request}};
  return {{"reserved_peak", s.reserved_peak},
          {"allocated_peak", s.allocated_peak},
          {"largest_inactive_split", s.largest_inactive_split},
          {"num_alloc_retries", s.num_alloc_retries},
          {"out_of_memory", s.limited || s.out_of_memory ? ordered_json(s.out_of_memory) : ordered_json(nullptr)},
          {"requested_peak", s.requested_peak},
          {"reserved_peak_at", {{"phase", s.reserved_peak_phase}, {"op", op_or_null(s.reserved_peak_op)}}},
          {"out_of_memory_at", oom},
          {"device_limit", s.limited ? ordered_json(s.device_limit) : ordered_json(nullptr)},
          {"alloc_conf", a.alloc_conf},
          {"segments_peak", s.segments_peak},
          {"host_tensors", {{"storages", s.off_device_storages}, {"bytes", s.off_device_bytes}}},
          {"total_reserved", total_reserved(s, a)},
          {"phases", phases}};
}

void print_allocator(const StepAllocatorCensus& s, const StepArgs& a, std::ostream& out) {
  out << "\ncaching allocator (PyTorch's, simulated over the step's device allocations; PYTORCH_CUDA_ALLOC_CONF "
      << conf_shown(a) << "):\n";
  Table t({"", "bytes", "", "what"});
  t.add({"reserved peak", grouped(s.reserved_peak), human_bytes(static_cast<double>(s.reserved_peak)),
         "segments held (memory_reserved), at " + s.reserved_peak_phase +
             (s.reserved_peak_op.empty() ? "" : ", " + std::string(s.reserved_peak_op))});
  t.add({"allocated peak", grouped(s.allocated_peak), human_bytes(static_cast<double>(s.allocated_peak)),
         "blocks at their rounded sizes (memory_allocated)"});
  t.add({"requested peak", grouped(s.requested_peak), human_bytes(static_cast<double>(s.requested_peak)),
         "the bytes asked for: the step's peak on the device"});
  t.add({"largest inactive split", grouped(s.largest_inactive_split),
         human_bytes(static_cast<double>(s.largest_inactive_split)),
         "most bytes at once free in split segments (inactive_split_bytes)"});
  t.add({"num_alloc_retries", std::to_string(s.num_alloc_retries), "", "allocations that flushed the cache first"});
  std::string verdict = "not checked: give --gpu-memory";
  if (s.limited || s.out_of_memory)  // (a request past any device's memory fails without a limit too)
    verdict = s.out_of_memory ? "YES: " + grouped(s.out_of_memory_request) + " B asked at " + s.out_of_memory_phase +
                                    (s.out_of_memory_op.empty() ? "" : ", " + std::string(s.out_of_memory_op)) +
                                    " (the figures above stop there)"
                              : "no, at --gpu-memory " + a.gpu_memory + " less the CUDA context and NCCL buffers";
  t.add({"out_of_memory", "", "", verdict});
  if (s.off_device_storages > 0)
    t.add({"host tensors", grouped(s.off_device_bytes), human_bytes(static_cast<double>(s.off_device_bytes)),
           std::to_string(s.off_device_storages) + " AdamW step counts and scalars, on the CPU: not allocated here"});
  t.add({"+ cuda_context", grouped(a.cuda_context), human_bytes(static_cast<double>(a.cuda_context)), "set by --cuda-context"});
  t.add({"+ nccl_buffers", grouped(a.nccl_buffers), human_bytes(static_cast<double>(a.nccl_buffers)), "set by --nccl-buffers"});
  t.add({"total reserved", grouped(total_reserved(s, a)), human_bytes(static_cast<double>(total_reserved(s, a))),
         "what the device holds for the process"});
  t.print(out);
}

void print_allocator_stages(const std::vector<std::pair<int64_t, const StepAllocatorCensus*>>& stages, std::ostream& out) {
  Table t({"stage", "reserved", "allocated", "requested", "inactive split", "retries", "out_of_memory"});
  for (const auto& [stage, s] : stages)
    t.add({std::to_string(stage), grouped(s->reserved_peak), grouped(s->allocated_peak), grouped(s->requested_peak),
           grouped(s->largest_inactive_split), std::to_string(s->num_alloc_retries),
           s->limited ? (s->out_of_memory ? "yes" : "no") : "-"});
  out << "\nthe caching allocator by stage (peaks):\n";
  t.print(out);
}

}  // namespace census::cli
