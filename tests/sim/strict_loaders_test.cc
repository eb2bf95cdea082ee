// The loaders refuse keys their format does not have, naming the file, the
// object and the key; and every key their writers write loads again.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/catch_compat.h"

#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/topology.h"

using namespace baton;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A topology with every optional field its writer knows.
Topology full_topology() {
  Topology topology = make_flat_topology(4, 100.0, Seconds::from_us(5.0));
  topology.source = "measured";
  topology.device.relative_speed = 0.8;
  topology.device.compute_noise = {0.9, 1.0, 1.5};
  topology.device.allreduce_noise = {Seconds::from_us(-20.0), Seconds::from_us(300.0)};
  topology.device.transfer_noise = {Seconds::from_us(-5.0), Seconds::from_us(1800.0)};
  topology.device.transfer_noise_ready = {Seconds::from_us(2.0), Seconds::from_us(90.0)};
  topology.levels.push_back(Level{"ethernet", 2, 10.0, Seconds::from_us(50.0), 8.0, Seconds::from_us(70.0)});
  return topology;
}

// The "calibration" object as `baton calibrate` writes it (tools/cmd_calibrate.cc).
json calibration() {
  const json samples = json::array({{{"bytes", 4}, {"seconds", 1e-5}}, {{"bytes", 4096}, {"seconds", 2e-5}}});
  return {{"point_to_point", samples},
          {"allreduce", samples},
          {"allreduce_undisturbed", samples},
          {"allreduce_model", samples},
          {"allreduce_every_seconds", json::array({json::array({1e-5, 3e-3}), json::array({2e-5})})},
          {"loaded_exchange",
           json::array({{{"bytes", 1024}, {"sent_s", 0.0}, {"waited_s", -2e-4}, {"completed_s", 6e-5}}})},
          {"loaded_forward_ms", json::array({0.3, 1.5})},
          {"latency_us", 9.5},
          {"bandwidth_gbps", 2.5},
          {"max_relative_residual", 0.04},
          {"allreduce_max_relative_residual", 0.1},
          {"gloo_io_threads", "idle"}};
}

// A profile with every optional field its writer knows.
Profile full_profile() {
  Profile profile = make_uniform_profile(3, Seconds::from_ms(1.0), Seconds::from_ms(2.0), Bytes(100), Bytes(200));
  profile.layers[0].description = "Linear(8, 8)";
  profile.layers[1].backward_input = Seconds::from_ms(1.5);
  profile.layers[1].backward_weight = Seconds::from_ms(0.5);
  profile.layers[1].optimizer = Seconds::from_ms(0.25);
  profile.layers[2].inputs = {0, 1};
  profile.layers[2].host_forward = Seconds::from_ms(0.5);  // a GPU profile's host side
  profile.layers[2].host_backward = Seconds::from_ms(1.25);
  return profile;
}

std::string refusal(const Result<Topology>& loaded) { return loaded.ok() ? "(loaded)" : loaded.error().message; }
std::string refusal(const Result<Profile>& loaded) { return loaded.ok() ? "(loaded)" : loaded.error().message; }
std::string refusal(const Result<Plan>& loaded) { return loaded.ok() ? "(loaded)" : loaded.error().message; }

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("topology: an unknown key is refused in every object, with the closest known key", "[loaders][topology]") {
  const json written = topology_to_json(full_topology());
  json level = written;
  level["levels"][1]["bandwith_gbps"] = 10;
  CHECK(refusal(topology_from_json(level, "topologies/a.json")) ==
        R"(topologies/a.json: levels[1] has an unknown key "bandwith_gbps" (did you mean "bandwidth_gbps"?))");
  json device = written;
  device["device"]["relative_sped"] = 2;
  CHECK(refusal(topology_from_json(device, "t.json")) ==
        R"(t.json: device has an unknown key "relative_sped" (did you mean "relative_speed"?))");
  json top = written;
  top["nmae"] = "x";
  CHECK(refusal(topology_from_json(top, "t.json")) ==
        R"(t.json: document has an unknown key "nmae" (did you mean "name"?))");
  json far = written;
  far["comment"] = "x";
  CHECK(
      refusal(topology_from_json(far, "t.json")) ==
      R"(t.json: document has an unknown key "comment" (expected one of: format, name, source, device, levels, calibration))");
}

TEST_CASE("topology: a misspelled key is named even where a required key is then missing", "[loaders][topology]") {
  // Without the key check this would read "levels[0].latency_us is missing".
  const std::string text = R"({"format": "baton.topology.v1", "name": "t", "device": {"name": "g", "memory_gib": 1},
      "levels": [{"name": "l", "size": 2, "bandwidth_gbps": 1, "latncy_us": 3}]})";
  CHECK(refusal(parse_topology(text, "t.json")) ==
        R"(t.json: levels[0] has an unknown key "latncy_us" (did you mean "latency_us"?))");
}

