//===- DeallocAfterLastUse.cpp - par-dealloc-after-last-use ---------------===//
//
// Moves each deallocation of a buffer allocated in the same block up to
// right after the buffer's last use in that block (see Passes.td).
//
// A use is any op of the block that uses the allocation or a value that may
// alias it: a view of it, any result of an op that reads it and may refer
// to a buffer (a call's memref results, a region op's results when a nested
// terminator yields it). An op with regions uses what its nested ops use.
// Asynchronous collectives name their buffers on both the start and the
// wait, so the wait is a use and the free follows it.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Buffers.h"
#include "par/Codegen/CPU/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#define DEBUG_TYPE "par-dealloc-after-last-use"

namespace mlir::par {
#define GEN_PASS_DEF_DEALLOCAFTERLASTUSE
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The ops of one block by position.
class BlockOrder {
public:
  explicit BlockOrder(Block &block) {
    for (Operation &op : block) {
      position[&op] = ops.size();
      ops.push_back(&op);
    }
  }
  unsigned of(Operation *op) const { return position.lookup(op); }
  Operation *at(unsigned i) const { return ops[i]; }

private:
  llvm::DenseMap<Operation *, unsigned> position;
  SmallVector<Operation *> ops;
};

/// The view ops from `v` back to its allocation (`v`'s own first).
SmallVector<Operation *> viewChain(Value v) {
  SmallVector<Operation *> chain;
  Value root = traceView(v);
  while (v != root) {
    Operation *def = v.getDefiningOp();
    chain.push_back(def);
    v = traceView(def->getOperand(0)) == root ? def->getOperand(0) : root;
  }
  return chain;
}

/// The position in `block` of the last op that uses `alloc`'s buffer,
/// other than `dealloc` and the view ops that only feed it; none when a
/// use lies outside the block.
std::optional<unsigned> lastUse(Operation *alloc, Operation *dealloc,
                                ArrayRef<Operation *> deallocChain,
                                const BlockOrder &order) {
  Block *block = alloc->getBlock();
  unsigned last = order.of(alloc);
  llvm::SmallPtrSet<Operation *, 4> chain(deallocChain.begin(),
                                          deallocChain.end());
  SmallVector<Value> work(alloc->getResults());
  llvm::DenseSet<Value> seen(work.begin(), work.end());
  auto push = [&](Value v) {
    if (mayReferToBuffer(v.getType()) && seen.insert(v).second)
      work.push_back(v);
  };
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (user == dealloc)
        continue;
      Operation *anc = block->findAncestorOpInBlock(*user);
      if (!anc)
        return std::nullopt;
      if (!chain.contains(user))
        last = std::max(last, order.of(anc));
      for (Value r : user->getResults())
        push(r);
      // A nested terminator may hand the buffer to its parents' results.
      if (user != anc && user->hasTrait<OpTrait::IsTerminator>())
        for (Operation *p = user->getParentOp(); p; p = p->getParentOp()) {
          for (Value r : p->getResults())
            push(r);
          if (p == anc)
            break;
        }
    }
  }
  return last;
}

struct DeallocAfterLastUsePass
    : public mlir::par::impl::DeallocAfterLastUseBase<
          DeallocAfterLastUsePass> {
  void runOnOperation() override {
    getOperation().walk([&](Block *block) { hoist(*block); });
  }

  void hoist(Block &block) {
    SmallVector<bufferization::DeallocOp> deallocs;
    for (Operation &op : block)
      if (auto d = dyn_cast<bufferization::DeallocOp>(op))
        if (d.getMemrefs().size() == 1 && d.getRetained().empty())
          deallocs.push_back(d);
    if (deallocs.empty())
      return;
    // Positions are taken once: a moved dealloc lands right after an op
    // that stays, so the others' positions keep their order.
    BlockOrder order(block);
    for (bufferization::DeallocOp d : deallocs)
      hoist(d, order);
  }

  void hoist(bufferization::DeallocOp d, const BlockOrder &order) {
    Value buffer = d.getMemrefs().front();
    Operation *alloc = allocationOf(buffer);
    Block *block = d->getBlock();
    if (!alloc || alloc->getBlock() != block)
      return;
    SmallVector<Operation *> chain = viewChain(buffer);
    if (llvm::any_of(chain, [&](Operation *op) {
          return op->getBlock() != block ||
                 llvm::any_of(op->getUsers(), [&](Operation *u) {
                   return u != d && !llvm::is_contained(chain, u);
                 });
        }))
      chain.clear(); // a view others use: it is an ordinary use
    std::optional<unsigned> last = lastUse(alloc, d, chain, order);
    if (!last)
      return;
    // The condition must be defined before the new place.
    Value cond = d.getConditions().front();
    if (Operation *def = cond.getDefiningOp()) {
      Operation *anc = block->findAncestorOpInBlock(*def);
      if (!anc)
        return;
      last = std::max(*last, order.of(anc));
    }
    if (order.of(d) <= *last + 1)
      return;
    Operation *after = order.at(*last);
    if (after->hasTrait<OpTrait::IsTerminator>())
      return;
    Operation *insertAfter = after;
    for (Operation *view : llvm::reverse(chain)) {
      view->moveAfter(insertAfter);
      insertAfter = view;
    }
    d->moveAfter(insertAfter);
  }
};

} // namespace
