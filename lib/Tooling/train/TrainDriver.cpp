//===- TrainDriver.cpp - One training loop over two step executors --------===//
//
// The loop: fault injection (tests), the step, the log line, every rank's
// non-finite check (skip undoes the update), the checkpoint cadence; then
// the summaries and what comes after training, in one order for both
// executors.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/TrainDriver.h"

#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Faults.h"
#include "par/Tooling/MemoryReport.h"
#include "par/Tooling/Profile.h"
#include "par/Tooling/TrainLoop.h"

#include <cstdio>
#include <optional>

namespace par::tooling {

StepExecutor::~StepExecutor() = default;

int64_t StepExecutor::predictedMemory() const {
  return predictedPeak(memoryPlanFunction());
}

namespace {

class TrainDriver {
public:
  TrainDriver(par_rt_context_t *ctx, const RunPlan &plan, StepExecutor &exec)
      : ctx(ctx), plan(plan), o(plan.options), exec(exec),
        rank(par_rt_context_rank(ctx)),
        world(par_rt_context_world_size(ctx)) {}

  int run();

private:
  /// The steps after the resumed one; false when a non-finite step stops
  /// the run.
  bool loop(TrainLog &log, const LossScaling &scaling);

  par_rt_context_t *ctx;
  const RunPlan &plan;
  const RunOptions &o;
  StepExecutor &exec;
  int64_t rank, world;
};

bool TrainDriver::loop(TrainLog &log, const LossScaling &scaling) {
  // Every rank's step-or-skip decisions, to check they agree.
  std::vector<double> decisions;
  // Loss-scaled programs skip non-finite steps themselves.
  NonFiniteCheck finite(ctx, scaling.enabled ? NonFiniteMode::Off : o.nonFinite,
                        rank);
  double tokens = exec.tokensPerStep();
  // --profile: the steps after the first (which pays the first touch of
  // every buffer), or the one step there is.
  int64_t first = plan.resumedStep + 1;
  int64_t profileFrom = o.train.steps > first ? first + 1 : first;
  double profiled = 0;
  for (int64_t step = first; step <= o.train.steps; ++step) {
    injectStepFaults(rank, step);
    if (o.profile && step == profileFrom)
      par_rt_profile_start();
    // --verify after several steps checks the last one from the state it
    // ran on (StepExecutor::keepLastStepInputs).
    if (o.verify && o.train.steps > 1 && step == o.train.steps)
      exec.keepLastStepInputs();
    StepOutcome r = exec.step(step);
    if (o.profile && step >= profileFrom)
      profiled += r.seconds;
    if (scaling.enabled)
      decisions.push_back(r.taken ? 1.0 : 0.0);
    log.step(step, r.loss, r.seconds, tokens, r.scale, r.taken);
    NonFiniteCheck::Action action = finite.check(
        step, r.loss,
        finite.enabled() ? exec.updatedState() : std::vector<UpdatedTensor>{});
    if (action == NonFiniteCheck::Stop)
      return false;
    if (action == NonFiniteCheck::Skip)
      exec.undoStep();
    if (plan.checkpointDue(step))
      exec.saveCheckpoint(step);
  }
  if (o.profile) {
    par_rt_profile_stop();
    if (rank == o.profileRank)
      printProfile(profileFrom, o.train.steps - profileFrom + 1, profiled,
                   o.profileRows);
  }
  finite.summary(o.train.steps - plan.resumedStep);
  if (scaling.enabled) {
    checkSameDecisions(ctx, decisions, rank, world);
    log.lossScaleSummary(exec.nextLossScale());
  }
  return true;
}

int TrainDriver::run() {
  noteResidentBaseline();
  // Before any buffer: the limit covers the session's buffers too.
  if (o.memoryLimit > 0)
    setMemoryLimit(o.memoryLimit, exec.memoryPlanFunction(), rank);
  exec.prepare();
  if (o.memoryLimit > 0)
    setMemoryPrediction(exec.predictedMemory());
  if (!o.resume.empty()) {
    exec.resume();
    // An export (no --steps), or a run whose checkpoint is at --steps
    // already: the state as loaded, nothing trained.
    if (plan.nothingToTrain(rank == 0)) {
      exec.saveWeights();
      return 0;
    }
  }
  injectCrash(rank);
  LossScaling scaling = exec.lossScaling();
  TrainLogOptions logOptions = o.train;
  logOptions.firstStep = plan.resumedStep + 1;
  logOptions.lossScale = scaling.enabled;
  logOptions.minScale = scaling.minScale;
  std::optional<TrainLog> log;
  log.emplace(logOptions, rank == 0);
  exec.printHeader();
  // The statistics cover the steps exactly.
  par_rt_context_reset_stats(ctx);
  if (!loop(*log, scaling))
    return 1;
  log->finish(exec.title());
  std::vector<double> losses = log->losses();
  log.reset(); // the CSV is complete before anything else is reported
  exec.report(o.train.steps - plan.resumedStep);
  reportMemory(ctx, exec.predictedMemory());
  // The limit models the job's devices; what follows (gathered results,
  // the unsharded reference of --verify) is the runner's checking.
  if (o.memoryLimit > 0)
    par_rt_memory_set_limit(0, nullptr, nullptr);
  exec.saveWeights();
  exec.writeResults();
  int status = rank == 0 && o.verify ? exec.verify(losses) : 0;
  if (o.sample.count > 0)
    exec.sample();
  return status;
}

} // namespace

int runTraining(par_rt_context_t *ctx, const RunPlan &plan,
                StepExecutor &exec) {
  TrainDriver driver(ctx, plan, exec);
  return driver.run();
}

} // namespace par::tooling
