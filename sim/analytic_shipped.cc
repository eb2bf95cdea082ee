#include "sim/analytic_shipped.h"

#include <fmt/format.h>

#include "sim/analytic.h"
#include "sim/profile.h"

namespace baton {

namespace {

constexpr const char* kUniform = "uniform-16";

// Microbatch sizes: what one GPU of the V100 generation trained with per
// pipeline microbatch (CNNs, GNMT) and what large-model pipelines use (BERT, GPT).
struct ArchitectureBatch {
  const char* architecture;
  int microbatch_size;
};
constexpr ArchitectureBatch kBatches[] = {{"vgg16", 32},   {"alexnet", 128}, {"resnet50", 32},
                                          {"gnmt8", 64},   {"gnmt16", 64},   {"bert-large", 8},
                                          {"gpt-1.3b", 1}, {"gpt-13b", 1},   {"gpt-175b", 1}};

ShippedProfile analytic_entry(const std::string& architecture, const std::string& device, int microbatch_size) {
  return ShippedProfile{fmt::format("{}_{}_mb{}.json", architecture, device, microbatch_size), architecture, device,
                        microbatch_size};
}

nlohmann::json uniform_json() {
  const Profile profile = make_uniform_profile(16, Seconds::from_ms(1.0), Seconds::from_ms(2.0),
                                               Bytes(int64_t{4} << 20), Bytes(int64_t{16} << 20), 1);
  return profile_to_json_with_derivation(
      profile,
      "Synthetic, not measured: make_uniform_profile(16 layers, forward 1 ms, backward 2 ms, "
      "output 4 MiB, params 16 MiB, microbatch 1). Identical layers, so pipeline results can be "
      "checked against closed forms such as (M + S - 1)(tF + tB). Regenerate with "
      "bench/make_shipped_profiles.");
}

}  // namespace

std::vector<ShippedProfile> shipped_profiles() {
  std::vector<ShippedProfile> entries;
  for (const char* device : {"v100", "a100", "h100"}) {
    for (const ArchitectureBatch& batch : kBatches)
      entries.push_back(analytic_entry(batch.architecture, device, batch.microbatch_size));
  }
  for (const char* architecture : {"vgg16", "resnet50", "gnmt8"}) {
    for (const ArchitectureBatch& batch : kBatches) {
      if (batch.architecture == std::string(architecture))
        entries.push_back(analytic_entry(architecture, "titanx", batch.microbatch_size));
    }
  }
  entries.push_back(ShippedProfile{"uniform_16.json", kUniform, "synthetic", 1});
  return entries;
}

Result<nlohmann::json> shipped_profile_json(const ShippedProfile& entry) {
  if (entry.architecture == kUniform) return uniform_json();
  auto device = device_spec(entry.device);
  if (!device) return device.error();
  auto profile = make_analytic_profile(entry.architecture, *device, entry.microbatch_size);
  if (!profile) return profile.error();
  return profile_to_json_with_derivation(*profile, analytic_derivation(*device, entry.microbatch_size));
}

Result<std::string> shipped_profile_text(const ShippedProfile& entry) {
  auto document = shipped_profile_json(entry);
  if (!document) return document.error();
  return document->dump(2) + "\n";
}

}  // namespace baton