TEST_CASE("topology: the calibration object's keys and numbers are checked", "[loaders][topology]") {
  json document = topology_to_json(full_topology());
  document["calibration"] = calibration();
  REQUIRE(topology_from_json(document, "t.json").ok());

  json key = document;
  key["calibration"]["latncy_us"] = 1;
  CHECK(refusal(topology_from_json(key, "t.json")) ==
        R"(t.json: calibration has an unknown key "latncy_us" (did you mean "latency_us"?))");
  json sample = document;
  sample["calibration"]["point_to_point"][1]["secs"] = 1e-5;
  CHECK(refusal(topology_from_json(sample, "t.json")) ==
        R"(t.json: calibration.point_to_point[1] has an unknown key "secs" (expected one of: bytes, seconds))");
  json time = document;
  time["calibration"]["allreduce_every_seconds"][0][1] = "slow";
  CHECK(refusal(topology_from_json(time, "t.json")) ==
        R"(t.json: calibration.allreduce_every_seconds[0][1] must be a number, got "slow")");
  json message = document;
  message["calibration"]["loaded_exchange"][0]["waited_s"] = "late";
  CHECK(refusal(topology_from_json(message, "t.json")) ==
        R"(t.json: calibration.loaded_exchange[0].waited_s must be a number, got "late")");
  json range = document;
  range["calibration"]["loaded_forward_ms"] = json::array({2.0, 1.0});
  CHECK(refusal(topology_from_json(range, "t.json")) ==
        "t.json: calibration.loaded_forward_ms must be [LO, HI], 0 < LO <= HI (ms: the loaded exchange's forwards), "
        "got [2.0,1.0]");
  json io = document;
  io["calibration"]["gloo_io_threads"] = "fast";
  CHECK(
      refusal(topology_from_json(io, "t.json")) ==
      R"(t.json: calibration.gloo_io_threads must be "idle" or "normal" (the class of Gloo's I/O threads), got "fast")");
  json not_object = document;
  not_object["calibration"] = json::array();
  CHECK(refusal(topology_from_json(not_object, "t.json")) == "t.json: calibration must be a JSON object, got []");
}

TEST_CASE("topology: what the writers write loads again, noise and calibration included", "[loaders][topology]") {
  const Topology topology = full_topology();
  json document = topology_to_json(topology);
  document["calibration"] = calibration();  // as `baton calibrate` adds it
  auto loaded = topology_from_json(document, "t.json");
  REQUIRE(loaded.ok());
  CHECK(loaded->source == "measured");
  CHECK(loaded->device.relative_speed == 0.8);
  CHECK(loaded->device.compute_noise == std::vector<double>{0.9, 1.0, 1.5});
  REQUIRE(loaded->device.allreduce_noise.size() == 2);
  CHECK(loaded->device.allreduce_noise[1].us() == 300.0);
  REQUIRE(loaded->device.transfer_noise.size() == 2);
  CHECK(loaded->device.transfer_noise[1].us() == 1800.0);
  REQUIRE(loaded->device.transfer_noise_ready.size() == 2);
  CHECK(loaded->device.transfer_noise_ready[1].us() == Approx(90.0).epsilon(1e-12));
  REQUIRE(loaded->levels.size() == 2);
  CHECK(loaded->levels[1].allreduce_bandwidth_gbps == std::optional<double>(8.0));
  // Times pass through seconds and back to microseconds, so the numbers may
  // move in their last bit; the keys stay and the document loads again.
  const json again = topology_to_json(*loaded);  // name, memory, speed and the four noises
  CHECK(again["device"].size() == 7);
  CHECK(again["levels"][1].size() == 6);
  CHECK(topology_from_json(again, "again.json").ok());
}

TEST_CASE("profile: an unknown key is refused in the document and in a layer", "[loaders][profile]") {
  const json written = profile_to_json(full_profile());
  json layer = written;
  layer["layers"][1]["forwrd_ms"] = layer["layers"][1]["forward_ms"];
  layer["layers"][1].erase("forward_ms");
  // Named as a typo, not read as a layer whose forward_ms is missing.
  CHECK(refusal(profile_from_json(layer, "traces/p.json")) ==
        R"(traces/p.json: layers[1] has an unknown key "forwrd_ms" (did you mean "forward_ms"?))");
  json top = written;
  top["microbatch_sise"] = 2;
  CHECK(refusal(profile_from_json(top, "p.json")) ==
        R"(p.json: document has an unknown key "microbatch_sise" (did you mean "microbatch_size"?))");
}

TEST_CASE("profile: derivation and compute_noise are checked", "[loaders][profile]") {
  json derivation = profile_to_json(full_profile());
  derivation["derivation"] = 3;
  CHECK(refusal(profile_from_json(derivation, "p.json")) == "p.json: derivation must be a string, got 3");
  json noise = profile_to_json(full_profile());
  noise["compute_noise"] = json::array({1.0, 0.0});
  CHECK(refusal(profile_from_json(noise, "p.json")) == "p.json: compute_noise[1] must be a number > 0, got 0.0");
}

