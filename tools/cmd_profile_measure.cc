// `baton profile measure`: a layer profile measured by running a zoo model
// with LibTorch (exec/executor.h, measure_profile).
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/executor_handoff.h"

#if BATON_HAVE_EXEC
#include "exec/executor.h"
#include "tools/report.h"
#endif

namespace baton::cli {

namespace {

struct MeasureArgs {
  std::string model;
  int microbatch_size = 0;
  std::string device = "cpu";
  int warmup = 3;
  int steps = 10;
  double min_time_s = 0.0;
  double quantile = 0.5;
  double gap_us = 0.0;
  std::vector<int> gap_at;
  int threads = 1;
  bool whole_pass = false;
  int streams = 1;
  std::string output;
};

#if BATON_HAVE_EXEC

int run_measure(const MeasureArgs& args) {
  exec::ProfileOptions options;
  options.device = args.device;
  options.warmup = args.warmup;
  options.steps = args.steps;
  options.min_time = Seconds(args.min_time_s);
  options.quantile = args.quantile;
  options.gap = Seconds::from_us(args.gap_us);
  options.gap_at = args.gap_at;
  options.intra_op_threads = args.threads;
  options.whole_pass = args.whole_pass;
  options.streams = args.streams;
  options.progress = [&args](const std::string& line) {
    std::fprintf(stderr, "profile %s: %s\n", args.model.c_str(), line.c_str());
  };
  take(exec::check_profile_request(args.model, args.microbatch_size, options));  // a bad request: exit 2
  auto result = exec::measure_profile(args.model, args.microbatch_size, options);
  if (!result) {
    std::fprintf(stderr, "baton: %s\n", result.error().message.c_str());
    return 1;
  }
  const exec::MeasuredProfile& measured = *result;
  const Profile& profile = measured.profile;
  // The spread around the medians rides along as the profile's compute_noise
  // (sim/profile.h), which the simulator does not read; `baton validate`
  // moves it into the topology (device.compute_noise).
  nlohmann::json document = profile_to_json(profile);
  if (!measured.compute_noise.empty()) document["compute_noise"] = measured.compute_noise;
  const std::string text = document.dump(2) + "\n";
  // Started as one of several ranks (RANK set, e.g. by validate): the other
  // ranks only load the machine as a run would; rank 0 reports.
  if (const char* rank = std::getenv("RANK"); rank != nullptr && std::string(rank) != "0") return 0;
  write_output(args.output, text);
  for (size_t l = 0; l < profile.layers.size(); ++l) {
    const Layer& layer = profile.layers[l];
    std::string host;
    // On a GPU, the host's side beside the device's (exec::HostTimes).
    if (args.device != "cpu" && l < measured.host.size())
      host = fmt::format("  host: forward {}  backward {}", human_seconds(measured.host[l].forward),
                         human_seconds(measured.host[l].backward));
    std::fprintf(stderr, "  %-8s forward %s  backward %s  optimizer %s  output %s  params %s%s\n", layer.name.c_str(),
                 human_seconds(layer.forward).c_str(), human_seconds(layer.backward).c_str(),
                 human_seconds(layer.optimizer).c_str(), human_bytes(layer.output_bytes).c_str(),
                 human_bytes(layer.param_bytes).c_str(), host.c_str());
  }
  if (measured.whole_pass) {
    const WholePass& whole = *measured.whole_pass;
    const CallCost per_call = per_call_cost(profile, whole);
    std::fprintf(stderr,
                 "  whole model, one call each: forward %s  backward %s  optimizer %s  "
                 "per call beyond the layers' work: forward %s  backward %s  optimizer %s\n",
                 human_seconds(whole.forward).c_str(), human_seconds(whole.backward).c_str(),
                 human_seconds(whole.optimizer).c_str(), human_seconds(per_call.forward).c_str(),
                 human_seconds(per_call.backward).c_str(), human_seconds(per_call.optimizer).c_str());
  }
  if (profile.shared_streams)
    std::fprintf(stderr, "  %d streams at once: %.3f times the work of one stream per second (shared_streams)\n",
                 profile.shared_streams->streams, profile.shared_streams->speedup);
  return 0;
}

#else

int run_measure(const MeasureArgs&) { hand_to_executor("profile measure"); }

#endif  // BATON_HAVE_EXEC

}  // namespace

void add_profile_measure_command(CLI::App& profile, CommandResult& result) {
  auto args = std::make_shared<MeasureArgs>();
  CLI::App* cmd = profile.add_subcommand("measure", "Measure a zoo model's layers with LibTorch");
  cmd->footer(
      "Run a model of the executor's zoo (mlp, vgg-mini, gpt-mini) layer by layer and write, per\n"
      "layer, the median forward, backward and optimizer-step time over --steps steps after --warmup,\n"
      "the output bytes and the parameter bytes, as a baton.profile.v1 file, plus \"compute_noise\": 200\n"
      "quantiles of every sample over its layer's value (how noisy the machine is; the simulator does\n"
      "not read it from a profile, `baton validate` puts it in the topology). Progress goes to stderr.\n"
      "On a GPU the per-layer lines also give the host's side: the wall time of the call that issues a\n"
      "forward or backward (its kernels queued, not run), which workers sharing the GPU queue on.\n"
      "With --whole-pass each step also times the whole model's forward, backward and optimizer step as\n"
      "one call each, as a stage of every layer runs them, and prints them after the layers with what a\n"
      "call costs beyond its layers' work: (sum of the layers - whole) / (layers - 1). The profile keeps\n"
      "it as call_cost_ms (never below zero): a stage of n layers then costs its layers' sum less n - 1\n"
      "calls' (on a GPU a layer timed alone starts from an idle stream; on a CPU it is near zero).\n"
      "With --streams N the whole model's passes then run on N threads at once, each with its own\n"
      "stream, parameters and samples, against one alone (3 rounds of about 50 ms, the median): the\n"
      "profile's shared_streams {streams, speedup}, speedup = N x one's time / the N's time. A GPU that\n"
      "small kernels leave mostly idle runs another stream's beside them (speedup > 1); `baton validate\n"
      "--device cuda` measures it with its workers' number, at least 4 (two streams in lockstep run the\n"
      "same kernels at once and do less than two pipeline stages get), and models workers sharing the\n"
      "GPU by it.\n"
      "Started as several ranks (RANK set), only rank 0 writes: the others measure alongside it, so that\n"
      "with --gap-us the profile sees the machine as a run uses it.\n"
      "Example: baton profile measure --model gpt-mini --microbatch-size 8 -o out/gpt-mini.json");
  cmd->add_option("--model", args->model, "mlp | vgg-mini | gpt-mini")->required();
  cmd->add_option("--microbatch-size", args->microbatch_size, "samples per microbatch")
      ->required()
      ->check(at_least(1))
      ->check(at_most(kMaxMicrobatchSize));
  cmd->add_option("--device", args->device, "cpu (default), cuda or cuda:N")->check(check_device_name);
  cmd->add_option("--warmup", args->warmup, "steps thrown away first (default 3)")->check(at_least(0));
  cmd->add_option("--steps", args->steps, "steps measured; the median is kept (default 10)")->check(at_least(1));
  cmd->add_option("--min-time", args->min_time_s,
                  "and keep measuring for at least this many seconds (default 0): on a shared machine whose\n"
                  "speed changes over seconds the median then spans those changes")
      ->check(at_least(0));
  cmd->add_option("--quantile", args->quantile,
                  "order statistic kept per layer: 0.5 the median (default), 0.1 the machine undisturbed")
      ->check(in_range(0.0, 1.0));
  cmd->add_option("--gap-us", args->gap_us,
                  "sleep this long before each timed region (default 0, at most 1 s), as stages wait between "
                  "computations")
      ->check(in_range(0, 1e6));
  cmd->add_option("--gap-at", args->gap_at,
                  "comma list of the first layers of a plan's stages, e.g. 0,3: sleep only before their\n"
                  "forwards and before the backwards of the stages' last layers (default: before every region)")
      ->delimiter(',')
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--threads", args->threads, "LibTorch intra-op threads (1 to 1024, default 1)")
      ->check(in_range(1, 1024));
  cmd->add_flag("--whole-pass", args->whole_pass,
                "also time the whole model's passes as one call each: the profile's call_cost_ms");
  cmd->add_option("--streams", args->streams,
                  "also run the whole model on this many streams at once against one (default 1: not measured)")
      ->check(in_range(1, 64));
  cmd->add_option("-o,--output", args->output, "write the profile here (default: standard output)");
  cmd->callback([args, &result] { result.exit_code = run_measure(*args); });
}

}  // namespace baton::cli
