//===- AsyncCollectives.cpp - par-async-collectives -----------------------===//
//
// Splits each buffer bucket all-reduce (optionally each plain buffer
// all-reduce) into par.buffer_all_reduce_start at its place and
// par.buffer_wait as late as the buffers allow, so that the compute in
// between overlaps the transfer.
//
// The wait goes right before the first later op of the same block that
//   - may write an input or read or write an output (including through
//     ops nested in its regions), by the memory effects it declares;
//   - has unknown memory effects (func.call, anything without
//     MemoryEffectOpInterface or RecursiveMemoryEffects), or an effect on
//     memory without a value (writes "somewhere"); or
//   - is the block's terminator (return, yield: the buffers escape).
// Reading an input meanwhile is allowed (the runtime only reads inputs).
//
// Aliasing is decided on roots (par/Communication/InFlight.h).
//
// Runs after one-shot bufferization (the buffer forms exist) and before the
// buffer deallocation pipeline, whose deallocations then follow the wait
// (the wait reads and writes the same buffers).
//
//===----------------------------------------------------------------------===//

#include "par/Communication/InFlight.h"
#include "par/Communication/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#define DEBUG_TYPE "par-async-collectives"

namespace mlir::par {
#define GEN_PASS_DEF_ASYNCCOLLECTIVES
#include "par/Communication/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

struct AsyncCollectivesPass
    : public mlir::par::impl::AsyncCollectivesBase<AsyncCollectivesPass> {
  using AsyncCollectivesBase::AsyncCollectivesBase;

  void runOnOperation() override {
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if (isa<BufferBucketAllReduceOp>(op) ||
          (allReduces && isa<BufferAllReduceOp>(op)))
        candidates.push_back(op);
    });
    for (Operation *op : candidates)
      split(op);
  }

  void split(Operation *op) {
    ValueRange ins, outs;
    FlatSymbolRefAttr mesh;
    ArrayAttr axes;
    ReductionKindAttr kind;
    if (auto b = dyn_cast<BufferBucketAllReduceOp>(op)) {
      ins = b.getInputs();
      outs = b.getOutputs();
      mesh = b.getMeshAttr();
      axes = b.getAxes();
      kind = b.getKindAttr();
    } else {
      auto a = cast<BufferAllReduceOp>(op);
      ins = a->getOperands().take_front();
      outs = a->getOperands().drop_front();
      mesh = a.getMeshAttr();
      axes = a.getAxes();
      kind = a.getKindAttr();
    }
    InFlight flight(ins, outs);

    // The block's terminator conflicts, so there is always a first one.
    Operation *waitBefore = op->getNextNode();
    while (!flight.conflicts(waitBefore))
      waitBefore = waitBefore->getNextNode();

    // Nothing to overlap (only allocations, views and constants before the
    // wait): the blocking form is the cheaper call.
    bool work = always;
    for (Operation *x = op->getNextNode(); x != waitBefore && !work;
         x = x->getNextNode())
      work = !isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
                  ViewLikeOpInterface>(x) &&
             !x->hasTrait<OpTrait::ConstantLike>();
    if (!work) {
      ++numKeptBlocking;
      return;
    }
    OpBuilder b(op);
    SmallVector<Value> inList(ins), outList(outs);
    auto start = BufferAllReduceStartOp::create(
        b, op->getLoc(), b.getI64Type(), inList, outList, mesh, axes, kind);
    b.setInsertionPoint(waitBefore);
    BufferWaitOp::create(b, op->getLoc(), start.getRequest(), inList,
                         outList);
    ++numStarted;
    if (waitBefore != op->getNextNode())
      ++numOverlapped;
    op->erase();
  }
};

} // namespace
