// baton: plan, simulate and execute pipeline-parallel training.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "sim/allocator.h"
#include "tools/cli_support.h"
#include "tools/commands.h"

namespace {

// CLI11 answers a misspelled command (`baton plna`) with "A subcommand is
// required": the word that names no command, and the commands there are.
// Empty when the command words are known (or end before a command is due).
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc && at->get_require_subcommand_min() > 0; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return "";
    std::vector<std::string> names;
    CLI::App* next = nullptr;
    for (CLI::App* command : at->get_subcommands([](CLI::App*) { return true; })) {
      names.push_back(command->get_name());
      if (command->check_name(word)) next = command;
    }
    if (next == nullptr)
      return fmt::format("unknown command '{}'; the commands{} are: {}", word,
                         at == &app ? "" : " of " + at->get_name(), fmt::join(names, ", "));
    at = next;
  }
  return "";
}

// CLI11 says "Could not convert: --num-layers = abc" for a value its option's
// type cannot hold; in baton's words, with what the option takes. The type
// comes from the option in the command that was run (CLI11's INT or UINT:
// baton's counts are ints; its real-valued flags' checks refuse a non-number
// first). Empty where the message is not of that form.
std::string conversion_message(const CLI::App& app, const std::string& what) {
  const std::string lead = "Could not convert: ";
  const size_t equals = what.find(" = ");
  if (what.rfind(lead, 0) != 0 || equals == std::string::npos) return "";
  const std::string name = what.substr(lead.size(), equals - lead.size());
  const std::string value = what.substr(equals + 3);
  std::vector<const CLI::App*> commands{&app};
  for (size_t i = 0; i < commands.size(); ++i)
    for (const CLI::App* sub : commands[i]->get_subcommands({})) commands.push_back(sub);
  for (auto it = commands.rbegin(); it != commands.rend(); ++it) {  // the innermost command first
    if ((*it)->get_name() != "baton" && !(*it)->parsed()) continue;
    const CLI::Option* option = (*it)->get_option_no_throw(name);
    if (option == nullptr) continue;
    const std::string type = option->get_type_name();  // "INT", or "INT:" and a check's description
    const auto is = [&](const char* kind) { return type == kind || type.rfind(std::string(kind) + ":", 0) == 0; };
    if (is("INT") || is("UINT"))
      return fmt::format("{}: expected a whole number of at most 2147483647, got \"{}\"", name, value);
    return "";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  baton::keep_freed_memory();
  CLI::App app{
      "baton: plan, simulate and execute pipeline-parallel training (PipeDream-style).\n"
      "Try: baton simulate --profile traces/vgg16_v100_mb32.json --topology "
      "topologies/pipedream_a.json --stages 0-31x15,31-39x1 --schedule pipedream,1f1b,gpipe,dp\n"
      "Each command explains itself: baton COMMAND --help",
      "baton"};
  app.require_subcommand(1);
  baton::cli::CommandResult result;
  baton::cli::add_plan_command(app, result);
  baton::cli::add_import_command(app, result);
  baton::cli::add_simulate_command(app, result);
  baton::cli::add_sweep_command(app, result);
  baton::cli::add_check_command(app, result);
  CLI::App* profile = app.add_subcommand("profile", "Make layer profiles: derived from an architecture, or measured");
  profile->require_subcommand(1);
  baton::cli::add_profile_analytic_command(*profile, result);
  baton::cli::add_profile_measure_command(*profile, result);
  baton::cli::add_run_command(app, result);
  baton::cli::add_compare_command(app, result);
  baton::cli::add_calibrate_command(app, result);
  baton::cli::add_validate_command(app, result);
  baton::cli::add_kernels_command(app, result);
  if (argc <= 1) {
    // As git does: a bare `baton` shows what it can do, and is still a usage error.
    std::fputs(app.help().c_str(), stdout);
    return baton::cli::kExitBadInput;
  }
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "baton: %s\n", unknown.c_str());
    return baton::cli::kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ConversionError& e) {
    const std::string message = conversion_message(app, e.what());
    if (message.empty()) return app.exit(e) == 0 ? 0 : baton::cli::kExitBadInput;
    std::fprintf(stderr, "baton: %s\n", message.c_str());
    return baton::cli::kExitBadInput;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : baton::cli::kExitBadInput;
  } catch (const baton::cli::UsageError& e) {
    std::fprintf(stderr, "baton: %s\n", e.what());
    return baton::cli::kExitBadInput;
  } catch (const std::bad_alloc&) {
    // The inputs' checks bound what a command builds (kMaxMicrobatchStages);
    // this is the last word where the machine has less memory than that.
    std::fputs(
        "baton: out of memory: the machine could not hold what this command builds (a smaller batch, "
        "fewer microbatches or a smaller sweep needs less)\n",
        stderr);
    return 1;
  }
  return result.exit_code;
}
