//===- RunModule.cpp - Running a compiled program on this rank ------------===//
//
// Inputs are global tensors first (given or generated, the same on every
// rank and in the reference), then this rank's blocks of them; results go
// the other way. With --repeat K there is one untimed warm-up run, then K
// timed runs; the statistics are those of the last run.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/RunModule.h"

#include "par/Manifest/Schema.h"
#include "par/Tooling/Compare.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Faults.h"
#include "par/Tooling/Npy.h"
#include "par/Tooling/StateLayout.h"
#include "par/Tooling/TrainDriver.h"
#include "par/Tooling/Traffic.h"
#include "par/Tooling/TrainState.h"
#include "par/Tooling/Values.h"
#include "par/Tooling/Weights.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <sys/stat.h>

namespace par::tooling {

namespace {

/// A plain run of one function of the sharded program: once or --repeat
/// times, or, as the train driver's plain step executor, a train step
/// iterated on state resident in session buffers (TrainStepper).
class ModuleRun : public StepExecutor {
public:
  ModuleRun(par_rt_context_t *ctx, const RunPlan &plan)
      : ctx(ctx), plan(plan), o(plan.options),
        sharded(o.artifact, PAR_PROGRAM_SHARDED, ctx),
        f(sharded.lookup(plan.entry)), rank(f.rank()),
        world(par_rt_context_world_size(ctx)) {}

  /// Once or --repeat times: run, report, save, write, verify.
  int runOnce();

  // The plain step executor (TrainDriver.h).
  void prepare() override;
  void resume() override;
  LossScaling lossScaling() const override;
  void printHeader() override;
  double tokensPerStep() const override;
  StepOutcome step(int64_t step) override;
  void keepLastStepInputs() override;
  double nextLossScale() const override { return nextScale; }
  std::vector<UpdatedTensor> updatedState() const override;
  void undoStep() override { stepper->undoFeedback(); }
  void saveCheckpoint(int64_t step) override;
  std::string title() const override;
  void report(int64_t stepsRun) override;
  void saveWeights() override;
  void writeResults() override;
  int verify(const std::vector<double> &losses) override;
  void sample() override;
  par_function_t *memoryPlanFunction() const override { return f.handle(); }
  /// The plan counts the donated results in their arguments' buffers; a
  /// run that can undo a step (--nonfinite skip) keeps them apart.
  int64_t predictedMemory() const override {
    int64_t peak = StepExecutor::predictedMemory();
    return peak < 0 || donates() ? peak : peak + f.donatedResultBytes();
  }

private:
  /// Whether the train step updates its parameters and state in place
  /// (not when a skipped step must be undone).
  bool donates() const { return o.nonFinite != NonFiniteMode::Skip; }
  /// Whether the results are read after the run (by every rank alike:
  /// gathering them is collective).
  bool wantsResults() const { return o.verify || !o.outputDir.empty(); }
  void loadInputs();
  StateLayout stateLayout();
  void readGivenInputs();
  void loadGivenWeights();
  void repeat();
  void reportTimes() const;

