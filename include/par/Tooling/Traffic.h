//===- Traffic.h - Measured traffic and gradient compression ----*- C++ -*-===//
//
// What par-run reports after training about communication: the bytes per
// step and rank the runtime measured (its ring-formula counters,
// par_rt_context_kernel_stats), broken down by kernel; for a program whose
// train step or stage updates compress their gradients
// (par-compress-gradients, the manifest's "compression"), what the
// compressed exchanges send against the fp32 ring all-reduce they replace
// and what the step would send without them; and the global L2 norm of the
// error-feedback buffers (--error-norm). Each line is printed by rank 0 in
// one fixed format (see Traffic.cpp), for tests and scripts to parse.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_TRAFFIC_H
#define PAR_TOOLING_TRAFFIC_H

#include "par/Tooling/Function.h"

#include <string>
#include <vector>

namespace par::tooling {

/// The gradient compression of the functions one rank runs each step (the
/// train step, or each pipeline stage update it owns), summed.
struct CompressionTotals {
  std::vector<std::string> methods; // distinct, in the order added
  double compressedBytes = 0, uncompressedBytes = 0;
  int64_t functions = 0; // how many of them compress

  /// Adds `f`'s compression (nothing if it has none).
  void add(const Function &f);
};

/// After `steps` training steps (the statistics cover exactly those):
/// gathers every rank's per-kernel statistics and compression on rank 0,
/// which prints the bytes per step of the rank that sent the most, by
/// kernel, and, if that rank (or else the busiest rank that does)
/// compresses gradients, the compression line. Collective.
void reportTraffic(par_rt_context_t *ctx, int64_t steps,
                   const CompressionTotals &mine, int64_t rank,
                   int64_t world);

/// One error-feedback buffer's block on this rank: input `input` of `f`,
/// its local block `local`. `skipAxis` is a mesh axis whose ranks hold
/// different buffers of the same function (a pipeline's axis: each
/// pipeline rank runs its own stages), -1 if none.
struct ErrorFeedbackBlock {
  const Function *f = nullptr;
  size_t input = 0;
  const Buffer *local = nullptr;
  int64_t skipAxis = -1;
};

/// --error-norm: the L2 norm over every error-feedback buffer of the job,
/// sqrt of the sum over ranks of each rank's local sum of squares (a block
/// replicated over a mesh axis counts once); rank 0 prints it with
/// `buffers`, how many buffers the program has. Collective.
void reportErrorFeedbackNorm(par_rt_context_t *ctx,
                             const std::vector<ErrorFeedbackBlock> &mine,
                             int64_t buffers, int64_t rank, int64_t world);

} // namespace par::tooling

#endif // PAR_TOOLING_TRAFFIC_H
