//===- Search.h - The configurations worth running --------------*- C++ -*-===//
//
// Enumerates every configuration par can compile for a device count and a
// global batch (dp x tp x pp factorisations, micro-batch sizes, virtual
// stages, schedules, ZeRO stages, recomputation, sequence parallelism),
// prices each with the cost model and keeps those that fit in memory,
// fastest first.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PLANNING_SEARCH_H
#define PAR_PLANNING_SEARCH_H

#include "par/Planning/CostModel.h"

#include <vector>

namespace mlir::par::planning {

struct SearchOptions {
  int64_t gpus = 1;
  int64_t globalBatch = 1;
  std::string precision = "bf16";
  /// Largest micro-batch size tried (in samples).
  int64_t maxMicroBatch = 16;
  /// Fixed values (0 / empty: searched).
  int64_t tp = 0, pp = 0;
};

struct SearchResult {
  std::vector<Estimate> fitting; // fastest first
  int64_t evaluated = 0;         // configurations priced
  int64_t rejected = 0;          // of which did not fit in memory
  /// The smallest memory among those that did not fit (for the message
  /// when nothing fits).
  double smallestMemory = 0;
};

SearchResult searchConfigurations(const ModelProfile &model,
                                  const Machine &machine,
                                  const SearchOptions &options);

} // namespace mlir::par::planning

#endif // PAR_PLANNING_SEARCH_H
