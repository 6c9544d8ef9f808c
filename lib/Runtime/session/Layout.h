//===- Layout.h - Which block of a global tensor a rank holds ---*- C++ -*-===//
//
// The sharding arithmetic of the session: a rank's mesh coordinates
// (row-major, last axis fastest), the offset of its block of a tensor
// (each dimension split over its axes, major first), a walk over a block's
// elements with their global indices, and the assembly of a global tensor
// from every rank's block (replicas taken once, partial values reduced).
// Internal to the session library.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_SESSION_LAYOUT_H
#define PAR_RUNTIME_SESSION_LAYOUT_H

#include "par/Manifest/Manifest.h"

#include <vector>

namespace par::session {

using manifest::FunctionSpec;
using manifest::Tensor;

std::vector<int64_t> coordsOf(const std::vector<int64_t> &sizes, int64_t rank);
int64_t rankOf(const std::vector<int64_t> &sizes,
               const std::vector<int64_t> &coords);

/// Per-dimension offset of the block at mesh coordinates `coords`.
std::vector<int64_t> blockOffset(const FunctionSpec &f, const Tensor &t,
                                 const std::vector<int64_t> &coords);

/// Calls fn(localLinear, globalLinear) for every element of the block at
/// `offset`.
template <typename Fn>
void forEachElement(const Tensor &t, const std::vector<int64_t> &offset,
                    Fn fn) {
  size_t rank = t.local.size();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t l = 0; l < t.localCount; ++l) {
    int64_t g = 0;
    for (size_t d = 0; d < rank; ++d)
      g = g * t.global[d] + offset[d] + idx[d];
    fn(l, g);
    for (int64_t d = (int64_t)rank - 1; d >= 0; --d) {
      if (++idx[d] < t.local[d])
        break;
      idx[d] = 0;
    }
  }
}

/// This rank's block of `global` (see par_function_scatter).
void extractBlock(const FunctionSpec &f, const Tensor &t,
                  const std::vector<int64_t> &coords, const char *global,
                  char *local);

/// Assembles the global tensor from `world` blocks laid one after the other
/// in `blocks` (rank order); see par_function_gather.
void assembleBlocks(const FunctionSpec &f, const Tensor &t,
                    const char *blocks, int64_t world,
                    const std::vector<int64_t> &sourceCoords, char *global);

} // namespace par::session

#endif // PAR_RUNTIME_SESSION_LAYOUT_H
