// `baton calibrate` and `baton validate` through the built binary: the link
// calibration writes a topology the simulator reads, and validate's figures are
// what the simulator predicts for the plan it wrote and what the run measured.
#include "tests/exec/exec_test_support.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/link_fit.h"
#include "sim/validation_figures.h"
#include "tests/cli/cli_runner.h"

namespace baton::testing {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(slurp(path)); }

std::vector<TransferSample> samples_of(const nlohmann::json& samples) {
  std::vector<TransferSample> out;
  for (const auto& s : samples)
    out.push_back({Bytes(s.at("bytes").get<int64_t>()), Seconds(s.at("seconds").get<double>())});
  return out;
}

// Each worker's compute per step, from a run's report (run.json).
std::vector<std::vector<Seconds>> step_compute_of(const nlohmann::json& run) {
  std::vector<std::vector<Seconds>> out;
  for (const auto& worker : run.at("workers")) {
    out.emplace_back();
    for (const auto& seconds : worker.at("step_compute_s")) out.back().emplace_back(seconds.get<double>());
  }
  return out;
}

}  // namespace

TEST_CASE("calibrate writes a topology whose link is the fit of its own samples", "[exec][gloo][cli][validate]") {
  const fs::path dir = scratch_dir("calibrate");
  const std::string topology_path = (dir / "link.json").string();
  const CliRun run =
      run_baton(fmt::format("calibrate --nproc 3 --repeats 15 --loaded-rounds 40 --timeout 20 -o '{}'", topology_path),
                "calibrate");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("latency") != std::string::npos);
  auto topology = parse_topology(slurp(topology_path), topology_path);
  REQUIRE(topology.ok());
  CHECK(topology->num_devices() == 3);
  REQUIRE(topology->levels.size() == 1);
  const nlohmann::json calibration = read_json(topology_path).at("calibration");
  // The launcher chose the class of the ranks' Gloo I/O threads from the load.
  CHECK((calibration.at("gloo_io_threads") == "idle" || calibration.at("gloo_io_threads") == "normal"));
  const auto p2p = samples_of(calibration.at("point_to_point"));
  const auto allreduce = samples_of(calibration.at("allreduce"));
  // The default sizes 4 B .. 4 MiB, whole float32 messages.
  REQUIRE(p2p.size() == 6);
  REQUIRE(allreduce.size() == 6);
  CHECK(p2p.front().size.value == 4);
  CHECK(p2p.back().size.value == 4 << 20);
  // The level is exactly the fit of the recorded samples.
  auto fit = fit_link(p2p);
  REQUIRE(fit.ok());
  CHECK(topology->levels[0].bandwidth_gbps == Approx(fit->bandwidth_gbps).epsilon(1e-12));
  CHECK(topology->levels[0].latency.value == Approx(fit->latency.value).epsilon(1e-9).margin(1e-15));
  // Every all-reduce is kept; the undisturbed time of a size is the 0.1
  // quantile of its 15 (position 1.4: 0.6 of the 2nd fastest + 0.4 of the 3rd),
  // the median the 8th fastest.
  const nlohmann::json every = calibration.at("allreduce_every_seconds");
  const auto undisturbed = samples_of(calibration.at("allreduce_undisturbed"));
  REQUIRE(every.size() == 6);
  REQUIRE(undisturbed.size() == 6);
  std::vector<double> extra;
  for (size_t i = 0; i < 6; ++i) {
    std::vector<double> times = every[i].get<std::vector<double>>();
    REQUIRE(times.size() == 15);
    std::sort(times.begin(), times.end());
    CHECK(undisturbed[i].time.value == Approx(0.6 * times[1] + 0.4 * times[2]).epsilon(1e-12));
    CHECK(allreduce[i].time.value == times[7]);
  }
  // The level's ring parameters are the fit of the undisturbed all-reduce
  // times, and the model beside each measurement is the simulator's ring on 3
  // devices with them.
  auto ring = fit_ring(undisturbed, 3);
  REQUIRE(ring.ok());
  CHECK(*topology->levels[0].allreduce_bandwidth_gbps == Approx(ring->bandwidth_gbps).epsilon(1e-12));
  CHECK(topology->levels[0].allreduce_latency->value == Approx(ring->latency.value).epsilon(1e-9).margin(1e-15));
  const auto model = samples_of(calibration.at("allreduce_model"));
  for (size_t i = 0; i < model.size(); ++i)
    CHECK(model[i].time.value == Approx(ring_allreduce_time(3, allreduce[i].size, *ring).value).epsilon(1e-9));
  // The device's all-reduce noise: 200 quantiles of every all-reduce minus the
  // model of its size; its extremes are the extremes of those differences
  // (quantiles 0.0025 and 0.9975 of 90 lie between the two smallest and the
  // two largest).
  for (size_t i = 0; i < 6; ++i)
    for (double t : every[i].get<std::vector<double>>()) extra.push_back(t - model[i].time.value);
  std::sort(extra.begin(), extra.end());
  const std::vector<Seconds>& noise = topology->device.allreduce_noise;
  REQUIRE(noise.size() == 200);
  CHECK(std::is_sorted(noise.begin(), noise.end(), [](Seconds a, Seconds b) { return a.value < b.value; }));
  CHECK(noise.front().value >= extra[0] - 1e-12);
  CHECK(noise.front().value <= extra[1] + 1e-12);
  CHECK(noise.back().value >= extra[88] - 1e-12);
  CHECK(noise.back().value <= extra[89] + 1e-12);
  // The loaded exchange: 5 iterations of 8 microbatches (40 rounds), each
  // rank's 40 received messages (rank 0's first), iteration i's of the i-th of
  // the default sizes of 1 KiB .. 1 MiB, each received after it was sent (one
  // steady clock) and after its wait began. The device's transfer noise: 200
  // quantiles of completed - max(waited, sent + the link's model of its size),
  // of the messages waited for before that modelled arrival (transfer_noise)
  // and of the others (transfer_noise_ready).
  const nlohmann::json loaded = calibration.at("loaded_exchange");
  REQUIRE(loaded.size() == 80);
  // Its forwards were drawn from the default range, 0.3 to 1.5 ms.
  CHECK(calibration.at("loaded_forward_ms") == nlohmann::json::array({0.3, 1.5}));
  const std::vector<int64_t> sizes{1 << 10, 16 << 10, 128 << 10, 1 << 20};
  std::vector<double> late;
  std::vector<double> ready;
  for (size_t k = 0; k < loaded.size(); ++k) {
    const nlohmann::json& m = loaded[k];
    CHECK(m.at("bytes").get<int64_t>() == sizes[(k % 40) / 8 % sizes.size()]);
    const double sent = m.at("sent_s").get<double>();
    const double waited = m.at("waited_s").get<double>();
    const double completed = m.at("completed_s").get<double>();
    CHECK(completed >= sent);
    CHECK(completed >= waited);
    const double arrival = sent + fit->predict(Bytes(m.at("bytes").get<int64_t>())).value;
    (waited < arrival ? late : ready).push_back(completed - std::max(waited, arrival));
  }
  for (const auto& [measured, drawn] : {std::pair{&late, &topology->device.transfer_noise},
                                        std::pair{&ready, &topology->device.transfer_noise_ready}}) {
    INFO(measured->size() << " messages");
    if (measured->size() < 2) {
      CHECK(drawn->size() == measured->size() * 200);
      continue;
    }
    std::sort(measured->begin(), measured->end());
    REQUIRE(drawn->size() == 200);
    CHECK(std::is_sorted(drawn->begin(), drawn->end(), [](Seconds a, Seconds b) { return a.value < b.value; }));
    CHECK(drawn->front().value >= (*measured)[0] - 1e-9);
    CHECK(drawn->front().value <= (*measured)[1] + 1e-9);
    CHECK(drawn->back().value >= (*measured)[measured->size() - 2] - 1e-9);
    CHECK(drawn->back().value <= measured->back() + 1e-9);
  }
}

