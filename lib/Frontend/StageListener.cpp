//===- StageListener.cpp - Rewrites that keep par.stage -------------------===//
//
// See StageListener.h.
//
//===----------------------------------------------------------------------===//

#include "StageListener.h"
#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::par;

namespace {

/// Stamps `stage` on every op inserted into `block` (not on the ops of the
/// new ops' regions), and remembers erased ops.
struct StageStamp : public RewriterBase::Listener {
  Block *block = nullptr;
  Attribute stage;
  DenseSet<Operation *> erased;

  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    if (stage && op->getBlock() == block &&
        !op->hasAttr(ParDialect::kStageAttrName))
      op->setAttr(ParDialect::kStageAttrName, stage);
  }
  void notifyOperationErased(Operation *op) override { erased.insert(op); }
};

/// No region simplification, and folding only if asked, so that what the
/// patterns do not match stays as it was.
GreedyRewriteConfig quietConfig(bool fold) {
  GreedyRewriteConfig config;
  config.enableFolding(fold);
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  return config;
}

} // namespace

LogicalResult
mlir::par::applyPatternsKeepingStage(Operation *fn,
                                     const FrozenRewritePatternSet &patterns,
                                     bool fold) {
  SmallVector<Operation *> pinned;
  fn->walk([&](Operation *op) {
    if (op != fn && op->hasAttr(ParDialect::kStageAttrName))
      pinned.push_back(op);
  });
  StageStamp stamp;
  for (Operation *op : pinned) {
    if (stamp.erased.contains(op))
      continue;
    stamp.block = op->getBlock();
    stamp.stage = op->getAttr(ParDialect::kStageAttrName);
    GreedyRewriteConfig config = quietConfig(fold);
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    config.setListener(&stamp);
    // Not converging on one op is no error: the whole-function run below
    // finishes the work.
    (void)applyOpPatternsGreedily(ArrayRef<Operation *>{op}, patterns,
                                  config);
  }
  return applyPatternsGreedily(fn, patterns, quietConfig(fold));
}
