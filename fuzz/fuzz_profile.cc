// Fuzzes parse_profile: any text must give a Profile or an Error, never a
// crash. An accepted profile must hold the invariants sim/profile.h promises,
// what profile_to_json writes must load again, and with a key the format
// does not have it must be refused.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "sim/profile.h"

namespace {

using baton::Profile;
using baton::fuzz::fail;

void check_invariants(const Profile& profile) {
  if (profile.layers.empty()) fail("profile has a layer", "");
  if (profile.microbatch_size < 1) fail("microbatch_size >= 1", "");
  for (int i = 0; i < profile.num_layers(); ++i) {
    const baton::Layer& layer = profile.layers[i];
    if (layer.forward.value < 0 || layer.backward.value < 0) fail("times >= 0", layer.name);
    if (layer.output_bytes.value < 0 || layer.param_bytes.value < 0) fail("sizes >= 0", layer.name);
    for (int producer : layer.inputs) {
      if (producer < 0 || producer >= i) fail("inputs name earlier layers", layer.name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto profile = baton::parse_profile(baton::fuzz::as_text(data, size), "fuzz.profile.json");
  if (!profile) return 0;
  check_invariants(*profile);
  const nlohmann::json written = baton::profile_to_json(*profile);
  auto again = baton::profile_from_json(written, "rewritten");
  if (!again) fail("the written profile loads again", again.error().message);
  if (again->num_layers() != profile->num_layers()) fail("rewriting keeps every layer", "");
  baton::fuzz::check_unknown_key_refused(
      written, [](const nlohmann::json& document) { return baton::profile_from_json(document, "extended"); });
  return 0;
}