  par_rt_context_t *ctx;
  const RunPlan &plan;
  const RunOptions &o;
  Session sharded;
  Function f;
  int64_t rank, world;
  std::map<size_t, Buffer> given;
  std::vector<Buffer> locals, outs, globals;
  /// --verify after several steps: the global inputs of the last step
  /// (rank 0; not the compression state, which the reference lacks).
  std::vector<Buffer> lastInputs;
  DataLoader data;
  TrainStepper::BatchFn batches;
  std::optional<TrainStepper> stepper; // made at the first step
  int64_t scaleArg = -1; // loss scaling: the argument the next scale feeds
  double nextScale = NAN;
  std::vector<double> times;
  par_rt_stats_t stats{};
};

void ModuleRun::readGivenInputs() {
  for (auto &[name, path] : o.inputs) {
    size_t k = 0;
    // An input's PyTorch name (or alias) names it too.
    for (k = 0; k < f.inputs.size(); ++k)
      if (f.inputs[k].name == name ||
          std::count(f.inputs[k].aliases.begin(), f.inputs[k].aliases.end(),
                     name))
        break;
    if (k < f.inputs.size()) {
      given[k] = readNpy(path, f.inputs[k], inputLabel(f.inputs, k));
      continue;
    }
    if (name.rfind("arg", 0) != 0 ||
        (k = strtoul(name.c_str() + 3, nullptr, 10)) >= f.inputs.size())
      fatal("unknown input '" + name + "' (the program has " +
            (f.inputs.empty()
                 ? std::string("no arguments")
                 : "arg0..arg" + std::to_string(f.inputs.size() - 1)) +
            ")");
    given[k] = readNpy(path, f.inputs[k], inputLabel(f.inputs, k));
  }
}

/// --load-weights: the named inputs' global values from the file (every
/// rank reads it; rank 0 reports).
void ModuleRun::loadGivenWeights() {
  if (o.loadWeights.empty())
    return;
  for (auto &[k, global] : loadWeights(f, o.loadWeights, rank == 0)) {
    if (given.count(k))
      fatal(inputLabel(f.inputs, k) + " is given twice: by --input and by "
            "--load-weights");
    given[k] = std::move(global);
  }
}

/// The inputs' global values (given, loaded or generated: the same on
/// every rank and in the reference), this rank's blocks, and --data's
/// first batch.
void ModuleRun::loadInputs() {
  readGivenInputs();
  loadGivenWeights();
  locals = localInputs(f, globalInputs(f, plan.seed, given));
  if (o.data.empty())
    return;
  data.seed = plan.seed;
  data.load(o.data);
  data.check(f, plan.tokensArg, plan.targetsArg);
  batches = dataBatches(f, data, plan.tokensArg, plan.targetsArg);
  batches(1, locals);
}

/// The state as the train driver's tools see it (StateLayout.h): every
/// rank holds its block of each named input (the parameters: weights) and
/// fed-back argument (the state a checkpoint holds), in `locals`.
StateLayout ModuleRun::stateLayout() {
  StateLayout l;
  l.rank = rank;
  l.axes = int64_t(f.axisSizes.size());
  std::vector<bool> fed(f.inputs.size(), false);
  for (auto [r, a] : f.feedback)
    fed[a] = true;
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Tensor &t = f.inputs[i];
    if (!fed[i] && t.name.empty())
      continue;
    StateSlot s;
    s.fn = &f;
    s.input = i;
    s.parameter = !t.name.empty();
    s.layoutBound = t.compressionState();
    s.global = s.layoutBound ? -1 : int64_t(i);
    if (fed[i])
      s.key = "arg" + std::to_string(i);
    s.host = &locals[i];
    l.slots.push_back(s);
  }
  return l;
}

/// --save-weights: the named inputs after the run (after training: the
/// trained parameters) gathered to rank 0, which writes them.
void ModuleRun::saveWeights() {
  if (!o.saveWeights.empty())
    saveNamedWeights(stateLayout(), o.saveWeights, f.name);
}

void ModuleRun::prepare() {
  checkTrainStep(f);
  loadInputs();
  if (f.lossScaleResult >= 0)
    for (auto [r, a] : f.feedback)
      if ((int64_t)r == f.lossScaleResult)
        scaleArg = a;
}

/// --resume: the train state from the checkpoint, each rank its blocks
/// (assembled from the shards by global index, whatever mesh saved them).
void ModuleRun::resume() {
  resumeState(ctx, o.resume, runMeta(f, plan, "plain", 0), stateLayout());
}

/// --checkpoint: the train state after `step` (the arguments the next
/// step runs with, on the host).
void ModuleRun::saveCheckpoint(int64_t step) {
  stepper->syncArguments();
  saveStateCheckpoint(ctx, o.checkpoint, runMeta(f, plan, "plain", step),
                      stateLayout());
}

LossScaling ModuleRun::lossScaling() const {
  return {scaleArg >= 0, f.minLossScale};
}

double ModuleRun::tokensPerStep() const {
  return o.data.empty() ? -1.0 : double(f.inputs[plan.tokensArg].globalCount);
}

void ModuleRun::printHeader() {
  if (rank != 0 || o.data.empty())
    return;
  // The global batch: dp replicas x micro-batches x micro-batch rows.
  const Tensor &tokens = f.inputs[plan.tokensArg];
  int64_t rows = tokens.global[0];
  printf("%s: training %s for %lld steps, global batch %lld sequences of "
         "%lld tokens",
         toolName().c_str(), f.name.c_str(), (long long)o.train.steps,
         (long long)rows, (long long)tokens.global[1]);
  if (f.microBatches > 1)
    printf(" (%lld micro-batches of %lld, gradients accumulated)",
           (long long)f.microBatches, (long long)(rows / f.microBatches));
  printf("\n");
}

StepOutcome ModuleRun::step(int64_t step) {
  if (!stepper)
    stepper.emplace(f, locals, batches, donates());
  StepOutcome r;
  // Loss scaling needs the host each step: the scale and the finite flag
  // (one element each) for the log and the decision check.
  if (scaleArg >= 0)
    r.scale = stepper->argumentScalar(scaleArg);
  r.loss = stepper->step(step);
  r.seconds = stepper->seconds();
  times.push_back(r.seconds);
  if (scaleArg >= 0) {
    r.taken = stepper->resultScalar(f.finiteResult) > 0.5;
    nextScale = stepper->resultScalar(f.lossScaleResult);
  }
  return r;
}

void ModuleRun::keepLastStepInputs() {
  if (!stepper)
    stepper.emplace(f, locals, batches, donates());
  lastInputs.clear();
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    if (f.inputs[i].compressionState())
      break; // trailing, and not in the reference
    Buffer local = stepper->argument(i).download();
    lastInputs.push_back(f.gather(PAR_INPUT, i, local.data()));
  }
}

