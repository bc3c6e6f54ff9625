#include "cli/report.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cli/options.h"
#include "util/escape.h"

namespace census::cli {
namespace {

// A file written whole under a temporary name beside its destination, renamed into place only when
// every file of the report is written.
struct Staged {
  std::string temporary;
  std::string destination;
};

// Why `destination` cannot be replaced (empty: it can): a directory, a device, FIFO or socket (which a
// rename would replace, /dev/full among them, rather than write to), a file no one may write (a rename
// would replace it too, even for root). `mode` is the permission bits the file it replaces has.
std::string unwritable(const std::string& destination, mode_t& mode) {
  struct stat info {};
  if (stat(destination.c_str(), &info) != 0) return errno == ENOENT ? "" : std::strerror(errno);
  if (S_ISDIR(info.st_mode)) return "it is a directory";
  if (!S_ISREG(info.st_mode)) return "it is not a regular file but a device, FIFO or socket";
  if ((info.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || access(destination.c_str(), W_OK) != 0)
    return "it is read-only";
  mode = info.st_mode & 07777;
  return {};
}

// Write `content` to a fresh temporary file next to `destination` (the file a symbolic link names, where
// it is one), flushed to the disk, so that a full disk or a quota is seen now; the reason on failure.
std::string stage(std::string destination, const std::string& content, std::vector<Staged>& staged) {
  std::error_code error;
  if (std::filesystem::is_symlink(destination, error)) {
    destination = std::filesystem::weakly_canonical(destination, error).string();
    if (error) return error.message();
  }
  mode_t mode = 0644;
  if (std::string reason = unwritable(destination, mode); !reason.empty()) return reason;
  std::string pattern = destination + ".census-XXXXXX";
  const int fd = mkstemp(pattern.data());
  if (fd < 0) return std::strerror(errno);
  auto fail = [&] {
    const std::string reason = std::strerror(errno);
    close(fd);
    std::remove(pattern.c_str());
    return reason;
  };
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? (errno = ENOSPC, fail()) : fail();
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || fchmod(fd, mode) != 0) return fail();
  if (close(fd) != 0) {
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
  add_text_option(*sub, "--output", options.output, "the HTML file to write (default report.html)",
                  "give the HTML file to write, or leave the option out (report.html)");
  add_text_option(*sub, "--svg", options.svg_dir, "also write each chart as a standalone SVG file into this directory",
                  "give the directory to write the charts into, or leave the option out");
  add_integer_option(*sub, kLayerIndexRule, request.layer_index, "the layer to draw (default 0)");
  add_integer_option(*sub, kSeqLengthRule, request.seq_length, "tokens of each sequence (default 4096)");
  add_integer_option(*sub, kMicroBatchSizeRule, request.micro_batch_size, "sequences of the micro-batch (default 1)");
  add_integer_option(*sub, kTensorParallelRule, request.tp, "tensor-parallel degree of the rank drawn (default 1)");
  add_text_option(*sub, "--experts-implementation", request.experts_implementation,
                  "how a MoE layer runs its experts: grouped_mm (default) or eager (the loop over experts)",
                  "give grouped_mm or eager, or leave the option out");
  add_text_option(*sub, "--kernels", request.kernels,
                  "the kernel profile: npu (the default, the reference's flash contract) or cuda (FlashAttention-2/3)",
                  "give npu or cuda, or leave the option out");
  add_text_option(*sub, "--train-yaml", request.train_yaml,
                  "a HyperParallel train.yaml: its plan_overrides' fused modules replace Transformers' own",
                  "give the path of a train.yaml, or leave the option out");
  sub->add_flag("--selective", request.selective,
                "draw the timeline under HyperParallel's selective activation checkpointing");
  add_choice_option(*sub, "--gdn-backend", gdn_backend, {"eager", "triton", "kernel"},
                    "gated delta rule of linear-attention layers: eager (the default) or triton (the kernel's contract)");
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
    err << "census: " << option << ": cannot write " << echoed(path) << " (" << escaped(reason) << "); "
        << (option == "--svg" ? "give a directory you may write into" : "give a writable file's path in a writable directory")
        << '\n';
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
