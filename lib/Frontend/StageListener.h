//===- StageListener.h - Rewrites that keep par.stage -----------*- C++ -*-===//
//
// The frontend passes rewrite ops of a forward whose ops may be pinned to a
// pipeline stage (`par.stage = k`). A rewrite must leave the pin on the ops
// that replace the pinned op; these helpers run patterns so that it does.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_FRONTEND_STAGELISTENER_H
#define PAR_FRONTEND_STAGELISTENER_H

#include "mlir/IR/PatternMatch.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"

namespace mlir::par {

/// Applies `patterns` greedily to the ops of `fn`. Each op carrying
/// `par.stage` is rewritten on its own first, and every op a rewrite of it
/// inserts into the function's body gets the same `par.stage`; then the
/// patterns run over the whole function (e.g. to fold the reshapes left
/// behind). No region simplification; ops are folded only with `fold`.
LogicalResult applyPatternsKeepingStage(Operation *fn,
                                        const FrozenRewritePatternSet &patterns,
                                        bool fold = false);

} // namespace mlir::par

#endif // PAR_FRONTEND_STAGELISTENER_H
