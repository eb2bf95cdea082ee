#include "exec/checkpoint.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "sim/json_fields.h"

namespace baton::exec {

namespace {

namespace fs = std::filesystem;

constexpr const char* kManifestFormat = "baton.checkpoint.v1";
constexpr const char* kStageFormat = "baton.checkpoint.stage.v1";
constexpr const char* kStepPrefix = "step-";

fs::path step_dir(const TrainOptions& options, int completed_steps) {
  return fs::path(options.checkpoint_dir) / fmt::format("{}{:06d}", kStepPrefix, completed_steps);
}

fs::path stage_path(const TrainOptions& options, int completed_steps, int stage) {
  return step_dir(options, completed_steps) / fmt::format("stage-{}.bin", stage);
}

fs::path manifest_path(const TrainOptions& options, int completed_steps) {
  return step_dir(options, completed_steps) / "manifest.json";
}

// What a resume must not change (the manifest's "run").
nlohmann::json run_identity(const Plan& plan, const TrainOptions& options) {
  return {{"model", options.model},
          {"seed", options.seed},
          {"schedule", std::string(schedule_name(plan.schedule))},
          {"stages", stages_to_string(plan.stages)},
          {"microbatches", plan.batches},
          {"microbatch_size", plan.microbatch_size},
          {"vertical_sync", plan.vertical_sync}};
}

// The first field of `ours` that `theirs` lacks or holds otherwise, as a message; empty when they agree.
std::string identity_difference(const nlohmann::json& theirs, const nlohmann::json& ours) {
  for (const auto& [field, value] : ours.items()) {
    if (!theirs.is_object() || !theirs.contains(field))
      return fmt::format("the checkpoint does not name its {}", field);
    if (theirs[field] != value)
      return fmt::format("the checkpoint was made with {} = {} but this run has {} = {}", field, theirs[field].dump(),
                         field, value.dump());
  }
  return {};
}

// Writes to a temporary name (distinct per process) and renames it into place.
Status write_atomic(const fs::path& path, const std::string& contents) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Error{fmt::format("{}: cannot create the folder: {}", path.parent_path().string(), ec.message())};
  const fs::path temporary = fs::path(path.string() + fmt::format(".tmp{}", ::getpid()));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return Error{fmt::format("{}: cannot write", temporary.string())};
    }
  }
  fs::rename(temporary, path, ec);
  if (ec) {
    std::remove(temporary.c_str());
    return Error{fmt::format("{}: cannot move into place: {}", path.string(), ec.message())};
  }
  return ok_status();
}

void append_floats(std::string& out, const at::Tensor& tensor) {
  const at::Tensor flat = tensor.detach().to(at::kFloat).contiguous();
  out.append(reinterpret_cast<const char*>(flat.data_ptr<float>()), static_cast<size_t>(flat.nbytes()));
}

Result<at::Tensor> read_floats(std::istream& in, int64_t elements, const fs::path& path) {
  at::Tensor tensor = at::empty({elements}, at::kFloat);
  in.read(reinterpret_cast<char*>(tensor.data_ptr<float>()), static_cast<std::streamsize>(tensor.nbytes()));
  if (in.gcount() != static_cast<std::streamsize>(tensor.nbytes()))
    return Error{fmt::format("{}: the file ends before its {} floats", path.string(), elements)};
  return tensor;
}

// `text` as a JSON object whose "format" is `format`, holding only the keys
// `known` and, in its "run", only those run_identity writes: a file of
// another version is refused by name rather than half read.
Result<nlohmann::json> parse_document(const std::string& text, const fs::path& path, const char* format,
                                      std::initializer_list<std::string_view> known) {
  nlohmann::json document = nlohmann::json::parse(text, nullptr, false);
  const auto tag = document.is_object() ? document.find("format") : document.end();
  if (!document.is_object() || tag == document.end() || *tag != format)
    return Error{fmt::format("{}: not a {} file", path.string(), format)};
  const json_fields::FieldPath root(path.string());
  if (auto ok = json_fields::check_known_keys(document, root, known); !ok) return ok.error();
  if (auto run = document.find("run"); run != document.end()) {
    if (auto ok = json_fields::check_known_keys(
            *run, root.field("run"),
            {"model", "seed", "schedule", "stages", "microbatches", "microbatch_size", "vertical_sync"});
        !ok)
      return ok.error();
  }
  return document;
}

// A checkpoint whose manifest and every stage file exist.
bool is_complete(const TrainOptions& options, int completed_steps, int stages) {
  std::error_code ec;
  if (!fs::exists(manifest_path(options, completed_steps), ec)) return false;
  for (int s = 0; s < stages; ++s) {
    if (!fs::exists(stage_path(options, completed_steps, s), ec)) return false;
  }
  return true;
}

