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

struct FoldUnitDimsPass
    : public mlir::par::impl::FoldUnitDimsBase<FoldUnitDimsPass> {
  void runOnOperation() override {
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
    if (failed(applyPatternsKeepingStage(getOperation(), frozen))) {
      getOperation().emitOpError("par-fold-unit-dims did not converge");
      return signalPassFailure();
    }
  }
};

} // namespace
