//===- VerifySPMD.cpp - par-verify-spmd -----------------------------------===//
//
// The contract at the end of the partitioning stage: no annotation ops are
// left, and every function argument/result that carries a sharding has the
// local type of its global type under that sharding.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

#define DEBUG_TYPE "par-verify-spmd"

namespace mlir::par {
#define GEN_PASS_DEF_VERIFYSPMD
#include "par/Dialect/Par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct VerifySPMDPass : public mlir::par::impl::VerifySPMDBase<VerifySPMDPass> {
  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](Operation *op) {
      if (isa<ShardingConstraintOp, ReshardOp>(op)) {
        op->emitOpError("is left after partitioning");
        ok = false;
      }
    });
    getOperation().walk([&](FunctionOpInterface fn) {
      auto check = [&](Type local, ShardingAttr s, TypeAttr global,
                       StringRef what, unsigned i) {
        if (!s || !global)
          return;
        MeshOp mesh = lookupMesh(fn, s.getMesh());
        if (!mesh) {
          ok = false;
          return;
        }
        FailureOr<RankedTensorType> expected = getLocalType(
            [&]() { return fn.emitOpError() << what << " #" << i << ": "; },
            cast<RankedTensorType>(global.getValue()), s, mesh);
        if (failed(expected)) {
          ok = false;
          return;
        }
        if (*expected != local) {
          fn.emitOpError() << what << " #" << i << " has type " << local
                           << " but its sharding " << s << " of "
                           << global.getValue() << " needs " << *expected;
          ok = false;
        }
      };
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        check(fn.getArgumentTypes()[i],
              fn.getArgAttrOfType<ShardingAttr>(i, ParDialect::kShardingAttrName),
              fn.getArgAttrOfType<TypeAttr>(i, ParDialect::kGlobalTypeAttrName),
              "argument", i);
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        check(fn.getResultTypes()[i],
              fn.getResultAttrOfType<ShardingAttr>(i, ParDialect::kShardingAttrName),
              fn.getResultAttrOfType<TypeAttr>(i, ParDialect::kGlobalTypeAttrName),
              "result", i);
    });
    if (!ok)
      signalPassFailure();
  }
};
} // namespace
