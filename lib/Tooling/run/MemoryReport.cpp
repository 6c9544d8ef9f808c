//===- MemoryReport.cpp - Predicted and measured memory per rank ----------===//

#include "par/Tooling/MemoryReport.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <unistd.h>

namespace par::tooling {

std::string formatMiB(int64_t bytes) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.2f MiB", (double)bytes / (1024.0 * 1024.0));
  return buf;
}

int64_t predictedPeak(par_function_t *fn) {
  par_memory_plan_t plan;
  if (!fn || par_function_memory_plan(fn, &plan) != PAR_OK)
    return -1;
  return plan.peak_bytes;
}

namespace {

/// The kernel's count of this process's resident memory, bytes, from
/// /proc/self/status: the current set ("VmRSS") or its high-water mark
/// ("VmHWM"); -1 where it cannot be read.
int64_t procStatusBytes(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  int64_t kib = -1;
  size_t n = strlen(field);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      kib = strtoll(line + n + 1, nullptr, 10);
      break;
    }
  fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

int64_t &residentBaseline() {
  static int64_t bytes = -1;
  return bytes;
}

struct LimitContext {
  par_function_t *fn = nullptr;
  int64_t rank = 0;
  int64_t predicted = -1;
};

LimitContext &limitContext() {
  static LimitContext c;
  return c;
}

/// What the plan names for `bytes` in the function being run: the tensor
/// types the plan allocates with exactly that size ("" when none).
std::string plannedTypes(par_function_t *fn, int64_t bytes) {
  if (!fn)
    return "";
  const char *types = par_function_allocation_types(fn, bytes);
  return types ? types : "";
}

void outOfMemory(int64_t bytes, int64_t live, int64_t limit, void *) {
  LimitContext &c = limitContext();
  const char *scope = par_rt_memory_scope();
  std::string types = plannedTypes(c.fn, bytes);
  fprintf(stderr,
          "par-run: error: out of memory (rank %lld): '%s' allocating %lld "
          "bytes%s%s%s with %s of the %s limit in use; ",
          (long long)c.rank, scope ? scope : "?", (long long)bytes,
          types.empty() ? "" : " (", types.c_str(), types.empty() ? "" : ")",
          formatMiB(live).c_str(), formatMiB(limit).c_str());
  if (c.predicted > 0)
    fprintf(stderr, "the memory plan predicts a peak of %s per rank\n",
            formatMiB(c.predicted).c_str());
  else
    fprintf(stderr, "the artifact has no memory plan\n");
  fflush(stderr);
  _Exit(1);
}

} // namespace

void setMemoryLimit(int64_t limitBytes, par_function_t *fn, int64_t rank) {
  limitContext().fn = fn;
  limitContext().rank = rank;
  limitContext().predicted = predictedPeak(fn);
  par_rt_memory_set_limit(limitBytes, outOfMemory, nullptr);
}

void setMemoryPrediction(int64_t predictedBytes) {
  limitContext().predicted = predictedBytes;
}

void noteResidentBaseline() { residentBaseline() = procStatusBytes("VmRSS"); }

void reportMemory(par_rt_context_t *ctx, int64_t predicted) {
  par_rt_memory_stats_t m;
  par_rt_memory_stats(&m);
  int64_t world = par_rt_context_world_size(ctx);
  int64_t rank = par_rt_context_rank(ctx);
  int64_t hwm = procStatusBytes("VmHWM"), base = residentBaseline();
  // The pool never gives a block back below its cache limit: what it holds
  // now (blocks in use and cached, in whole size classes) is the most it
  // held.
  par_rt_alloc_stats_t a;
  par_rt_alloc_stats(&a);
  int64_t mine[5] = {m.peak_bytes, predicted, hwm, base,
                     a.live_bytes + a.cached_bytes};
  std::vector<int64_t> all(rank == 0 ? 5 * world : 0);
  if (par_rt_gather_world(ctx, mine, sizeof mine,
                          rank == 0 ? all.data() : nullptr) != PAR_OK ||
      rank != 0)
    return;
  int64_t top = 0;
  for (int64_t r = 1; r < world; ++r)
    if (all[5 * r] > all[5 * top])
      top = r;
  const int64_t *t = &all[5 * top];
  printf("par-run: memory (rank %lld): predicted %s, measured peak %s",
         (long long)top, t[1] >= 0 ? formatMiB(t[1]).c_str() : "none",
         formatMiB(t[0]).c_str());
  // The allocator's count against the kernel's: the resident set's
  // high-water mark over what was resident before the first buffer.
  if (t[2] >= 0 && t[3] >= 0)
    printf("; resident peak %s over %s before the first buffer (+%s); "
           "the buffer pool holds %s",
           formatMiB(t[2]).c_str(), formatMiB(t[3]).c_str(),
           formatMiB(t[2] - t[3]).c_str(), formatMiB(t[4]).c_str());
  printf("\n");
  fflush(stdout);
}

} // namespace par::tooling
