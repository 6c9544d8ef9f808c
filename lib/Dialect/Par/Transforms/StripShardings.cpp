//===- StripShardings.cpp - par-strip-shardings ---------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

#define DEBUG_TYPE "par-strip-shardings"

namespace mlir::par {
#define GEN_PASS_DEF_STRIPSHARDINGS
#include "par/Dialect/Par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct StripShardingsPass
    : public mlir::par::impl::StripShardingsBase<StripShardingsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> toErase;
    module.walk([&](Operation *op) {
      if (isa<ShardingConstraintOp, ReshardOp>(op)) {
        op->getResult(0).replaceAllUsesWith(op->getOperand(0));
        toErase.push_back(op);
      } else if (auto af = dyn_cast<AllFiniteOp>(op)) {
        // On one device the check is global.
        af.removeMeshAttr();
      } else if (isa<MeshOp>(op)) {
        toErase.push_back(op);
      } else if (auto fn = dyn_cast<FunctionOpInterface>(op)) {
        for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
          fn.removeArgAttr(i, ParDialect::kShardingAttrName);
          fn.removeArgAttr(i, ParDialect::kGlobalTypeAttrName);
        }
        for (unsigned i = 0; i < fn.getNumResults(); ++i) {
          fn.removeResultAttr(
              i, StringAttr::get(op->getContext(), ParDialect::kShardingAttrName));
          fn.removeResultAttr(
              i, StringAttr::get(op->getContext(), ParDialect::kGlobalTypeAttrName));
        }
      } else {
        op->removeAttr(ParDialect::kShardingAttrName);
      }
    });
    for (Operation *op : toErase)
      op->erase();
    // Collectives have no meaning without a mesh.
    WalkResult r = module.walk([&](Operation *op) {
      if (isa<AllReduceOp, BucketAllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp,
              BroadcastOp, AllSliceOp, SendOp, RecvOp>(op)) {
        op->emitOpError("cannot be stripped: the program is already "
                        "partitioned");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
