//===- RunModule.h - Running a compiled program on this rank ----*- C++ -*-===//
//
// What par-run does inside a job, as a library (IREE's
// iree/tooling/run_module.h plays this part for iree-run-module): builds
// each input's local block (a given .npy or the generator), runs the entry
// point once, K times (--repeat) or as a train step N times (--steps, with
// a character corpus for the batches), reports per-rank time and traffic
// (after training also the bytes per step by kernel, gradient compression's
// savings and, with --error-norm, the error-feedback buffers' norm:
// Traffic.h), gathers the results to rank 0 (--output writes them as .npy),
// verifies them and the loss trajectory against the unsharded reference
// (--verify; a sharded step's trailing error-feedback state, which the
// reference lacks, is left out) and samples text from the trained model
// (--sample).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_RUNMODULE_H
#define PAR_TOOLING_RUNMODULE_H

#include "par/Tooling/RunPlan.h"
#include "par/Runtime/par_runtime.h"

namespace par::tooling {

/// Runs `plan.entry` of the artifact's sharded program on this rank of the
/// job `ctx` (whose mesh is set): once or --repeat times, or as a train
/// step (--steps, --resume) through the train driver with the plain step
/// executor. Returns the exit status (1 when --verify finds a mismatch).
/// Collective: every rank calls it.
int runModule(par_rt_context_t *ctx, const RunPlan &plan);

} // namespace par::tooling

#endif // PAR_TOOLING_RUNMODULE_H
