// `baton validate`'s inputs and its way of starting ranks: the profile, the
// calibrated topology and the loaded slices of the device's speed (see
// tools/cmd_validate.cc for the loop they feed). Built with the executor only.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/executor.h"
#include "sim/plan.h"
#include "sim/profile.h"
#include "sim/topology.h"
#include "sim/validation_figures.h"
#include "tools/validate_report.h"

namespace baton::cli {

// A step of the loop that ran and failed (ranks that died, a calibration that
// could not be fitted): exit 1, unlike bad input (UsageError, exit 2).
struct RunFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One line of progress on standard error.
void progress(const std::string& line);
std::string path_in(const std::filesystem::path& dir, const std::string& name);
// --device cuda: the workers are threads of one process on that GPU (run
// --backend threads --device cuda), not gloo ranks.
bool on_gpu(const ValidateArgs& args);

// --profile, or one measured on args.device; saved as DIR/profile.json.
Profile obtain_profile(const ValidateArgs& args, const exec::ModelInfo& model, const std::filesystem::path& dir);
// Runs `baton <arguments>` as `nproc` local ranks with this process's standard
// output and error sent to `log` (the ranks inherit them), so what the ranks
// print lands there. Throws RunFailure when a rank fails.
void launch_logged(const std::vector<std::string>& arguments, int nproc, Seconds timeout, const std::string& log,
                   const std::string& what);
// One slice of the device's speed and noise under the run's conditions,
// measured in `dir` just before a schedule's run.
LoadedSlice measure_loaded_slice(const ValidateArgs& args, const Profile& alone, const Plan& plan,
                                 const std::filesystem::path& dir);
// The slices pooled into the calibrated topology, saved as DIR/topology.json.
Topology pooled_topology(const ValidateArgs& args, const Topology& base, const std::vector<LoadedSlice>& slices,
                         const std::filesystem::path& dir);
// The profile's shared_streams, where the topology's level 0 is
// shared_compute, as its shared_speedup (at least 1), saved in
// DIR/topology.json; otherwise `base`.
Topology shared_topology(const Topology& base, const Profile& profile, const std::filesystem::path& dir);
// The range calibrate's loaded exchange draws its forwards from for gloo
// ranks running `profile` (--loaded-forward-ms): half to one and a half times
// the forward of one of --nproc even stages (the whole model's forward over
// nproc), held within 0.05 to 5 ms (beyond a few scheduler ticks the receive
// noise no longer follows the compute, and the exchange would take long).
std::pair<double, double> loaded_forward_ms(const Profile& profile, int nproc);
// --topology, or calibrated (gloo ranks, with the loaded exchange at
// loaded_forward_ms of `profile` where given; or the threads backend's workers
// on the GPU); saved as DIR/topology.json, its "calibration" object in
// `calibration`.
Topology obtain_topology(const ValidateArgs& args, const std::filesystem::path& dir, nlohmann::json& calibration,
                         const Profile* profile);

}  // namespace baton::cli
