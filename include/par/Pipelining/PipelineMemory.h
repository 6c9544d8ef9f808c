//===- PipelineMemory.h - What a pipeline rank holds, and its peak -*- C++ -*-===//
//
// The buffers a rank's pipeline interpreter holds between actions, keyed
// by (micro-batch, stage), and the rules that move them (PipelineBuffers):
// the executor (PipelineExecutor.cpp) runs a step through them on session
// buffers and compiled calls, and the memory prediction
// (predictPipelineMemory) runs the same rules on byte counts and the
// stage functions' memory plans, so the two cannot disagree on what is
// held when (docs/RationaleMemory.md, "Pipelines").
//
// The rules: a forward takes its input activation (stages > 0) and
// stashes it until the stage's backward (or, split, its weight-gradient
// half), which recomputes the forward from it, or, where the stage's
// backward is split at its residuals (par-pipeline-stash), keeps the
// forward's residuals with it, which the backward reads instead; the
// output activation is
// held until it is sent (or, on the same rank, taken by the next stage's
// forward); a received activation or gradient until the action that takes
// it; a backward's input gradient until it is sent; the split backward's
// output gradient from its BI to its BW. A send leaves its buffer in
// flight until the next send on this rank (which first completes every
// send in flight) or the end of the step, so at most one is in flight.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINING_PIPELINEMEMORY_H
#define PAR_PIPELINING_PIPELINEMEMORY_H

#include "par/Pipelining/Schedule.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Function.h"

#include <algorithm>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace par::tooling {

/// The stage function an action calls.
enum class StageCall { Forward, Backward, InputGrad, WeightGrad };

/// What the interpreter holds between actions, in bytes, by what it is.
struct PipelineHeld {
  int64_t stashed = 0;   // stage inputs kept for the backward
  int64_t residuals = 0; // forward residuals kept for the backward
  int64_t outputGrads = 0; // BI's output gradients kept for BW
  int64_t activations = 0; // produced or received, not yet taken or sent
  int64_t gradients = 0;   // input gradients, produced or received
  int64_t sending = 0;     // a send's buffer in flight
  int64_t stashedCount = 0; // micro-batch stage inputs stashed
  int64_t total() const {
    return stashed + residuals + outputGrads + activations + gradients +
           sending;
  }
};

