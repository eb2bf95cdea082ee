// `baton profile analytic`: a layer profile derived from an architecture's
// FLOPs and bytes at a stated device peak and efficiency (sim/analytic.h).
#include <memory>

#include <fmt/format.h>

#include "sim/analytic.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

struct AnalyticArgs {
  std::string arch;
  std::string device = "v100";
  int microbatch_size = 32;
  double efficiency = 0.0;
  std::string output;
  bool list = false;
};

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

int run_analytic(const AnalyticArgs& args) {
  if (args.list) {
    std::printf("architectures: %s\n", joined(analytic_architectures()).c_str());
    for (const std::string& name : analytic_devices()) {
      const DeviceSpec spec = take(device_spec(name));
      std::printf("device %-7s %s\n", name.c_str(), spec.label().c_str());
    }
    return 0;
  }
  if (args.arch.empty()) throw UsageError("profile analytic: --arch is required (see --list)");
  DeviceSpec spec = take(device_spec(args.device));
  if (args.efficiency > 0) spec.efficiency = args.efficiency;
  const Profile profile = take(make_analytic_profile(args.arch, spec, args.microbatch_size));
  const std::string derivation = analytic_derivation(spec, args.microbatch_size);
  const std::string text = profile_to_json_with_derivation(profile, derivation).dump(2) + "\n";
  Seconds total;
  Bytes params;
  for (const Layer& layer : profile.layers) {
    total += layer.forward + layer.backward;
    params += layer.param_bytes;
  }
  if (args.output.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    write_file_atomic(args.output, text);
  }
  std::fprintf(stderr, "baton: %s on %s, microbatch %d: %d layers, forward+backward %s, parameters %s\n",
               args.arch.c_str(), spec.full_name.c_str(), args.microbatch_size, profile.num_layers(),
               human_seconds(total).c_str(), human_bytes(params).c_str());
  return 0;
}

}  // namespace

void add_profile_analytic_command(CLI::App& profile, CommandResult& result) {
  auto args = std::make_shared<AnalyticArgs>();
  CLI::App* cmd = profile.add_subcommand("analytic", "Derive a profile from an architecture's FLOPs and bytes");
  cmd->footer(
      "Derive a layer profile from an architecture: per layer FLOPs and bytes moved, turned into\n"
      "time with a roofline at the device's stated peak and efficiency; backward = 2 x forward.\n"
      "Example: baton profile analytic --arch gpt-13b --device h100 --microbatch-size 1 -o gpt13b.json");
  cmd->add_option("--arch", args->arch, "architecture (see --list)");
  cmd->add_option("--device", args->device, "device spec: v100, a100, h100, titanx, cpu (default v100)");
  cmd->add_option("--microbatch-size", args->microbatch_size, "samples per microbatch (default 32)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--efficiency", args->efficiency,
                  "override the fraction of peak FLOP/s that GEMMs and convolutions reach")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("-o,--output", args->output, "write the profile here (default: standard output)");
  cmd->add_flag("--list", args->list, "list the architectures and device specs");
  cmd->callback([args, &result] { result.exit_code = run_analytic(*args); });
}

}  // namespace baton::cli
