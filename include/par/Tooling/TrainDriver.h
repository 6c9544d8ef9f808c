//===- TrainDriver.h - One training loop over two step executors -*- C++ -*-===//
//
// Training is the same loop whether a step is one call of a train step
// (par-optimizer's <f>_step, on the whole mesh) or a pipeline's actions
// (par-pipeline-schedule's per-rank programs and the stage updates): the
// train driver owns the loop, the log, the non-finite check, loss-scale
// decisions, checkpoint cadence, and the order of what comes after
// (reports, saved weights, results, verification, sampling); a
// StepExecutor owns the state and knows how to run one step on it.
// RunModule.cpp implements the plain executor, lib/Pipelining/Run the
// pipelined one.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_TRAINDRIVER_H
#define PAR_TOOLING_TRAINDRIVER_H

#include "par/Tooling/Finite.h"
#include "par/Tooling/RunPlan.h"
#include "par/Runtime/par_runtime.h"

#include <cmath>
#include <string>
#include <vector>

namespace par::tooling {

/// What one step did on this rank (the loss is every rank's).
struct StepOutcome {
  double loss = 0;
  double seconds = 0;
  double scale = NAN; // loss scaling: the scale the step ran with
  bool taken = true;  // loss scaling: its gradients were finite
};

/// Loss scaling of a train step: whether the step carries a loss scale,
/// and the policy's minimum (0: unknown).
struct LossScaling {
  bool enabled = false;
  double minScale = 0;
};

class StepExecutor {
public:
  virtual ~StepExecutor();
  /// Everything before the first step: the state in session buffers, the
  /// inputs, --load-weights. Collective.
  virtual void prepare() = 0;
  /// --resume: the train state from the checkpoint. Collective.
  virtual void resume() = 0;
  virtual LossScaling lossScaling() const = 0;
  /// Rank 0: what is trained, on what batch.
  virtual void printHeader() = 0;
  /// Tokens per step for the log's rate (< 0: no --data).
  virtual double tokensPerStep() const = 0;
  /// Runs step `step` (from 1). Collective.
  virtual StepOutcome step(int64_t step) = 0;
  /// --verify after several steps: called before the last step, gathers
  /// to rank 0 the global state that step starts from (parameters,
  /// optimizer and loss-scale state), so that verify() can run the
  /// reference's step from it. Collective.
  virtual void keepLastStepInputs() = 0;
  /// Loss scaling: the scale the next step runs with.
  virtual double nextLossScale() const = 0;
  /// The state this rank updated in the last step (the non-finite check).
  virtual std::vector<UpdatedTensor> updatedState() const = 0;
  /// Discards the last step's update (--nonfinite skip).
  virtual void undoStep() = 0;
  /// --checkpoint: the state after `step`. Collective.
  virtual void saveCheckpoint(int64_t step) = 0;
  /// The loss plot's title.
  virtual std::string title() const = 0;
  /// After the last step: time, traffic and compression reports (and a
  /// pipeline's in-flight activations and trace). Collective.
  virtual void report(int64_t stepsRun) = 0;
  /// --save-weights: the named parameters, gathered. Collective.
  virtual void saveWeights() = 0;
  /// The results after training, gathered to rank 0 (--output, and kept
  /// for verify). Collective.
  virtual void writeResults() = 0;
  /// Rank 0: --verify against the unsharded reference, which runs the
  /// same steps from the same start; `losses` are this run's, checked
  /// against the reference's. After one step the results are compared;
  /// after several, the last step's results against the reference's
  /// step from the state kept by keepLastStepInputs, elementwise at one
  /// step's tolerance (docs/Verification.md). Returns the exit status.
  virtual int verify(const std::vector<double> &losses) = 0;
  /// --sample: text from the trained model. Collective.
  virtual void sample() = 0;
  /// The function whose memory plan predicts this rank's peak (null:
  /// none).
  virtual par_function_t *memoryPlanFunction() const { return nullptr; }
  /// This rank's predicted peak in bytes (< 0: none): by default the plan
  /// of memoryPlanFunction(); the pipelined executor simulates its
  /// actions (PipelineMemory.h). Valid after prepare().
  virtual int64_t predictedMemory() const;
};

/// Trains with `exec` as `plan` says; returns the exit status (1: a
/// non-finite step under --nonfinite error, or a --verify mismatch).
/// Collective.
int runTraining(par_rt_context_t *ctx, const RunPlan &plan,
                StepExecutor &exec);

} // namespace par::tooling

#endif // PAR_TOOLING_TRAINDRIVER_H
