// The names of the executor's model zoo (exec/model_zoo.cc), without LibTorch:
// the commands that only plan (baton plan --emit torchrun) refuse a plan the
// executor could not run before printing its launch line.
#pragma once

#include <array>
#include <string_view>

namespace baton {

inline constexpr std::array<std::string_view, 3> kZooModelNames{"mlp", "vgg-mini", "gpt-mini"};

inline constexpr bool is_zoo_model(std::string_view name) {
  for (std::string_view known : kZooModelNames)
    if (known == name) return true;
  return false;
}

}  // namespace baton
