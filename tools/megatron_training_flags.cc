#include "tools/megatron_training_flags.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace baton::cli {

const std::string kTrainingFlagsGroup =
    "Megatron training flags accepted and not modelled (no effect on a training iteration's time or memory)";

namespace {

enum class Arity { kValue, kValues, kSwitch };

struct TrainingFlag {
  const char* name;
  Arity arity;
  const char* what;
};

// Megatron-LM's spellings (megatron/training/arguments.py and the configs it
// is built from). --data-path, --moe-aux-loss-coeff and
// --moe-router-load-balancing-type take several values.
constexpr TrainingFlag kFlags[] = {
    {"--lr", Arity::kValue, "learning rate"},
    {"--min-lr", Arity::kValue, "learning rate"},
    {"--lr-decay-style", Arity::kValue, "learning rate"},
    {"--lr-decay-iters", Arity::kValue, "learning rate"},
    {"--lr-decay-samples", Arity::kValue, "learning rate"},
    {"--lr-warmup-iters", Arity::kValue, "learning rate"},
    {"--lr-warmup-samples", Arity::kValue, "learning rate"},
    {"--lr-warmup-fraction", Arity::kValue, "learning rate"},
    {"--lr-warmup-init", Arity::kValue, "learning rate"},
    {"--weight-decay", Arity::kValue, "optimizer hyperparameter"},
    {"--start-weight-decay", Arity::kValue, "optimizer hyperparameter"},
    {"--end-weight-decay", Arity::kValue, "optimizer hyperparameter"},
    {"--weight-decay-incr-style", Arity::kValue, "optimizer hyperparameter"},
    {"--adam-beta1", Arity::kValue, "optimizer hyperparameter"},
    {"--adam-beta2", Arity::kValue, "optimizer hyperparameter"},
    {"--adam-eps", Arity::kValue, "optimizer hyperparameter"},
    {"--clip-grad", Arity::kValue, "optimizer hyperparameter"},
    {"--decoupled-lr", Arity::kValue, "learning rate"},
    {"--decoupled-min-lr", Arity::kValue, "learning rate"},
    {"--apply-layernorm-1p", Arity::kSwitch, "the norms' weights kept as 1 + w"},
    {"--calculate-per-token-loss", Arity::kSwitch, "the loss's normalization"},
    {"--manual-gc", Arity::kSwitch, "Python's garbage collection on the host (not modelled at all)"},
    {"--rotary-percent", Arity::kValue, "the rotary positions' share of a head (their kernel taken as whole)"},
    {"--init-method-std", Arity::kValue, "initialization"},
    {"--initial-loss-scale", Arity::kValue, "fp16 loss scaling"},
    {"--min-loss-scale", Arity::kValue, "fp16 loss scaling"},
    {"--loss-scale-window", Arity::kValue, "fp16 loss scaling"},
    {"--hysteresis", Arity::kValue, "fp16 loss scaling"},
    {"--seed", Arity::kValue, "the run"},
    {"--train-iters", Arity::kValue, "the run"},
    {"--train-samples", Arity::kValue, "the run"},
    {"--exit-duration-in-mins", Arity::kValue, "the run"},
    {"--distributed-backend", Arity::kValue, "the run"},
    {"--distributed-timeout-minutes", Arity::kValue, "the run"},
    {"--step-batch-size-schedule", Arity::kValue,
     "the batch-size ramp: baton times an iteration at --global-batch-size"},
    {"--rampup-batch-size", Arity::kValues, "the batch-size ramp: baton times an iteration at --global-batch-size"},
    {"--use-mcore-models", Arity::kSwitch, "the model's implementation: baton models Megatron-core's"},
    {"--rotary-base", Arity::kValue, "the rotary positions' base frequency"},
    {"--use-rope-scaling", Arity::kSwitch, "the rotary positions' frequencies (Llama 3.1's scaling)"},
    {"--rope-scaling-factor", Arity::kValue, "the rotary positions' frequencies (Llama 3.1's scaling)"},
    {"--data-path", Arity::kValues, "data"},
    {"--split", Arity::kValue, "data"},
    {"--data-cache-path", Arity::kValue, "data"},
    {"--mock-data", Arity::kSwitch, "data"},
    {"--num-workers", Arity::kValue, "data"},
    {"--tokenizer-type", Arity::kValue, "data"},
    {"--tokenizer-model", Arity::kValue, "data"},
    {"--vocab-file", Arity::kValue, "data"},
    {"--merge-file", Arity::kValue, "data"},
    {"--tiktoken-pattern", Arity::kValue, "data"},
    {"--no-mmap-bin-files", Arity::kSwitch, "data"},
    {"--no-create-attention-mask-in-dataloader", Arity::kSwitch,
     "data (the loader's s x s mask, which baton does not count either way)"},
    {"--fp8-amax-history-len", Arity::kValue, "FP8 delayed scaling's history (its amax reductions are not modelled)"},
    {"--fp8-amax-compute-algo", Arity::kValue, "FP8 delayed scaling's history (its amax reductions are not modelled)"},
    {"--empty-unused-memory-level", Arity::kValue,
     "the allocator's cache emptied after each iteration's passes (1) and step (2): baton counts allocated "
     "memory, whose peak does not move, and not the time of allocating again"},
    {"--save", Arity::kValue, "checkpoints (their time between iterations is not counted)"},
    {"--load", Arity::kValue, "checkpoints (their time between iterations is not counted)"},
    {"--save-interval", Arity::kValue, "checkpoints (their time between iterations is not counted)"},
    {"--no-load-optim", Arity::kSwitch, "checkpoints (their time between iterations is not counted)"},
    {"--ckpt-format", Arity::kValue, "checkpoints (their time between iterations is not counted)"},
    {"--no-load-rng", Arity::kSwitch, "checkpoints (their time between iterations is not counted)"},
    {"--eval-iters", Arity::kValue, "evaluation (its time between iterations is not counted)"},
    {"--eval-interval", Arity::kValue, "evaluation (its time between iterations is not counted)"},
    {"--log-interval", Arity::kValue, "logging"},
    {"--profile-step-start", Arity::kValue, "logging"},
    {"--profile-step-end", Arity::kValue, "logging"},
    {"--log-throughput", Arity::kSwitch, "logging"},
    {"--logging-level", Arity::kValue, "logging"},
    {"--profile-ranks", Arity::kValues, "logging"},
    {"--no-check-for-nan-in-loss-and-grad", Arity::kSwitch,
     "the NaN checks of the loss and the gradients (baton does not count them either way)"},
    {"--tensorboard-dir", Arity::kValue, "logging"},
    {"--wandb-project", Arity::kValue, "logging"},
    {"--wandb-exp-name", Arity::kValue, "logging"},
    {"--wandb-save-dir", Arity::kValue, "logging"},
    {"--moe-router-score-function", Arity::kValue, "the router's scores (routing taken as balanced)"},
    {"--moe-router-pre-softmax", Arity::kSwitch, "the router's scores (routing taken as balanced)"},
    {"--moe-router-topk-scaling-factor", Arity::kValue, "the router's scores (routing taken as balanced)"},
    {"--moe-router-load-balancing-type", Arity::kValues, "the router's balancing (routing taken as balanced)"},
    {"--moe-aux-loss-coeff", Arity::kValues, "the router's balancing (routing taken as balanced)"},
    {"--moe-z-loss-coeff", Arity::kValue, "the router's balancing (routing taken as balanced)"},
    {"--moe-router-enable-expert-bias", Arity::kSwitch, "the router's balancing (routing taken as balanced)"},
    {"--moe-router-bias-update-rate", Arity::kValue, "the router's balancing (routing taken as balanced)"},
};

// `value` as a shell word: as it is when it has only characters no shell
// treats specially, else in single quotes (a quote inside as '\'').
std::string shell_word(const std::string& value) {
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_.,:/=+@%").find(c) != std::string_view::npos;
  });
  if (plain) return value;
  std::string quoted = "'";
  for (const char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string with_values(const std::string& name, const std::vector<std::string>& values) {
  std::string text = name;
  for (const std::string& value : values) text += " " + shell_word(value);
  return text;
}

}  // namespace