/// The fed-back arguments, each once, as the next step will read them.
std::vector<UpdatedTensor> ModuleRun::updatedState() const {
  std::vector<UpdatedTensor> state;
  std::vector<bool> seen(f.inputs.size(), false);
  for (auto [r, a] : f.feedback)
    if (!seen[a]) {
      seen[a] = true;
      state.push_back({int64_t(a), inputLabel(f.inputs, a), &f.inputs[a],
                       &stepper->argument(a), f.onDevice()});
    }
  return state;
}

std::string ModuleRun::title() const {
  return toolName() + ": " + f.name + " on " + std::to_string(world) +
         " ranks, loss per step";
}

/// After training: the final results and the trained state copied out
/// once (for --output, --verify, the error norm and sampling), then the
/// bytes per step, compression and per-rank times.
void ModuleRun::report(int64_t stepsRun) {
  // The results leave the session only for what reads them (--output,
  // --verify): at GPT-2's size they are 2 GB.
  if (wantsResults())
    outs = stepper->outputs();
  stepper->syncArguments();
  par_rt_context_stats(ctx, &stats);
  CompressionTotals compression;
  compression.add(f);
  reportTraffic(ctx, stepsRun, compression, rank, world);
  if (o.errorNorm) {
    // After the last step the arguments hold its fed-back results.
    std::vector<ErrorFeedbackBlock> blocks;
    for (size_t i : f.errorFeedbackInputs())
      blocks.push_back({&f, i, &locals[i], -1});
    reportErrorFeedbackNorm(ctx, blocks, int64_t(blocks.size()), rank, world);
  }
  reportTimes();
}

/// The results gathered to rank 0 as global tensors; --output writes them.
void ModuleRun::writeResults() {
  globals.clear();
  if (!wantsResults())
    return;
  for (size_t k = 0; k < f.outputs.size(); ++k)
    globals.push_back(f.gather(PAR_OUTPUT, k, outs[k].data()));
  if (rank != 0 || o.outputDir.empty())
    return;
  mkdir(o.outputDir.c_str(), 0755);
  for (size_t k = 0; k < globals.size(); ++k) {
    std::string path = o.outputDir + "/result" + std::to_string(k) + ".npy";
    writeNpy(path, f.outputs[k].dtype, f.outputs[k].global,
             globals[k].data());
    printf("  wrote %s\n", path.c_str());
  }
}

void ModuleRun::sample() {
  std::string text = sampleFromStep(ctx, sharded, f, locals, plan.tokensArg,
                                    plan.targetsArg, o.sampleEntry, o.sample);
  if (rank == 0)
    printSample(o.sample, text);
}

