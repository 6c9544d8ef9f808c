//===- PipelineReports.cpp - What a pipelined run reports -----------------===//
//
// After training: each pipeline rank's stage inputs and residuals in
// flight against the memory plans' prediction, the traffic and
// compression of the stage updates, and the Chrome trace of the last step.
//
//===----------------------------------------------------------------------===//

#include "PipelineRun.h"

namespace par::tooling::pipeline_run {

/// Per pipeline rank: the most stage inputs held at once and their bytes
/// (with a stashing stage's residuals: par-pipeline-stash; without, the
/// backward recomputes the forward and nothing else is kept), and the
/// runtime allocator's peak of that rank (what the memory plans predict).
void PipelineRun::reportStash() {
  par_rt_memory_stats_t mem;
  par_rt_memory_stats(&mem);
  double mine[3] = {(double)buffers->peakStash,
                    (double)buffers->peakStashBytes, (double)mem.peak_bytes};
  std::vector<double> all(3 * world);
  checkRuntime(par_rt_gather_world(ctx, mine, sizeof(mine), all.data()), ctx,
               "gathering statistics");
  if (rank != 0)
    return;
  bool stash = false;
  for (const StageProgram &st : stages)
    stash |= st.stash;
  printf("%s: peak in-flight activations (stage inputs%s held), per "
         "pipeline rank:",
         toolName().c_str(), stash ? " and forward residuals" : "");
  for (int64_t r = 0; r < pipe.p; ++r) {
    std::vector<int64_t> c(coords.size(), 0);
    c[ppAxis] = r;
    int64_t w = stages[0].fwd.rankOf(c);
    printf(" %lld: %.0f (%.0f bytes; measured peak %.0f bytes)",
           (long long)r, all[3 * w], all[3 * w + 1], all[3 * w + 2]);
  }
  printf("\n");
}

PipelineMemoryPlan PipelineRun::memoryPlanOf(int64_t r) const {
  std::vector<PipelineStageFunctions> fns;
  for (int64_t s = 0; s < S; ++s) {
    const StageProgram &st = stages[s];
    bool split = shape.splitBackward;
    fns.push_back({&st.forwardFn(), &st.backwardFn(),
                   split && s > 0 ? &st.inputGradFn() : nullptr,
                   split ? &st.weightGradFn() : nullptr, &st.update, st.stash});
  }
  return predictPipelineMemory(fns, programs[r], r, shape, donates());
}

/// Rank 0: each pipeline rank's predicted peak and what is live then (the
/// same programs and functions on every rank of a pipeline rank).
void PipelineRun::reportMemoryPlans() {
  if (rank != 0)
    return;
  for (int64_t r = 0; r < pipe.p; ++r) {
    PipelineMemoryPlan mp = memoryPlanOf(r);
    if (mp.peak < 0) {
      printf("%s: memory plan of pipeline rank %lld: none (%s has no "
             "memory plan)\n",
             toolName().c_str(), (long long)r, mp.missing.c_str());
      continue;
    }
    printf("%s: memory plan of pipeline rank %lld (%s): peak %s (%lld "
           "bytes) in %s = "
           "stage state %s + in flight %s (%lld stage inputs %s, their "
           "residuals %s) + the action's own %s; most in flight %s (%lld "
           "stage inputs)\n",
           toolName().c_str(), (long long)r,
           pipe.schedule ? pipe.schedule : "?", formatMiB(mp.peak).c_str(),
           (long long)mp.peak, mp.at.c_str(), formatMiB(mp.stageState).c_str(),
           formatMiB(mp.held.total()).c_str(),
           (long long)mp.held.stashedCount,
           formatMiB(mp.held.stashed).c_str(),
           formatMiB(mp.held.residuals).c_str(), formatMiB(mp.call).c_str(),
           formatMiB(mp.peakHeld).c_str(), (long long)mp.peakStashed);
  }
  fflush(stdout);
}

/// After training: the bytes per step by kernel and the compression of the
/// stage updates this rank runs (Traffic.h); with --error-norm the norm of
/// their error-feedback state (the update's state inputs of role
/// "error_feedback", counted over every stage for the buffer count).
void PipelineRun::reportCompression(int64_t stepsRun) {
  CompressionTotals compression;
  std::vector<ErrorFeedbackBlock> blocks;
  std::deque<Buffer> host; // the error-feedback state, copied out
  for (int64_t s : myStages) {
    const Function &u = stages[s].update;
    compression.add(u);
    size_t P = stages[s].paramArgs.size();
    for (size_t k = 0; k < stages[s].state.size(); ++k)
      if (o.errorNorm && u.inputs[2 * P + k].errorFeedback()) {
        host.push_back(stages[s].state[k].download());
        blocks.push_back({&u, 2 * P + k, &host.back(), ppAxis});
      }
  }
  reportTraffic(ctx, stepsRun, compression, rank, world);
  if (!o.errorNorm)
    return;
  int64_t buffers = 0;
  for (int64_t s = 0; s < S; ++s) {
    const Function &u = stages[s].update;
    for (size_t i = 2 * u.stageArgs.size(); i < u.inputs.size(); ++i)
      buffers += u.inputs[i].errorFeedback() ? 1 : 0;
  }
  reportErrorFeedbackNorm(ctx, blocks, buffers, rank, world);
}
/// After training: the peak activations in flight, the traffic and
/// compression, and the Chrome trace of the last step (one track per rank).
void PipelineRun::report(int64_t stepsRun) {
  reportStash();
  reportMemoryPlans();
  reportCompression(stepsRun);
  if (o.trace.empty())
    return;
  writeChromeTrace(ctx, trace, o.trace, rank, world);
  if (rank == 0)
    printf("%s: wrote the trace %s (last step; open in Perfetto)\n",
           toolName().c_str(), o.trace.c_str());
}

} // namespace par::tooling::pipeline_run
