//===- FoldUnitDims.cpp - par-fold-unit-dims ------------------------------===//
//
// Upstream's unit-extent folding (the patterns of
// linalg-fold-unit-extent-dims) with par.stage kept (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"
#include "StageListener.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"

#define DEBUG_TYPE "par-fold-unit-dims"

namespace mlir::par {
#define GEN_PASS_DEF_FOLDUNITDIMS
#include "par/Frontend/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// Whether a linalg op of `fn` has a unit-extent loop or operand dim.
bool hasUnitDims(func::FuncOp fn) {
  return fn
      .walk([](linalg::LinalgOp op) {
        for (int64_t range : op.getStaticLoopRanges())
          if (range == 1)
            return WalkResult::interrupt();
        for (Value v : op->getOperands())
          if (auto t = dyn_cast<RankedTensorType>(v.getType()))
            if (llvm::is_contained(t.getShape(), 1))
              return WalkResult::interrupt();
        return WalkResult::advance();
      })
      .wasInterrupted();
}

struct FoldUnitDimsPass
    : public mlir::par::impl::FoldUnitDimsBase<FoldUnitDimsPass> {
  void runOnOperation() override {
    if (!hasUnitDims(getOperation()))
      return; // Nothing to do: leave the function as it is.
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    // Reshapes, not rank-reducing slices: expand/collapse_shape have
    // sharding rules that keep a dimension's split through them.
    linalg::ControlDropUnitDims options;
    options.rankReductionStrategy = linalg::ControlDropUnitDims::
        RankReductionStrategy::ReassociativeReshape;
    linalg::populateFoldUnitExtentDimsPatterns(patterns, options);
    linalg::populateMoveInitOperandsToInputPattern(patterns);
    // The reshapes folding leaves around fills and empties (a keepdim sum's
    // init as collapse_shape(fill)) become fills of the folded shape: the
    // partitioner recognises a fill of the neutral value as a split
    // reduction's valid init.
    linalg::FillOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::populateFoldTensorEmptyPatterns(patterns);
    FrozenRewritePatternSet frozen(std::move(patterns));
    // Folding on: the reshapes the patterns leave (collapse of an expand)
    // fold away.
    if (failed(applyPatternsKeepingStage(getOperation(), frozen,
                                         /*fold=*/true))) {
      getOperation().emitOpError("par-fold-unit-dims did not converge");
      return signalPassFailure();
    }
  }
};

} // namespace
