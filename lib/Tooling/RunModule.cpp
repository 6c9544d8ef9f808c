//===- RunModule.cpp - Running a compiled program on this rank ------------===//
//
// Inputs are global tensors first (given or generated, the same on every
// rank and in the reference), then this rank's blocks of them; results go
// the other way. With --repeat K there is one untimed warm-up run, then K
// timed runs; the statistics are those of the last run.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/RunModule.h"

#include "par/Target/Manifest/ManifestSchema.h"
#include "par/Tooling/Compare.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Faults.h"
#include "par/Tooling/Npy.h"
#include "par/Tooling/Traffic.h"
#include "par/Tooling/TrainState.h"
#include "par/Tooling/Values.h"
#include "par/Tooling/Weights.h"

#include <algorithm>
#include <set>
#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>

namespace par::tooling {

namespace {

class ModuleRun {
public:
  ModuleRun(par_rt_context_t *ctx, const RunOptions &o)
      : ctx(ctx), o(o), sharded(o.artifact, PAR_PROGRAM_SHARDED, ctx),
        f(sharded.lookup(o.entry)), rank(f.rank()),
        world(par_rt_context_world_size(ctx)) {}

  int run();

private:
  void readGivenInputs();
  void loadGivenWeights();
  void saveTrainedWeights();
  void resumeState();
  void saveState(int64_t step);
  void injectCrash() const;
  bool train(); // false: stopped by a non-finite step (Finite.h)
  void repeat();
  void report() const;
  int verify(const std::vector<Buffer> &globals) const;

