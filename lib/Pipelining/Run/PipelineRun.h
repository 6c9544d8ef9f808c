//===- PipelineRun.h - The pipelined step executor -------------*- C++ -*-===//
//
// Private to lib/Pipelining/Run (MLIR's *Detail.h habit): the pipelined
// step executor (a StepExecutor of the train driver, TrainDriver.h), one
// class over three files by concern:
//   PipelineExecutor.cpp  loading the schedule and stages, the action
//                         interpreter, a step and the stages' updates;
//   PipelineState.cpp     the stages' state as one StateLayout
//                         (StateLayout.h, shared with the plain executor):
//                         weights, checkpoints, --verify, sampling;
//   PipelineReports.cpp   what is reported after training.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINING_RUN_PIPELINERUN_H
#define PAR_PIPELINING_RUN_PIPELINERUN_H

#include "par/Pipelining/Schedule.h"
#include "par/Manifest/Schema.h"
#include "par/Pipelining/ChromeTrace.h"
#include "par/Tooling/CharData.h"
#include "par/Tooling/Compare.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Faults.h"
#include "par/Tooling/Finite.h"
#include "par/Tooling/MemoryReport.h"
#include "par/Tooling/StateLayout.h"
#include "par/Tooling/Npy.h"
#include "par/Pipelining/PipelineMemory.h"
#include "par/Tooling/TrainDriver.h"
#include "par/Tooling/Traffic.h"
#include "par/Tooling/TrainState.h"
#include "par/Tooling/Values.h"
#include "par/Tooling/Weights.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <set>

namespace par::tooling::pipeline_run {

namespace pl = par::pipeline;

struct StageProgram {
  Function fwd, grad, update;
  /// ZB-H1's halves of the backward: input gradient (stages > 0), weight
  /// gradients.
  Function gradInput, gradWeight;
  /// The backward split at its residuals (par-pipeline-stash): F calls
  /// fwdRes, which returns them after the output, B calls bwd on them.
  Function fwdRes, bwd;
  /// ZB-H1's halves of bwd: BI (stages > 0) saves what BW reads.
  Function bwdInput, bwdWeight;
  bool stash = false;
  const Function &forwardFn() const { return stash ? fwdRes : fwd; }
  const Function &backwardFn() const { return stash ? bwd : grad; }
  const Function &inputGradFn() const { return stash ? bwdInput : gradInput; }
  const Function &weightGradFn() const {
    return stash ? bwdWeight : gradWeight;
  }
  /// The residuals fwdRes returns (after its output).
  size_t numResiduals() const { return stash ? fwdRes.outputs.size() - 1 : 0; }
  /// Parameter buffers by the split function's argument index.
  std::map<int64_t, SessionBuffer> params;
  /// The update's state arguments (after params and grads), and the sums
  /// of the gradients over the micro-batches: where the update reads them
  /// (gradSumBuf) and, for a GPU program, on the host (gradSum), where
  /// they are added up. `summed`: this step's first backward has written
  /// them (it copies; the next ones add).
  std::vector<SessionBuffer> state;
  std::vector<Buffer> gradSum;
  std::vector<SessionBuffer> gradSumBuf;
  bool summed = false;
  /// The update's results; after a call the parameters' and state's swap
  /// with the kept buffers. Empty for a donated result, which the update
  /// writes into its argument's buffer (par-donate-buffers).
  std::vector<SessionBuffer> updateOut;
  /// Indices (into fwd's arguments) of the parameters, in update order.
  std::vector<size_t> paramArgs;
};

/// A call's arguments: pointers to kept buffers and to ones made for it.
struct CallArgs {
  std::deque<SessionBuffer> made;
  std::vector<const SessionBuffer *> ptrs;
  void add(const SessionBuffer *b) { ptrs.push_back(b); }
  void add(SessionBuffer b) {
    made.push_back(std::move(b));
    ptrs.push_back(&made.back());
  }
};

/// The pipelined step executor (TrainDriver.h): a step is this rank's
/// actions, then its stages' updates.
class PipelineRun : public StepExecutor {
public:
  PipelineRun(par_rt_context_t *ctx, const RunPlan &plan)
      : ctx(ctx), plan(plan), o(plan.options),
        sharded(o.artifact, PAR_PROGRAM_SHARDED, ctx),
        rank(par_rt_context_rank(ctx)),
        world(par_rt_context_world_size(ctx)) {}

