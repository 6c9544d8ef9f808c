//===- TrainLoop.h - Iterating a train step ---------------------*- C++ -*-===//
//
// A train step (par-autodiff + par-optimizer) maps parameters, optimizer
// state and a batch to the loss (result 0) and the new parameters and
// state; its manifest's feedback pairs say which result feeds which
// argument. TrainStepper runs such a step again and again on one set of
// argument buffers, sharded or on the reference alike; TrainLog prints the
// progress line and writes the loss CSV and plot.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_TRAINLOOP_H
#define PAR_TOOLING_TRAINLOOP_H

#include "par/Tooling/CharData.h"
#include "par/Tooling/Function.h"
#include "par/Runtime/par_runtime.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace par::tooling {

/// Checks that `f` can be iterated: it has feedback pairs, each result has
/// its argument's layout, and the loss (result 0) is a replicated scalar.
void checkTrainStep(const Function &f);

/// Copies each fed-back result of `outs` into its argument's buffer;
/// returns the loss (element 0 of result 0).
double feedBack(const Function &f, const std::vector<Buffer> &outs,
                std::vector<Buffer> &args);

/// Runs `f` as a train step, its state resident in session buffers (device
/// memory for a GPU program, host memory for a CPU one: the same code
/// path). The arguments are uploaded once; before step s,
/// `fillBatch(s, args)` (if set) refreshes the data arguments on the host
/// and the non-state arguments are uploaded; after the call only the loss
/// is copied out, and each fed-back result becomes its argument by
/// swapping the two buffers (results must not alias arguments). The state
/// entries of `args` are stale during training: syncArguments() copies the
/// state back into them.
class TrainStepper {
public:
  using BatchFn = std::function<void(int64_t step, std::vector<Buffer> &)>;
  /// With `donate`, the donated results (Function::donated) are computed
  /// in their arguments' buffers: one buffer set for the parameters and
  /// state, but no undoFeedback.
  TrainStepper(const Function &f, std::vector<Buffer> &args,
               BatchFn fillBatch = {}, bool donate = true);

  /// Runs step `step` and returns its loss.
  double step(int64_t step);
  /// The last step's results, copied to the host.
  std::vector<Buffer> outputs() const;
  /// Element 0 of the last step's result k, and of the argument `i` the
  /// next step runs with (one element copied out).
  double resultScalar(size_t k) const;
  double argumentScalar(size_t i) const;
  /// Copies the fed-back arguments (parameters and state) into `args`.
  void syncArguments();
  /// The time the last step's call took.
  double seconds() const { return lastSeconds; }
  /// The step function, and argument i's buffer the next step runs with
  /// (after a step: a fed-back argument holds the step's new value).
  const Function &function() const { return f; }
  const SessionBuffer &argument(size_t i) const { return in[i]; }
  /// Discards the last step's update: swaps the feedback back, so the
  /// fed-back arguments hold their values from before the step again (a
  /// result feeding two arguments: the second is copied from the first).
  /// Not for a donating stepper (the old values are overwritten).
  void undoFeedback();

private:
  const Function &f;
  std::vector<Buffer> &args;
  BatchFn fillBatch;
  std::vector<SessionBuffer> in, out; // out[r] empty for a donated result
  std::vector<int64_t> donatedTo;      // per result: its argument, or -1
  std::vector<bool> state;             // per argument: fed back
  std::vector<const SessionBuffer *> result; // where each result lives
  double lastSeconds = 0;
};

/// A BatchFn that fills arguments `tokensArg` and `targetsArg` of `f`
/// with this rank's blocks of `data`'s batch of each step.
TrainStepper::BatchFn dataBatches(const Function &f, const DataLoader &data,
                                  size_t tokensArg, size_t targetsArg);

/// Runs the train step `steps` times from `args`; returns the
/// losses (the last step's results stay in `outputs`).
std::vector<double> runSteps(const Function &f, std::vector<Buffer> &args,
                             int64_t steps, TrainStepper::BatchFn fillBatch,
                             std::vector<Buffer> *outputs = nullptr);

struct TrainLogOptions {
  int64_t steps = 0;
  int64_t firstStep = 1; // a resumed run's first step (the log's rate)
  std::string lossCsv;  // "step,loss,seconds" per step (rank 0)
  std::string lossPlot; // an SVG at the end (rank 0)
  // Loss scaling: the progress line and the CSV show each step's scale and
  // whether it was skipped; the summary counts the skips.
  bool lossScale = false;
  double minScale = 0;  // the policy's minimum (0: unknown)
  // --alloc-stats: at the end, rank 0's buffer-pool counts per step over
  // the steps after the first (the steady state).
  bool allocStats = false;
};

/// The training loop's record: every rank keeps the losses; rank 0 prints
/// the progress line, writes the loss CSV and at the end the plot.
/// Loss scaling: every rank's step-or-skip decisions (1 taken, 0 skipped,
/// one per step) are the same, or the run fails; rank 0 says so.
void checkSameDecisions(par_rt_context_t *ctx,
                        const std::vector<double> &decisions, int64_t rank,
                        int64_t world);

class TrainLog {
public:
  TrainLog(const TrainLogOptions &o, bool rank0);
  ~TrainLog();
  /// One step's loss and time; `tokens` < 0 when there is no token count.
  /// With loss scaling, `scale` is the scale the step ran with and `taken`
  /// whether its gradients were finite (else it was skipped).
  void step(int64_t step, double loss, double seconds, double tokens,
            double scale = NAN, bool taken = true);
  void finish(const std::string &title);
  /// Loss scaling: the skipped steps and the scale after the last step
  /// (and a warning when it sits at the policy's minimum).
  void lossScaleSummary(double nextScale) const;
  const std::vector<double> &losses() const { return losses_; }

private:
  TrainLogOptions o;
  bool printing;
  FILE *csv = nullptr;
  double start;
  std::vector<double> losses_;
  int64_t skipped = 0;
  double lastScale = NAN;
  par_rt_alloc_stats_t afterFirst{}; // the pool after the first step
};

} // namespace par::tooling

#endif // PAR_TOOLING_TRAINLOOP_H
