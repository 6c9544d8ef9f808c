//===- Layout.cpp - Which block of a global tensor a rank holds -----------===//
//
// Element copies keep the bytes of each element; only partial values go
// through double to be reduced (as par-run always did).
//
//===----------------------------------------------------------------------===//

#include "Layout.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace par::session {

std::vector<int64_t> coordsOf(const std::vector<int64_t> &sizes,
                              int64_t rank) {
  std::vector<int64_t> c(sizes.size());
  for (int64_t i = (int64_t)c.size() - 1; i >= 0; --i) {
    c[i] = rank % sizes[i];
    rank /= sizes[i];
  }
  return c;
}

int64_t rankOf(const std::vector<int64_t> &sizes,
               const std::vector<int64_t> &coords) {
  int64_t r = 0;
  for (size_t i = 0; i < coords.size(); ++i)
    r = r * sizes[i] + coords[i];
  return r;
}

std::vector<int64_t> blockOffset(const FunctionSpec &f, const Tensor &t,
                                 const std::vector<int64_t> &coords) {
  std::vector<int64_t> off(t.global.size(), 0);
  for (size_t d = 0; d < t.global.size(); ++d) {
    int64_t block = 0;
    for (int64_t a : t.axesOfDim(d))
      block = block * f.sizes[a] + coords[a];
    off[d] = block * t.local[d];
  }
  return off;
}

namespace {

/// The value a partial block holds where it contributes nothing.
double neutralOf(const Tensor &t) {
  double inf = std::numeric_limits<double>::infinity();
  double neutral = t.partialKind == PAR_MAX   ? -inf
                   : t.partialKind == PAR_MIN ? inf
                                              : 0.0;
  if (par_dtype_info(t.dtype)->is_float || !std::isinf(neutral))
    return neutral;
  bool low = neutral < 0;
  switch (t.dtype) {
  case PAR_I32: return low ? INT32_MIN : INT32_MAX;
  case PAR_I8: return low ? INT8_MIN : INT8_MAX;
  case PAR_I1: return low ? 0 : 1;
  default: return low ? (double)INT64_MIN : (double)INT64_MAX;
  }
}

} // namespace

void extractBlock(const FunctionSpec &f, const Tensor &t,
                  const std::vector<int64_t> &coords, const char *global,
                  char *local) {
  int64_t es = par_dtype_info(t.dtype)->element_size;
  // A partial tensor: one device per partial group holds the value, the
  // others the reduction's neutral value.
  bool holder = true;
  for (int64_t a : t.partial)
    holder &= coords[a] == 0;
  double neutral = neutralOf(t);
  forEachElement(t, blockOffset(f, t, coords), [&](int64_t l, int64_t g) {
    if (holder)
      memcpy(local + l * es, global + g * es, es);
    else
      par_dtype_store(t.dtype, local, l, neutral);
  });
}

void assembleBlocks(const FunctionSpec &f, const Tensor &t,
                    const char *blocks, int64_t world,
                    const std::vector<int64_t> &sourceCoords, char *global) {
  int64_t es = par_dtype_info(t.dtype)->element_size;
  int64_t bytes = t.localCount * es;
  bool partial = !t.partial.empty();
  std::vector<double> acc(partial ? t.globalCount : 0, 0.0);
  std::vector<bool> seen(partial ? t.globalCount : 0, false);
  for (int64_t r = 0; r < world; ++r) {
    std::vector<int64_t> c = coordsOf(f.sizes, r);
    // Axes neither splitting a dim nor partial replicate: take one copy.
    bool contributes = true;
    for (size_t a = 0; a < c.size(); ++a)
      if (!t.usesAxis(a) && c[a] != sourceCoords[a])
        contributes = false;
    if (!contributes)
      continue;
    const char *block = blocks + r * bytes;
    forEachElement(t, blockOffset(f, t, c), [&](int64_t l, int64_t g) {
      if (!partial) {
        memcpy(global + g * es, block + l * es, es);
        return;
      }
      double v = par_dtype_load(t.dtype, block, l);
      if (!seen[g])
        acc[g] = v;
      else if (t.partialKind == PAR_MAX)
        acc[g] = std::max(acc[g], v);
      else if (t.partialKind == PAR_MIN)
        acc[g] = std::min(acc[g], v);
      else
        acc[g] += v;
      seen[g] = true;
    });
  }
  for (int64_t i = 0; partial && i < t.globalCount; ++i)
    par_dtype_store(t.dtype, global, i, acc[i]);
}

} // namespace par::session