// The completed steps of the newest complete checkpoint; -1 when there is none.
Result<int> latest_complete(const TrainOptions& options, int stages) {
  std::error_code ec;
  fs::directory_iterator entries(options.checkpoint_dir, ec);
  if (ec) return Error{fmt::format("{}: cannot read the checkpoint folder: {}", options.checkpoint_dir, ec.message())};
  int latest = -1;
  for (const fs::directory_entry& entry : entries) {
    const std::string name = entry.path().filename().string();
    const std::string digits = name.substr(std::min(name.size(), std::string(kStepPrefix).size()));
    if (name.rfind(kStepPrefix, 0) != 0 || digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const int completed = std::stoi(digits);
    if (completed > latest && is_complete(options, completed, stages)) latest = completed;
  }
  return latest;
}

}  // namespace

bool checkpoint_due(const TrainOptions& options, int completed_steps) {
  return !options.checkpoint_dir.empty() && options.checkpoint_every > 0 &&
         completed_steps % options.checkpoint_every == 0;
}

Status write_stage_state(const Plan& plan, const TrainOptions& options, int completed_steps, int stage,
                         const StageState& state) {
  const nlohmann::json header{{"format", kStageFormat},
                              {"stage", stage},
                              {"completed_steps", completed_steps},
                              {"weight_version", state.weight_version},
                              {"elements", state.weights.numel()},
                              {"run", run_identity(plan, options)}};
  std::string contents = header.dump() + "\n";
  append_floats(contents, state.weights);
  append_floats(contents, state.gradient);
  return write_atomic(stage_path(options, completed_steps, stage), contents);
}

Status write_manifest(const Plan& plan, const TrainOptions& options, int completed_steps) {
  const nlohmann::json manifest{{"format", kManifestFormat},
                                {"completed_steps", completed_steps},
                                {"stages", plan.num_stages()},
                                {"run", run_identity(plan, options)}};
  return write_atomic(manifest_path(options, completed_steps), manifest.dump(2) + "\n");
}

Result<StageState> read_stage_state(const Plan& plan, const TrainOptions& options, int completed_steps, int stage,
                                    int64_t elements) {
  const fs::path path = stage_path(options, completed_steps, stage);
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{fmt::format("{}: cannot open", path.string())};
  std::string line;
  std::getline(in, line);
  auto header = parse_document(line, path, kStageFormat,
                               {"format", "stage", "completed_steps", "weight_version", "elements", "run"});
  if (!header) return header.error();
  if (header->value("stage", -1) != stage || header->value("completed_steps", -1) != completed_steps ||
      header->value("elements", int64_t{-1}) != elements) {
    return Error{fmt::format("{}: the header says stage {}, {} completed steps, {} elements; expected {}, {}, {}",
                             path.string(), header->value("stage", -1), header->value("completed_steps", -1),
                             header->value("elements", int64_t{-1}), stage, completed_steps, elements)};
  }
  const nlohmann::json theirs = header->value("run", nlohmann::json());
  if (const std::string why = identity_difference(theirs, run_identity(plan, options)); !why.empty())
    return Error{fmt::format("{}: another run's stage file: {}", path.string(), why)};
  StageState state;
  state.weight_version = header->value("weight_version", 0);
  auto weights = read_floats(in, elements, path);
  if (!weights) return weights.error();
  auto gradient = read_floats(in, elements, path);
  if (!gradient) return gradient.error();
  state.weights = std::move(*weights);
  state.gradient = std::move(*gradient);
  return state;
}

Result<int> resumable_checkpoint(const Plan& plan, const TrainOptions& options) {
  if (options.checkpoint_dir.empty()) return Error{"resume: no checkpoint folder was given"};
  auto latest = latest_complete(options, plan.num_stages());
  if (!latest) return latest.error();
  if (*latest < 0) {
    return Error{
        fmt::format("{}: no complete checkpoint to resume from (complete: a step-<n> folder with its "
                    "manifest.json and a stage-<s>.bin for each of the plan's {} stages)",
                    options.checkpoint_dir, plan.num_stages())};
  }
  const fs::path path = manifest_path(options, *latest);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto manifest = parse_document(text.str(), path, kManifestFormat, {"format", "completed_steps", "stages", "run"});
  if (!manifest) return manifest.error();
  const nlohmann::json theirs = manifest->value("run", nlohmann::json());
  if (const std::string why = identity_difference(theirs, run_identity(plan, options)); !why.empty())
    return Error{fmt::format("{}: cannot resume: {}", path.string(), why)};
  if (*latest >= options.steps) {
    return Error{
        fmt::format("{}: the checkpoint already holds {} completed steps and the run has {}: nothing is "
                    "left to run",
                    path.string(), *latest, options.steps)};
  }
  return *latest;
}

}  // namespace baton::exec
