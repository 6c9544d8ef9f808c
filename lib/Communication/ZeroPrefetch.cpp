//===- ZeroPrefetch.cpp - par-zero-prefetch -------------------------------===//
//
// Starts ZeRO-3's parameter gathers (par.buffer_all_gather tagged
// par.zero_gather) one group ahead of their use: a
// par.buffer_all_gather_start as early as the rule below allows and a
// par.buffer_wait at the gather's place, right before the gathered
// buffer's first use. The gathered buffer's allocation moves with the
// start, so the memory plan and the deallocation see it live from there.
//
// The rule. The tagged gathers of a block form groups: runs of gathers
// with no compute between consecutive ones (only allocations, views,
// constants, other gathers). Group k's starts go right after group k-1's
// last wait, that is, while the compute that uses group k-1's parameters
// runs; group 0's go as early as their operands allow. Walking up from the gather, the start
// stops below
//   - the previous group's last wait (the bound above),
//   - an earlier start of this pass (the starts keep the gathers' order),
//   - the op that defines the shard (the start's input), and
//   - any op that conflicts with the transfer in flight (InFlight.h: it may
//     write the shard or touch the gathered buffer, or has unknown effects).
// A gather whose output is not a static allocation of its block, used only
// after the gather, stays blocking, as does one with no work between the
// start's place and its own (a start waited for at once only costs).
//
//===----------------------------------------------------------------------===//

#include "par/Communication/InFlight.h"
#include "par/Communication/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#define DEBUG_TYPE "par-zero-prefetch"

namespace mlir::par {
#define GEN_PASS_DEF_ZEROPREFETCH
#include "par/Communication/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// Allocations, views, constants, other gathers and the starts and waits
/// of collectives: no compute a transfer could overlap.
bool isNoWork(Operation *op) {
  return isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
             ViewLikeOpInterface, BufferAllGatherOp, BufferAllGatherStartOp,
             BufferWaitOp>(op) ||
         op->hasTrait<OpTrait::ConstantLike>();
}

/// The gathered buffer, when the start can take its allocation along: a
/// static memref.alloc of the gather's block whose other users all come
/// after the gather.
memref::AllocOp movableOutput(BufferAllGatherOp gather) {
  auto alloc = gather.getOutput().getDefiningOp<memref::AllocOp>();
  Block *block = gather->getBlock();
  if (!alloc || alloc->getBlock() != block || alloc->getNumOperands() != 0)
    return nullptr;
  for (Operation *user : alloc->getUsers()) {
    if (user == gather)
      continue;
    Operation *at = block->findAncestorOpInBlock(*user);
    if (!at || !gather->isBeforeInBlock(at))
      return nullptr;
  }
  return alloc;
}

/// Splits the block's tagged gathers (in program order) into groups: runs
/// with no work between consecutive gathers.
SmallVector<SmallVector<BufferAllGatherOp>>
groupGathers(ArrayRef<BufferAllGatherOp> gathers) {
  SmallVector<SmallVector<BufferAllGatherOp>> groups;
  for (BufferAllGatherOp g : gathers) {
    bool work = groups.empty();
    if (!work)
      for (Operation *x = groups.back().back()->getNextNode(); x != g && !work;
           x = x->getNextNode())
        work = !isNoWork(x);
    if (work)
      groups.emplace_back();
    groups.back().push_back(g);
  }
  return groups;
}

struct ZeroPrefetchPass
    : public mlir::par::impl::ZeroPrefetchBase<ZeroPrefetchPass> {
  using ZeroPrefetchBase::ZeroPrefetchBase;

  /// The starts this pass made (none is hoisted above another).
  llvm::SmallPtrSet<Operation *, 32> starts;

  void runOnOperation() override {
    starts.clear(); // a pass instance may run on several modules
    llvm::MapVector<Block *, SmallVector<BufferAllGatherOp>> byBlock;
    getOperation().walk([&](BufferAllGatherOp op) {
      if (op->hasAttr(ParDialect::kZeROGatherAttrName))
        byBlock[op->getBlock()].push_back(op);
    });
    for (auto &[block, gathers] : byBlock) {
      // Group k's starts go below group k-1's last wait (its last gather,
      // or what replaced it).
      Operation *bound = nullptr;
      for (ArrayRef<BufferAllGatherOp> group : groupGathers(gathers)) {
        Operation *last = nullptr;
        for (BufferAllGatherOp g : group)
          last = prefetch(g, bound);
        bound = last;
      }
    }
  }

  /// Where the start of `gather` goes: the earliest op below `bound` that
  /// it may precede (the gather itself when none).
  Operation *startPlace(BufferAllGatherOp gather, memref::AllocOp alloc,
                        Operation *bound) {
    Block *block = gather->getBlock();
    Value shard = gather.getInput();
    Operation *def = shard.getDefiningOp()
                         ? block->findAncestorOpInBlock(*shard.getDefiningOp())
                         : nullptr;
    InFlight flight(ValueRange{shard}, ValueRange{gather.getOutput()});
    Operation *place = gather;
    for (Operation *prev = place->getPrevNode(); prev && prev != bound;
         prev = place->getPrevNode()) {
      if (prev != alloc.getOperation() &&
          (prev == def || starts.contains(prev) || flight.conflicts(prev)))
        break;
      place = prev;
    }
    return place;
  }

  /// Splits `gather` into a start at its place and a wait at the gather's;
  /// returns the wait (the gather when it stays blocking).
  Operation *prefetch(BufferAllGatherOp gather, Operation *bound) {
    memref::AllocOp alloc = movableOutput(gather);
    if (!alloc) {
      ++numKeptBlocking;
      return gather;
    }
    Operation *place = startPlace(gather, alloc, bound);
    bool work = false;
    for (Operation *x = place; x != gather.getOperation() && !work;
         x = x->getNextNode())
      work = !isNoWork(x);
    if (!work) {
      ++numKeptBlocking;
      return gather;
    }
    // The allocation first, then the start.
    if (place == alloc.getOperation())
      place = alloc->getNextNode();
    else
      alloc->moveBefore(place);
    OpBuilder b(place);
    Location loc = gather.getLoc();
    auto start = BufferAllGatherStartOp::create(
        b, loc, b.getI64Type(), gather.getInput(), gather.getOutput(),
        gather.getMeshAttr(), gather.getAxes(), gather.getDimAttr());
    start->setAttr(ParDialect::kZeROGatherAttrName,
                   gather->getAttr(ParDialect::kZeROGatherAttrName));
    starts.insert(start);
    b.setInsertionPoint(gather);
    auto wait = BufferWaitOp::create(b, loc, start.getRequest(),
                                     ValueRange{gather.getInput()},
                                     ValueRange{gather.getOutput()});
    gather->erase();
    ++numStarted;
    return wait;
  }
};

} // namespace
