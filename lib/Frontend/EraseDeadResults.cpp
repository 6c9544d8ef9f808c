//===- EraseDeadResults.cpp - par-erase-dead-results ----------------------===//
//
// linalg.generic results nothing reads, with their inits and the body ops
// only they need, removed (see Passes.td): torch's argmax next to the
// softmax max.
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallBitVector.h"

#define DEBUG_TYPE "par-erase-dead-results"

namespace mlir::par {
#define GEN_PASS_DEF_ERASEDEADRESULTS
#include "par/Frontend/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The results of `op` that can go: no uses, and their yielded values need
/// only pure body ops no kept result needs, and an accumulator only they
/// read. `deadOps` gets the body ops that go with them.
llvm::SmallBitVector findDeadResults(linalg::GenericOp op,
                                     DenseSet<Operation *> &deadOps) {
  unsigned n = op.getNumResults();
  llvm::SmallBitVector dead(n);
  for (unsigned r = 0; r < n; ++r)
    dead[r] = op.getResult(r).use_empty();
  if (dead.none() || dead.all()) // all dead: the op itself goes (DCE)
    return llvm::SmallBitVector(n);
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  // A use is dead if it is a dropped yield operand or in a dead op.
  auto deadUse = [&](OpOperand &use) {
    if (use.getOwner() == yield)
      return (bool)dead[use.getOperandNumber()];
    return deadOps.contains(use.getOwner());
  };
  bool reset = true;
  while (reset && dead.any()) {
  deadOps.clear();
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &bop : llvm::reverse(body->without_terminator())) {
      if (deadOps.contains(&bop) || !isMemoryEffectFree(&bop) ||
          bop.getNumRegions())
        continue;
      if (llvm::all_of(bop.getUses(), deadUse)) {
        deadOps.insert(&bop);
        changed = true;
      }
    }
  }
  // A dropped result's accumulator must be read by dropped ops only (if
  // not, keep it and look again).
  reset = false;
  for (unsigned r = 0; r < n; ++r)
    if (dead[r] && !llvm::all_of(op.getRegionOutputArgs()[r].getUses(),
                                 deadUse)) {
      dead.reset(r);
      reset = true;
    }
  }
  return dead;
}

/// `op` without the results in `dead` (and the body ops in `deadOps`).
void eraseResults(linalg::GenericOp op, const llvm::SmallBitVector &dead,
                  const DenseSet<Operation *> &deadOps) {
  OpBuilder b(op);
  SmallVector<Value> inits;
  SmallVector<Type> types;
  SmallVector<AffineMap> maps;
  for (OpOperand *in : op.getDpsInputOperands())
    maps.push_back(op.getMatchingIndexingMap(in));
  for (auto [r, init] : llvm::enumerate(op.getDpsInitsMutable())) {
    if (dead[r])
      continue;
    inits.push_back(init.get());
    types.push_back(op.getResult(r).getType());
    maps.push_back(op.getMatchingIndexingMap(&init));
  }
  auto kept = linalg::GenericOp::create(b, op.getLoc(), types,
                                        op.getDpsInputs(), inits, maps,
                                        op.getIteratorTypesArray());
  kept->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  Block *body = op.getBody();
  Block *nb = b.createBlock(&kept.getRegion());
  IRMapping map;
  unsigned numIn = op.getNumDpsInputs();
  for (BlockArgument arg : body->getArguments()) {
    if (arg.getArgNumber() >= numIn && dead[arg.getArgNumber() - numIn])
      continue;
    map.map(arg, nb->addArgument(arg.getType(), arg.getLoc()));
  }
  b.setInsertionPointToEnd(nb);
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  for (Operation &bop : body->without_terminator())
    if (!deadOps.contains(&bop))
      b.clone(bop, map);
  SmallVector<Value> yielded;
  for (auto [r, v] : llvm::enumerate(yield.getOperands()))
    if (!dead[r])
      yielded.push_back(map.lookupOrDefault(v));
  linalg::YieldOp::create(b, yield.getLoc(), yielded);
  unsigned k = 0;
  for (unsigned r = 0; r < op.getNumResults(); ++r)
    if (!dead[r])
      op.getResult(r).replaceAllUsesWith(kept.getResult(k++));
  op.erase();
}

struct EraseDeadResultsPass
    : public mlir::par::impl::EraseDeadResultsBase<EraseDeadResultsPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) { generics.push_back(op); });
    for (linalg::GenericOp op : generics) {
      DenseSet<Operation *> deadOps;
      llvm::SmallBitVector dead = findDeadResults(op, deadOps);
      if (dead.any())
        eraseResults(op, dead, deadOps);
    }
  }
};

} // namespace
