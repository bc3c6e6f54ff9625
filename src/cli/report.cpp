#include "cli/report.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace census::cli {
namespace {

// A file written whole under a temporary name beside its destination, renamed into place only when
// every file of the report is written.
struct Staged {
  std::string temporary;
  std::string destination;
};

// Write `content` to a fresh temporary file next to `destination`; the reason on failure.
std::string stage(const std::string& destination, const std::string& content, std::vector<Staged>& staged) {
  std::string pattern = destination + ".census-XXXXXX";
  const int fd = mkstemp(pattern.data());
  if (fd < 0) return std::strerror(errno);
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      const std::string reason = std::strerror(errno);
      close(fd);
      std::remove(pattern.c_str());
      return reason;
    }
    written += static_cast<size_t>(n);
  }
  if (fchmod(fd, 0644) != 0 || close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(pattern.c_str());
    return reason;
  }
  staged.push_back({pattern, destination});
  return {};
}

void discard(const std::vector<Staged>& staged) {
  for (const Staged& s : staged) std::remove(s.temporary.c_str());
}

}  // namespace

CLI::App* add_report_command(CLI::App& app, Request& request, std::string& model, std::string& gdn_backend,
                             ReportOptions& options) {
  CLI::App* sub = app.add_subcommand("report", "where a layer's memory goes, drawn: a self-contained HTML page");
  sub->add_option("config", model, "a config.json path, or a shipped model name (census models)")->required();
  sub->add_option("--output", options.output, "the HTML file to write (default report.html)");
  sub->add_option("--svg", options.svg_dir, "also write each chart as a standalone SVG file into this directory");
  sub->add_option("--layer-index", request.layer_index, "the layer to draw (default 0)");
  sub->add_option("--seq-length", request.seq_length, "tokens of each sequence (default 4096)");
  sub->add_option("--micro-batch-size", request.micro_batch_size, "sequences of the micro-batch (default 1)");
  sub->add_option("--tp", request.tp, "tensor-parallel degree of the rank drawn (default 1)");
  sub->add_option("--experts-implementation", request.experts_implementation,
                  "how a MoE layer runs its experts: grouped_mm (default) or eager (the loop over experts)");
  sub->add_option("--kernels", request.kernels,
                  "the kernel profile: npu (the default, the reference's flash contract) or cuda (FlashAttention-2/3)");
  sub->add_option("--train-yaml", request.train_yaml,
                  "a HyperParallel train.yaml: its plan_overrides' fused modules replace Transformers' own");
  sub->add_flag("--selective", request.selective,
                "draw the timeline under HyperParallel's selective activation checkpointing");
  sub->add_option("--gdn-backend", gdn_backend,
                  "gated delta rule of linear-attention layers: eager (the default) or triton (the kernel's contract)")
      ->check(CLI::IsMember({"eager", "triton", "kernel"}));
  return sub;
}

int run_report(const Request& request, const ReportOptions& options, std::ostream& out, std::ostream& err) {
  if (options.output.empty()) {
    err << "census: --output: an empty path; give the HTML file to write\n";
    return 2;
  }
  const Report report = build_report(request);
  std::vector<Staged> staged;
  auto refuse_path = [&](const std::string& option, const std::string& path, const std::string& reason) {
    discard(staged);
    err << "census: " << option << ": cannot write '" << path << "' (" << reason
        << "); give a path in a writable directory\n";
    return 2;
  };
  if (std::string reason = stage(options.output, report_html(report), staged); !reason.empty())
    return refuse_path("--output", options.output, reason);
  bool made_directory = false;
  if (!options.svg_dir.empty()) {
    std::error_code error;
    if (!std::filesystem::is_directory(options.svg_dir, error)) {
      made_directory = std::filesystem::create_directory(options.svg_dir, error);
      if (error) return refuse_path("--svg", options.svg_dir, error.message());
    }
    for (const auto& [stem, svg] : report.charts) {
      const std::string path = (std::filesystem::path(options.svg_dir) / (stem + ".svg")).string();
      if (std::string reason = stage(path, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svg, staged);
          !reason.empty()) {
        const int code = refuse_path("--svg", path, reason);
        if (made_directory) std::filesystem::remove(options.svg_dir, error);
        return code;
      }
    }
  }
  for (const Staged& s : staged) {
    if (std::rename(s.temporary.c_str(), s.destination.c_str()) != 0) {
      const std::string reason = std::strerror(errno);
      return refuse_path(s.destination == options.output ? "--output" : "--svg", s.destination, reason);
    }
  }
  out << "wrote " << options.output;
  if (!options.svg_dir.empty()) out << " and " << report.charts.size() << " charts in " << options.svg_dir;
  out << ": " << report.title << '\n';
  return 0;
}

}  // namespace census::cli
