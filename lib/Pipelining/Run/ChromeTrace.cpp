//===- ChromeTrace.cpp - Per-rank timelines as a Chrome trace -------------===//
//
// Ranks hold different numbers of spans: the counts are gathered first,
// every rank pads its record to the largest, and one gather moves them all.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/ChromeTrace.h"

#include "par/Tooling/Diagnostics.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace par::tooling {

void TraceRecorder::add(const std::string &name, const std::string &category,
                        double t0, double t1, bool nested) {
  TraceSpan s{};
  s.t0 = t0;
  s.t1 = t1;
  s.nested = nested;
  snprintf(s.name, sizeof(s.name), "%s", name.c_str());
  snprintf(s.category, sizeof(s.category), "%s", category.c_str());
  spans_.push_back(s);
}

void TraceRecorder::addKernels(par_rt_context_t *ctx, double start) {
  par_rt_trace_event_t k[256];
  int64_t n = par_rt_trace_take(ctx, k, 256);
  for (int64_t i = 0; i < n && i < 256; ++i)
    add(k[i].kernel, "collective", k[i].start - start, k[i].end - start,
        /*nested=*/true);
}

namespace {

class TraceWriter {
public:
  explicit TraceWriter(FILE *f) : f(f) {}
  void span(int64_t tid, const char *name, const char *cat, double a,
            double b) {
    fprintf(f,
            "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", "
            "\"pid\": 0, \"tid\": %lld, \"ts\": %.3f, \"dur\": %.3f}",
            first ? "" : ",\n", name, cat, (long long)tid, a * 1e6,
            (b - a) * 1e6);
    first = false;
  }
  void track(int64_t tid) {
    fprintf(f,
            "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
            "\"tid\": %lld, \"args\": {\"name\": \"rank %lld\"}}",
            first ? "" : ",\n", (long long)tid, (long long)tid);
    first = false;
  }

private:
  FILE *f;
  bool first = true;
};

void writeSpans(FILE *f, const std::vector<TraceSpan> &all, size_t stride,
                const std::vector<int64_t> &counts) {
  fprintf(f, "{\"traceEvents\": [\n");
  TraceWriter w(f);
  for (size_t r = 0; r < counts.size(); ++r) {
    w.track(r);
    double last = 0;
    for (int64_t i = 0; i < counts[r]; ++i) {
      const TraceSpan &s = all[r * stride + i];
      if (s.nested) {
        w.span(r, s.name, s.category, s.t0, s.t1);
        continue;
      }
      if (s.t0 > last)
        w.span(r, "idle", "idle", last, s.t0);
      w.span(r, s.name, s.category, s.t0, s.t1);
      last = s.t1;
    }
  }
  fprintf(f, "\n]}\n");
}

} // namespace

void writeChromeTrace(par_rt_context_t *ctx, const TraceRecorder &trace,
                      const std::string &path, int64_t rank, int64_t world) {
  std::vector<TraceSpan> spans = trace.spans();
  int64_t n = spans.size(), most = 0;
  std::vector<int64_t> counts(world);
  checkRuntime(par_rt_gather_world(ctx, &n, sizeof(n), counts.data()), ctx,
               "gathering trace sizes");
  if (rank == 0)
    most = *std::max_element(counts.begin(), counts.end());
  checkRuntime(par_rt_broadcast_world(ctx, &most, sizeof(most), 0), ctx,
               "broadcasting trace sizes");
  spans.resize(std::max<int64_t>(most, 1));
  std::vector<TraceSpan> all(rank == 0 ? spans.size() * world : 1);
  checkRuntime(par_rt_gather_world(ctx, spans.data(),
                                   spans.size() * sizeof(TraceSpan),
                                   all.data()),
               ctx, "gathering the trace");
  if (rank != 0)
    return;
  FILE *f = fopen(path.c_str(), "w");
  if (!f)
    fatal("cannot write '" + path + "': " + strerror(errno));
  writeSpans(f, all, spans.size(), counts);
  fclose(f);
}

} // namespace par::tooling
