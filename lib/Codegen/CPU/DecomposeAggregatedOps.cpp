//===- DecomposeAggregatedOps.cpp - par-decompose-aggregated-ops ----------===//

#include "par/Codegen/CPU/Passes.h"

#include "mlir/IR/PatternMatch.h"

#define DEBUG_TYPE "par-decompose-aggregated-ops"

namespace mlir::par {
#define GEN_PASS_DEF_DECOMPOSEAGGREGATEDOPS
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct DecomposeAggregatedOpsPass
    : public mlir::par::impl::DecomposeAggregatedOpsBase<
          DecomposeAggregatedOpsPass> {
  void runOnOperation() override {
    // Collect first, then rewrite (the walk must not see new ops).
    SmallVector<linalg::AggregatedOpInterface> ops;
    getOperation().walk(
        [&](linalg::AggregatedOpInterface op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::AggregatedOpInterface op : ops) {
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> values = op.decomposeOperation(rewriter);
      if (failed(values)) {
        op->emitOpError("cannot be decomposed into structured ops");
        return signalPassFailure();
      }
      rewriter.replaceOp(op, *values);
    }
  }
};
} // namespace
