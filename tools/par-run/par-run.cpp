//===- par-run.cpp - Runs a compiled par program on N ranks ---------------===//
//
// par-run -n N ARTIFACT [options]   (par-run --help lists them)
//
// A thin driver over the tooling library (par/Tooling) and the pipelined
// step executor (par/Pipelining/PipelineExecutor.h): the options are
// parsed and validated there (RunOptions.h), resolved against the
// artifact's manifest into a run plan (RunPlan.h), and runJob either
// starts the N ranks (mpirun -n N, on --hostfile/-H hosts when given; a
// single rank runs in this process) or, in a rank, runs the plan: a
// program once or --repeat times, or a train step through the train
// driver (TrainDriver.h) with the plain step executor, or with the
// pipelined one under --pipeline (the body chosen here).
// Inside an mpirun or srun job the user started, par-run is that job's
// rank (docs/Launch.md).
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/PipelineExecutor.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Launcher.h"
#include "par/Tooling/RunOptions.h"
#include "par/Tooling/RunModule.h"
#include "par/Tooling/RunPlan.h"

using namespace par::tooling;

int main(int argc, char **argv) {
  setToolName("par-run");
  superviseLaunchedRank(); // in a rank launchJob started
  const RunPlan plan = planRun(parseRunOptions(argc, argv));
  return runJob(plan, argc, argv,
                plan.options.pipeline ? runPipeline : runModule);
}