  par_rt_context_t *ctx;
  const RunOptions &o;
  Session sharded;
  Function f;
  int64_t rank, world;
  std::map<size_t, Buffer> given;
  std::vector<Buffer> locals, outs;
  DataLoader data;
  TrainStepper::BatchFn batches;
  std::vector<double> times, losses;
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

/// --save-weights: the named inputs after the run (after training: the
/// trained parameters) gathered to rank 0, which writes them.
void ModuleRun::saveTrainedWeights() {
  if (o.saveWeights.empty())
    return;
  std::vector<size_t> named;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (!f.inputs[i].name.empty())
      named.push_back(i);
  std::vector<Buffer> globals;
  for (size_t i : named)
    globals.push_back(f.gather(PAR_INPUT, i, locals[i].data()));
  if (rank != 0)
    return;
  std::vector<NamedValue> values;
  for (size_t k = 0; k < named.size(); ++k)
    values.push_back({&f.inputs[named[k]], &globals[k]});
  saveWeights(o.saveWeights, f.name, values);
}

/// --resume: the train state from the checkpoint, each rank its blocks
/// (assembled from the shards by global index, whatever mesh saved them).
void ModuleRun::resumeState() {
  checkTrainStep(f);
  CheckpointReader reader(o.resume);
  CheckpointMeta here = runMeta(f, o, "plain", 0);
  bool same = reader.sameLayout(here);
  std::set<std::string> keys;
  int64_t reset = 0;
  for (const CheckpointTensor &t : stepState(f, locals, rank)) {
    if (!t.layoutBound)
      keys.insert(t.key);
    else if (!same) {
      ++reset;
      continue;
    }
    reader.load(t, rank);
  }
  reader.finish(ctx, keys);
  if (rank == 0)
    reader.reportResumed(reset);
}

/// --checkpoint: the train state after `step` (the arguments the next
/// step runs with, on the host).
void ModuleRun::saveState(int64_t step) {
  saveCheckpoint(ctx, o.checkpoint, runMeta(f, o, "plain", step),
                 stepState(f, locals, rank));
}

/// Fault injection for tests of the failure path: the named rank crashes
/// just before the program runs, while the others wait in its collectives.
void ModuleRun::injectCrash() const {
  const char *inject = getenv("PAR_RUN_INJECT_CRASH");
  if (!inject || strtoll(inject, nullptr, 10) != rank)
    return;
  crash("rank " + std::to_string(rank) +
        ": crashing on purpose (PAR_RUN_INJECT_CRASH)");
}

bool ModuleRun::train() {
  checkTrainStep(f);
  TrainLogOptions logOptions = o.train;
  logOptions.firstStep = o.resumedStep + 1;
  // Loss scaling: the argument the next scale feeds is this step's scale.
  int64_t scaleArg = -1;
  if (f.lossScaleResult >= 0) {
    for (auto [r, a] : f.feedback)
      if ((int64_t)r == f.lossScaleResult)
        scaleArg = a;
    logOptions.lossScale = scaleArg >= 0;
    logOptions.minScale = f.minLossScale;
  }
  TrainLog log(logOptions, rank == 0);
  const Tensor *tokens = o.data.empty() ? nullptr : &f.inputs[o.tokensArg];
  if (rank == 0 && tokens) {
    // The global batch: dp replicas x micro-batches x micro-batch rows.
    int64_t rows = tokens->global[0];
    printf("%s: training %s for %lld steps, global batch %lld sequences of "
           "%lld tokens",
           toolName().c_str(), f.name.c_str(), (long long)o.train.steps,
           (long long)rows, (long long)tokens->global[1]);
    if (f.microBatches > 1)
      printf(" (%lld micro-batches of %lld, gradients accumulated)",
             (long long)f.microBatches, (long long)(rows / f.microBatches));
    printf("\n");
  }
  TrainStepper stepper(f, locals, batches);
  // The statistics cover the steps exactly (nothing before them counts
  // today; the reset keeps it so).
  par_rt_context_reset_stats(ctx);
  // Every rank's step-or-skip decisions, to check they agree.
  std::vector<double> decisions;
  double nextScale = NAN;
  // Loss-scaled programs skip non-finite steps themselves.
  NonFiniteCheck finite(ctx, scaleArg >= 0 ? NonFiniteMode::Off : o.nonFinite,
                        rank);
  for (int64_t step = o.resumedStep + 1; step <= o.train.steps; ++step) {
    injectStepFaults(rank, step);
    // Loss scaling needs the host each step: the scale and the finite
    // flag (one element each) for the log and the decision check.
    double scale =
        scaleArg >= 0 ? stepper.argumentScalar(scaleArg) : NAN;
    double loss = stepper.step(step);
    times.push_back(stepper.seconds());
    bool taken = true;
    if (scaleArg >= 0) {
      taken = stepper.resultScalar(f.finiteResult) > 0.5;
      nextScale = stepper.resultScalar(f.lossScaleResult);
      decisions.push_back(taken ? 1.0 : 0.0);
    }
    log.step(step, loss, stepper.seconds(),
             tokens ? double(tokens->globalCount) : -1.0, scale, taken);
    if (finite.afterStep(step, loss, stepper) == NonFiniteCheck::Stop)
      return false;
    if (checkpointDue(o, step)) {
      stepper.syncArguments();
      saveState(step);
    }
  }
  finite.summary(o.train.steps - o.resumedStep);
  if (scaleArg >= 0) {
    checkSameDecisions(ctx, decisions, rank, world);
    log.lossScaleSummary(nextScale);
  }
  log.finish(toolName() + ": " + f.name + " on " + std::to_string(world) +
             " ranks, loss per step");
  losses = log.losses();
  // The final results (gathered, written, verified) and, for the error norm
  // and sampling, the trained state: copied out once.
  outs = stepper.outputs();
  stepper.syncArguments();
  par_rt_context_stats(ctx, &stats);
  CompressionTotals compression;
  compression.add(f);
  reportTraffic(ctx, o.train.steps - o.resumedStep, compression, rank, world);
  if (o.errorNorm) {
    // After the last step the arguments hold its fed-back results.
    std::vector<ErrorFeedbackBlock> blocks;
    for (size_t i : f.errorFeedbackInputs())
      blocks.push_back({&f, i, &locals[i], -1});
    reportErrorFeedbackNorm(ctx, blocks, int64_t(blocks.size()), rank, world);
  }
  return true;
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
void ModuleRun::report() const {
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
int ModuleRun::verify(const std::vector<Buffer> &globals) const {
  // A GPU run's reference is a CPU program: it runs under a CPU context.
  HostContextScope host(f.onDevice());
  Session reference(o.artifact, PAR_PROGRAM_REFERENCE, nullptr);
  Function ref = reference.lookup(f.name);
  size_t extra = extraState(f, ref);
  std::vector<Buffer> refIn = globalInputs(ref, o.seed, given), refOut;
  TrainStepper::BatchFn refBatches;
  if (!o.data.empty())
    refBatches = dataBatches(ref, data, o.tokensArg, o.targetsArg);
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
  for (size_t k = 0; k < ref.outputs.size(); ++k) {
    const Tensor &t = ref.outputs[k];
    TensorDiff d = compareTensors(t, globals[k].data(), refOut[k].data());
    if (!reportTensorDiff(k, t, d,
                          toleranceFor(o.rtol, t.dtype, f.computeType,
                                       f.onDevice()),
                          o.train.steps, resultName(f, k)))
      status = 1;
  }
  return status;
}

int ModuleRun::run() {
  readGivenInputs();
  loadGivenWeights();
  locals = localInputs(f, globalInputs(f, o.seed, given));
  if (!o.resume.empty()) {
    resumeState();
    // An export (no --steps), or a run whose checkpoint is at --steps
    // already: the state as loaded, nothing trained.
    if (nothingToTrain(o, rank == 0)) {
      saveTrainedWeights();
      return 0;
    }
  }
  if (!o.data.empty()) {
    data.seed = o.seed;
    data.load(o.data);
    data.check(f, o.tokensArg, o.targetsArg);
    batches = dataBatches(f, data, o.tokensArg, o.targetsArg);
    batches(1, locals);
  }
  injectCrash();
  if (o.train.steps > 0) {
    if (!train())
      return 1;
  } else
    repeat();
  report();
  saveTrainedWeights();
  // Gather the results to rank 0 and assemble the global tensors.
  std::vector<Buffer> globals;
  for (size_t k = 0; k < f.outputs.size(); ++k)
    globals.push_back(f.gather(PAR_OUTPUT, k, outs[k].data()));
  int status = 0;
  if (rank == 0 && !o.outputDir.empty()) {
    mkdir(o.outputDir.c_str(), 0755);
    for (size_t k = 0; k < globals.size(); ++k) {
      std::string path = o.outputDir + "/result" + std::to_string(k) + ".npy";
      writeNpy(path, f.outputs[k].dtype, f.outputs[k].global,
               globals[k].data());
      printf("  wrote %s\n", path.c_str());
    }
  }
  if (rank == 0 && o.verify)
    status = verify(globals);
  if (o.sample.count > 0) {
    std::string text =
        sampleFromStep(ctx, sharded, f, locals, o.tokensArg, o.targetsArg,
                       o.sampleEntry, o.sample);
    if (rank == 0)
      printSample(o.sample, text);
  }
  return status;
}

} // namespace

void resolveDataArgs(const Function &f, RunOptions &o) {
  namespace key = ::par::manifest::key;
  if (!o.tokensGiven)
    if (std::optional<size_t> i = f.inputWithRole(key::kRoleTokens))
      o.tokensArg = *i;
  if (!o.targetsGiven)
    if (std::optional<size_t> i = f.inputWithRole(key::kRoleTargets))
      o.targetsArg = *i;
}

int runModule(par_rt_context_t *ctx, const RunOptions &o) {
  ModuleRun run(ctx, o);
  return run.run();
}

} // namespace par::tooling
