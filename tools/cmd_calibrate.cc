// `baton calibrate`: measures the link between executor ranks (c10d Gloo) and
// writes it as a topology the simulator and planner read.
//
// Like `run --backend gloo`, a process with RANK and WORLD_SIZE in its
// environment is one rank; otherwise it starts --nproc ranks of itself here.
// Rank 0 fits latency and bandwidth to the point-to-point times (half of each
// size's undisturbed round trip, the fastest of its repeats) and
// the ring all-reduce's own latency and bandwidth to the undisturbed
// all-reduce times (each size's 0.1 quantile; sim/link_fit.h: fit_link,
// fit_ring); what each all-reduce took beyond that model becomes the device's
// allreduce_noise_us (on the 2-core machines half or more of the all-reduces
// wait 2-4 ms longer, whatever their size). It writes a one-level
// baton.topology.v1 with one device per rank (with --device cuda: one stream
// per worker, level 0 marked shared_compute: the workers take turns on the
// GPU's compute, as one device's streams do), and keeps the raw samples and
// the all-reduce times beside the model's in a "calibration" object (part of
// the format, sim/topology.h; the simulator does not read it).
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "exec/launcher.h"
#include "sim/link_fit.h"
#include "sim/stats.h"
#include "sim/topology.h"
#include "tools/cli_support.h"
#include "tools/commands.h"
#include "tools/executor_handoff.h"
#include "tools/report.h"

#if BATON_HAVE_EXEC
#include <unistd.h>

#include "exec/executor.h"
#include "tools/rank_launch.h"
#endif

namespace baton::cli {

namespace {

struct CalibrateArgs {
  int nproc = 2;
  std::string output;
  double memory_gib = 0.0;
  int repeats = 40;
  int loaded_rounds = 400;
  std::vector<double> loaded_forward_ms{0.3, 1.5};
  double timeout_s = 30.0;
  std::string device = "cpu";  // else the threads backend's link on that GPU
};

#if BATON_HAVE_EXEC

nlohmann::json samples_json(const std::vector<TransferSample>& samples) {
  nlohmann::json out = nlohmann::json::array();
  for (const TransferSample& s : samples) out.push_back({{"bytes", s.size.value}, {"seconds", s.time.value}});
  return out;
}

// What was measured: the Gloo ranks of this machine, or the threads
// backend's workers on one GPU.
struct Measured {
  std::string name;     // of the topology
  std::string what;     // its first sentence
  std::string level;    // the level's name
  std::string device;   // the device's name
  double memory_bytes;  // shared by the ranks (workers)
  std::string one_way;  // how a one-way time is measured
  // The workers are streams of one device that take turns on its compute
  // (Level::shared_compute), not devices of their own.
  bool shared_compute = false;
};

Measured gloo_measured(int ranks, int repeats) {
  return Measured{fmt::format("calibrated-gloo-{}ranks", ranks),
                  fmt::format("{} executor ranks on one machine over c10d Gloo (TCP)", ranks),
                  "gloo",
                  "executor-rank",
                  static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)),
                  fmt::format("the fastest of {} round trips / 2", repeats)};
}

// Memory per device: --memory-gib, or the measured machine's (GPU's) shared.
double memory_per_rank_gib(const CalibrateArgs& args, const Measured& measured, int ranks) {
  if (args.memory_gib > 0.0) return args.memory_gib;
  return measured.memory_bytes / double(1 << 30) / ranks;
}

// Per size, the 0.1 quantile of its all-reduces: the all-reduce undisturbed,
// which the ring model is fitted to.
std::vector<TransferSample> undisturbed_allreduce(const exec::LinkMeasurement& m) {
  std::vector<TransferSample> out;
  for (size_t i = 0; i < m.allreduce.size(); ++i) {
    std::vector<double> times;
    for (Seconds t : m.allreduce_samples[i]) times.push_back(t.value);
    out.push_back({m.allreduce[i].size, Seconds(quantile(times, 0.1))});
  }
  return out;
}

// kNoiseQuantiles quantiles ((q + 0.5) / kNoiseQuantiles) of `extra`; empty when it is.
std::vector<Seconds> noise_quantiles(const std::vector<double>& extra) {
  std::vector<Seconds> out;
  if (extra.empty()) return out;
  for (int q = 0; q < exec::kNoiseQuantiles; ++q)
    out.push_back(Seconds(quantile(extra, (q + 0.5) / exec::kNoiseQuantiles)));
  return out;
}