/// The retention rules over a backend. Backend provides:
///   using Buf: movable, default-constructed empty, int64_t bytes() const;
///   std::vector<Buf> call(StageCall, const pipeline::Action &, const Buf
///       *x, const Buf *dy, const std::vector<Buf> *residuals): the stage
///       function on stage input x (ignored for stage 0), the forward's
///       residuals (a stashing stage's backward; else null) and output
///       gradient dy (null: the last stage); fresh results;
///   bool stashes(int64_t stage): its forward returns residuals after its
///       output, which its backward reads;
///   void loss(const Buf &): the last stage's forward result;
///   void accumulate(StageCall, int64_t stage, const std::vector<Buf> &);
///   size_t numParams(int64_t stage);
///   Buf receive(const pipeline::Action &): received, or started (its
///       buffer then untouched until ready);
///   void ready(const Buf &): a compute is about to take the buffer (an
///       activation or gradient, received or the rank's own): its
///       receive, if started, completes;
///   void send(const pipeline::Action &, const Buf &): started; the buffer
///       stays untouched until waitSends;
///   void waitSends(): completes every send started.
template <class Backend> class PipelineBuffers {
public:
  using Buf = typename Backend::Buf;
  using Key = std::pair<int64_t, int64_t>; // (micro-batch, stage)

  PipelineBuffers(Backend &backend, int64_t numStages)
      : be(backend), S(numStages) {}

  void run(const pipeline::Action &a) {
    awaitInputs(a); // a no-op where the driver did it first
    switch (a.op) {
    case pipeline::Op::F: forward(a); break;
    case pipeline::Op::B: backward(a); break;
    case pipeline::Op::BI: backwardInput(a); break;
    case pipeline::Op::BW: backwardWeight(a); break;
    default: transfer(a); break;
    }
  }

  /// Completes the started receives of what compute `a` reads. run does it
  /// too; a driver that times the action calls it first (the wait is the
  /// transfer's, not the action's).
  void awaitInputs(const pipeline::Action &a) {
    auto ready = [&](std::map<Key, Buf> &pool, Key key) {
      auto it = pool.find(key);
      if (it != pool.end())
        be.ready(it->second);
    };
    if (a.op == pipeline::Op::F && a.stage > 0)
      ready(acts, {a.mb, a.stage});
    if ((a.op == pipeline::Op::B || a.op == pipeline::Op::BI) &&
        a.stage + 1 < S)
      ready(grads, {a.mb, a.stage + 1});
  }

  /// After the last action: the sends complete and their buffers go.
  void finishStep() {
    be.waitSends();
    inFlight.clear();
  }

  PipelineHeld held() const {
    PipelineHeld h;
    h.stashed = stashBytes;
    h.residuals = residualBytes;
    h.stashedCount = (int64_t)stash.size();
    for (auto &[k, b] : dyStash)
      h.outputGrads += b.bytes();
    for (auto &[k, b] : acts)
      h.activations += b.bytes();
    for (auto &[k, b] : grads)
      h.gradients += b.bytes();
    for (const Buf &b : inFlight)
      h.sending += b.bytes();
    return h;
  }

  /// The most stage inputs stashed at once, and the most bytes (with the
  /// residuals kept with them: peakResidualBytes of them).
  size_t peakStash = 0;
  int64_t peakStashBytes = 0, peakResidualBytes = 0;

private:
  static std::string named(const char *what, const pipeline::Action &a) {
    return std::string(what) + "(mb=" + std::to_string(a.mb) +
           ",s=" + std::to_string(a.stage) + ")";
  }

  Buf take(std::map<Key, Buf> &pool, Key key, const std::string &missing) {
    auto it = pool.find(key);
    if (it == pool.end())
      fatal("pipeline: " + missing);
    Buf b = std::move(it->second);
    pool.erase(it);
    return b;
  }

  /// The gradient of the stage's output (none for the last stage).
  Buf outputGradient(const pipeline::Action &a, const char *what) {
    if (a.stage + 1 >= S)
      return Buf();
    return take(grads, {a.mb, a.stage + 1},
                named(what, a) + " has no output gradient");
  }

  Buf unstash(const pipeline::Action &a) {
    Buf x = take(stash, {a.mb, a.stage},
                 named("B", a) + " has no stashed stage input");
    stashBytes -= x.bytes();
    return x;
  }

  const Buf *dyArg(const pipeline::Action &a, const Buf &dy) const {
    return a.stage + 1 < S ? &dy : nullptr;
  }

  void forward(const pipeline::Action &a) {
    Key key{a.mb, a.stage};
    Buf x;
    if (a.stage > 0)
      x = take(acts, key, named("F", a) + " has no input activation");
    std::vector<Buf> outs =
        be.call(StageCall::Forward, a, &x, nullptr, nullptr);
    if (a.stage + 1 == S)
      be.loss(outs[0]);
    else
      acts[{a.mb, a.stage + 1}] = std::move(outs[0]);
    if (be.stashes(a.stage)) {
      std::vector<Buf> &r = residuals[key];
      for (size_t i = 1; i < outs.size(); ++i) {
        residualBytes += outs[i].bytes();
        r.push_back(std::move(outs[i]));
      }
    }
    stashBytes += x.bytes();
    stash[key] = std::move(x);
    peakStash = std::max(peakStash, stash.size());
    peakStashBytes = std::max(peakStashBytes, stashBytes + residualBytes);
    peakResidualBytes = std::max(peakResidualBytes, residualBytes);
  }

  /// A stashing stage's residuals of (mb, stage), no longer held.
  std::vector<Buf> takeResiduals(const pipeline::Action &a, const char *what) {
    auto it = residuals.find({a.mb, a.stage});
    if (it == residuals.end())
      fatal("pipeline: " + named(what, a) + " has no stashed residuals");
    std::vector<Buf> res = std::move(it->second);
    residuals.erase(it);
    for (const Buf &b : res)
      residualBytes -= b.bytes();
    return res;
  }

  void backward(const pipeline::Action &a) {
    Buf x = unstash(a);
    Buf dy = outputGradient(a, "B");
    std::vector<Buf> res;
    if (be.stashes(a.stage))
      res = takeResiduals(a, "B");
    std::vector<Buf> outs =
        be.call(StageCall::Backward, a, &x, dyArg(a, dy),
                be.stashes(a.stage) ? &res : nullptr);
    be.accumulate(StageCall::Backward, a.stage, outs);
    if (a.stage > 0)
      grads[{a.mb, a.stage}] = std::move(outs[1 + be.numParams(a.stage)]);
  }

  /// The input's gradient now (the stage before waits for it); the stage
  /// input and dy stay for BW, and on a stashing stage the residuals,
  /// joined by what BI saved for BW.
  void backwardInput(const pipeline::Action &a) {
    Key key{a.mb, a.stage};
    Buf dy = outputGradient(a, "BI");
    if (a.stage > 0) {
      auto x = stash.find(key);
      if (x == stash.end())
        fatal("pipeline: " + named("BI", a) + " has no stashed stage input");
      bool keeps = be.stashes(a.stage);
      auto res = residuals.find(key);
      if (keeps && res == residuals.end())
        fatal("pipeline: " + named("BI", a) + " has no stashed residuals");
      std::vector<Buf> outs =
          be.call(StageCall::InputGrad, a, &x->second, dyArg(a, dy),
                  keeps ? &res->second : nullptr);
      grads[key] = std::move(outs[1]);
      if (keeps) {
        for (size_t i = 2; i < outs.size(); ++i) {
          residualBytes += outs[i].bytes();
          res->second.push_back(std::move(outs[i]));
        }
        peakStashBytes = std::max(peakStashBytes, stashBytes + residualBytes);
        peakResidualBytes = std::max(peakResidualBytes, residualBytes);
      }
    }
    dyStash[key] = std::move(dy);
  }

  void backwardWeight(const pipeline::Action &a) {
    Buf x = unstash(a);
    Buf dy = take(dyStash, {a.mb, a.stage},
                  named("BW", a) + " comes before its BI");
    std::vector<Buf> res;
    if (be.stashes(a.stage))
      res = takeResiduals(a, "BW");
    be.accumulate(StageCall::WeightGrad, a.stage,
                  be.call(StageCall::WeightGrad, a, &x, dyArg(a, dy),
                          be.stashes(a.stage) ? &res : nullptr));
  }

  /// act(mb, s) is stage s's input; grad(mb, s) its gradient. A send
  /// first completes the sends in flight, so one buffer at most is in
  /// flight (the programs par-run runs are verified under this wait:
  /// Transfers::Buffered, Schedule.h).
  void transfer(const pipeline::Action &a) {
    Key key{a.mb, a.stage};
    bool isAct =
        a.op == pipeline::Op::SendAct || a.op == pipeline::Op::RecvAct;
    std::map<Key, Buf> &pool = isAct ? acts : grads;
    if (a.isRecv()) {
      pool[key] = be.receive(a);
      return;
    }
    Buf b = take(pool, key, "nothing to send for " + pipeline::formatAction(a));
    finishStep();
    inFlight.push_back(std::move(b));
    be.send(a, inFlight.back());
  }

  Backend &be;
  int64_t S;
  std::map<Key, Buf> acts, grads, stash, dyStash;
  std::map<Key, std::vector<Buf>> residuals; // a stashing stage's
  std::list<Buf> inFlight; // buffers of unfinished sends
  int64_t stashBytes = 0, residualBytes = 0;
};

