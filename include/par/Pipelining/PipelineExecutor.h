//===- PipelineExecutor.h - Running a pipelined train step ------*- C++ -*-===//
//
// A pipelined artifact (par-pipeline-split, par-autodiff, par-optimizer,
// par-pipeline-schedule) holds a stage table naming per stage s, by role,
// a forward, a backward (or, split, the input- and weight-gradient halves)
// and an update, plus every pipeline rank's ordered actions; the manifest
// hands both over, and the interpreter finds every function by its role.
// Each rank keeps the parameters and optimizer state of its own stages
// only, interprets its actions as they are listed (transfers over the
// pipeline axis with the runtime's send/recv; a CPU program's sends never
// block, so with one stage per rank its receives move to just before
// their readers, sinkReceives in Schedule.h), sums each parameter
// gradient over the micro-batches and then applies its stages' updates.
// A forward keeps the residuals its backward reads (par-pipeline-stash, the
// default); under stash=false a backward recomputes its stage's forward
// from the kept stage input instead. lib/Pipelining/Run implements it
// (PipelineRun.h says how its files divide the work).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINING_PIPELINEEXECUTOR_H
#define PAR_PIPELINING_PIPELINEEXECUTOR_H

#include "par/Tooling/RunPlan.h"
#include "par/Runtime/par_runtime.h"

namespace par::tooling {

/// Trains the artifact's pipelined program as `plan` says on this rank of
/// the job `ctx`, through the train driver (TrainDriver.h) with the
/// pipelined step executor: besides what every train run reports, the
/// peak activations in flight and the trace (--trace); --verify checks the
/// loss trajectory and the final parameters and optimizer state against
/// the unpipelined step on one rank. Returns the exit status. Collective.
int runPipeline(par_rt_context_t *ctx, const RunPlan &plan);

} // namespace par::tooling

#endif // PAR_PIPELINING_PIPELINEEXECUTOR_H
