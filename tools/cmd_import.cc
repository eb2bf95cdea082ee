// `baton import pipedream`: PipeDream's graph.txt profiles into baton's format.
#include <memory>

#include "planner/pipedream_import.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/report.h"

namespace baton::cli {

namespace {

struct ImportArgs {
  std::string input;
  std::string output;
  std::string model;
  std::string device = "unknown (PipeDream profile)";
  int microbatch_size = 0;
};

int run_import(const ImportArgs& args) {
  Profile profile = take(import_pipedream_graph(read_file(args.input), args.input));
  if (!args.model.empty()) profile.model = args.model;
  if (profile.model.empty()) profile.model = "imported";
  profile.device = args.device;
  if (args.microbatch_size > 0) profile.microbatch_size = args.microbatch_size;
  const std::string text = profile_to_json(profile).dump(2) + "\n";
  if (args.output.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    write_file_atomic(args.output, text);
  }
  int dag_layers = 0;
  Seconds total;
  Bytes params;
  for (int i = 0; i < profile.num_layers(); ++i) {
    const Layer& layer = profile.layers[i];
    dag_layers += layer.inputs.size() > 1 || (i > 0 && layer.inputs != std::vector<int>{i - 1});
    total += layer.forward + layer.backward;
    params += layer.param_bytes;
  }
  std::fprintf(stderr, "baton: imported %d layers (%d with non-chain inputs), forward+backward %s, parameters %s\n",
               profile.num_layers(), dag_layers, human_seconds(total).c_str(), human_bytes(params).c_str());
  return 0;
}

}  // namespace

void add_import_command(CLI::App& app, CommandResult& result) {
  CLI::App* import = app.add_subcommand("import", "Convert other tools' profiles into baton's format");
  import->require_subcommand(1);
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = import->add_subcommand("pipedream", "Import a PipeDream graph.txt layer profile");
  cmd->footer(
      "Reads PipeDream's profiler output (one line per node with forward_compute_time, backward_compute_time\n"
      "in ms, activation_size and parameter_size in bytes, then the edges) and writes a baton.profile.v1\n"
      "profile: layers in a topological order, the DAG kept in `inputs`, node descriptions kept.\n"
      "Example: baton import pipedream profiles/vgg16/graph.txt -o traces/vgg16_pipedream.json --model vgg16");
  cmd->add_option("graph", args->input, "PipeDream graph.txt")->required();
  cmd->add_option("-o,--output", args->output, "write the profile here (default: standard output)");
  cmd->add_option("--model", args->model, "model name to record");
  cmd->add_option("--device", args->device, "device the profile was measured on, to record");
  cmd->add_option("--microbatch-size", args->microbatch_size, "samples per minibatch the profile was taken at")
      ->check(at_least(1))
      ->check(at_most(kMaxMicrobatchSize));
  cmd->callback([args, &result] { result.exit_code = run_import(*args); });
}

}  // namespace baton::cli
