//===- FuseElementwise.cpp - par-fuse-elementwise -------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "par-fuse-elementwise"

namespace mlir::par {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "par/Dialect/Par/Transforms/Passes.h.inc"
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
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      return producer && isa<linalg::GenericOp>(producer) &&
             isa<linalg::GenericOp>(fused->getOwner()) &&
             producer->hasOneUse();
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
