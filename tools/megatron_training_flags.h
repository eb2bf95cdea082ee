// Megatron-LM's training flags that change nothing in a training
// iteration's time or memory (the learning-rate schedule, the optimizer's
// hyperparameters, the run's length and seed, data and tokenizer paths,
// checkpoints, evaluation, logging, and the router's balancing terms, routing
// being taken as balanced throughout): accepted by the commands that take a
// GPT model in Megatron's flags, so that a launch line runs as it is, and
// named as not modelled. Any other flag is refused, as before.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace baton::cli {

// The group the flags are listed under in --help.
extern const std::string kTrainingFlagsGroup;

// Adds the flags to `cmd`; each one given is appended to `given` as its
// flag and values, quoted for a shell where they need it ("--lr 3e-4",
// "--data-path 1.0 '/data/my corpus'").
void add_training_flags(CLI::App& cmd, std::vector<std::string>& given);

// The flags' names alone, sorted, each once: {"--data-path", "--lr"}.
std::vector<std::string> training_flag_names(const std::vector<std::string>& given);

// "baton: note: ..." on stderr naming `given`'s flags (nothing when empty).
void note_not_modelled(std::string_view command, const std::vector<std::string>& given);

// baton's --profile PATH (a layer profile), which Megatron-LM spells as a
// switch (its profiler, with --profile-step-start and --profile-step-end).
// Given a path, `path` takes it; given alone, "--profile" joins `given` as
// Megatron's flag, accepted and not modelled with a GPT model in Megatron's
// flags (refuse_megatron_flags refuses it without one).
CLI::Option* add_profile_option(CLI::App& cmd, std::string& path, std::vector<std::string>& given,
                                const std::string& help);
// Whether `cmd`'s --profile was given alone (Megatron's switch).
bool lone_profile(const CLI::App& cmd);

}  // namespace baton::cli
