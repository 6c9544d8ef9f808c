//===- DecomposePad.cpp - par-decompose-pad -------------------------------===//
//
// tensor.pad with a constant value as linalg.fill + tensor.insert_slice
// (see Passes.td): both have sharding rules and adjoints.
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"
#include "StageListener.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"

#define DEBUG_TYPE "par-decompose-pad"

namespace mlir::par {
#define GEN_PASS_DEF_DECOMPOSEPAD
#include "par/Frontend/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// Upstream's decomposition, for a pad with a constant value only: the
/// other case would become tensor.generate, which par cannot shard either.
struct DecomposeConstantPad : public linalg::DecomposePadOpPattern {
  using DecomposePadOpPattern::DecomposePadOpPattern;

  LogicalResult matchAndRewrite(tensor::PadOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getConstantPaddingValue())
      return rewriter.notifyMatchFailure(op, "padding value is not uniform");
    return DecomposePadOpPattern::matchAndRewrite(op, rewriter);
  }
};

struct DecomposePadPass
    : public mlir::par::impl::DecomposePadBase<DecomposePadPass> {
  void runOnOperation() override {
    if (getOperation().walk([](tensor::PadOp) { return WalkResult::interrupt(); })
            .wasInterrupted() == false)
      return; // Nothing to do: leave the function as it is.
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeConstantPad>(&getContext());
    FrozenRewritePatternSet frozen(std::move(patterns));
    if (failed(applyPatternsKeepingStage(getOperation(), frozen)))
      return signalPassFailure();
  }
};

} // namespace
