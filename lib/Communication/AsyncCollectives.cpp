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
// Aliasing is decided on roots: a memref is traced through view-like ops
// (subview, cast, reshapes, ...) to the value they view. A root is a fresh
// allocation (memref.alloc/alloca: aliases only itself), an argument of the
// function (may alias any other argument) or unknown (a loop's iter_arg, a
// call's result, a global: may alias anything).
//
// Runs after one-shot bufferization (the buffer forms exist) and before the
// buffer deallocation pipeline, whose deallocations then follow the wait
// (the wait reads and writes the same buffers).
//
//===----------------------------------------------------------------------===//

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

/// Where a buffer comes from, for aliasing.
struct Root {
  enum class Kind { Allocation, Argument, Unknown };
  Value value;
  Kind kind;
};

Root rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>()) {
    // Only views whose result is the view (not, e.g., a subview's offsets).
    if (view->getNumResults() != 1 || view.getViewSource() == v)
      break;
    v = view.getViewSource();
  }
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Block *owner = arg.getOwner();
    bool entry = owner->isEntryBlock() &&
                 isa<FunctionOpInterface>(owner->getParentOp());
    return {v, entry ? Root::Kind::Argument : Root::Kind::Unknown};
  }
  if (isa<memref::AllocOp, memref::AllocaOp>(v.getDefiningOp()))
    return {v, Root::Kind::Allocation};
  return {v, Root::Kind::Unknown};
}

bool mayAlias(const Root &a, const Root &b) {
  if (a.value == b.value)
    return true;
  if (a.kind == Root::Kind::Unknown || b.kind == Root::Kind::Unknown)
    return true;
  // Two arguments may be the same buffer; an allocation is fresh.
  return a.kind == Root::Kind::Argument && b.kind == Root::Kind::Argument;
}

bool mayAliasAny(const Root &r, ArrayRef<Root> roots) {
  return llvm::any_of(roots, [&](const Root &o) { return mayAlias(r, o); });
}

/// The buffers of one in-flight collective.
struct InFlight {
  SmallVector<Root> inputs, outputs;

  bool conflicts(Operation *op) const {
    if (op->hasTrait<OpTrait::IsTerminator>())
      return true;
    WalkResult r = op->walk([&](Operation *inner) {
      auto mem = dyn_cast<MemoryEffectOpInterface>(inner);
      if (!mem) {
        // Nested ops are visited on their own.
        if (inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
          return WalkResult::advance();
        return WalkResult::interrupt(); // unknown effects (calls)
      }
      SmallVector<MemoryEffects::EffectInstance> effects;
      mem.getEffects(effects);
      for (const MemoryEffects::EffectInstance &e : effects) {
        if (isa<MemoryEffects::Allocate>(e.getEffect()))
          continue; // a fresh buffer is nobody's alias
        Value v = e.getValue();
        if (!v) {
          // An effect on memory at large (e.g. a message leaving).
          if (isa<MemoryEffects::Read>(e.getEffect()))
            continue;
          return WalkResult::interrupt();
        }
        if (!isa<BaseMemRefType>(v.getType()))
          continue;
        Root root = rootOf(v);
        if (mayAliasAny(root, outputs))
          return WalkResult::interrupt();
        if (!isa<MemoryEffects::Read>(e.getEffect()) &&
            mayAliasAny(root, inputs))
          return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return r.wasInterrupted();
  }
};

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
    InFlight flight;
    for (Value v : ins)
      flight.inputs.push_back(rootOf(v));
    for (Value v : outs)
      flight.outputs.push_back(rootOf(v));

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
