//===- Report.h - The planner's output ---------------------------*- C++ -*-===//
//
// What par-plan prints: the `predicted:` line scripts read, one
// configuration's breakdown by phase and memory part, the table of the best
// configurations, and a configuration as par-compile options.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PLANNING_REPORT_H
#define PAR_PLANNING_REPORT_H

#include "par/Planning/CostModel.h"

#include "llvm/Support/raw_ostream.h"

#include <vector>

namespace mlir::par::planning {

struct Machine;
struct ModelProfile;

/// The model as the planner sees it (one paragraph).
void printProfile(llvm::raw_ostream &os, const ModelProfile &model);

/// `predicted: step S s, T TFLOP/s per device, MFU F%, memory M GiB per
/// device`.
void printPredictedLine(llvm::raw_ostream &os, const Estimate &e);

/// The step by phase, memory by part, throughput, and the options.
void printBreakdown(llvm::raw_ostream &os, const Estimate &e,
                    const Machine &machine);

/// One row per estimate, best first, numbered from 1.
void printTable(llvm::raw_ostream &os, const std::vector<Estimate> &rows);

/// The `n` most expensive of `kernels` (per micro-batch, one device).
void printKernels(llvm::raw_ostream &os, std::vector<KernelTime> kernels,
                  int n);

/// The mesh and par-compile's --options for `e`'s configuration.
void printCompileOptions(llvm::raw_ostream &os, const Estimate &e);

} // namespace mlir::par::planning

#endif // PAR_PLANNING_REPORT_H
