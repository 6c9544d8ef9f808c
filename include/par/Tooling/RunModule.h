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

#include "par/Tooling/Checkpoint.h"
#include "par/Tooling/Finite.h"
#include "par/Tooling/Sampling.h"
#include "par/Tooling/TrainLoop.h"

#include <map>
#include <string>

namespace par::tooling {

struct RunOptions {
  std::string artifact;
  std::string entry;                         // "" = the first function
  std::map<std::string, std::string> inputs; // "argK" -> FILE.npy
  uint64_t seed = 0;
  bool seedGiven = false; // --seed (a resumed run takes the checkpoint's)
  std::string outputDir;
  bool verify = false;
  double rtol = -1; // < 0: the dtype's default tolerance
  int64_t repeat = 1;
  TrainLogOptions train; // steps > 0: iterate a train step
  std::string data;      // a character corpus for the token/target args
  int64_t tokensArg = 0, targetsArg = 1;
  bool tokensGiven = false, targetsGiven = false; // --tokens, --targets
  std::string loadWeights; // a .safetensors file for the named inputs
  std::string saveWeights; // where the trained named inputs go
  SamplingOptions sample; // count > 0: sample after training
  std::string sampleEntry;
  std::string trace; // pipelined runs: a Chrome trace of the last step
  bool errorNorm = false; // after training: the error-feedback buffers' norm
  CheckpointOptions checkpoint; // --checkpoint DIR --save-every N --keep K
  std::string resume; // --resume DIR: continue from its newest checkpoint
  int64_t resumedStep = 0; // the step --resume's checkpoint was saved at
  NonFiniteMode nonFinite = NonFiniteMode::Error; // --nonfinite (Finite.h)
};

/// The data arguments --data fills, where --tokens/--targets did not say:
/// the inputs of `f` of role "tokens" and "targets" (par.data), else arg0
/// and arg1.
void resolveDataArgs(const Function &f, RunOptions &o);

/// Runs `o.entry` of the artifact's sharded program on this rank of the
/// job `ctx` (whose mesh is set); returns the exit status (1 when --verify
/// finds a mismatch). Collective: every rank calls it.
int runModule(par_rt_context_t *ctx, const RunOptions &o);

} // namespace par::tooling

#endif // PAR_TOOLING_RUNMODULE_H
