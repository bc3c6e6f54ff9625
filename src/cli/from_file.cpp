#include "cli/from_file.h"

#include <algorithm>

#include "run/read_trainer_file.h"

namespace census::cli {

Result<std::optional<TrainerFile>> read_from(const std::vector<std::string>& from, const TrainerFileContext& context) {
  if (from.empty()) return std::optional<TrainerFile>();
  if (from.size() != 2) return refuse("--from", "give the trainer and its file: --from torchtitan job.toml");
  auto file = read_trainer_file(from[0], from[1], context);
  CENSUS_TRY(file);
  return std::optional<TrainerFile>(file.take());
}

Status check_flags_beside_file(const CLI::App& command, std::initializer_list<std::string_view> taken) {
  for (const CLI::Option* option : command.get_options()) {
    if (option->count() == 0) continue;
    const std::string name = option->get_name(false, true);
    if (std::find(taken.begin(), taken.end(), name) != taken.end() || name == "--help") continue;
    return refuse(name + " beside --from", "the file states the run; change the file, or give the run as flags without --from");
  }
  return {};
}

nlohmann::ordered_json trainer_file_json(const std::vector<std::string>& from, const TrainerFile& file,
                                         const std::vector<std::string>& flags) {
  nlohmann::ordered_json ignored = nlohmann::ordered_json::array();
  for (const IgnoredField& f : file.ignored) ignored.push_back({{"field", f.field}, {"why", std::string(f.why)}});
  return {{"trainer", from[0]}, {"file", from[1]}, {"format", file.format},
          {"flags", flags},     {"ignored", ignored}, {"notes", file.notes}};
}

void print_trainer_file(const std::vector<std::string>& from, const TrainerFile& file, const std::string& command,
                        std::ostream& out) {
  out << "from " << from[1] << " (" << file.format << "): " << command << '\n';
  for (const std::string& line : ignored_lines(file.ignored)) out << line << '\n';
  for (const std::string& note : file.notes) out << "note: " << note << '\n';
}

}  // namespace census::cli
