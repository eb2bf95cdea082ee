// The shipped data: every profile in traces/ and every topology in topologies/
// loads, and the generated profiles still match what the generator produces.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include "tests/catch_compat.h"

#include "sim/analytic_shipped.h"
#include "sim/profile.h"
#include "sim/topology.h"
#include "tests/analytic/analytic_fixtures.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::first_difference;

const fs::path kSourceDir(BATON_SOURCE_DIR);

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<fs::path> json_files(const fs::path& folder) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST_CASE("every shipped profile is on disk and matches the generator", "[analytic][data]") {
  const auto entries = shipped_profiles();
  CHECK(entries.size() >= 27 + 1);
  for (const ShippedProfile& entry : entries) {
    INFO(entry.file_name << " (regenerate: make_shipped_profiles traces)");
    const fs::path path = kSourceDir / "traces" / entry.file_name;
    REQUIRE(fs::exists(path));
    const std::string text = read_text(path);
    auto loaded = parse_profile(text, path.string());
    REQUIRE(loaded.ok());
    auto expected = shipped_profile_json(entry);
    REQUIRE(expected.ok());
    const json on_disk = json::parse(text);
    CHECK(first_difference(on_disk, *expected, "document").value_or("") == "");
    CHECK(on_disk.at("derivation").get<std::string>().size() > 100);
    CHECK(text.back() == '\n');
  }
}

TEST_CASE("every profile in traces/ loads and says how it was derived", "[analytic][data]") {
  const auto files = json_files(kSourceDir / "traces");
  CHECK(files.size() >= shipped_profiles().size());
  const std::string readme = read_text(kSourceDir / "traces" / "README.md");
  for (const fs::path& path : files) {
    INFO(path.string());
    const std::string text = read_text(path);
    auto profile = parse_profile(text, path.string());
    REQUIRE(profile.ok());
    CHECK(profile->num_layers() > 0);
    CHECK(json::parse(text).contains("derivation"));
  }
  for (const ShippedProfile& entry : shipped_profiles()) {
    INFO(entry.file_name);
    CHECK(readme.find(entry.file_name) != std::string::npos);
  }
}

struct ExpectedTopology {
  const char* file;
  int devices;
  std::vector<double> bandwidth_gbps;  // innermost first
  std::vector<int> rails = {};         // innermost first; empty: 1 everywhere
};

TEST_CASE("every topology loads with its stated devices and links", "[analytic][data]") {
  // Bandwidths: PCIe 10 GB/s = 80 Gb/s; NVLink (PipeDream) 25 GB/s = 200 Gb/s;
  // NVLink 3 600 GB/s both ways -> 300 GB/s x 8 = 2400 Gb/s per direction;
  // NVLink 4 900 GB/s both ways -> 450 GB/s x 8 = 3600 Gb/s; 8 IB rails per server,
  // one NIC per GPU. vTrain's cluster: 150 GB/s x 8 = 1200 Gb/s; 800 Gb/s in 8 rails.
  const std::vector<ExpectedTopology> expected = {
      {"pipedream_a.json", 4 * 4, {10 * 8, 10}},
      {"pipedream_b.json", 2 * 8, {25 * 8, 25}},
      {"pipedream_c.json", 4 * 1, {40}},
      {"a100_4x8.json", 4 * 8, {600.0 / 2 * 8, 8 * 200}, {1, 8}},
      {"h100_32x8.json", 32 * 8, {900.0 / 2 * 8, 8 * 400}, {1, 8}},
      {"a100_vtrain.json", 64 * 8, {150.0 * 8, 800}, {1, 8}},
      {"cpu_2core.json", 2, {8}},
  };
  const std::string readme = read_text(kSourceDir / "topologies" / "README.md");
  for (const ExpectedTopology& e : expected) {
    INFO(e.file);
    const fs::path path = kSourceDir / "topologies" / e.file;
    auto topology = parse_topology(read_text(path), path.string());
    REQUIRE(topology.ok());
    CHECK(topology->num_devices() == e.devices);
    REQUIRE(topology->num_levels() == static_cast<int>(e.bandwidth_gbps.size()));
    for (int l = 0; l < topology->num_levels(); ++l) {
      CHECK(topology->levels[l].bandwidth_gbps == e.bandwidth_gbps[l]);
      CHECK(topology->levels[l].rails == (e.rails.empty() ? 1 : e.rails[l]));
    }
    CHECK(topology->source.size() > 50);
    CHECK(topology->device.relative_speed == 1.0);
    CHECK(readme.find(e.file) != std::string::npos);
  }
  for (const fs::path& path : json_files(kSourceDir / "topologies")) {
    INFO(path.string());
    CHECK(parse_topology(read_text(path), path.string()).ok());
  }
}

}  // namespace
}  // namespace baton
