//===- RunPlan.h - A par-run job, resolved against its artifact -*- C++ -*-===//
//
// The options (RunOptions.h) say what the user asked; the plan says what
// will run: which function (with --steps and no --entry, the artifact's
// train step, found by its manifest role), which inputs the corpus fills,
// the seed and first step of a resumed run (from the checkpoint), and the
// target. It is made once, in the launching process (so that a bad
// artifact, entry or checkpoint fails before any rank starts) and again,
// identically, in each rank, and never changes afterwards.
//
// runJob is par-run's body: outside an MPI job it checks the plan against
// the mesh and starts the ranks (launchJob, Launcher.h); in a rank it
// starts the runtime and runs the plan with the rank body the driver
// gives: runModule (RunModule.h: a program once or --repeat times, or a
// train step through the train driver, TrainDriver.h, with the plain step
// executor) or, for --pipeline, runPipeline (lib/Pipelining/Run, the
// pipelined step executor under the same driver).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_RUNPLAN_H
#define PAR_TOOLING_RUNPLAN_H

#include "par/Tooling/RunOptions.h"
#include "par/Runtime/par_runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace par::tooling {

struct RunPlan {
  RunOptions options; // as the user gave them
  /// The function a plain run calls (the train step when training); the
  /// unpipelined train step for a pipelined run.
  std::string entry;
  /// The manifest's target: "cpu" or "cuda:<chip>".
  std::string target;
  /// The run's seed: --seed, or the resumed checkpoint's.
  uint64_t seed = 0;
  /// The step a resumed checkpoint was saved at (0: not resumed).
  int64_t resumedStep = 0;
  /// The arguments --data fills: --tokens/--targets, else the inputs of
  /// role "tokens" and "targets" (par.data), else arg0 and arg1.
  int64_t tokensArg = 0, targetsArg = 1;
  /// The entry's mesh: its axis sizes and device count.
  std::vector<int64_t> mesh;
  int64_t devices = 1;
  /// Training a pipelined artifact without --pipeline: what the launcher
  /// says once (every rank trains the unpipelined step; "" otherwise).
  std::string pipelineNote;

  bool training() const { return options.train.steps > 0; }
  /// A resumed run with no step left: an export (no --steps), or a
  /// checkpoint at --steps already (`print`: rank 0 says so).
  bool nothingToTrain(bool print) const;
  /// Whether to save a checkpoint after `step`.
  bool checkpointDue(int64_t step) const;
};

/// Resolves `o` against its artifact's manifest (and --resume's
/// checkpoint); fatal, with the reason, when they do not fit.
RunPlan planRun(const RunOptions &o);

/// What a rank runs once the runtime has started.
using RankBody = int (*)(par_rt_context_t *ctx, const RunPlan &plan);

/// par-run's body (see above): `body` in each rank; returns the process's
/// exit status.
int runJob(const RunPlan &plan, int argc, char **argv, RankBody body);

} // namespace par::tooling

#endif // PAR_TOOLING_RUNPLAN_H
