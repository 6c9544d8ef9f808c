//===- CollectivesToRuntime.h - Buffer collectives to calls ----*- C++ -*-===//
//
// Patterns turning par's buffer-form collectives (par.buffer_*) into calls
// of the runtime's kernel ABI; the par-collectives-to-runtime pass applies
// them. A GPU target uses the same patterns: the kernels take addresses.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CONVERSION_PARTORUNTIME_COLLECTIVESTORUNTIME_H
#define PAR_CONVERSION_PARTORUNTIME_COLLECTIVESTORUNTIME_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::par {

void populateCollectivesToRuntimePatterns(RewritePatternSet &patterns);

} // namespace mlir::par

#endif // PAR_CONVERSION_PARTORUNTIME_COLLECTIVESTORUNTIME_H
