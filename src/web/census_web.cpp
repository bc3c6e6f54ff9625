// File: census_web.cpp
// The browser page's door into Census (web/, docs/web.md), compiled by emscripten into the page's
// WebAssembly module. It adds no command of its own: `census_run` is the command line's dispatch
// (cli/cli.h) run on the argv the page builds from its form, and `census_draw` is the report's
// charts (report/step_charts.h) of the JSON a command printed. Each returns one JSON document, valid
// until the next call:
//   census_run(["step", "llama-3.1-8b", "--format", "json"]) -> {"stdout", "stderr", "code"}
//   census_draw("step" | "plan", the command's JSON, a device memory such as "80GiB" or "")
//                                                              -> {"charts": [{"id", "svg"}]} | {"error"}
// A pasted config.json is a file the page writes into the module's in-memory file system first, so
// the command reads it as the command line reads any path.
//
// Note [One thread in the page]: the module is built without threads. Where the command line runs a
// pipeline's stages, or the plan's stage steps, on as many threads as there are cores, the page's
// std::thread::hardware_concurrency() is 1, so they run one after another on the calling thread.
#include <emscripten.h>

#include <nlohmann/json.hpp>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/options.h"
#include "report/step_charts.h"

namespace {

using nlohmann::ordered_json;

std::string g_answer;  // the last call's answer, read by the page before its next call

const char* answer(const ordered_json& json) {
  g_answer = json.dump();
  return g_answer.c_str();
}

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE const char* census_run(const char* argv_json) {
  std::ostringstream out, err;
  int code = 0;
  try {
    const ordered_json args = ordered_json::parse(argv_json);
    std::vector<std::string> argv = {"census"};
    for (const ordered_json& arg : args) argv.push_back(arg.get<std::string>());
    std::vector<const char*> pointers;
    for (const std::string& arg : argv) pointers.push_back(arg.c_str());
    code = census::cli::run_cli(static_cast<int>(pointers.size()), pointers.data(), out, err);
  } catch (const std::exception& e) {
    // The command line has no such path: a broken invariant, shown as the process would end.
    err << "census: internal error: " << e.what() << '\n';
    code = 70;
  }
  return answer({{"stdout", out.str()}, {"stderr", err.str()}, {"code", code}});
}

EMSCRIPTEN_KEEPALIVE const char* census_draw(const char* kind, const char* command_json, const char* gpu_memory) {
  try {
    const ordered_json json = ordered_json::parse(command_json);
    const std::string what = kind;
    std::vector<std::pair<std::string, std::string>> charts;
    if (what == "step") {
      int64_t limit = 0;
      if (*gpu_memory != '\0') {
        auto bytes = census::cli::parse_bytes("GPU memory", gpu_memory);
        if (!bytes) return answer({{"error", "census: " + bytes.refusal().message()}});
        limit = *bytes;
      }
      charts = census::step_charts(json, limit);
    } else if (what == "plan") {
      charts = census::plan_charts(json);
    } else {
      return answer({{"error", "census_draw: '" + what + "' is not a command with charts; use step or plan"}});
    }
    ordered_json list = ordered_json::array();
    for (const auto& [id, svg] : charts) list.push_back({{"id", id}, {"svg", svg}});
    return answer({{"charts", list}});
  } catch (const std::exception& e) {
    return answer({{"error", std::string("census_draw: ") + e.what()}});
  }
}

}  // extern "C"
