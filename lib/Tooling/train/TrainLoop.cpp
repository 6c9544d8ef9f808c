//===- TrainLoop.cpp - Iterating a train step -----------------------------===//
//
// Step times cover the program call only (not the batch or the feedback
// copies); the "s left" estimate extrapolates the wall time so far.
//
// Residency: the step's arguments live in session buffers for the whole
// run; the feedback is a swap of buffer handles (no copy), the data
// arguments go in once per step and the loss comes out. What else crosses
// to the host per step is asked by a feature: loss scaling's scale and
// finite flag (one element each, for the log and the global-decision
// check). The final results and state come out once, at the end.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/TrainLoop.h"

#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/LossPlot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace par::tooling {

void checkTrainStep(const Function &f) {
  if (f.feedback.empty())
    fatal("'" + f.name + "' is not a train step (its manifest has no "
          "feedback; build one with par-autodiff and par-optimizer)");
  for (auto [r, a] : f.feedback)
    if (!f.outputs[r].sameLayout(f.inputs[a]))
      fatal("result" + std::to_string(r) + " of '" + f.name +
            "' is laid out differently from arg" + std::to_string(a) +
            ", which it feeds; give both the same sharding");
  const Tensor &loss = f.outputs[0];
  if (loss.globalCount != 1 || !loss.replicated())
    fatal("the loss of '" + f.name + "' (result0) must be a replicated scalar");
}

double feedBack(const Function &f, const std::vector<Buffer> &outs,
                std::vector<Buffer> &args) {
  for (auto [r, a] : f.feedback)
    memcpy(args[a].data(), outs[r].data(), f.outputs[r].localBytes());
  if (f.outputs.empty())
    return NAN;
  return par_dtype_load(f.outputs[0].dtype, outs[0].data(), 0);
}

TrainStepper::TrainStepper(const Function &f, std::vector<Buffer> &args,
                           BatchFn fillBatch, bool donate)
    : f(f), args(args), fillBatch(std::move(fillBatch)),
      donatedTo(f.outputs.size(), -1), state(f.inputs.size(), false) {
  if (args.size() != f.inputs.size())
    fatal("'" + f.name + "' takes " + std::to_string(f.inputs.size()) +
          " arguments, not " + std::to_string(args.size()));
  for (auto [r, a] : f.feedback)
    state[a] = true;
  if (donate)
    for (auto [r, a] : f.donated)
      donatedTo[r] = a;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    in.push_back(f.upload(PAR_INPUT, i, args[i]));
  for (size_t k = 0; k < f.outputs.size(); ++k)
    out.push_back(donatedTo[k] < 0 ? f.buffer(PAR_OUTPUT, k)
                                   : SessionBuffer());
  for (size_t k = 0; k < out.size(); ++k)
    result.push_back(donatedTo[k] < 0 ? &out[k] : &in[donatedTo[k]]);
}

double TrainStepper::step(int64_t step) {
  if (fillBatch) {
    fillBatch(step, args);
    for (size_t i = 0; i < f.inputs.size(); ++i)
      if (!state[i])
        in[i].upload(args[i]);
  }
  std::vector<const SessionBuffer *> inPtrs;
  std::vector<SessionBuffer *> outPtrs;
  for (SessionBuffer &b : in)
    inPtrs.push_back(&b);
  for (size_t k = 0; k < out.size(); ++k)
    outPtrs.push_back(donatedTo[k] < 0 ? &out[k] : &in[donatedTo[k]]);
  double t0 = par_rt_now_seconds();
  f.callBuffers(inPtrs, outPtrs);
  lastSeconds = par_rt_now_seconds() - t0;
  double loss =
      f.outputs.empty() ? NAN : outPtrs[0]->scalar(f.outputs[0].dtype);
  // The feedback: result r becomes argument a by a swap (the old argument's
  // buffer takes the next step's result r). A result feeding a second
  // argument is copied from the first. A donated result is in its
  // argument's buffer already.
  for (size_t k = 0; k < out.size(); ++k)
    result[k] = outPtrs[k];
  std::vector<int64_t> fedInto(donatedTo);
  for (auto [r, a] : f.feedback) {
    if (fedInto[r] == (int64_t)a)
      continue;
    if (fedInto[r] < 0) {
      std::swap(in[a], out[r]);
      fedInto[r] = a;
      result[r] = &in[a];
    } else {
      in[a].copyFrom(in[fedInto[r]]);
    }
  }
  return loss;
}

void TrainStepper::undoFeedback() {
  if (std::count_if(donatedTo.begin(), donatedTo.end(),
                    [](int64_t a) { return a >= 0; }))
    fatal("internal: undoing a step whose update was made in place");
  std::vector<int64_t> fedInto(f.outputs.size(), -1);
  for (auto [r, a] : f.feedback)
    if (fedInto[r] < 0) {
      std::swap(in[a], out[r]);
      fedInto[r] = a;
    }
  for (auto [r, a] : f.feedback)
    if (fedInto[r] != (int64_t)a)
      in[a].copyFrom(in[fedInto[r]]);
}

std::vector<Buffer> TrainStepper::outputs() const {
  std::vector<Buffer> host;
  for (const SessionBuffer *b : result)
    host.push_back(b->download());
  return host;
}

double TrainStepper::resultScalar(size_t k) const {
  return result[k]->scalar(f.outputs[k].dtype);
}

double TrainStepper::argumentScalar(size_t i) const {
  return in[i].scalar(f.inputs[i].dtype);
}

void TrainStepper::syncArguments() {
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (state[i])
      in[i].download(args[i].data(), f.inputs[i].localBytes());
}