void add_training_flags(CLI::App& cmd, std::vector<std::string>& given) {
  for (const TrainingFlag& flag : kFlags) {
    const std::string name = flag.name;
    if (cmd.get_option_no_throw(name) != nullptr) continue;  // the command's own flag of that name
    const std::string help = fmt::format("Megatron's, {}: accepted, not modelled", flag.what);
    CLI::Option* option = nullptr;
    switch (flag.arity) {
      case Arity::kValue:
        option = cmd.add_option_function<std::string>(
            name, [&given, name](const std::string& value) { given.push_back(with_values(name, {value})); }, help);
        break;
      case Arity::kValues:
        option = cmd.add_option_function<std::vector<std::string>>(
                        name,
                        [&given, name](const std::vector<std::string>& values) {
                          given.push_back(with_values(name, values));
                        },
                        help)
                     ->expected(1, CLI::detail::expected_max_vector_size);
        break;
      case Arity::kSwitch:
        option = cmd.add_flag_function(
            name, [&given, name](std::int64_t) { given.push_back(name); }, help);
        break;
    }
    option->group(kTrainingFlagsGroup);
  }
}

std::vector<std::string> training_flag_names(const std::vector<std::string>& given) {
  std::vector<std::string> names;
  for (const std::string& flag : given) names.push_back(flag.substr(0, flag.find(' ')));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

void note_not_modelled(std::string_view command, const std::vector<std::string>& given) {
  if (given.empty()) return;
  std::fputs(fmt::format("baton: note: {}: {} accepted, not modelled (no effect on a training iteration's time or "
                         "memory; --help lists these flags)\n",
                         command, fmt::join(training_flag_names(given), " "))
                 .c_str(),
             stderr);
}

CLI::Option* add_profile_option(CLI::App& cmd, std::string& path, std::vector<std::string>& given,
                                const std::string& help) {
  return cmd
      .add_option_function<std::vector<std::string>>(
          "--profile",
          [&path, &given](const std::vector<std::string>& values) {
            if (values.empty() || values.front().empty())
              given.push_back("--profile");
            else
              path = values.front();
          },
          help + "; alone, Megatron's profiler switch (with a GPT model in Megatron's flags: accepted, not modelled)")
      ->expected(0, 1);
}

bool lone_profile(const CLI::App& cmd) {
  const CLI::Option* option = cmd.get_option_no_throw("--profile");
  if (option == nullptr || option->count() == 0) return false;
  const auto& results = option->results();
  return results.empty() || results.front().empty();
}

}  // namespace baton::cli
