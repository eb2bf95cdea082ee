// `baton validate`'s inputs: tools/validate_inputs.h.
#include "tools/validate_inputs.h"

#if BATON_HAVE_EXEC

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "tools/cli_support.h"
#include "tools/rank_launch.h"

namespace baton::cli {

namespace fs = std::filesystem;

void progress(const std::string& line) { std::fprintf(stderr, "validate: %s\n", line.c_str()); }

std::string path_in(const fs::path& dir, const std::string& name) { return (dir / name).string(); }

// --device cuda: the workers are threads of one process on that GPU (run
// --backend threads --device cuda), not gloo ranks.
bool on_gpu(const ValidateArgs& args) { return args.device != "cpu"; }

namespace {

// The fewest streams that measure a GPU's shared throughput (obtain_profile).
constexpr int kSaturatingStreams = 4;

}  // namespace

Profile obtain_profile(const ValidateArgs& args, const exec::ModelInfo& model, const fs::path& dir) {
  Profile profile;
  if (!args.profile.empty()) {
    profile = load_profile_file(args.profile);
    // The profile's times hold at its own microbatch size only.
    if (args.microbatch_size_given && args.microbatch_size != profile.microbatch_size)
      throw UsageError(fmt::format(
          "--microbatch-size {}: the profile {} was measured at {} samples per microbatch; leave the flag out, or "
          "drop --profile to measure one at {}",
          args.microbatch_size, args.profile, profile.microbatch_size, args.microbatch_size));
  } else {
    progress(fmt::format("measuring the profile of {} (microbatch size {})", model.name, args.microbatch_size));
    exec::ProfileOptions options;
    options.device = args.device;
    options.intra_op_threads = args.threads;
    options.steps = 20;
    options.min_time = Seconds(args.profile_seconds);
    options.quantile = args.quantile;
    // On a GPU a layer timed alone pays the host's hand-over that a stage's
    // pass pays once: the profile's call_cost (sim/profile.h). On a CPU it is
    // near zero, and the recorded CPU validations were made without it.
    options.whole_pass = on_gpu(args);
    // On a GPU the --nproc workers are streams of it: how much they do at
    // once (sim/profile.h: shared_streams; shared_topology moves it into the
    // topology), measured with the GPU saturated: at least kSaturatingStreams
    // streams. Two streams in lockstep run the same kernels at once and do
    // less than two pipeline stages, whose kernels differ, get (on an H200,
    // gpt-mini at micro-batch 16384: 1.14 against 1.21 with four; the
    // two-worker runs replay within 5% at the latter, bench/RESULTS.md).
    if (on_gpu(args)) options.streams = std::max(args.nproc, kSaturatingStreams);
    profile = take(exec::measure_profile(model.name, args.microbatch_size, options)).profile;
  }
  std::vector<std::string> names;
  for (const Layer& layer : profile.layers) names.push_back(layer.name);
  if (names != model.layer_names) {
    throw UsageError(fmt::format("{}: the profile's layers are not those of model '{}' ({} layers: {} ...)",
                                 args.profile, model.name, model.layer_names.size(), model.layer_names.front()));
  }
  write_file_atomic(path_in(dir, "profile.json"), profile_to_json(profile).dump(2) + "\n");
  return profile;
}

// Runs `baton <arguments>` as `nproc` local ranks with this process's standard
// output and error sent to `log` (the ranks inherit them), so what the ranks
// print lands there.
void launch_logged(const std::vector<std::string>& arguments, int nproc, Seconds timeout, const std::string& log,
                   const std::string& what) {
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = dup(STDOUT_FILENO);
  const int saved_err = dup(STDERR_FILENO);
  const int file = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (saved_out < 0 || saved_err < 0 || file < 0) throw UsageError(fmt::format("validate: cannot write {}", log));
  dup2(file, STDOUT_FILENO);
  dup2(file, STDERR_FILENO);
  close(file);
  const Status launched = launch_self_ranks(arguments, nproc, timeout);
  dup2(saved_out, STDOUT_FILENO);
  dup2(saved_err, STDERR_FILENO);
  close(saved_out);
  close(saved_err);
  if (!launched) throw RunFailure(fmt::format("{}: {} (see {})", what, launched.error().message, log));
}

// One slice of the device's speed and noise under the run's conditions
// (sim/validation_figures.h), measured in `dir` just before a schedule's run:
// every rank profiles the model at once, each stage's forward and backward
// after --gap-us of sleep (a stage's work follows a wait in a run once per
// stage, not per layer).
LoadedSlice measure_loaded_slice(const ValidateArgs& args, const Profile& alone, const Plan& plan,
                                 const fs::path& dir) {
  std::vector<std::string> starts;
  for (const StagePlan& stage : plan.stages) starts.push_back(std::to_string(stage.layers.begin));
  progress(fmt::format("measuring {} on {} ranks at once, {} us of sleep before each stage's work (stages {})",
                       alone.model, args.nproc, args.gap_us, stages_to_string(plan.stages)));
  const std::string path = path_in(dir, "profile-loaded.json");
  launch_logged({"profile",
                 "measure",
                 "--model",
                 alone.model,
                 "--microbatch-size",
                 std::to_string(alone.microbatch_size),
                 "--steps",
                 "20",
                 "--min-time",
                 fmt::format("{}", args.profile_seconds),
                 "--quantile",
                 fmt::format("{}", args.quantile),
                 "--gap-us",
                 fmt::format("{}", args.gap_us),
                 "--gap-at",
                 fmt::format("{}", fmt::join(starts, ",")),
                 "--threads",
                 std::to_string(args.threads),
                 "-o",
                 path},
                args.nproc, Seconds(4 * args.profile_seconds + 120.0), path_in(dir, "profile-loaded.log"),
                "loaded profile");
  LoadedSlice slice;
  slice.speed = loaded_speed(alone, load_profile_file(path));
  const nlohmann::json document = nlohmann::json::parse(read_file(path));
  if (document.contains("compute_noise")) slice.noise = document["compute_noise"].get<std::vector<double>>();
  return slice;
}

// The slices pooled into the calibrated topology, saved as DIR/topology.json:
// compute_noise all their samples, relative_speed the median of the slices'
// speeds (for the record: each schedule is predicted at its run's own, run_speed).
Topology pooled_topology(const ValidateArgs& args, const Topology& base, const std::vector<LoadedSlice>& slices,
                         const fs::path& dir) {
  Topology topology = base;
  topology.device = pooled_device(base.device, slices);
  nlohmann::json document = nlohmann::json::parse(read_file(path_in(dir, "topology.json")));
  document["device"]["relative_speed"] = topology.device.relative_speed;
  if (!topology.device.compute_noise.empty()) document["device"]["compute_noise"] = topology.device.compute_noise;
  std::string source = document.value("source", "");
  const std::string unmeasured = "relative_speed 1: compute as profiled.";
  if (const size_t at = source.find(unmeasured); at != std::string::npos) source.erase(at, unmeasured.size());
  document["source"] = source + fmt::format(
                                    "relative_speed {:.3f}, measured by `baton validate`: the median over {} "
                                    "slices, one just before each schedule's run, of compute of a profile "
                                    "alone / compute with every rank profiling at once between {} us "
                                    "sleeps; compute_noise all the slices' samples.",
                                    topology.device.relative_speed, slices.size(), args.gap_us);
  write_file_atomic(path_in(dir, "topology.json"), document.dump(2) + "\n");
  return topology;
}

Topology shared_topology(const Topology& base, const Profile& profile, const fs::path& dir) {
  Topology topology = base;
  if (!profile.shared_streams || !topology.levels.front().shared_compute) return topology;
  // Below 1 the streams slow each other down beyond taking turns; the
  // simulator's floor is taking turns.
  topology.levels.front().shared_speedup = std::max(1.0, profile.shared_streams->speedup);
  nlohmann::json document = nlohmann::json::parse(read_file(path_in(dir, "topology.json")));
  document["levels"][0]["shared_speedup"] = topology.levels.front().shared_speedup;
  document["source"] =
      document.value("source", "") + fmt::format(
                                         " shared_speedup {:.3f}: the profile's {} streams at once (profile measure "
                                         "--streams), measured {:.3f}.",
                                         topology.levels.front().shared_speedup, profile.shared_streams->streams,
                                         profile.shared_streams->speedup);
  write_file_atomic(path_in(dir, "topology.json"), document.dump(2) + "\n");
  return topology;
}

std::pair<double, double> loaded_forward_ms(const Profile& profile, int nproc) {
  const LayerRange all{0, profile.num_layers()};
  const double stage = forward_time(profile, all).ms() / std::max(nproc, 1);
  const auto held = [](double ms) { return std::clamp(ms, 0.05, 5.0); };
  return {held(0.5 * stage), held(1.5 * stage)};
}

Topology obtain_topology(const ValidateArgs& args, const fs::path& dir, nlohmann::json& calibration,
                         const Profile* profile) {
  const std::string path = path_in(dir, "topology.json");
  if (!args.topology.empty()) {
    write_file_atomic(path, read_file(args.topology));
  } else if (on_gpu(args)) {
    progress(fmt::format("calibrating the hand-overs between {} workers on {}", args.nproc, args.device));
    launch_logged({"calibrate", "--device", args.device, "--nproc", std::to_string(args.nproc), "-o", path, "--timeout",
                   fmt::format("{}", args.timeout_s)},
                  1, Seconds(4 * args.timeout_s + 60.0), path_in(dir, "calibrate.log"), "calibration");
  } else {
    progress(fmt::format("calibrating the link between {} gloo ranks", args.nproc));
    std::vector<std::string> arguments{"calibrate", "--nproc",   std::to_string(args.nproc),       "-o",
                                       path,        "--timeout", fmt::format("{}", args.timeout_s)};
    if (profile != nullptr) {
      const auto [low, high] = loaded_forward_ms(*profile, args.nproc);
      arguments.insert(arguments.end(), {"--loaded-forward-ms", fmt::format("{:.4f},{:.4f}", low, high)});
    }
    launch_logged(arguments, args.nproc, Seconds(4 * args.timeout_s + 60.0), path_in(dir, "calibrate.log"),
                  "calibration");
  }
  const nlohmann::json document = nlohmann::json::parse(read_file(path), nullptr, false);
  if (document.is_object() && document.contains("calibration")) calibration = document["calibration"];
  Topology topology = load_topology_file(path);
  if (topology.num_devices() < args.nproc) {
    throw UsageError(fmt::format("{}: topology '{}' has {} devices but --nproc is {}", args.topology, topology.name,
                                 topology.num_devices(), args.nproc));
  }
  return topology;
}

}  // namespace baton::cli

#endif  // BATON_HAVE_EXEC