// What every all-reduce took beyond the ring model, pooled over the sizes, as
// kNoiseQuantiles quantiles: the device's allreduce_noise.
std::vector<Seconds> allreduce_noise(const exec::LinkMeasurement& m, const LinkFit& ring) {
  std::vector<double> extra;
  for (size_t i = 0; i < m.allreduce.size(); ++i) {
    const Seconds model = ring_allreduce_time(m.ranks, m.allreduce[i].size, ring);
    for (Seconds t : m.allreduce_samples[i]) extra.push_back((t - model).value);
  }
  return noise_quantiles(extra);
}

// What the messages of the loaded exchange made their receiver wait beyond the
// link model: from the later of the wait's start and the modelled arrival
// (sent + fit) to the wait's end, as kNoiseQuantiles quantiles, of the
// messages whose receiver began to wait before that arrival (`late`: the
// device's transfer_noise) or after it (transfer_noise_ready); empty without
// such messages.
std::vector<Seconds> transfer_noise(const exec::LinkMeasurement& m, const LinkFit& fit, bool late) {
  std::vector<double> extra;
  for (const exec::LoadedTransfer& t : m.loaded) {
    const Seconds arrival = t.sent + fit.predict(t.size);
    if ((t.waited < arrival) == late) extra.push_back((t.completed - max(t.waited, arrival)).value);
  }
  return noise_quantiles(extra);
}

nlohmann::json calibrated_topology(const exec::LinkMeasurement& m, const LinkFit& fit, const LinkFit& ring,
                                   const CalibrateArgs& args, const Measured& measured) {
  Topology topology;
  topology.name = measured.name;
  topology.source = fmt::format(
      "Measured by `baton calibrate`: {}. Latency and bandwidth fitted to one-way times of {} message sizes "
      "({}), worst relative residual {:.1f}%. {}; relative_speed 1: compute as profiled.",
      measured.what, m.point_to_point.size(), measured.one_way, 100.0 * fit.max_relative_residual,
      measured.shared_compute ? "One stream per worker, all on one device whose compute they take turns on "
                                "(shared_compute)"
                              : "One device per rank");
  topology.device.name = measured.device;
  topology.device.memory = Bytes(static_cast<int64_t>(memory_per_rank_gib(args, measured, m.ranks) * double(1 << 30)));
  topology.device.allreduce_noise = allreduce_noise(m, ring);
  topology.device.transfer_noise = transfer_noise(m, fit, /*late=*/true);
  topology.device.transfer_noise_ready = transfer_noise(m, fit, /*late=*/false);
  topology.levels = {
      Level{measured.level, m.ranks, fit.bandwidth_gbps, fit.latency, ring.bandwidth_gbps, ring.latency}};
  topology.levels.front().shared_compute = measured.shared_compute;
  nlohmann::json model = nlohmann::json::array();
  for (const TransferSample& s : m.allreduce) {
    model.push_back({{"bytes", s.size.value}, {"seconds", ring_allreduce_time(m.ranks, s.size, ring).value}});
  }
  nlohmann::json every = nlohmann::json::array();
  for (const std::vector<Seconds>& times : m.allreduce_samples) {
    nlohmann::json row = nlohmann::json::array();
    for (Seconds t : times) row.push_back(t.value);
    every.push_back(std::move(row));
  }
  nlohmann::json loaded = nlohmann::json::array();
  const Seconds origin = m.loaded.empty() ? Seconds() : m.loaded.front().sent;  // the steady clock's is arbitrary
  for (const exec::LoadedTransfer& t : m.loaded) {
    loaded.push_back({{"bytes", t.size.value},
                      {"sent_s", (t.sent - origin).value},
                      {"waited_s", (t.waited - origin).value},
                      {"completed_s", (t.completed - origin).value}});
  }
  nlohmann::json out = topology_to_json(topology);
  out["calibration"] = {{"point_to_point", samples_json(m.point_to_point)},
                        {"allreduce", samples_json(m.allreduce)},
                        {"allreduce_undisturbed", samples_json(undisturbed_allreduce(m))},
                        {"allreduce_model", model},
                        {"allreduce_every_seconds", every},
                        {"loaded_exchange", loaded},
                        {"latency_us", fit.latency.value * 1e6},
                        {"bandwidth_gbps", fit.bandwidth_gbps},
                        {"max_relative_residual", fit.max_relative_residual},
                        {"allreduce_max_relative_residual", ring.max_relative_residual}};
  if (!m.loaded.empty()) out["calibration"]["loaded_forward_ms"] = args.loaded_forward_ms;
  if (!m.gloo_io.empty()) out["calibration"]["gloo_io_threads"] = m.gloo_io;
  return out;
}

