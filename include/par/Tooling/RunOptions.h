//===- RunOptions.h - What a user asks of par-run ---------------*- C++ -*-===//
//
// par-run's command line as a value: parsed and validated once, here in
// the library (the tool only calls parseRunOptions), never changed after.
// What depends on the artifact (which function runs, the data arguments, a
// resumed checkpoint's seed and step) is resolved from these options and
// the manifest into a RunPlan (RunPlan.h).
//
// Launching: -n N ranks of the artifact's mesh; outside an MPI job par-run
// starts them with `mpirun -n N`, on the hosts of --hostfile FILE or
// -H host:slots,... when given (OpenMPI's own syntax, passed through), and
// inside a job the user started (mpirun, srun) it runs as that job's rank.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_RUNOPTIONS_H
#define PAR_TOOLING_RUNOPTIONS_H

#include "par/Tooling/Checkpoint.h"
#include "par/Tooling/Finite.h"
#include "par/Tooling/Sampling.h"
#include "par/Tooling/TrainLoop.h"

#include <cstdio>
#include <map>
#include <string>

namespace par::tooling {

struct RunOptions {
  // The job.
  int64_t ranks = -1;
  std::string backend = "cpu"; // cpu or cuda
  bool pipeline = false;       // --pipeline: the stored pipeline actions
  std::string hostfile;        // --hostfile FILE (mpirun's)
  std::string hosts;           // -H host:slots,... (mpirun's)
  int64_t threads = 0;         // --threads (0: not given)
  std::string collectiveTimeout; // --collective-timeout SECONDS
  int64_t memoryLimit = 0;       // --memory-limit SIZE per rank (0: none)
  // The program and its inputs.
  std::string artifact;
  std::string entry;                         // "" = chosen by the plan
  std::map<std::string, std::string> inputs; // "argK" or name -> FILE.npy
  uint64_t seed = 0;
  bool seedGiven = false; // --seed (a resumed run takes the checkpoint's)
  std::string data;       // a character corpus for the token/target args
  int64_t tokensArg = 0, targetsArg = 1;
  bool tokensGiven = false, targetsGiven = false; // --tokens, --targets
  std::string loadWeights; // a .safetensors file for the named inputs
  // What to do and what to report.
  int64_t repeat = 1;
  TrainLogOptions train; // steps > 0: iterate a train step
  NonFiniteMode nonFinite = NonFiniteMode::Error; // --nonfinite (Finite.h)
  CheckpointOptions checkpoint; // --checkpoint DIR --save-every N --keep K
  std::string resume; // --resume DIR: continue from its newest checkpoint
  std::string outputDir;
  std::string saveWeights; // where the trained named inputs go
  bool verify = false;
  double rtol = -1; // < 0: the dtype's default tolerance
  /// The trained state's tolerance under --verify (< 0: rtol's).
  double stateRtol = -1;
  double stateTolerance() const { return stateRtol >= 0 ? stateRtol : rtol; }
  SamplingOptions sample; // count > 0: sample after training
  std::string sampleEntry;
  std::string trace;      // pipelined runs: a Chrome trace of the last step
  bool errorNorm = false; // after training: the error-feedback buffers' norm
  bool profile = false;     // --profile: time per step by kernel
  int64_t profileRows = 15; // --profile-top N: the rows it prints
  int64_t profileRank = 0;  // --profile-rank R: whose table it prints
};

/// Parses and validates par-run's command line (argv[1..]); a bad option
/// or combination is fatal with a message naming it; -h/--help prints the
/// usage and exits 0.
RunOptions parseRunOptions(int argc, char **argv);

/// par-run's usage text, on `to` (--help: stdout; a missing artifact: stderr).
void printRunUsage(FILE *to);

/// The threads each rank runs: --threads, else OMP_NUM_THREADS, else the
/// host's cores shared among the ranks on it (at least 1).
int64_t threadsPerRank(const RunOptions &o);

/// Sets the environment the ranks inherit (mpirun forwards it): OpenMP
/// and OpenBLAS threads (threadsPerRank unless the environment says),
/// libomp's spin time, and the collective watchdog's timeout.
void exportRunEnvironment(const RunOptions &o);

} // namespace par::tooling

#endif // PAR_TOOLING_RUNOPTIONS_H
