//===- DeviceMemory.cpp - par-gpu-device-memory ---------------------------===//
//
// Host code of a cuda program only orchestrates: every buffer it creates is
// device memory, and it never dereferences one (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/GPU/Passes.h"

#include "llvm/ADT/TypeSwitch.h"

#define DEBUG_TYPE "par-gpu-device-memory"

namespace mlir::par {
#define GEN_PASS_DEF_DEVICEMEMORY
#include "par/Codegen/GPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The function -convert-bufferization-to-memref generates for
/// deallocations whose aliasing is only known at run time.
constexpr llvm::StringLiteral kDeallocHelper = "dealloc_helper";

bool onHost(Operation *op) {
  return !op->getParentOfType<gpu::LaunchOp>() &&
         !op->getParentOfType<gpu::GPUModuleOp>();
}

/// A shape operand of memref.reshape: host metadata, written by the host
/// and read by the reshape's descriptor arithmetic, never by a kernel.
/// Also the tables bufferization's deallocation lowering passes to its
/// helper function (pointers as index, ownership as i1): written by the
/// host, read by the helper on the host.
bool isShapeBuffer(Value buffer) {
  return llvm::all_of(buffer.getUsers(), [&](Operation *user) {
    if (auto store = dyn_cast<memref::StoreOp>(user))
      return store.getMemRef() == buffer && onHost(user);
    if (auto reshape = dyn_cast<memref::ReshapeOp>(user))
      return reshape.getShape() == buffer;
    if (auto cast = dyn_cast<memref::CastOp>(user))
      return isShapeBuffer(cast.getResult());
    if (auto call = dyn_cast<func::CallOp>(user))
      return call.getCallee().starts_with(kDeallocHelper);
    return isa<memref::DeallocOp>(user);
  });
}

struct DeviceMemoryPass
    : public mlir::par::impl::DeviceMemoryBase<DeviceMemoryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> work;
    module.walk([&](Operation *op) {
      // The deallocation helper compares pointers in host tables.
      if (auto fn = op->getParentOfType<func::FuncOp>();
          fn && fn.getName().starts_with(kDeallocHelper))
        return;
      if (onHost(op) &&
          isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
              memref::GetGlobalOp, memref::LoadOp, memref::StoreOp,
              memref::CopyOp>(op))
        work.push_back(op);
    });
    // Host metadata stays host memory, with its loads, stores and frees:
    // buffers of `index` (the deallocation helper's pointer tables; no
    // tensor of a model has index elements) and reshape shape operands.
    llvm::SmallPtrSet<Operation *, 8> shapeBuffers;
    for (Operation *op : work)
      if (isa<memref::AllocOp, memref::AllocaOp>(op) &&
          isShapeBuffer(op->getResult(0)))
        shapeBuffers.insert(op);
    auto hostMeta = [&](Value buffer) {
      auto type = dyn_cast<MemRefType>(buffer.getType());
      if (type && type.getElementType().isIndex())
        return true;
      Operation *def = buffer.getDefiningOp();
      return def && shapeBuffers.contains(def);
    };
    for (Operation *op : work) {
      Value buffer =
          TypeSwitch<Operation *, Value>(op)
              .Case<memref::AllocOp, memref::AllocaOp>(
                  [](Operation *o) { return o->getResult(0); })
              .Case([](memref::LoadOp o) { return o.getMemRef(); })
              .Case([](memref::StoreOp o) { return o.getMemRef(); })
              .Case([](memref::DeallocOp o) { return o.getMemref(); })
              .Default([](Operation *) { return Value(); });
      if (buffer && hostMeta(buffer))
        continue;
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
        // A constant's device copy for the call: made at the function's
        // entry (a global needs nothing defined before it), filled from
        // the host copy, freed at every return.
        auto type = cast<MemRefType>(global.getType());
        if (!type.getLayout().isIdentity()) {
          op->emitError("par-gpu-device-memory: a constant with a strided "
                        "layout has no device copy");
          return signalPassFailure();
        }
        auto fn = op->getParentOfType<func::FuncOp>();
        OpBuilder eb(&fn.getBody().front(), fn.getBody().front().begin());
        Value host = memref::GetGlobalOp::create(eb, loc, type,
                                                 global.getNameAttr());
        auto alloc = gpu::AllocOp::create(eb, loc, type, Type(), ValueRange(),
                                          ValueRange(), ValueRange());
        gpu::MemcpyOp::create(eb, loc, Type(), ValueRange(), alloc.getMemref(),
                              host);
        global.getResult().replaceAllUsesWith(alloc.getMemref());
        op->erase();
        fn.walk([&](func::ReturnOp ret) {
          OpBuilder rb(ret);
          gpu::DeallocOp::create(rb, loc, Type(), ValueRange(),
                                 alloc.getMemref());
        });
        continue;
      }
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        // A value the host decides on (a loop bound, a branch condition):
        // one thread copies the element into a one-element device buffer,
        // which is copied to the host (gpu-async-region synchronizes the
        // stream before the host reads it).
        Type elem = load.getType();
        auto one = MemRefType::get({1}, elem);
        auto dev = gpu::AllocOp::create(b, loc, one, Type(), ValueRange(),
                                        ValueRange(), ValueRange());
        Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
        auto launch =
            gpu::LaunchOp::create(b, loc, c1, c1, c1, c1, c1, c1);
        {
          OpBuilder kb(&launch.getBody().front(),
                       launch.getBody().front().end());
          Value v = memref::LoadOp::create(kb, loc, load.getMemRef(),
                                           load.getIndices());
          Value c0 = arith::ConstantIndexOp::create(kb, loc, 0);
          memref::StoreOp::create(kb, loc, v, dev.getMemref(), c0);
          gpu::TerminatorOp::create(kb, loc);
        }
        auto fn = op->getParentOfType<func::FuncOp>();
        OpBuilder eb(&fn.getBody().front(), fn.getBody().front().begin());
        Value host = memref::AllocaOp::create(eb, loc, one);
        gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), host,
                              dev.getMemref());
        Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
        Value v = memref::LoadOp::create(b, loc, host, c0);
        gpu::DeallocOp::create(b, loc, Type(), ValueRange(), dev.getMemref());
        load.replaceAllUsesWith(v);
        op->erase();
        continue;
      }
      // What remains writes a buffer on the host.
      op->emitError("par-gpu-device-memory: '")
          << op->getName()
          << "' writes device memory on the host; the cuda target has no "
             "lowering for it";
      return signalPassFailure();
    }
  }
};

} // namespace