std::string calibration_text(const exec::LinkMeasurement& m, const LinkFit& fit, const LinkFit& ring,
                             const Measured& measured) {
  std::vector<std::vector<std::string>> rows{{"bytes", "one-way", "fitted", "all-reduce", "model"}};
  for (size_t i = 0; i < m.point_to_point.size(); ++i) {
    const TransferSample& p = m.point_to_point[i];
    const TransferSample& a = m.allreduce[i];
    rows.push_back({human_bytes(p.size), human_seconds(p.time), human_seconds(fit.predict(p.size)),
                    human_seconds(a.time), human_seconds(ring_allreduce_time(m.ranks, a.size, ring))});
  }
  return fmt::format(
             "calibrate: {}: latency {}, bandwidth {:.2f} Gb/s (worst residual {:.1f}%); "
             "ring all-reduce: latency {}, bandwidth {:.2f} Gb/s (worst residual {:.1f}%)\n\n",
             measured.what, human_seconds(fit.latency), fit.bandwidth_gbps, 100.0 * fit.max_relative_residual,
             human_seconds(ring.latency), ring.bandwidth_gbps, 100.0 * ring.max_relative_residual) +
         render_table(rows);
}

// Fits the measurement and writes the topology (rank 0, or the one process).
int write_calibration(const CalibrateArgs& args, const exec::LinkMeasurement& m, const Measured& what) {
  auto fit = fit_link(m.point_to_point);
  auto ring = fit_ring(undisturbed_allreduce(m), m.ranks);
  if (!fit || !ring) {
    std::fprintf(stderr, "baton: calibrate: %s (is the machine busy? retry, or raise --repeats)\n",
                 (!fit ? fit : ring).error().message.c_str());
    return 1;
  }
  const std::string text = calibrated_topology(m, *fit, *ring, args, what).dump(2) + "\n";
  if (args.output.empty() || args.output == "-") {
    std::fputs(text.c_str(), stdout);
    std::fputs(calibration_text(m, *fit, *ring, what).c_str(), stderr);
  } else {
    write_file_atomic(args.output, text);
    std::fputs(calibration_text(m, *fit, *ring, what).c_str(), stdout);
  }
  return 0;
}

int run_rank(const CalibrateArgs& args, const exec::RankEnv& env) {
  exec::LinkOptions options;
  options.repeats = args.repeats;
  options.timeout = Seconds(args.timeout_s);
  // The loaded exchange compares steady clocks of two ranks: only on one machine.
  options.loaded_rounds = exec::is_loopback(env.master_addr) ? args.loaded_rounds : 0;
  options.loaded_forward_min = Seconds::from_ms(args.loaded_forward_ms[0]);
  options.loaded_forward_max = Seconds::from_ms(args.loaded_forward_ms[1]);
  auto measured = exec::measure_link_rank(env, options);
  if (!measured) {
    std::fprintf(stderr, "baton: calibrate: rank %d: %s\n", env.rank, measured.error().message.c_str());
    return 1;
  }
  if (env.rank != 0) return 0;
  return write_calibration(args, *measured, gloo_measured(measured->ranks, args.repeats));
}

// --device cuda: the threads backend's workers on that GPU, in this process.
int run_on_device(const CalibrateArgs& args) {
  auto info = exec::device_info(args.device);
  if (!info) {
    std::fprintf(stderr, "baton: calibrate: %s\n", info.error().message.c_str());
    return 1;
  }
  exec::LinkOptions options;
  options.sizes_bytes = exec::LinkOptions::gpu_sizes_bytes();
  options.repeats = args.repeats;
  options.timeout = Seconds(args.timeout_s);
  auto measured = exec::measure_link_threads(args.device, args.nproc, options);
  if (!measured) {
    std::fprintf(stderr, "baton: calibrate: %s\n", measured.error().message.c_str());
    return 1;
  }
  const Measured what{
      fmt::format("calibrated-{}-threads-{}workers", args.device, args.nproc),
      fmt::format("{} workers of the threads backend on {}, each on its own CUDA stream (a hand-over is an event "
                  "wait and a device-to-device copy; an all-reduce sums on the last contributor's stream), timed "
                  "with CUDA events",
                  args.nproc, info->description),
      "cuda-streams",
      info->description,
      static_cast<double>(info->memory_bytes),
      fmt::format("the fastest of {} receives of data already there", args.repeats),
      /*shared_compute=*/true};
  return write_calibration(args, *measured, what);
}

