//===- Finite.cpp - Catching a non-finite loss or update ------------------===//
//
// The scan tests exponent bits (all ones: NaN or Inf) in a loop the
// compiler vectorizes, and stops at this rank's first non-finite tensor:
// the global first is the least of the ranks' firsts.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Finite.h"

#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/TrainLoop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace par::tooling {

std::optional<NonFiniteMode> parseNonFiniteMode(const std::string &s) {
  if (s == "error")
    return NonFiniteMode::Error;
  if (s == "skip")
    return NonFiniteMode::Skip;
  if (s == "off")
    return NonFiniteMode::Off;
  return std::nullopt;
}

namespace {

template <typename Bits>
int64_t countExponentOnes(const void *data, int64_t count, Bits mask) {
  const Bits *p = static_cast<const Bits *>(data);
  int64_t n = 0;
  for (int64_t i = 0; i < count; ++i)
    n += (p[i] & mask) == mask;
  return n;
}

/// One rank's record: its first non-finite tensor (order < 0: none), how
/// many of its elements are non-finite, and its name.
struct Record {
  double order = -1, count = 0, elements = 0;
  char label[232] = {0};
};

std::string lossText(double loss) {
  if (std::isnan(loss))
    return "nan";
  return loss > 0 ? "inf" : "-inf";
}

} // namespace

int64_t countNonFinite(par_dtype_t dtype, const void *data, int64_t count) {
  switch (dtype) {
  case PAR_F32:
    return countExponentOnes<uint32_t>(data, count, 0x7f800000u);
  case PAR_F64:
    return countExponentOnes<uint64_t>(data, count, 0x7ff0000000000000ull);
  case PAR_F16:
    return countExponentOnes<uint16_t>(data, count, uint16_t(0x7c00));
  case PAR_BF16:
    return countExponentOnes<uint16_t>(data, count, uint16_t(0x7f80));
  default:
    return 0;
  }
}

NonFiniteCheck::NonFiniteCheck(par_rt_context_t *ctx, NonFiniteMode mode,
                               int64_t rank)
    : ctx(ctx), mode(mode), rank(rank) {}

NonFiniteCheck::Action
NonFiniteCheck::check(int64_t step, double loss,
                      const std::vector<UpdatedTensor> &state) {
  if (!enabled())
    return Continue;
  // This rank's first non-finite tensor in the global order.
  std::vector<const UpdatedTensor *> sorted;
  for (const UpdatedTensor &t : state)
    if (t.tensor->isFloat)
      sorted.push_back(&t);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const UpdatedTensor *a, const UpdatedTensor *b) {
                     return a->order < b->order;
                   });
  Record mine;
  for (const UpdatedTensor *t : sorted) {
    int64_t n = t->tensor->localCount;
    const void *data = t->buffer->data();
    if (t->onDevice) {
      host.resize(std::max<int64_t>(t->tensor->localBytes(), 1));
      t->buffer->download(host.data(), t->tensor->localBytes());
      data = host.data();
    }
    if (int64_t bad = countNonFinite(t->tensor->dtype, data, n)) {
      mine.order = double(t->order);
      mine.count = double(bad);
      mine.elements = double(n);
      strncpy(mine.label, t->label.c_str(), sizeof(mine.label) - 1);
      break;
    }
  }
  int64_t world = par_rt_context_world_size(ctx);
  std::vector<Record> all(rank == 0 ? world : 1);
  checkRuntime(par_rt_gather_world(ctx, &mine, sizeof(mine), all.data()), ctx,
               "gathering the non-finite check");
  // Rank 0 decides (the loss is the same on every rank) and tells all.
  double action = Continue;
  if (rank == 0) {
    std::string what;
    if (!std::isfinite(loss)) {
      what = "the loss is " + lossText(loss);
    } else {
      int64_t first = -1;
      for (int64_t r = 0; r < world; ++r)
        if (all[r].order >= 0 && (first < 0 || all[r].order < all[first].order))
          first = r;
      if (first >= 0) {
        char counts[128];
        snprintf(counts, sizeof(counts), " (%.0f of %.0f elements on rank %lld)",
                 all[first].count, all[first].elements, (long long)first);
        what = "non-finite values in the updated " +
               std::string(all[first].label) + counts +
               ": its gradient or update overflowed";
      }
    }
    if (!what.empty()) {
      std::string line = "step " + std::to_string(step) + ": " + what;
      if (mode == NonFiniteMode::Error) {
        fflush(stdout);
        fprintf(stderr, "%s: error: %s\n", toolName().c_str(), line.c_str());
        fprintf(stderr, "%s: note: --nonfinite skip discards such steps and "
                "continues\n", toolName().c_str());
        fflush(stderr);
        action = Stop;
      } else {
        printf("%s: %s: step skipped (its update discarded)\n",
               toolName().c_str(), line.c_str());
        fflush(stdout);
        action = Skip;
      }
    }
  }
  checkRuntime(par_rt_broadcast_world(ctx, &action, sizeof(action), 0), ctx,
               "broadcasting the non-finite decision");
  if (action == Skip)
    ++skippedSteps;
  return Action(int(action));
}

void NonFiniteCheck::summary(int64_t steps) const {
  if (mode != NonFiniteMode::Skip || rank != 0)
    return;
  printf("%s: --nonfinite skip: %lld of %lld steps skipped (non-finite loss "
         "or update)\n",
         toolName().c_str(), (long long)skippedSteps, (long long)steps);
  fflush(stdout);
}

} // namespace par::tooling
