// The profiles shipped under traces/: which files they are and their exact
// contents, so that bench/make_shipped_profiles can regenerate them and a test
// can check that the files on disk still match the generator.
//
// Every shipped profile is profile_to_json() of its Profile plus a top-level
// "derivation" string, pretty-printed with a 2-space indent and a final newline.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/result.h"

namespace baton {

struct ShippedProfile {
  std::string file_name;     // under traces/, e.g. "vgg16_v100_mb32.json"
  std::string architecture;  // an analytic_architectures() name, or "uniform-16" (synthetic)
  std::string device;        // a device_spec() name; "synthetic" for uniform-16
  int microbatch_size = 1;
};

// Every shipped profile, in a stable order: each architecture on v100, a100 and
// h100 at one microbatch size per architecture, a few on titanx (PipeDream's
// cluster C), and the synthetic uniform_16.json.
std::vector<ShippedProfile> shipped_profiles();

// The document for one entry (profile plus "derivation").
Result<nlohmann::json> shipped_profile_json(const ShippedProfile& entry);
// The exact file text: the document dumped with a 2-space indent, then "\n".
Result<std::string> shipped_profile_text(const ShippedProfile& entry);

}  // namespace baton