/// The inputs go into session buffers once; every run calls on them (the
/// times cover the program alone, on a GPU too) and the results come out
/// after the last.
void ModuleRun::repeat() {
  std::vector<SessionBuffer> in, out;
  std::vector<const SessionBuffer *> inPtrs;
  std::vector<SessionBuffer *> outPtrs;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    in.push_back(f.upload(PAR_INPUT, i, locals[i]));
  for (size_t k = 0; k < f.outputs.size(); ++k)
    out.push_back(f.buffer(PAR_OUTPUT, k));
  for (SessionBuffer &b : in)
    inPtrs.push_back(&b);
  for (SessionBuffer &b : out)
    outPtrs.push_back(&b);
  for (int64_t it = 0; it < o.repeat + (o.repeat > 1 ? 1 : 0); ++it) {
    checkRuntime(par_rt_barrier(ctx), ctx, "barrier");
    par_rt_context_reset_stats(ctx);
    double t0 = par_rt_now_seconds();
    f.callBuffers(inPtrs, outPtrs);
    double t = par_rt_now_seconds() - t0;
    par_rt_context_stats(ctx, &stats);
    if (o.repeat == 1 || it > 0)
      times.push_back(t);
  }
  outs.clear();
  for (const SessionBuffer &b : out)
    outs.push_back(b.download());
}

/// Per-rank time and traffic, printed by rank 0.
void ModuleRun::reportTimes() const {
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  double mine[4] = {sorted.front(), stats.bytes_sent,
                    (double)stats.collectives, sorted[sorted.size() / 2]};
  std::vector<double> all(4 * world);
  checkRuntime(par_rt_gather_world(ctx, mine, sizeof(mine), all.data()), ctx,
               "gathering statistics");
  if (rank != 0)
    return;
  printf("%s: %s on %lld ranks (mesh", toolName().c_str(), f.name.c_str(),
         (long long)world);
  for (size_t a = 0; a < f.axisNames.size(); ++a)
    printf(" %s=%lld", f.axisNames[a].c_str(), (long long)f.axisSizes[a]);
  printf(")\n");
  for (int64_t r = 0; r < world; ++r) {
    printf("  rank %lld: %.6f s, %.0f bytes sent in %.0f collectives",
           (long long)r, all[4 * r], all[4 * r + 1], all[4 * r + 2]);
    if (o.repeat > 1)
      printf(" (best of %lld; median %.6f s)", (long long)o.repeat,
             all[4 * r + 3]);
    printf("\n");
  }
}

/// How many trailing inputs and results of the sharded `f` the reference
/// `ref` lacks: 0 for equal signatures; for a sharded step with gradient
/// compression its error-feedback inputs (role "error_feedback", after all
/// of the reference's) and the results that feed them (after all of the
/// reference's). Anything else is fatal.
size_t extraState(const Function &f, const Function &ref) {
  if (ref.inputs.size() == f.inputs.size() &&
      ref.outputs.size() == f.outputs.size())
    return 0;
  size_t extra = f.inputs.size() - ref.inputs.size();
  bool ok = f.inputs.size() > ref.inputs.size() &&
            f.outputs.size() == ref.outputs.size() + extra;
  for (size_t i = ref.inputs.size(); ok && i < f.inputs.size(); ++i) {
    bool fed = false;
    for (auto [r, a] : f.feedback)
      fed = fed || (a == i && r >= ref.outputs.size());
    ok = f.inputs[i].compressionState() && fed;
  }
  if (!ok)
    fatal("reference and sharded programs have different signatures ('" +
          f.name + "': " + std::to_string(ref.inputs.size()) + " -> " +
          std::to_string(ref.outputs.size()) + " and " +
          std::to_string(f.inputs.size()) + " -> " +
          std::to_string(f.outputs.size()) +
          "); only trailing compression state (roles 'error_feedback' "
          "and 'compression_step', fed back by trailing results) may "
          "differ");
  return extra;
}

/// The PyTorch name of result k of `f`: that of the named input it feeds
/// (a train step's new parameter), else "".
std::string resultName(const Function &f, size_t k) {
  for (auto [r, a] : f.feedback)
    if (r == k && !f.inputs[a].name.empty())
      return f.inputs[a].name;
  return "";
}

