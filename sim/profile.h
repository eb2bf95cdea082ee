// Profile: the measured (or derived) cost of every layer of a model.
//
// A profile is the planner's and simulator's only knowledge of the model. Times
// are per microbatch of `microbatch_size` samples on `device`; sizes in bytes.
// Layers are in a topological order (profile order); a layer's `inputs` are
// indices of earlier layers (default: the previous layer; none for layer 0).
//
// File format `baton.profile.v1`:
//   {"format": "baton.profile.v1", "model": str, "device": str, "microbatch_size": int,
//    "layers": [{"name": str, "forward_ms": num, "backward_ms": num,
//                optional "backward_input_ms", "backward_weight_ms": num (both or neither;
//                  the zero-bubble split of the backward into the gradient of the
//                  input (I) and of the weights (W); their sum must equal
//                  backward_ms to 1e-6 relative; without them I and W take half
//                  of backward_ms each, a stated guess: for the GEMMs that
//                  dominate transformer and convolution layers the two products
//                  cost the same),
//                "output_bytes": int, "param_bytes": int,
//                optional "optimizer_ms": num (one optimizer step over the layer's
//                  parameters; default 0),
//                optional "description": str, optional "inputs": [layer names],
//                optional "host_forward_ms", "host_backward_ms": num >= 0 (on a GPU,
//                  the host's own time issuing the pass, as `profile measure
//                  --device cuda` writes it beside the device's: a pass the host
//                  issues faster than the GPU runs it lets the host run ahead.
//                  Kept for a model of the host issuing and the GPU running; no
//                  figure reads them yet),
//                optional "forward_overlap_ms", "backward_overlap_ms": num >= 0, at
//                  most forward_ms (backward_ms) (default 0: the communication
//                  inside the pass, such as a mixture of experts' all-to-alls,
//                  that an overlapped pair hides behind the other pass's
//                  compute; part of the pass's time, not added to it),
//                optional "expert_forward_ms", "expert_backward_input_ms",
//                  "expert_backward_weight_ms": num >= 0, all three or none (a
//                  block of a mixture-of-experts model: its experts' work
//                  between the dispatch and the combine all-to-alls, which are
//                  the pass's overlap, half each: the forward's, the
//                  backward's input gradients and its weight gradients, zero
//                  for a dense block; with the overlap at most the pass's
//                  time, the weight gradients at most backward_weight_ms
//                  where given. An overlapped pair runs the pieces as
//                  Megatron-core's batch-level overlap does, block beside
//                  block, sim/stage_costs.h's pair_hidden; a layer without
//                  them and without overlap, such as the embedding, runs
//                  before or after the blocks; part of the passes' time)}],
//    optional "derivation": str (how the numbers were derived, for people: analytic
//      profiles say which formulas and device figures they used),
//    optional "compute_noise": [num > 0, ...] (how noisy the measuring machine was: a
//      sample of the factor by which one layer's time differed from its profiled
//      value, as `baton profile measure` writes it; `baton validate` moves it into
//      the topology's device.compute_noise, sim/topology.h. The simulator does not
//      read it from a profile.),
//    optional "call_cost_ms": {"forward": num >= 0, "backward": num >= 0,
//      "optimizer": num >= 0} (what one call of a pass costs beyond its layers'
//      work: a stage of n layers runs its forward, backward and optimizer step as
//      one call each, while the layers were timed one call each, so the stage's
//      time is its layers' sum less (n - 1) times this (never below zero);
//      `profile measure --whole-pass` measures it as (sum of the layers - the
//      whole model as one call) / (layers - 1), a negative result written as 0;
//      default 0: a stage is its layers' sum),
//    optional "shared_streams": {"streams": int >= 2, "speedup": num > 0} (on a GPU:
//      how much more of the model's work `streams` streams of the device do per
//      second running at once than one stream alone, as `profile measure
//      --streams N` measures it with the whole model's passes; `baton validate`
//      moves it into the topology's level 0 (shared_speedup, sim/topology.h),
//      where workers share the device. The simulator does not read it from a
//      profile.)}
// These are all the keys: the loader refuses any other, naming the object and
// the key (a misspelled `forwrd_ms` is an error, not a layer without forward
// time). `derivation` and `compute_noise` joined v1 without a new format
// string: they change no figure computed from the profile. `call_cost_ms`
// joined later: it changes the figures of a profile that has it, and a file
// without it means what it meant.
//
// Invariants after loading: at least one layer; names unique; every time and
// size >= 0; `inputs` refer to earlier layers only (so the graph is acyclic).
// Thread safety: immutable after construction; share freely.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/result.h"
#include "sim/units.h"