  void prepare() override;
  void resume() override { resumeStages(); }
  LossScaling lossScaling() const override;
  void printHeader() override;
  double tokensPerStep() const override;
  StepOutcome step(int64_t step) override;
  void keepLastStepInputs() override;
  double nextLossScale() const override { return nextScale; }
  std::vector<UpdatedTensor> updatedState() const override;
  void undoStep() override { undoUpdates(); }
  void saveCheckpoint(int64_t step) override { saveStages(step); }
  std::string title() const override;
  void report(int64_t stepsRun) override;
  void saveWeights() override { saveStageWeights(); }
  void writeResults() override;
  int verify(const std::vector<double> &losses) override;
  void sample() override;
  int64_t predictedMemory() const override { return memoryPlanOf(me).peak; }

private:
  void loadSchedule();
  std::string stepName() const;
  void loadStages();
  void checkStage(int64_t s) const;
  void prepareCommunicators();
  void initStage(int64_t s);
  CallArgs stageArgs(int64_t s, int64_t step, int64_t mb,
                     const Function &callee, const SessionBuffer *x,
                     const std::vector<SessionBuffer> *residuals,
                     const SessionBuffer *dy);
  Buffer dataArg(const Function &fs, size_t j, int64_t orig, int64_t s,
                 int64_t step, int64_t mb);
  void accumulate(StageProgram &st, const Function &fn,
                  const std::vector<SessionBuffer> &outs);
  /// A GPU program: its session buffers are device memory.
  bool onDevice() const { return sharded.target() != "cpu"; }
  char *gradSumData(StageProgram &st, size_t j) const;
  // The PipelineBuffers backend (PipelineMemory.h): the retention rules
  // call these.
  friend class PipelineBuffers<PipelineRun>;
  using Buf = SessionBuffer;
  std::vector<SessionBuffer>
  call(StageCall c, const pl::Action &a, const SessionBuffer *x,
       const SessionBuffer *dy, const std::vector<SessionBuffer> *residuals);
  bool stashes(int64_t stage) const { return stages[stage].stash; }
  void loss(const SessionBuffer &out);
  void accumulate(StageCall c, int64_t stage,
                  const std::vector<SessionBuffer> &outs);
  size_t numParams(int64_t stage) const {
    return stages[stage].paramArgs.size();
  }
  SessionBuffer receive(const pl::Action &a);
  void ready(const SessionBuffer &b);
  void send(const pl::Action &a, const SessionBuffer &b);
  void waitSends();
  /// The memory prediction of pipeline rank r's step (PipelineMemory.h).
  PipelineMemoryPlan memoryPlanOf(int64_t r) const;
  void reportMemoryPlans();
  void runUpdates();
  void sumTiedGradients();
  // Parameters several stages take: (split-function argument, [(stage,
  // index in its update)]), found once (tiedChecked).
  std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, size_t>>>>
      tied;
  bool tiedChecked = false;
  double lossScale() const;
  void undoUpdates();
  /// Whether the updates write parameters and state in place (not when a
  /// skipped step must be undone: --nonfinite skip).
  bool donates() const { return o.nonFinite != NonFiniteMode::Skip; }
  SessionBuffer *updateResult(StageProgram &st, size_t k);
  void reportStash();
  void reportCompression(int64_t stepsRun);
  void loadStageWeights();
  StateLayout stateLayout();
  void saveStageWeights();
  void findStateKeys();
  void resumeStages();
  void saveStages(int64_t step);
  /// --verify: the final parameters and optimizer state against the
  /// reference step's after the same steps (`refArgs`); false on a
  /// mismatch.
  bool verifyState(const Function &ref, const std::vector<Buffer> &refArgs,
                   double rtolGiven);

  // --verify: the trained parameters and optimizer state, global, on rank
  // 0, by the unpipelined step's argument index (writeResults gathers).
  std::map<int64_t, Buffer> finalState, lastState;
  std::string stateUnmapped; // why the state is not compared ("" if it is)

  par_rt_context_t *ctx;
  const RunPlan &plan;
  const RunOptions &o;
  Session sharded;
  int64_t rank, world;
  pl::PipelineShape shape;
  pl::Programs programs;
  // The receives start where the programs list them and complete when a
  // compute takes their buffer (a CPU program whose programs verify so:
  // cpuRuntimePrograms); the started ones by buffer.
  bool postedReceives = false;
  std::map<const void *, int64_t> startedReceives;
  par_pipeline_info_t pipe;
  std::string func, axisName;
  int64_t S = 0, m = 0, ppAxis = -1, me = 0, axesCode = 0, lossRoot = 0;
  std::vector<int64_t> myStages; // this rank's stages, in order
  std::vector<StageProgram> stages;
  std::vector<int64_t> coords;
  DataLoader data;
  Function stepSpec; // the unpipelined step (no --data)
  // --input argK=FILE.npy of the step's data arguments (a fixed batch).
  std::map<int64_t, Buffer> fixedData;
  // --load-weights: the named parameters' global values by the split
  // function's argument.
  std::map<int64_t, Buffer> loaded;
  // Checkpoints: each stage update's inputs' keys (TrainState.h; "" for
  // gradients), and the lowest stage holding each key (its writer).
  std::vector<std::vector<std::string>> stateKeys;
  std::map<std::string, int64_t> keyOwner;
  Function stepFn; // the unpipelined step (the keys are its arguments)
  // What the actions hold between them (made in prepare).
  std::optional<PipelineBuffers<PipelineRun>> buffers;
  int64_t currentStep = 0;
  double lossSum = 0;
  // Loss scaling: every stage update carries the scale state (identical on
  // all ranks: the decision is global); the first local stage's is read.
  bool scaling = false;
  bool lastTaken = true;
  double nextScale = NAN;
  double stepScale = NAN; // the scale this step runs with
  TraceRecorder trace;
};

} // namespace par::tooling::pipeline_run

#endif // PAR_PIPELINING_RUN_PIPELINERUN_H