int run_calibrate(const CalibrateArgs& args) {
  if (args.device != "cpu") return run_on_device(args);
  if (const auto env = rank_env_from_environment()) return run_rank(args, *env);
  const std::optional<MachineLoad> load = sample_machine_load();  // also the launcher's, for the I/O class
  if (load && is_busy(*load))
    std::fprintf(stderr, "baton: calibrate: warning: %s\n", busy_machine_warning(*load).c_str());
  const Status launched = launch_self_ranks(own_arguments(), args.nproc, Seconds(4 * args.timeout_s + 60.0), load);
  if (!launched) {
    std::fprintf(stderr, "baton: calibrate: %s\n", launched.error().message.c_str());
    return 1;
  }
  return 0;
}

#else

int run_calibrate(const CalibrateArgs&) { hand_to_executor("calibrate"); }

#endif  // BATON_HAVE_EXEC

}  // namespace

void add_calibrate_command(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Measure the executor's link and write it as a topology");
  cmd->footer(
      "Start --nproc executor ranks on this machine (c10d Gloo over TCP), time messages of 4 B to 4 MiB\n"
      "between rank 0 and rank 1 and all-reduces over all ranks, fit latency + size / bandwidth to the\n"
      "one-way times and the ring model to each size's undisturbed all-reduce (0.1 quantile), and write\n"
      "a one-level topology with one device per rank; what the all-reduces took beyond the ring model is\n"
      "its device's allreduce_noise_us (noisy simulations draw from it: simulate --noise-samples). Then\n"
      "ranks 0 and 1 compute and exchange messages as pipeline stages do (--loaded-rounds, computing\n"
      "--loaded-forward-ms between messages): how long each receive waited beyond the link model is its\n"
      "device's transfer_noise_us (receives that waited for their data) and transfer_noise_ready_us (data\n"
      "already there), added to each receive of a noisy simulation. The raw samples and the all-reduce\n"
      "times beside the ring model are kept under \"calibration\".\n"
      "Calibrate an idle machine: where other work keeps half a CPU or more busy (/proc/stat, sampled\n"
      "first) it warns, and the ranks' Gloo I/O threads run in the normal class instead of SCHED_IDLE,\n"
      "which that work would starve (BATON_GLOO_IO=idle|normal decides instead; the class is recorded\n"
      "as calibration.gloo_io_threads).\n\n"
      "Example:\n"
      "  baton calibrate --nproc 2 -o out/link.json\n"
      "  baton simulate --profile out/mlp.json --topology out/link.json --stages 0-3,3-6 --schedule 1f1b");
  cmd->add_option("--nproc", args->nproc,
                  fmt::format("ranks (devices of the topology), 2 to {} (default 2)", exec::kMaxLocalRanks))
      ->check(in_range(2, exec::kMaxLocalRanks));
  cmd->add_option("-o,--output", args->output, "write the topology here (default: standard output)");
  cmd->add_option("--memory-gib", args->memory_gib, "memory per device (default: this machine's / nproc)")
      ->check(above_and_at_most(0, kMaxDeviceMemoryGib));
  cmd->add_option("--repeats", args->repeats, "round trips (all-reduces) timed per size (default 40)")
      ->check(at_least(1));
  cmd->add_option("--loaded-rounds", args->loaded_rounds,
                  "messages each way of the loaded exchange (default 400; 0: none; ranks on one machine only)")
      ->check(at_least(0));
  cmd->add_option("--loaded-forward-ms", args->loaded_forward_ms,
                  "LO,HI: the loaded exchange draws each iteration's forward from LO to HI ms, its backward 1-2\n"
                  "forwards (default 0.3,1.5); a receive waits longer the longer the ranks compute between messages,\n"
                  "so match the stages to be predicted (validate sets it from the model's profile)")
      ->expected(2)
      ->delimiter(',')
      ->check(above_and_at_most(0, 1000));
  cmd->add_option("--timeout", args->timeout_s, "seconds any single wait may take (default 30)")->check(more_than(0));
  cmd->add_option("--device", args->device,
                  "cpu (default: Gloo ranks), or cuda / cuda:N: the threads backend's --nproc workers on that GPU "
                  "(run --device cuda), in this process; its topology marks them shared_compute: streams of one "
                  "GPU that take turns on its compute (add level 0's shared_speedup for streams that compute at once: "
                  "profile measure --streams measures it, validate sets it)")
      ->check(check_device_name);
  cmd->callback([args, &result] {
    if (args->loaded_forward_ms[0] > args->loaded_forward_ms[1])
      throw UsageError(fmt::format("calibrate: --loaded-forward-ms {},{}: LO must not exceed HI",
                                   args->loaded_forward_ms[0], args->loaded_forward_ms[1]));
    result.exit_code = run_calibrate(*args);
  });
}

}  // namespace baton::cli