TEST_CASE("BATON_GLOO_IO, when set, is the class of the ranks' Gloo I/O threads, and a wrong one is refused",
          "[exec][gloo][cli][validate]") {
  struct Restore {
    ~Restore() { unsetenv("BATON_GLOO_IO"); }
  } restore;
  const fs::path dir = scratch_dir("calibrate-io");
  const std::string topology_path = (dir / "link.json").string();
  const std::string command =
      fmt::format("calibrate --nproc 2 --repeats 3 --loaded-rounds 0 --timeout 20 -o '{}'", topology_path);
  setenv("BATON_GLOO_IO", "normal", 1);
  const CliRun normal = run_baton(command, "calibrate-io");
  INFO(normal.err);
  REQUIRE(normal.exit_code == 0);
  CHECK(read_json(topology_path).at("calibration").at("gloo_io_threads") == "normal");
  setenv("BATON_GLOO_IO", "fast", 1);
  const CliRun wrong = run_baton(command, "calibrate-io");
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.err.find("BATON_GLOO_IO=fast: the class of Gloo's I/O threads is idle (SCHED_IDLE, the default) or "
                       "normal") != std::string::npos);
}

TEST_CASE("validate's prediction is the noisy simulation of its plan and its measurement the run's median step",
          "[exec][gloo][cli][validate]") {
  const fs::path dir = scratch_dir("validate");
  const CliRun run = run_baton(
      fmt::format(
          "validate --model mlp --nproc 2 --microbatch-size 16 --microbatches 4 "
          "--steps 4 --run-seconds 0 --profile-seconds 0.5 --schedule 1f1b,dp --stages 0-3,3-6 --tolerance 1000 "
          "--timeout 20 --out '{}'",
          dir.string()),
      "validate");
  INFO(run.err);
  // A failed step's log is in the scratch directory, which is gone by the time anyone looks.
  std::string logs;
  for (const char* log : {"calibrate.log", "profile.log"})
    if (run.exit_code != 0 && fs::exists(dir / log)) logs += fmt::format("{}:\n{}\n", log, slurp(dir / log));
  INFO(logs);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("report.md") != std::string::npos);
  const std::string report = slurp(dir / "report.md");
  for (const char* part : {"# Validation: mlp on 2 gloo ranks", "## Summary", "## Link calibration and device",
                           "## Profile", "## 1f1b", "## dp", "(1f1b/compare.svg)", "| fc1 |"}) {
    CHECK(report.find(part) != std::string::npos);
  }
  // The device's relative speed is the compute of the profile measured alone over
  // that of the profile measured on both ranks at once between sleeps.
  const auto compute = [](const nlohmann::json& profile) {
    double total = 0.0;
    for (const auto& layer : profile.at("layers"))
      total += layer.at("forward_ms").get<double>() + layer.at("backward_ms").get<double>();
    return total;
  };
  // It is measured in slices, one just before each schedule's run, and pooled
  // into topology.json: the median of the two slices' speeds (their mean, for
  // the record: a schedule is predicted at its own slice's), and all their noise
  // samples (200 quantiles each of sample / the layer's median, so the
  // pooled sample's middle is 1).
  const nlohmann::json device = read_json(dir / "topology.json").at("device");
  const double alone = compute(read_json(dir / "profile.json"));
  const double speed_1f1b = alone / compute(read_json(dir / "1f1b" / "profile-loaded.json"));
  const double speed_dp = alone / compute(read_json(dir / "dp" / "profile-loaded.json"));
  CHECK(device.at("relative_speed").get<double>() == Approx(0.5 * (speed_1f1b + speed_dp)).epsilon(1e-9));
  std::vector<double> pooled = read_json(dir / "1f1b" / "profile-loaded.json").at("compute_noise");
  const std::vector<double> other = read_json(dir / "dp" / "profile-loaded.json").at("compute_noise");
  REQUIRE(pooled.size() == 200);
  REQUIRE(other.size() == 200);
  CHECK(std::is_sorted(other.begin(), other.end()));
  CHECK(other.front() <= 1.0);
  CHECK(other.back() >= 1.0);
  CHECK(other[99] == Approx(1.0).epsilon(0.05));
  pooled.insert(pooled.end(), other.begin(), other.end());
  std::sort(pooled.begin(), pooled.end());
  CHECK(device.at("compute_noise").get<std::vector<double>>() == pooled);
  // The calibration's all-reduce noise rides along.
  CHECK(device.at("allreduce_noise_us").size() == 200);
  // The link is calibrated after the profile, its loaded exchange computing
  // forwards of half to one and a half times one of two even stages' (the
  // model's forward over 2), held within 0.05 .. 5 ms (written to 1e-4 ms).
  double forward = 0.0;
  const nlohmann::json profile_document = read_json(dir / "profile.json");  // outlives the loop
  for (const auto& layer : profile_document.at("layers")) forward += layer.at("forward_ms").get<double>();
  const auto held = [](double ms) { return std::clamp(ms, 0.05, 5.0); };
  const nlohmann::json range = read_json(dir / "topology.json").at("calibration").at("loaded_forward_ms");
  REQUIRE(range.size() == 2);
  CHECK(range[0].get<double>() == Approx(held(0.5 * forward / 2)).margin(1e-4));
  CHECK(range[1].get<double>() == Approx(held(1.5 * forward / 2)).margin(1e-4));
  const nlohmann::json summary = read_json(dir / "report.json");
  REQUIRE(summary.at("cases").size() == 2);
  // The machine's load before the first measurement (tools/machine_load.h):
  // other work's busy CPUs over a quarter second, stated in report.md too.
  const nlohmann::json load = summary.at("machine_load");
  CHECK(load.at("cpus") == std::thread::hardware_concurrency());
  CHECK(load.at("busy_cpus").get<double>() >= 0.0);
  CHECK(load.at("busy_cpus").get<double>() <= load.at("cpus").get<double>() + 1e-9);
  CHECK(load.at("window_s") == 0.25);
  CHECK(report.find("Machine load before the first measurement: ") != std::string::npos);
  for (const auto& c : summary.at("cases")) {
    const std::string schedule = c.at("schedule");
    INFO(schedule);
    CHECK(c.at("stages") == (schedule == "dp" ? "0-6x2" : "0-3x1,3-6x1"));
    CHECK(c.at("workers") == 2);
    // Its slice is the kept attempt's, whose files are the ones in S/.
    const double slice_speed = alone / compute(read_json(dir / schedule / "profile-loaded.json"));
    CHECK(c.at("slice_speed").get<double>() == Approx(slice_speed).epsilon(1e-9));
    // Each schedule is predicted at its run's own speed, with the pooled
    // noise: the slice's times E / X, E the compute per step the slice
    // expects (the run's mean compute per step over run_compute) and X the
    // median over steps 1..3 of the workers' compute summed.
    const nlohmann::json ran = read_json(dir / schedule / "run.json");
    std::vector<double> sums(ran.at("steps").size(), 0.0);
    double total = 0.0;
    for (const auto& worker : ran.at("workers")) {
      total += worker.at("compute_s").get<double>();
      const std::vector<double> per_step = worker.at("step_compute_s");
      REQUIRE(per_step.size() == sums.size());
      for (size_t k = 0; k < sums.size(); ++k) sums[k] += per_step[k];
    }
    // Every step's compute is in the worker's total.
    CHECK(std::accumulate(sums.begin(), sums.end(), 0.0) == Approx(total).epsilon(1e-9));
    const double expected = total / double(sums.size()) / c.at("run_compute").get<double>();
    REQUIRE(sums.size() == 4);
    std::sort(sums.begin() + 1, sums.end());
    CHECK(c.at("relative_speed").get<double>() == Approx(slice_speed * expected / sums[2]).epsilon(1e-9));
    // Another attempt follows only a run whose compute per step was more than
    // --drift (0.03, the default) off its slice's expectation; earlier attempts' files are
    // set aside.
    const int attempts = c.at("attempts");
    CHECK(attempts >= 1);
    CHECK(attempts <= 3);
    CHECK(c.at("run_compute").get<double>() > 0.0);
    if (attempts < 3) CHECK(std::abs(c.at("run_compute").get<double>() - 1.0) <= 0.03);
    for (int a = 1; a < attempts; ++a) CHECK(fs::exists(dir / schedule / fmt::format("attempt-{}", a) / "run.json"));
    CHECK_FALSE(fs::exists(dir / schedule / fmt::format("attempt-{}", attempts)));
    // predicted = the median of the simulator's iteration time over 200 noisy
    // simulations of the same plan and profile on the topology at that speed
    // (seeds 1..200); the deterministic one beside it; both plus the step's
    // barriers: 2 ranks, one round of Gloo's dissemination barrier in each of
    // the two, each the calibrated all-reduce latency.
    nlohmann::json at_speed = read_json(dir / "topology.json");
    const double barrier = 2.0 * at_speed.at("levels").at(0).at("allreduce_latency_us").get<double>() * 1e-6;
    CHECK(c.at("step_barrier_s").get<double>() == Approx(barrier).epsilon(1e-12));
    at_speed["device"]["relative_speed"] = c.at("relative_speed");
    const fs::path topology = dir / (schedule + "-topology.json");
    std::ofstream(topology) << at_speed.dump();
    const CliRun sim = run_baton(
        fmt::format("simulate --profile '{}' --topology '{}' --plan '{}' --json "
                    "--optimizer sgd --noise-samples 200",
                    (dir / "profile.json").string(), topology.string(), (dir / schedule / "plan.json").string()),
        "validate-sim");
    REQUIRE(sim.exit_code == 0);
    const nlohmann::json simulated = nlohmann::json::parse(sim.out);
    CHECK(c.at("predicted_without_noise_s").get<double>() ==
          Approx(simulated.at("iteration_time_s").get<double>() + barrier).epsilon(1e-12));
    // The prediction replays the run's steps: each simulated at the slice's
    // speed with every worker slowed as its compute in that step says
    // (predict_run), with the pooled noise; the median plus the barriers. The
    // run's executor overhead per action (its loop's time neither computing
    // nor waiting, over its actions) is recorded beside it, not predicted.
    nlohmann::json at_slice = read_json(dir / "topology.json");
    at_slice["device"]["relative_speed"] = slice_speed;
    const std::vector<std::vector<Seconds>> per_worker = step_compute_of(ran);
    const auto plan = plan_from_json(read_json(dir / schedule / "plan.json"), "plan.json");
    const auto profile = profile_from_json(read_json(dir / "profile.json"), "profile.json");
    const auto slice_topology = topology_from_json(at_slice, "topology.json");
    REQUIRE(plan.ok());
    REQUIRE(profile.ok());
    REQUIRE(slice_topology.ok());
    std::vector<Seconds> overhead;
    for (const auto& worker : ran.at("workers"))
      overhead.emplace_back(std::max(0.0, worker.at("overhead_s").get<double>() / worker.at("actions").get<double>()));
    REQUIRE(c.at("action_overhead_s").size() == overhead.size());
    for (size_t w = 0; w < overhead.size(); ++w) {
      CHECK(c.at("action_overhead_s")[w].get<double>() == Approx(overhead[w].value).epsilon(1e-12));
      CHECK(overhead[w].value < 1e-3);  // the executor's own time: microseconds per action
    }
    const auto replayed = predict_run(*plan, *profile, *slice_topology, per_worker, 0.5);
    REQUIRE(replayed.ok());
    const double predicted = replayed->value + barrier;
    CHECK(c.at("predicted_s").get<double>() == Approx(predicted).epsilon(1e-12));
    // With a slice the prediction is the one at the run's speeds.
    CHECK(c.at("predicted_at_run_speeds_s").get<double>() == c.at("predicted_s").get<double>());
    CHECK(c.at("error_at_run_speeds").get<double>() == c.at("error").get<double>());
    // measured = the median of the wall times of steps 1..3, the middle one.
    std::vector<double> walls;
    const nlohmann::json run_report = read_json(dir / schedule / "run.json");
    for (const auto& step : run_report.at("steps")) walls.push_back(step.at("wall_s").get<double>());
    REQUIRE(walls.size() == 4);
    std::sort(walls.begin() + 1, walls.end());
    CHECK(c.at("measured_s").get<double>() == walls[2]);
    CHECK(c.at("measured_median_s").get<double>() == walls[2]);
    CHECK(c.at("measured_min_s").get<double>() == walls[1]);
    CHECK(c.at("measured_max_s").get<double>() == walls[3]);
    const double measured = c.at("measured_s").get<double>();
    CHECK(c.at("error").get<double>() == Approx((measured - predicted) / predicted).epsilon(1e-9));
    CHECK(slurp(dir / schedule / "compare.svg").find("<svg") != std::string::npos);
  }
}