TrainStepper::BatchFn dataBatches(const Function &f, const DataLoader &data,
                                  size_t tokensArg, size_t targetsArg) {
  return [&f, &data, tokensArg, targetsArg](int64_t step,
                                            std::vector<Buffer> &args) {
    for (size_t a : {tokensArg, targetsArg})
      args[a] = f.scatter(PAR_INPUT, a,
                          data.batch(f.inputs[a], a == targetsArg, step));
  };
}

std::vector<double> runSteps(const Function &f, std::vector<Buffer> &args,
                             int64_t steps, TrainStepper::BatchFn fillBatch,
                             std::vector<Buffer> *outputs) {
  TrainStepper stepper(f, args, std::move(fillBatch));
  std::vector<double> losses;
  for (int64_t s = 1; s <= steps; ++s)
    losses.push_back(stepper.step(s));
  if (outputs)
    *outputs = stepper.outputs();
  stepper.syncArguments();
  return losses;
}

void checkSameDecisions(par_rt_context_t *ctx,
                        const std::vector<double> &decisions, int64_t rank,
                        int64_t world) {
  std::vector<double> all(decisions.size() * world);
  checkRuntime(par_rt_gather_world(ctx, decisions.data(),
                                   decisions.size() * sizeof(double),
                                   all.data()),
               ctx, "gathering the step decisions");
  if (rank != 0)
    return;
  for (int64_t r = 1; r < world; ++r)
    for (size_t s = 0; s < decisions.size(); ++s)
      if (all[r * decisions.size() + s] != all[s])
        fatal("rank " + std::to_string(r) + " and rank 0 disagree on whether "
              "step " + std::to_string(s + 1) + " was taken (the all-finite "
              "decision must be global)");
  printf("%s: loss scaling: all %lld ranks took the same step/skip decision "
         "at every step\n",
         toolName().c_str(), (long long)world);
}

TrainLog::TrainLog(const TrainLogOptions &o, bool rank0)
    : o(o), printing(rank0), start(par_rt_now_seconds()) {
  if (!printing || o.lossCsv.empty())
    return;
  csv = fopen(o.lossCsv.c_str(), "w");
  if (!csv)
    fatal("cannot write '" + o.lossCsv + "': " + strerror(errno));
  fprintf(csv, o.lossScale ? "step,loss,seconds,scale,skipped\n"
                           : "step,loss,seconds\n");
}

TrainLog::~TrainLog() {
  if (csv)
    fclose(csv);
}

void TrainLog::step(int64_t step, double loss, double seconds, double tokens,
                    double scale, bool taken) {
  losses_.push_back(loss);
  if (losses_.size() == 1)
    par_rt_alloc_stats(&afterFirst);
  if (o.lossScale) {
    skipped += !taken;
    lastScale = scale;
  }
  if (!printing)
    return;
  double done = par_rt_now_seconds() - start;
  printf("step %lld/%lld  loss %.6g  %.4f s/step", (long long)step,
         (long long)o.steps, loss, seconds);
  if (tokens >= 0)
    printf("  %.0f tokens/s", tokens / std::max(seconds, 1e-9));
  if (o.lossScale)
    printf("  scale %.6g%s  skipped %lld", scale,
           taken ? "" : " (non-finite gradients: step skipped)",
           (long long)skipped);
  int64_t run = step - o.firstStep + 1;
  printf("  %.1f s left\n", done / std::max<int64_t>(run, 1) * (o.steps - step));
  fflush(stdout);
  if (csv) {
    fprintf(csv, "%lld,%.9g,%.6f", (long long)step, loss, done);
    if (o.lossScale)
      fprintf(csv, ",%.9g,%d", scale, taken ? 0 : 1);
    fprintf(csv, "\n");
  }
}

void TrainLog::lossScaleSummary(double nextScale) const {
  if (!printing || !o.lossScale)
    return;
  printf("%s: loss scaling: %lld of %lld steps skipped (non-finite "
         "gradients), loss scale now %.6g\n",
         toolName().c_str(), (long long)skipped, (long long)losses_.size(),
         nextScale);
  if (o.minScale > 0 && nextScale <= o.minScale)
    printf("%s: warning: the loss scale is at its minimum (%.6g): gradients "
           "overflow even unscaled; the model or the learning rate diverges\n",
           toolName().c_str(), o.minScale);
}

void TrainLog::finish(const std::string &title) {
  if (csv)
    fclose(csv);
  csv = nullptr;
  if (printing && o.allocStats) {
    par_rt_alloc_stats_t now;
    par_rt_alloc_stats(&now);
    int64_t n = (int64_t)losses_.size() - 1;
    if (n <= 0) {
      printf("%s: buffer pool: %lld system allocations in the one step "
             "(no steady state to report)\n",
             toolName().c_str(), (long long)now.system_allocs);
    } else {
      double sys = double(now.system_allocs - afterFirst.system_allocs) / n;
      double hits = double(now.pool_hits - afterFirst.pool_hits) / n;
      printf("%s: buffer pool (rank 0): %.2f system allocations and %.1f "
             "pool hits per step over steps 2..%lld; %lld system "
             "allocations in all, %.1f MB cached\n",
             toolName().c_str(), sys, hits, (long long)n + 1,
             (long long)now.system_allocs, now.cached_bytes / 1e6);
    }
  }
  if (printing && !o.lossPlot.empty()) {
    writeLossPlot(o.lossPlot, losses_, title);
    printf("%s: wrote the loss plot %s\n", toolName().c_str(),
           o.lossPlot.c_str());
  }
}

} // namespace par::tooling
