//===- FuseElementwise.cpp - par-fuse-elementwise -------------------------===//

#include "par/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "par-fuse-elementwise"

namespace mlir::par {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct FuseElementwisePass
    : public mlir::par::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Only generic-into-generic, and only when the producer's value is not
    // needed elsewhere (otherwise fusion duplicates its work).
    // Each producer element must be computed once: the consumer must read
    // the fused operand through a permutation of all its loops (no extra
    // loops, e.g. a contraction, that would recompute it).
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
      auto consumer = dyn_cast<linalg::GenericOp>(fused->getOwner());
      if (!producer || !consumer || !producer->hasOneUse())
        return false;
      return consumer.getMatchingIndexingMap(fused).isPermutation();
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
