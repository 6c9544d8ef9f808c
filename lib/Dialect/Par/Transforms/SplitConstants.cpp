//===- SplitConstants.cpp - par-split-constants ---------------------------===//
//
// Clones cheap tensor producers per use so that each use can take its own
// sharding (see Passes.td). Runs producers before consumers in reverse, so a
// fill cloned per use also gets its own tensor.empty.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

#define DEBUG_TYPE "par-split-constants"

namespace mlir::par {
#define GEN_PASS_DEF_SPLITCONSTANTS
#include "par/Dialect/Par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// True for ops that produce a tensor from nothing but constants/scalars.
bool isCheapProducer(Operation *op) {
  if (op->getNumResults() != 1 ||
      !isa<RankedTensorType>(op->getResult(0).getType()))
    return false;
  if (isa<tensor::EmptyOp, tensor::SplatOp>(op))
    return true;
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    return dense && dense.isSplat();
  }
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    Operation *dest = fill.getOutputs()[0].getDefiningOp();
    return dest && isCheapProducer(dest);
  }
  return false;
}

struct SplitConstantsPass
    : public mlir::par::impl::SplitConstantsBase<SplitConstantsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if (isCheapProducer(op))
        candidates.push_back(op);
    });
    // Consumers (fills) first, so the empties they clone are split next.
    for (Operation *op : llvm::reverse(candidates)) {
      Value v = op->getResult(0);
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : v.getUses())
        uses.push_back(&use);
      if (uses.size() <= 1)
        continue;
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(op);
        Operation *clone = b.clone(*op);
        use->set(clone->getResult(0));
        ++numClones;
      }
    }
    // Fills cloned above share their destination; split those too.
    SmallVector<Operation *> dests;
    getOperation().walk([&](linalg::FillOp fill) {
      if (Operation *d = fill.getOutputs()[0].getDefiningOp())
        if (isCheapProducer(d) && !d->getResult(0).hasOneUse())
          dests.push_back(d);
    });
    for (Operation *op : dests) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : op->getResult(0).getUses())
        uses.push_back(&use);
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(op);
        use->set(b.clone(*op)->getResult(0));
        ++numClones;
      }
    }
  }
};
} // namespace
