// `baton profile analytic`: a layer profile derived from an architecture's
// FLOPs and bytes at a stated device peak and efficiency (sim/analytic.h).
#include <memory>

#include <fmt/format.h>

#include "sim/analytic.h"
#include "sim/megatron_sim.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/megatron_flags.h"
#include "tools/megatron_training_flags.h"
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
  std::string topology;        // --arch gpt: the GPU and its tensor-parallel links
  std::string group_topology;  // --arch gpt: write the topology of TP groups here
  MegatronArgs megatron;
};

// --arch gpt: one tensor-parallel rank of a Megatron GPT (sim/megatron_profile.h).
int run_gpt_profile(const AnalyticArgs& args, const CLI::App& cmd) {
  if (const std::vector<std::string> given = given_flags(cmd, {"--device", "--microbatch-size", "--efficiency"});
      !given.empty())
    throw UsageError(fmt::format(
        "profile analytic --arch gpt: {} with the other architectures; a GPT's GPU is its --topology's device, its "
        "batch --micro-batch-size, and its kernels' efficiencies the GPU model's (docs/TRANSFORMERS.md)",
        flags_go(given)));
  if (args.topology.empty())
    throw UsageError("profile analytic --arch gpt: --topology is required (it names the GPU and its links)");
  const Topology topology = load_topology_file(args.topology);
  MegatronArgs flags = args.megatron;
  if (flags.global_batch == 0) flags.global_batch = flags.micro_batch * std::max(1, flags.data);
  if (flags.data == 0) flags.data = 1;
  const MegatronRun run = megatron_run(flags, topology);
  note_not_modelled("profile analytic", flags.not_modelled);
  const MegatronProfile profile = take(megatron_profile_on(run.model, run.layout, topology));
  const std::string derivation = fmt::format(
      "Megatron GPT, one of {} tensor-parallel ranks on {} ({}); per layer: GEMMs by wave-quantized tiles and "
      "memory-bound kernels at HBM speed on the GPU model, tensor-parallel all-reduces on the topology's innermost "
      "levels, recomputation {}, host dispatch floor; output_bytes and param_bytes are those of a whole "
      "tensor-parallel group (sim/megatron_profile.h)",
      run.layout.tensor, topology.name, topology.device.name, recompute_name(run.layout.recompute));
  const std::string text = profile_to_json_with_derivation(profile.profile, derivation).dump(2) + "\n";
  if (args.output.empty())
    std::fputs(text.c_str(), stdout);
  else
    write_file_atomic(args.output, text);
  if (!args.group_topology.empty())
    write_file_atomic(args.group_topology,
                      topology_to_json(take(tensor_group_topology(topology, run.layout.tensor))).dump(2) + "\n");
  const MegatronLayerTime& block = profile.times[1];
  std::fprintf(stderr,
               "baton: gpt L%lld h%lld on %s, t %d, micro-batch %d: per block forward %s (TP %s), backward %s "
               "(recomputation %s)\n",
               static_cast<long long>(run.model.layers), static_cast<long long>(run.model.hidden),
               topology.device.name.c_str(), run.layout.tensor, run.layout.micro_batch,
               human_seconds(profile.profile.layers[1].forward).c_str(), human_seconds(block.forward_comm).c_str(),
               human_seconds(profile.profile.layers[1].backward).c_str(), human_seconds(block.recompute).c_str());
  return 0;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

int run_analytic(const AnalyticArgs& args, const CLI::App& cmd) {
  if (args.list) {
    std::printf("architectures: %s, gpt (Megatron flags, --topology)\n", joined(analytic_architectures()).c_str());
    for (const std::string& name : analytic_devices()) {
      const DeviceSpec spec = take(device_spec(name));
      std::printf("device %-7s %s\n", name.c_str(), spec.label().c_str());
    }
    return 0;
  }
  if (args.arch.empty()) throw UsageError("profile analytic: --arch is required (see --list)");
  if (args.arch == "gpt") return run_gpt_profile(args, cmd);
  refuse_megatron_flags(cmd, "profile analytic", "--arch " + args.arch);
  if (!args.topology.empty() || !args.group_topology.empty())
    throw UsageError("profile analytic: --topology and --group-topology go with --arch gpt");
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
      "Example: baton profile analytic --arch gpt-13b --device h100 --microbatch-size 1 -o gpt13b.json\n\n"
      "--arch gpt takes a GPT in Megatron-LM's flags and a --topology instead of --device, and writes\n"
      "the per-layer times of one tensor-parallel rank with its tensor-parallel collectives, from the\n"
      "GPU's kernel model (sim/gpu_model.h); --group-topology writes the topology whose devices are the\n"
      "tensor-parallel groups, for simulate --stages. Example (Korthikanti et al.'s 22B layer at t 8):\n"
      "  baton profile analytic --arch gpt --topology topologies/a100_4x8.json --num-layers 48 \\\n"
      "      --hidden-size 6144 --num-attention-heads 64 --seq-length 2048 --micro-batch-size 4 \\\n"
      "      --tensor-model-parallel-size 8 -o gpt22b_t8.json");
  cmd->add_option("--arch", args->arch, "architecture (see --list)");
  cmd->add_option("--device", args->device, "device spec: v100, a100, h100, titanx, cpu (default v100)");
  cmd->add_option("--microbatch-size", args->microbatch_size, "samples per microbatch (default 32)")
      ->check(at_least(1))
      ->check(at_most(kMaxMicrobatchSize));
  cmd->add_option("--efficiency", args->efficiency,
                  "override the fraction of peak FLOP/s that GEMMs and convolutions reach, in (0, 1]")
      ->check(above_and_at_most(0.0, 1.0));
  cmd->add_option("-o,--output", args->output, "write the profile here (default: standard output)");
  cmd->add_flag("--list", args->list, "list the architectures and device specs");
  cmd->add_option("--topology", args->topology, "--arch gpt: the cluster (its device names the GPU)");
  cmd->add_option("--group-topology", args->group_topology,
                  "--arch gpt: also write the topology whose devices are tensor-parallel groups");
  add_megatron_flags(*cmd, args->megatron);
  cmd->callback([args, cmd, &result] { result.exit_code = run_analytic(*args, *cmd); });
}

}  // namespace baton::cli
