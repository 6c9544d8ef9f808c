//===- DeviceMemory.cpp - par-gpu-device-memory ---------------------------===//
//
// Host code of a cuda program only orchestrates: every buffer it creates is
// device memory, and it never dereferences one (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/GPU/Passes.h"

#define DEBUG_TYPE "par-gpu-device-memory"

namespace mlir::par {
#define GEN_PASS_DEF_DEVICEMEMORY
#include "par/Codegen/GPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

bool onHost(Operation *op) {
  return !op->getParentOfType<gpu::LaunchOp>() &&
         !op->getParentOfType<gpu::GPUModuleOp>();
}

struct DeviceMemoryPass
    : public mlir::par::impl::DeviceMemoryBase<DeviceMemoryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> work;
    module.walk([&](Operation *op) {
      if (onHost(op) &&
          isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
              memref::GetGlobalOp, memref::LoadOp, memref::StoreOp,
              memref::CopyOp>(op))
        work.push_back(op);
    });
    for (Operation *op : work) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (isa<memref::AllocOp, memref::AllocaOp>(op)) {
        auto type = cast<MemRefType>(op->getResult(0).getType());
        auto alloc = gpu::AllocOp::create(
            b, loc, type, /*asyncToken=*/Type(), ValueRange(),
            op->getOperands(), ValueRange());
        // An alloca lives until its function returns: free it there.
        if (isa<memref::AllocaOp>(op)) {
          Region *scope = op->getParentRegion();
          if (!isa<func::FuncOp>(scope->getParentOp())) {
            op->emitError("par-gpu-device-memory: a stack buffer inside "
                          "control flow has no device form");
            return signalPassFailure();
          }
          for (Block &block : *scope)
            if (auto ret = dyn_cast<func::ReturnOp>(block.getTerminator())) {
              OpBuilder rb(ret);
              gpu::DeallocOp::create(rb, loc, Type(), ValueRange(),
                                     alloc.getMemref());
            }
        }
        op->getResult(0).replaceAllUsesWith(alloc.getMemref());
        op->erase();
        continue;
      }
      if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(b, loc, Type(), ValueRange(),
                               dealloc.getMemref());
        op->erase();
        continue;
      }
      if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
        // A constant's device copy for this call: allocated, filled from
        // the host copy, freed when the function returns.
        auto type = cast<MemRefType>(global.getType());
        if (!type.getLayout().isIdentity()) {
          op->emitError("par-gpu-device-memory: a constant with a strided "
                        "layout has no device copy");
          return signalPassFailure();
        }
        b.setInsertionPointAfter(op);
        auto alloc = gpu::AllocOp::create(b, loc, type, Type(), ValueRange(),
                                          ValueRange(), ValueRange());
        global.getResult().replaceAllUsesExcept(alloc.getMemref(), {});
        gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), alloc.getMemref(),
                              global.getResult());
        auto fn = op->getParentOfType<func::FuncOp>();
        fn.walk([&](func::ReturnOp ret) {
          OpBuilder rb(ret);
          gpu::DeallocOp::create(rb, loc, Type(), ValueRange(),
                                 alloc.getMemref());
        });
        continue;
      }
      // What remains reads or writes a buffer on the host.
      op->emitError("par-gpu-device-memory: '")
          << op->getName()
          << "' reads or writes device memory on the host; the cuda target "
             "has no lowering for it (a value the host must decide on, e.g. "
             "a loop bound or a branch condition computed on the device)";
      return signalPassFailure();
    }
  }
};

} // namespace