TEST_CASE("validate exits 1 when an error exceeds the tolerance, and 2 on bad input", "[exec][gloo][cli][validate]") {
  const fs::path dir = scratch_dir("validate-tolerance");
  SECTION("a tolerance no measurement meets") {
    const CliRun run = run_baton(fmt::format("validate --model mlp --nproc 2 --microbatch-size 8 --microbatches 2 "
                                             "--steps 2 --run-seconds 0 --schedule dp --tolerance 1e-12 --timeout 20 "
                                             "--topology topologies/cpu_2core.json --out '{}'",
                                             dir.string()),
                                 "validate-tolerance");
    CHECK(run.exit_code == 1);
    CHECK(run.err.find("exceeds") != std::string::npos);
    CHECK(run.out.find("NO") != std::string::npos);
    // Without a slice (a given topology, as on a GPU) the prediction is the
    // noisy simulations at the topology's speed, and beside it the run's
    // steps replayed at the speeds its workers had against that speed
    // (predict_run on the given topology, plus the step barrier).
    const nlohmann::json c = read_json(dir / "report.json").at("cases").at(0);
    CHECK(c.at("slice_speed").get<double>() == 0.0);
    const std::vector<std::vector<Seconds>> per_worker = step_compute_of(read_json(dir / "dp" / "run.json"));
    const auto plan = plan_from_json(read_json(dir / "dp" / "plan.json"), "plan.json");
    const auto profile = profile_from_json(read_json(dir / "profile.json"), "profile.json");
    const auto topology =
        topology_from_json(read_json(fs::path(BATON_SOURCE_DIR) / "topologies" / "cpu_2core.json"), "cpu_2core.json");
    REQUIRE(plan.ok());
    REQUIRE(profile.ok());
    REQUIRE(topology.ok());
    const auto replayed = predict_run(*plan, *profile, *topology, per_worker, 0.5);
    REQUIRE(replayed.ok());
    const double at_run_speeds = replayed->value + c.at("step_barrier_s").get<double>();
    CHECK(c.at("predicted_at_run_speeds_s").get<double>() == Approx(at_run_speeds).epsilon(1e-12));
    const double measured = c.at("measured_s").get<double>();
    CHECK(c.at("error_at_run_speeds").get<double>() ==
          Approx((measured - at_run_speeds) / at_run_speeds).epsilon(1e-9));
    CHECK(slurp(dir / "report.md").find("At the speeds its workers had") != std::string::npos);
  }
  SECTION("a profile of another model") {
    const fs::path profile = dir / "vgg.json";
    REQUIRE(run_baton(fmt::format("profile measure --model vgg-mini --microbatch-size 2 --warmup 0 --steps 1 -o '{}'",
                                  profile.string()),
                      "validate-profile")
                .exit_code == 0);
    const CliRun run = run_baton(
        fmt::format("validate --model mlp --profile '{}' --out '{}'", profile.string(), (dir / "out").string()),
        "validate-profile");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("are not those of model 'mlp'") != std::string::npos);
  }
  SECTION("a profile at another microbatch size than --microbatch-size") {
    const fs::path profile = dir / "mlp2.json";
    REQUIRE(run_baton(fmt::format("profile measure --model mlp --microbatch-size 2 --warmup 0 --steps 1 -o '{}'",
                                  profile.string()),
                      "validate-profile-size")
                .exit_code == 0);
    const CliRun run = run_baton(fmt::format("validate --model mlp --profile '{}' --microbatch-size 4 --out '{}'",
                                             profile.string(), (dir / "out").string()),
                                 "validate-profile-size");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("--microbatch-size 4: the profile") != std::string::npos);
    CHECK(run.err.find("measured at 2 samples") != std::string::npos);
  }
  SECTION("a topology with fewer devices than ranks") {
    const CliRun run = run_baton(fmt::format("validate --model mlp --nproc 3 --topology topologies/cpu_2core.json "
                                             "--out '{}'",
                                             (dir / "out").string()),
                                 "validate-topology");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("has 2 devices but --nproc is 3") != std::string::npos);
  }
  SECTION("one rank") {
    const CliRun run = run_baton("validate --model mlp --nproc 1", "validate-nproc");
    CHECK(run.exit_code == 2);
    CHECK(run.err.find("--nproc: must be in [2, 256], got 1") != std::string::npos);
  }
}

}  // namespace baton::testing
