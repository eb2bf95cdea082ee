// What both backends share: turning a Plan into a ready-to-run set of stages
// and per-worker setups, and turning their results into a RunReport.
//
// prepare_run checks the plan against the model (check_plan_for_model), builds
// and validates its Program (build_program, validate_program), and derives
// from the Program, once, everything a worker needs to know about the others:
// - step divisors: STEP n of a worker applies the gradients of the B's it ran
//   since its previous STEP, summed over its stage's replicas when the stage
//   is replicated (their ALLREDUCE adds them);
// - vertical sync (pipedream): forward_versions[k] = the number of STEPs the
//   stage-0 worker of microbatch k ran before its F k, i.e. the version (per
//   pass) stage 0 used. PipeDream sends this tag with the activation; as the
//   Program is known to every worker, baton derives it instead.
// Thread safety: a PreparedRun is immutable once built.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "exec/executor.h"
#include "exec/fault.h"
#include "exec/model.h"
#include "exec/stage.h"
#include "exec/worker.h"
#include "sim/program.h"

namespace baton::exec {

struct PreparedRun {
  std::unique_ptr<ModelDef> model;
  Plan plan;
  Program program;
  std::vector<StageModel> stages;                              // [stage]
  std::vector<std::map<int, std::vector<int>>> step_divisors;  // [worker][stage][round]
  std::vector<int> stage0_versions;                            // [microbatch], vertical sync only
  std::optional<InjectedFault> fault;                          // from BATON_INJECT_FAULT
};

// Also reads BATON_INJECT_FAULT (exec/fault.h; its rank must be a worker of
// the plan) and checks the checkpoint options: checkpoint_every >= 0, and a
// folder for checkpoint_every or resume.
Result<std::unique_ptr<PreparedRun>> prepare_run(const Plan& plan, const TrainOptions& options);

// `reducers`: one per stage the worker runs (stages_of order), null where the
// stage has no replicas.
WorkerSetup worker_setup(const PreparedRun& run, int worker, const TrainOptions& options, Transport* transport,
                         WorkerDevice* device, const std::vector<Reducer*>& reducers);

// The spans of one step, sorted by (start, worker, action_index), as a measured Trace.
Trace measured_trace(const Program& program, std::vector<Span> spans);

// Layer by layer copies of a stage's parameters (for Weights).
std::vector<std::vector<std::vector<float>>> stage_weights(const StageModel& stage,
                                                           const std::vector<at::Tensor>& params);
// A tensor of any device and type as float32 values on the host.
std::vector<float> to_floats(const at::Tensor& tensor);

// Mean of the step's per-microbatch losses.
double mean_loss(const std::vector<std::pair<int, double>>& losses);

// With options.resume: loads the latest complete checkpoint (resumable_checkpoint)
// into every worker of `workers` (each from its stage's file) and returns its
// completed steps, the step to run next; 0 without resume.
Result<int> restore_checkpoint(const PreparedRun& run, const TrainOptions& options,
                               const std::vector<Worker*>& workers);

}  // namespace baton::exec
