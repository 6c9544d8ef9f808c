//===- PipelineMemory.cpp - What a pipeline rank holds, and its peak ------===//
//
// The prediction runs PipelineBuffers (the executor's retention rules) on
// byte counts. What it counts is what the runtime measures: session
// buffers (the stage state, the buffers a call makes for its arguments,
// its results, received tensors) and, during a call, the program's own
// allocations, whose peak the stage function's memory plan gives (a CPU
// program's results are allocations it hands over, inside that peak). The
// host-side copies (gradient sums, data batches) are not device memory
// and not counted, as in the executor.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/PipelineMemory.h"

#include "par/Runtime/par_session.h"

namespace par::tooling {

namespace pl = par::pipeline;

namespace {

/// A byte count held like a session buffer: counted while alive.
class Bytes {
public:
  Bytes() = default;
  Bytes(int64_t *live, int64_t n) : live(live), n(n) { *live += n; }
  ~Bytes() {
    if (live)
      *live -= n;
  }
  Bytes(Bytes &&o) noexcept { *this = std::move(o); }
  Bytes &operator=(Bytes &&o) noexcept {
    if (this != &o) {
      if (live)
        *live -= n;
      live = o.live;
      n = o.n;
      o.live = nullptr;
      o.n = 0;
    }
    return *this;
  }
  Bytes(const Bytes &) = delete;
  Bytes &operator=(const Bytes &) = delete;
  int64_t bytes() const { return n; }

private:
  int64_t *live = nullptr;
  int64_t n = 0;
};

int64_t sumLocalBytes(const std::vector<Tensor> &ts, size_t from = 0) {
  int64_t n = 0;
  for (size_t i = from; i < ts.size(); ++i)
    n += ts[i].localBytes();
  return n;
}

/// The PipelineBuffers backend on byte counts (see the header).
class Simulation {
public:
  using Buf = Bytes;

  Simulation(const std::vector<PipelineStageFunctions> &stages,
             PipelineMemoryPlan &plan)
      : stages(stages), plan(plan), S((int64_t)stages.size()) {}

  std::vector<Bytes> call(StageCall c, const pl::Action &a, const Bytes *x,
                          const Bytes *dy, const std::vector<Bytes> *);
  bool stashes(int64_t stage) const { return stages[stage].stash; }
  void loss(const Bytes &) {}
  void accumulate(StageCall, int64_t, const std::vector<Bytes> &) {}
  size_t numParams(int64_t stage) const {
    return stages[stage].update->stageArgs.size();
  }
  Bytes receive(const pl::Action &a) {
    Bytes b(&live, stages[a.stage].forward->inputs.back().localBytes());
    observe(0, pl::formatAction(a));
    return b;
  }
  void ready(const Bytes &) {}
  void send(const pl::Action &, const Bytes &) {}
  void waitSends() {}

  /// The program peak of `f`'s plan (0, and the plan's `missing` set, when
  /// it has none).
  int64_t programPeak(const Function *f);
  /// Live now plus `extra` (a running program's own) is a new peak?
  void observe(int64_t extra, const std::string &at);

  int64_t live = 0;
  PipelineBuffers<Simulation> *buffers = nullptr;

private:
  const Function *function(StageCall c, const PipelineStageFunctions &st) {
    switch (c) {
    case StageCall::Forward: return st.forward;
    case StageCall::Backward: return st.backward;
    case StageCall::InputGrad: return st.inputGrad;
    default: return st.weightGrad;
    }
  }

  const std::vector<PipelineStageFunctions> &stages;
  PipelineMemoryPlan &plan;
  int64_t S;
};

int64_t Simulation::programPeak(const Function *f) {
  par_memory_plan_t p;
  if (!f || par_function_memory_plan(f->handle(), &p) != PAR_OK) {
    if (plan.missing.empty())
      plan.missing = f ? "'" + f->name + "'" : "a stage function";
    return 0;
  }
  return p.program_peak_bytes;
}

void Simulation::observe(int64_t extra, const std::string &at) {
  if (buffers) {
    PipelineHeld h = buffers->held();
    plan.peakHeld = std::max(plan.peakHeld, h.total());
    plan.peakStashed = std::max(plan.peakStashed, h.stashedCount);
  }
  if (live + extra <= plan.peak)
    return;
  plan.peak = live + extra;
  plan.held = buffers ? buffers->held() : PipelineHeld();
  plan.call = plan.peak - plan.stageState - plan.held.total();
  plan.at = at;
}

/// The call's made arguments (the executor's stageArgs: the forward's
/// stage arguments that are not parameters, sized as the called
/// function's for a stashing stage, else as the backward's when it passes
/// dy or runs the last stage) and results, then its program.
std::vector<Bytes> Simulation::call(StageCall c, const pl::Action &a,
                                    const Bytes *, const Bytes *dy,
                                    const std::vector<Bytes> *) {
  const PipelineStageFunctions &st = stages[a.stage];
  const Function *fn = function(c, st);
  if (!fn)
    fatal("pipeline memory: stage " + std::to_string(a.stage) +
          " has no function for " + pl::formatAction(a));
  const Function &spec = st.stash                      ? *fn
                         : dy || a.stage + 1 == S ? *st.backward
                                                  : *st.forward;
  const std::vector<int64_t> &params = st.update->stageArgs;
  std::vector<Bytes> made, outs;
  for (size_t j = 0; j < st.forward->stageArgs.size(); ++j)
    if (std::find(params.begin(), params.end(), st.forward->stageArgs[j]) ==
        params.end())
      made.emplace_back(&live, spec.inputs[j].localBytes());
  // A CPU program's results become the call's buffers where it allocated
  // them (par_function_call_new): counted in its peak, then held. A GPU
  // program (or one that donates) writes buffers made before the call.
  bool handedOver = !fn->onDevice() && fn->donatedResultBytes() == 0;
  if (handedOver)
    observe(programPeak(fn), pl::formatAction(a));
  for (const Tensor &t : fn->outputs)
    outs.emplace_back(&live, t.localBytes());
  if (!handedOver)
    observe(programPeak(fn), pl::formatAction(a));
  return outs;
}

} // namespace

PipelineMemoryPlan
predictPipelineMemory(const std::vector<PipelineStageFunctions> &stages,
                      const std::vector<pl::Action> &actions, int64_t rank,
                      const pl::PipelineShape &shape, bool donate) {
  PipelineMemoryPlan plan;
  plan.peak = 0;
  Simulation sim(stages, plan);
  int64_t S = (int64_t)stages.size();
  // The executor's stage state (initStage): the update's arguments
  // (parameters, gradient sums, optimizer state) and results (but those
  // it writes in place, when it donates).
  std::vector<Bytes> state;
  for (int s : shape.stagesOf((int)rank)) {
    const Function &u = *stages[s].update;
    state.emplace_back(&sim.live,
                       sumLocalBytes(u.inputs) + sumLocalBytes(u.outputs) -
                           (donate ? u.donatedResultBytes() : 0));
  }
  plan.stageState = sim.live;
  {
    PipelineBuffers<Simulation> buffers(sim, S);
    sim.buffers = &buffers;
    for (const pl::Action &a : actions) {
      buffers.run(a);
      sim.observe(0, pl::formatAction(a)); // what it keeps afterwards
    }
    buffers.finishStep();
    sim.observe(0, "the end of the actions");
    sim.buffers = nullptr;
  }
  for (int s : shape.stagesOf((int)rank))
    sim.observe(sim.programPeak(stages[s].update),
                "update(s=" + std::to_string(s) + ")");
  if (!plan.missing.empty())
    plan.peak = -1;
  return plan;
}

} // namespace par::tooling