/// Runs the unsharded reference on the same global inputs (as many train
/// steps, from the same start) and compares; rank 0 only. A sharded step's
/// trailing error-feedback state is not in the reference: its inputs are
/// left out and only the results both have are compared.
int ModuleRun::verify(const std::vector<double> &losses) {
  // A GPU run's reference is a CPU program: it runs under a CPU context.
  HostContextScope host(f.onDevice());
  Session reference(o.artifact, PAR_PROGRAM_REFERENCE, nullptr);
  Function ref = reference.lookup(f.name);
  size_t extra = extraState(f, ref);
  std::vector<Buffer> refIn = globalInputs(ref, plan.seed, given), refOut;
  TrainStepper::BatchFn refBatches;
  if (!o.data.empty())
    refBatches = dataBatches(ref, data, plan.tokensArg, plan.targetsArg);
  int status = 0;
  if (o.train.steps > 0) {
    std::vector<double> refLosses =
        runSteps(ref, refIn, o.train.steps, refBatches, &refOut);
    double tol = toleranceFor(o.rtol, ref.outputs[0].dtype, f.computeType,
                              f.onDevice());
    if (!verifyLossTrajectory(losses, refLosses, tol))
      status = 1;
  } else {
    if (refBatches)
      refBatches(1, refIn);
    refOut = ref.call(refIn);
  }
  printf("%s: verify against the unsharded program (1 rank)\n",
         toolName().c_str());
  if (extra > 0)
    printf("%s: the sharded program's %zu error-feedback input(s) and "
           "result(s) are not in the reference: comparing its other %zu "
           "result(s)%s\n",
           toolName().c_str(), extra, ref.outputs.size(),
           f.compression ? " (compressed gradients differ from the "
                           "reference's by the compression error; see --rtol)"
                         : "");
  // After several steps the sharded and the reference state have drifted
  // apart by each step's rounding, amplified by the optimizer; the last
  // step is checked from the state it ran on instead (StepExecutor's
  // keepLastStepInputs), at one step's tolerance, and the drift printed.
  std::vector<Buffer> drifted;
  if (o.train.steps > 1) {
    if (lastInputs.size() != ref.inputs.size())
      fatal("internal: the last step's inputs were not kept for --verify");
    drifted = std::move(refOut);
    if (refBatches)
      refBatches(o.train.steps, lastInputs);
    refOut = ref.call(lastInputs);
    printf("%s: the results of step %lld against the reference's step from "
           "the same state, elementwise\n",
           toolName().c_str(), (long long)o.train.steps);
  }
  double worstDrift = 0;
  size_t worstAt = 0;
  for (size_t k = 0; k < ref.outputs.size(); ++k) {
    const Tensor &t = ref.outputs[k];
    TensorDiff d = compareTensors(t, globals[k].data(), refOut[k].data());
    // A train step's results after the loss are its parameters and state.
    double tol = o.train.steps > 0 && k > 0
                     ? trainedStateTolerance(o.stateTolerance(), t.dtype,
                                             f.computeType, f.onDevice())
                     : toleranceFor(o.rtol, t.dtype, f.computeType,
                                    f.onDevice());
    if (!reportTensorDiff(k, t, d, tol, resultName(f, k)))
      status = 1;
    if (!drifted.empty()) {
      TensorDiff dd = compareTensors(t, globals[k].data(), drifted[k].data());
      if (!(dd.rel <= worstDrift)) {
        worstDrift = dd.rel;
        worstAt = k;
      }
    }
  }
  if (!drifted.empty())
    printf("%s: drift from the reference run of all %lld steps (not "
           "checked): largest max rel error %.3g (result%zu)\n",
           toolName().c_str(), (long long)o.train.steps, worstDrift, worstAt);
  return status;
}

int ModuleRun::runOnce() {
  loadInputs();
  injectCrash(rank);
  repeat();
  reportTimes();
  saveWeights();
  writeResults();
  return rank == 0 && o.verify ? verify({}) : 0;
}

} // namespace

int runModule(par_rt_context_t *ctx, const RunPlan &plan) {
  ModuleRun run(ctx, plan);
  if (plan.training() || !plan.options.resume.empty())
    return runTraining(ctx, plan, run);
  return run.runOnce();
}

} // namespace par::tooling
