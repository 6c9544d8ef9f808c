//===- FastMath.cpp - par-fast-math ---------------------------------------===//
//
// The two licences par's CPU kernels take with float arithmetic, each its
// own option (docs/RationaleCPUKernels.md):
//  * reassociate: the combiners of linalg reductions get `reassoc`, so
//    LLVM vectorises the reduction loops (partial sums in vector lanes)
//    as PyTorch's kernels do;
//  * approximate: exp and log become MLIR's polynomial approximations
//    (tanh first expands to exp), straight-line arithmetic that vectorises,
//    instead of one libm call per element.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "par-fast-math"

namespace mlir::par {
#define GEN_PASS_DEF_FASTMATH
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct FastMathPass : public mlir::par::impl::FastMathBase<FastMathPass> {
  using FastMathBase::FastMathBase;

  void runOnOperation() override {
    if (reassociate) {
      auto flags = arith::FastMathFlags::reassoc;
      getOperation().walk([&](linalg::LinalgOp op) {
        if (op.getNumReductionLoops() == 0)
          return;
        op->walk([&](arith::ArithFastMathInterface fm) {
          // Only float arithmetic has these flags (the interface also
          // covers ops on vectors of floats).
          Operation *inner = fm.getOperation();
          if (!llvm::all_of(inner->getResultTypes(), [](Type t) {
                return isa<FloatType>(getElementTypeOrSelf(t));
              }))
            return;
          arith::FastMathFlagsAttr old = fm.getFastMathFlagsAttr();
          arith::FastMathFlags now =
              old ? old.getValue() | flags : flags;
          fm->setAttr(fm.getFastMathAttrName(),
                      arith::FastMathFlagsAttr::get(&getContext(), now));
        });
      });
    }
    if (approximate) {
      RewritePatternSet expand(&getContext());
      math::populateExpansionPatterns(expand, {"tanh"});
      if (failed(applyPatternsGreedily(getOperation(), std::move(expand))))
        return signalPassFailure();
      RewritePatternSet patterns(&getContext());
      populateMathPolynomialApproximationPatterns(
          patterns, [](StringRef name) {
            return name == math::ExpOp::getOperationName() ||
                   name == math::LogOp::getOperationName();
          });
      if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
        return signalPassFailure();
    }
  }
};
} // namespace
