//===- PipelineState.cpp - The pipelined run's state ----------------------===//
//
// The stages' state as one StateLayout (StateLayout.h): every stage's
// parameters and keyed state, on every rank, held by the stage's pipeline
// coordinate. --save-weights, --checkpoint, --resume and the gathers of
// --verify and --sample are the plain executor's, over that layout;
// --load-weights fills each stage's parameters before they are made, and
// --verify runs the unpipelined step on one rank.
//
//===----------------------------------------------------------------------===//

#include "PipelineRun.h"

namespace par::tooling::pipeline_run {

/// --load-weights: every stage's named parameters (their update's leading
/// arguments) from the file, checked on every rank (each keeps its own
/// stages'); rank 0 reports.
void PipelineRun::loadStageWeights() {
  if (o.loadWeights.empty())
    return;
  WeightLoader file(o.loadWeights);
  for (int64_t s = 0; s < S; ++s) {
    const Function &u = stages[s].update;
    for (size_t j = 0; j < u.stageArgs.size(); ++j)
      if (!u.inputs[j].name.empty()) {
        Buffer g = file.load(u.inputs[j], inputLabel(u.inputs, j), u.name);
        if (shape.rankOf(s) == me)
          loaded[u.stageArgs[j]] = std::move(g);
      }
  }
  if (file.loaded() == 0)
    fatal("--load-weights: no parameter of the pipeline's stage updates "
          "has a name (the frontend's par.name, which par-import puts on "
          "parameters)");
  if (rank == 0)
    file.report();
}

/// The stages' state as the train driver's tools see it (StateLayout.h):
/// every stage's parameters and keyed state (all stages, in order, on
/// every rank), held by the stage's pipeline coordinate, this rank's
/// stages' in their session buffers. A parameter several stages take is
/// read from its first stage's copy; a key's first stage is its writer.
StateLayout PipelineRun::stateLayout() {
  StateLayout l;
  l.rank = rank;
  l.axes = int64_t(coords.size());
  std::set<int64_t> seen; // parameters, by split-function argument
  for (int64_t s = 0; s < S; ++s) {
    StageProgram &st = stages[s];
    const Function &u = st.update;
    size_t P = u.stageArgs.size();
    bool mine = shape.rankOf(s) == me;
    for (size_t i = 0; i < u.inputs.size(); ++i) {
      // Keys are found for checkpoints and --verify only (findStateKeys).
      std::string key = stateKeys.empty() ? "" : stateKeys[s][i];
      bool param = i < P;
      if (!param && key.empty())
        continue; // a gradient sum, or state --verify leaves out
      StateSlot slot;
      slot.key = key;
      slot.fn = &u;
      slot.input = i;
      slot.holderAxis = ppAxis;
      slot.holder = shape.rankOf(s);
      slot.parameter = param;
      slot.layoutBound = key.rfind("stage", 0) == 0;
      if (param) {
        slot.global = u.stageArgs[i];
        slot.primary = seen.insert(slot.global).second;
      } else {
        if (key.rfind("arg", 0) == 0)
          slot.global = std::stoll(key.substr(3));
        slot.primary = keyOwner[key] == s;
      }
      if (mine)
        slot.device =
            param ? &st.params[u.stageArgs[i]] : &st.state[i - 2 * P];
      l.slots.push_back(slot);
    }
  }
  return l;
}

/// --save-weights: every stage's named parameters, gathered to rank 0,
/// which writes them.
void PipelineRun::saveStageWeights() {
  if (!o.saveWeights.empty())
    saveNamedWeights(stateLayout(), o.saveWeights, func);
}

/// The checkpoint keys of every stage's state (all stages: every rank
/// knows the whole program).
void PipelineRun::findStateKeys() {
  Function step = stepFn = sharded.lookup(stepName());
  if (step.grad.empty())
    fatal("manifest: the train step '" + step.name + "' records no gradient "
          "function");
  Function grad = sharded.lookup(step.grad);
  // Only --verify asks: a layout that does not map leaves the optimizer
  // state out of the comparison, saying why.
  bool strict = !o.checkpoint.dir.empty() || !o.resume.empty();
  for (int64_t s = 0; s < S; ++s) {
    stateKeys.push_back(stageStateKeys(step, grad, stages[s].update,
                                       strict ? nullptr : &stateUnmapped));
    stateKeys.back().resize(stages[s].update.inputs.size());
    for (const std::string &k : stateKeys.back())
      if (!k.empty())
        keyOwner.emplace(k, s);
  }
}

/// --resume: this rank's stages' state from the checkpoint (a tied
/// parameter's copies, and each stage's step counter and loss-scale state,
/// all load the one saved tensor).
void PipelineRun::resumeStages() {
  resumeState(ctx, o.resume, runMeta(stepFn, plan, "pipelined", 0),
              stateLayout());
}

/// --checkpoint: every stage's state after `step`. The record names the
/// unpipelined step, whose arguments the keys are.
void PipelineRun::saveStages(int64_t step) {
  saveStateCheckpoint(ctx, o.checkpoint,
                      runMeta(stepFn, plan, "pipelined", step),
                      stateLayout());
}

/// Every stage's parameters gathered on rank 0, which runs the unsharded
/// logits function (reference.so) on them.
void PipelineRun::sample() {
  std::map<int64_t, Buffer> whole =
      gatherState(stateLayout(), StateSelection::Parameters);
  if (rank != 0)
    return;
  // A GPU run's reference is a CPU program: it runs under a CPU context.
  HostContextScope hostContext(sharded.target() != "cpu");
  Session reference(o.artifact, PAR_PROGRAM_REFERENCE, nullptr);
  std::string entry = o.sampleEntry;
  if (entry.empty() && pipe.logits)
    entry = pipe.logits;
  std::string text =
      sampleFromParameters(reference, entry, func, whole, plan.tokensArg,
                           plan.targetsArg, o.sample);
  printSample(o.sample, text);
}

/// --verify: the trained parameters and optimizer state (loss-scale
/// state included; not the layout-bound compression state), gathered to
/// rank 0 by the unpipelined step's argument. Collective.
void PipelineRun::writeResults() {
  if (o.verify)
    finalState = gatherState(stateLayout(), StateSelection::Mapped);
}

/// --verify after several steps: the state the last step starts from.
void PipelineRun::keepLastStepInputs() {
  if (stateUnmapped.empty())
    lastState = gatherState(stateLayout(), StateSelection::Mapped);
}

bool PipelineRun::verifyState(const Function &ref,
                              const std::vector<Buffer> &refArgs,
                              double rtolGiven) {
  bool ok = true;
  for (auto &[orig, global] : finalState) {
    const Tensor &t = ref.inputs[orig];
    TensorDiff d = compareTensors(t, global.data(), refArgs[orig].data());
    double tol = trainedStateTolerance(rtolGiven, t.dtype, ref.computeType,
                                       sharded.target() != "cpu");
    std::string label = inputLabel(ref.inputs, orig);
    ok &= reportStateDiff(label, t, d, tol);
  }
  return ok;
}

/// The unpipelined train step (par-optimizer, same micro-batches) on one
/// rank, from the same initial values and batches: the loss of every step,
/// then the trained parameters and optimizer state.
int PipelineRun::verify(const std::vector<double> &losses) {
  HostContextScope hostContext(sharded.target() != "cpu");
  Session reference(o.artifact, PAR_PROGRAM_REFERENCE, nullptr);
  Function ref = reference.lookup(stepName());
  if (ref.microBatches != m)
    fatal("the reference step accumulates " +
          std::to_string(ref.microBatches) + " micro-batches, the pipeline " +
          std::to_string(m));
  std::map<size_t, Buffer> given;
  if (!o.loadWeights.empty())
    given = loadWeights(ref, o.loadWeights, /*print=*/false);
  std::vector<Buffer> in = globalInputs(ref, plan.seed, given);
  TrainStepper::BatchFn batches;
  if (!o.data.empty())
    batches = dataBatches(ref, data, plan.tokensArg, plan.targetsArg);
  std::vector<Buffer> start = in;
  std::vector<double> refLosses = runSteps(ref, in, o.train.steps, batches);
  printf("%s: verify against the unpipelined step (1 rank)\n",
         toolName().c_str());
  double tol = toleranceFor(o.rtol, ref.outputs[0].dtype, ref.computeType,
                            sharded.target() != "cpu");
  bool ok = verifyLossTrajectory(losses, refLosses, tol);
  if (!stateUnmapped.empty()) {
    // The optimizer state is not gathered: the reference cannot rerun the
    // last step from the pipeline's state.
    printf("%s: the last step is not rerun from the pipeline's state (%s); "
           "the loss trajectory is checked\n",
           toolName().c_str(), stateUnmapped.c_str());
    return ok ? 0 : 1;
  }
  // After several steps, the reference's last step from the pipeline's
  // state before it (keepLastStepInputs), at one step's tolerance; the
  // drift of the whole run is printed.
  if (o.train.steps > 1) {
    std::vector<Buffer> drifted = std::move(in);
    in = std::move(start);
    for (auto &[orig, b] : lastState)
      in[orig] = b;
    runSteps(ref, in, 1, batches ? TrainStepper::BatchFn(
                                       [&](int64_t, std::vector<Buffer> &a) {
                                         batches(o.train.steps, a);
                                       })
                                 : TrainStepper::BatchFn());
    double worst = 0;
    std::string worstAt;
    for (auto &[orig, global] : finalState) {
      TensorDiff d = compareTensors(ref.inputs[orig], global.data(),
                                    drifted[orig].data());
      if (!(d.rel <= worst)) {
        worst = d.rel;
        worstAt = inputLabel(ref.inputs, orig);
      }
    }
    printf("%s: the state after step %lld against the reference's step from "
           "the same state, elementwise (drift from the reference run of all "
           "%lld steps, not checked: largest max rel error %.3g, %s)\n",
           toolName().c_str(), (long long)o.train.steps,
           (long long)o.train.steps, worst, worstAt.c_str());
  }
  ok &= verifyState(ref, in, o.stateTolerance());
  return ok ? 0 : 1;
}
} // namespace par::tooling::pipeline_run
