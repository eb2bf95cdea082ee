// Checkpoints of a training run: what each stage needs to continue exactly
// where it stopped, taken between iterations (see exec/executor.h).
//
// Layout: <dir>/step-<n>/ holds the checkpoint taken after n completed steps
// (n zero-padded to 6 digits, so names sort):
//   stage-<s>.bin  one per stage, from its replica 0 (the replicas of a stage
//                  hold identical weights after every STEP, so one copy
//                  serves them all);
//   manifest.json  written last, once every stage file is in place. A
//                  checkpoint is complete when its manifest and all its stage
//                  files exist; an incomplete one is never resumed from.
//     {"format": "baton.checkpoint.v1", "completed_steps": n, "stages": S,
//      "run": {"model": str, "seed": int, "schedule": str, "stages": "0-3,3-6",
//              "microbatches": int, "microbatch_size": int, "vertical_sync": bool}}
// Stage file: one JSON header line, then raw float32 data (native byte order):
//     {"format": "baton.checkpoint.stage.v1", "stage": s, "completed_steps": n,
//      "weight_version": v, "elements": N, "run": {... as in the manifest}}\n
//   N floats: the live weights (the stage's parameters, flattened in order);
//   N floats: the gradient buffer.
// "run" names what must not change across a resume; the stage header repeats
// it so that a stage file left by another run in the same folder is refused.
// Every file is written under a temporary name and renamed into place, so a
// crash leaves the old file or the new one, never part of one.
// Thread safety: writers of distinct stages may run at once (several threads
// or processes); the manifest is written once, after all of them.
#pragma once

#include <string>

#include "exec/executor.h"
#include "exec/pch.h"

namespace baton::exec {

// One stage's state at an iteration boundary.
struct StageState {
  int weight_version = 0;  // STEPs applied so far: the live version's number
  at::Tensor weights;      // [elements] float32, the live parameters flattened
  at::Tensor gradient;     // [elements] float32, the gradient buffer
};

// Whether a checkpoint is taken after `completed_steps` steps.
bool checkpoint_due(const TrainOptions& options, int completed_steps);

Status write_stage_state(const Plan& plan, const TrainOptions& options, int completed_steps, int stage,
                         const StageState& state);
// Call once every stage's file of `completed_steps` is written.
Status write_manifest(const Plan& plan, const TrainOptions& options, int completed_steps);

// Reads stage `stage` of the checkpoint after `completed_steps` (found by
// resumable_checkpoint); `elements` is the stage's parameter count.
Result<StageState> read_stage_state(const Plan& plan, const TrainOptions& options, int completed_steps, int stage,
                                    int64_t elements);

}  // namespace baton::exec
