//===- ChromeTrace.h - Per-rank timelines as a Chrome trace -----*- C++ -*-===//
//
// Each rank records named spans (seconds from a common start); the writer
// gathers every rank's record to rank 0 and writes the Chrome trace event
// format (open in Perfetto or chrome://tracing): one track per rank, an
// "idle" span in every gap between top-level spans, and nested spans (a
// collective inside an action) drawn inside the span before them.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINING_CHROMETRACE_H
#define PAR_PIPELINING_CHROMETRACE_H

#include "par/Runtime/par_runtime.h"

#include <string>
#include <vector>

namespace par::tooling {

/// One span; plain data, so that ranks can send records as bytes.
struct TraceSpan {
  double t0, t1;
  int32_t nested; // inside the top-level span before it
  char name[44];
  char category[20];
};

class TraceRecorder {
public:
  void add(const std::string &name, const std::string &category, double t0,
           double t1, bool nested = false);
  /// Records the runtime's kernel trace (par_rt_trace_take) as nested
  /// "collective" spans, times relative to `start`.
  void addKernels(par_rt_context_t *ctx, double start);
  const std::vector<TraceSpan> &spans() const { return spans_; }

private:
  std::vector<TraceSpan> spans_;
};

/// Collective over the world: rank 0 writes every rank's spans to `path`
/// (fatal if it cannot).
void writeChromeTrace(par_rt_context_t *ctx, const TraceRecorder &trace,
                      const std::string &path, int64_t rank, int64_t world);

} // namespace par::tooling

#endif // PAR_PIPELINING_CHROMETRACE_H