namespace baton {

// The most samples per microbatch a profile holds (the loader refuses more):
// the commands that write profiles take no more.
inline constexpr int kMaxMicrobatchSize = 1 << 24;

struct Layer {
  std::string name;
  std::string description;  // free text, e.g. "Conv2d(3, 64, 3x3)"
  Seconds forward;
  Seconds backward;                       // full backward (input + weight gradients)
  std::optional<Seconds> backward_input;  // zero-bubble split, when profiled
  std::optional<Seconds> backward_weight;
  Seconds optimizer;  // one optimizer step over its parameters (STEP)
  // On a GPU: the host's time issuing the pass (see the file format above).
  std::optional<Seconds> host_forward;
  std::optional<Seconds> host_backward;
  Bytes output_bytes;  // activation this layer hands to its consumers
  Bytes param_bytes;
  std::vector<int> inputs;  // producer layer indices (< own index)
  // Communication inside the forward (the backward) that an overlapped pair
  // (DualPipeV's F&B, sim/program.h) hides behind the other pass's compute:
  // a mixture of experts' all-to-alls. Part of forward (backward), not added.
  Seconds forward_overlap;
  Seconds backward_overlap;
  // A mixture of experts' block: the experts' share of each pass (the work
  // between its dispatch and its combine, whose all-to-alls are the
  // overlaps above, half each), which tells an overlapped pair what each
  // all-to-all can run beside (sim/stage_costs.h). Part of forward
  // (backward, backward_weight), not added.
  struct ExpertWork {
    Seconds forward;
    Seconds backward_input;
    Seconds backward_weight;
  };
  std::optional<ExpertWork> experts;
};

// What one call of each pass costs beyond its layers' work ("call_cost_ms").
struct CallCost {
  Seconds forward;
  Seconds backward;
  Seconds optimizer;
  bool operator==(const CallCost&) const = default;
};

// "shared_streams": streams of one device running the model at once.
struct SharedStreams {
  int streams = 2;
  // (streams x one stream's time per pass) / the time per pass of each of the
  // streams running at once: 1 = they take turns, streams = no slowdown.
  double speedup = 1.0;
  bool operator==(const SharedStreams&) const = default;
};

struct Profile {
  std::string model;
  std::string device;
  int microbatch_size = 1;
  std::vector<Layer> layers;
  CallCost call_cost;  // zero: a stage takes its layers' sum
  std::optional<SharedStreams> shared_streams;

  int num_layers() const { return static_cast<int>(layers.size()); }
};

// The whole model's pass as one call each, as a stage holding every layer
// runs it (one forward call, one autograd call, one optimizer step), against
// the profile's layers one call each: what a call costs beyond its layers'
// work is (sum of the layers - whole) / (layers - 1) per pass. On a GPU each
// layer timed alone starts from an idle stream and pays the host's hand-over
// before its first kernel; a stage pays it once (bench/RESULTS.md). The
// profile's call_cost is that, never below zero (`profile measure
// --whole-pass`).
struct WholePass {
  Seconds forward;
  Seconds backward;
  Seconds optimizer;
};
// Per call beyond the layers' work, for `pass` of `profile`'s layers ((sum -
// whole) / (layers - 1), negative where the whole pass took longer; 0 for a
// one-layer model).
CallCost per_call_cost(const Profile& profile, const WholePass& pass);
// The profile's call_cost from those passes: per_call_cost, never below zero
// (a whole pass slower than its layers, as noise can make it, leaves a stage
// its layers' sum).
CallCost call_cost_from(const Profile& profile, const WholePass& pass);

// A half-open range of layers [begin, end) in profile order.
struct LayerRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  bool operator==(const LayerRange&) const = default;
};

// Sums over a layer range.
Seconds forward_time(const Profile& profile, LayerRange range);
Seconds backward_time(const Profile& profile, LayerRange range);
Bytes param_bytes(const Profile& profile, LayerRange range);
// Bytes a stage keeps per in-flight microbatch for its backward: the input it
// received plus the outputs of its own layers (see docs/SIMULATOR.md).
Bytes stashed_activation_bytes(const Profile& profile, LayerRange range);
// Bytes that cross the cut before layer `range.begin` (what the stage receives):
// outputs of layers before the range consumed by layers inside it. Zero for a
// range starting at layer 0.
Bytes input_bytes(const Profile& profile, LayerRange range);
// Bytes that cross the cut after the range (what the stage sends on): outputs
// of layers inside the range consumed by layers after it. Zero at the end.
Bytes output_bytes(const Profile& profile, LayerRange range);

// Parsing and writing. `source` names the file in error messages.
Result<Profile> profile_from_json(const nlohmann::json& document, const std::string& source);
Result<Profile> parse_profile(std::string_view text, const std::string& source);
nlohmann::json profile_to_json(const Profile& profile);

// A chain of `num_layers` identical layers, for tests and studies.
Profile make_uniform_profile(int num_layers, Seconds forward, Seconds backward, Bytes output, Bytes params,
                             int microbatch_size = 1);

}  // namespace baton