TEST_CASE("profile: a split backward must add up to the whole", "[loaders][profile]") {
  // full_profile's layer 1: backward 2 ms split 1.5 + 0.5.
  json off = profile_to_json(full_profile());
  off["layers"][1]["backward_weight_ms"] = 0.75;
  CHECK(refusal(profile_from_json(off, "p.json")) ==
        "p.json: layers[1] backward_input_ms + backward_weight_ms = 1.5 + 0.75 = 2.25 is not backward_ms = 2");
  json half = profile_to_json(full_profile());
  half["layers"][1].erase("backward_weight_ms");
  CHECK(refusal(profile_from_json(half, "p.json")) ==
        "p.json: layers[1] must give both backward_input_ms and backward_weight_ms, or neither");
}

TEST_CASE("profile: what the writers write loads again, derivation and compute_noise included", "[loaders][profile]") {
  const Profile profile = full_profile();
  json document = profile_to_json(profile);
  document["derivation"] = "Analytic, not measured.";        // profile analytic
  document["compute_noise"] = json::array({0.8, 1.0, 1.3});  // profile measure
  auto loaded = profile_from_json(document, "p.json");
  REQUIRE(loaded.ok());
  CHECK(loaded->layers[0].description == "Linear(8, 8)");
  CHECK(loaded->layers[1].optimizer.ms() == 0.25);
  CHECK(loaded->layers[2].inputs == std::vector<int>{0, 1});
  CHECK(loaded->layers[2].host_forward == std::optional<Seconds>(Seconds::from_ms(0.5)));
  CHECK(loaded->layers[2].host_backward == std::optional<Seconds>(Seconds::from_ms(1.25)));
  CHECK_FALSE(loaded->layers[1].host_forward.has_value());
  CHECK(profile_to_json(*loaded) == profile_to_json(profile));
  json negative = document;
  negative["layers"][2]["host_backward_ms"] = -1.0;
  CHECK(refusal(profile_from_json(negative, "p.json")).find("host_backward_ms") != std::string::npos);
}

TEST_CASE("plan: an unknown key is refused in the document and in a stage", "[loaders][plan]") {
  Plan plan;
  plan.model = "m";
  plan.schedule = Schedule::kPipeDream;
  plan.stages = {StagePlan{LayerRange{0, 2}, 2, {0, 1}}, StagePlan{LayerRange{2, 3}, 1, {2}}};
  plan.prediction = {{"time_per_minibatch_s", 0.5}, {"anything", "the planner's"}};
  const json written = plan_to_json(plan);
  auto loaded = plan_from_json(written, "plan.json");
  REQUIRE(loaded.ok());
  CHECK(plan_to_json(*loaded) == written);  // prediction is kept verbatim, whatever its keys

  json stage = written;
  stage["stages"][0]["replica"] = 2;
  CHECK(refusal(plan_from_json(stage, "plans/p.json")) ==
        R"(plans/p.json: stages[0] has an unknown key "replica" (did you mean "replicas"?))");
  json top = written;
  top["vertical_synch"] = true;
  CHECK(refusal(plan_from_json(top, "plan.json")) ==
        R"(plan.json: document has an unknown key "vertical_synch" (did you mean "vertical_sync"?))");
}

TEST_CASE("every shipped profile, topology and plan outside traces/ and topologies/ loads", "[loaders][data]") {
  // traces/ and topologies/ are loaded by tests/analytic/shipped_data_test.cc.
  const fs::path root(BATON_SOURCE_DIR);
  CHECK(parse_profile(read_text(root / "tests/data/tiny_profile.json"), "tiny_profile.json").ok());
  CHECK(parse_topology(read_text(root / "tests/data/tiny_topology.json"), "tiny_topology.json").ok());
  int seeds = 0;
  for (const char* target : {"fuzz_profile", "fuzz_topology", "fuzz_plan"}) {
    std::vector<fs::path> valid;
    for (const auto& entry : fs::directory_iterator(root / "fuzz/corpus" / target))
      if (entry.path().filename().string().rfind("valid_", 0) == 0) valid.push_back(entry.path());
    std::sort(valid.begin(), valid.end());
    for (const fs::path& path : valid) {
      INFO(path.string());
      const std::string text = read_text(path);
      const std::string name = path.string();
      const std::string target_name(target);
      if (target_name == "fuzz_profile") CHECK(refusal(parse_profile(text, name)) == "(loaded)");
      if (target_name == "fuzz_topology") CHECK(refusal(parse_topology(text, name)) == "(loaded)");
      if (target_name == "fuzz_plan") CHECK(refusal(parse_plan(text, name)) == "(loaded)");
      ++seeds;
    }
  }
  CHECK(seeds == 4 + 4 + 4);
}