/// The functions of one stage (null where the schedule calls none).
struct PipelineStageFunctions {
  /// forward and backward: the functions F and B call (a stashing stage's
  /// `_fwd_res` and `_bwd`, with `stash` set).
  const Function *forward = nullptr, *backward = nullptr,
                 *inputGrad = nullptr, *weightGrad = nullptr,
                 *update = nullptr;
  bool stash = false;
};

/// The predicted peak of one pipeline rank's step, with what is live then.
struct PipelineMemoryPlan {
  int64_t peak = -1;       // bytes; -1: no prediction (see `missing`)
  int64_t stageState = 0;  // its stages' parameters, gradient sums,
                           // optimizer state and update results
  PipelineHeld held;       // the in-flight buffers at the peak
  int64_t call = 0;        // the running call's own arguments, results
                           // and program peak
  std::string at;          // the action (or update) at the peak
  /// Over the step: the most stage inputs stashed at once and the most
  /// bytes held between actions.
  int64_t peakStashed = 0, peakHeld = 0;
  std::string missing;     // a function without a memory plan
};

/// Runs `actions` (one pipeline rank's program) through PipelineBuffers on
/// byte counts: the stage state the executor keeps for the rank's stages
/// (`shape.stagesOf(rank)`), each call's made arguments (the forward's
/// stage arguments that are not the stage's parameters: data, loss scale),
/// results and program peak (the manifest's plan), then each stage's
/// update. The executor's behaviour is deterministic, so this is its peak
/// of session buffers plus program allocations, to the plans' accuracy.
PipelineMemoryPlan
predictPipelineMemory(const std::vector<PipelineStageFunctions> &stages,
                      const std::vector<pipeline::Action> &actions, int64_t rank,
                      const pipeline::PipelineShape &shape, bool donate);

} // namespace par::tooling

#endif // PAR_PIPELINING_PIPELINEMEMORY_H
