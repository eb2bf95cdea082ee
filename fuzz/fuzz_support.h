// Helpers shared by the fuzz targets: the input as text, a failed property
// as a crash libFuzzer records, and the small fixed model and cluster that
// fuzzed plans are checked against.
//
// A property that fails calls `fail`, which prints what broke and aborts, so
// libFuzzer saves the input as a crash file. Loaders returning an Error is
// never a failure: it is their job.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/topology.h"

namespace baton::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] inline void fail(std::string_view property, std::string_view detail) {
  std::fprintf(stderr, "fuzz property failed: %.*s\n%.*s\n", static_cast<int>(property.size()), property.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// Loaders refuse keys their format does not have (sim/json_fields.h,
// check_known_keys): `written`, a document a writer produced, with one key
// more at its top level must be refused, and the message must name the key.
template <typename Load>
void check_unknown_key_refused(nlohmann::json written, Load load) {
  written["fuzz_unknown_key"] = 1;
  auto loaded = load(written);
  if (loaded) fail("a document with an unknown key is refused", written.dump());
  if (loaded.error().message.find("\"fuzz_unknown_key\"") == std::string::npos)
    fail("the refusal names the unknown key", loaded.error().message);
}

// Work caps: plans larger than this are only parsed and checked, never
// expanded into devices or a Program (that would measure the schedule's
// size, not find bugs).
constexpr int64_t kMaxWorkers = 64;
constexpr int64_t kMaxMicrobatches = 256;

// Total replicas in 64-bit, safe for any parsed plan.
inline int64_t total_workers(const std::vector<StagePlan>& stages) {
  int64_t total = 0;
  for (const StagePlan& stage : stages) total += stage.replicas;
  return total;
}

// 8 layers; plans must cover [0, 8).
inline const Profile& fixture_profile() {
  static const Profile profile =
      make_uniform_profile(8, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(1 << 20), Bytes(1 << 22));
  return profile;
}

// 4 servers x 16 devices = kMaxWorkers devices.
inline const Topology& fixture_topology() {
  static const Topology topology = [] {
    Topology t = make_flat_topology(16, 600.0, Seconds::from_us(5.0));
    t.name = "fuzz-4x16";
    t.levels.push_back(Level{"ethernet", 4, 100.0, Seconds::from_us(20.0), {}, {}});
    return t;
  }();
  return topology;
}

}  // namespace baton::fuzz
