//===- StreamOrder.cpp - par-gpu-stream-order -----------------------------===//
//
// No host synchronization inside a cuda function (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/GPU/Passes.h"

#define DEBUG_TYPE "par-gpu-stream-order"

namespace mlir::par {
#define GEN_PASS_DEF_STREAMORDER
#include "par/Codegen/GPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

struct StreamOrderPass
    : public mlir::par::impl::StreamOrderBase<StreamOrderPass> {
  void runOnOperation() override {
    SmallVector<gpu::WaitOp> blocking;
    getOperation().walk([&](gpu::WaitOp wait) {
      if (wait.getAsyncToken())
        return; // `gpu.wait async`: the start of a chain, not a sync
      // Only before a call: the runtime's kernels (ordered by the streams)
      // or another function of the program (which starts its own chain on
      // the same stream). A host read of a copied value keeps its wait.
      auto call = dyn_cast_or_null<func::CallOp>(wait->getNextNode());
      if (call)
        blocking.push_back(wait);
    });
    for (gpu::WaitOp wait : blocking)
      wait.erase();
  }
};

} // namespace
