//===- SplitDeallocs.cpp - par-split-deallocs -----------------------------===//
//
// The linear-time half of buffer-deallocation-simplification (see
// Passes.td): deallocations traced to an allocation that no retained
// buffer views get their own `bufferization.dealloc` without retained
// values, so upstream's quadratic simplification sees small ops.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"
#include "par/Codegen/CPU/Buffers.h"

#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "par-split-deallocs"

namespace mlir::par {
#define GEN_PASS_DEF_SPLITDEALLOCS
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

bool isFunctionArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && isa<FunctionOpInterface>(arg.getOwner()->getParentOp()) &&
         arg.getOwner()->isEntryBlock();
}

/// Adds to `atoms` what `v` may alias among this function's buffers: the
/// allocation it views; for a call's result the call (its results may
/// alias each other) and the allocations passed to it; nothing for a
/// function argument. False if that cannot be told (a region's result, a
/// loop's argument).
bool atomsOf(Value v, SmallVectorImpl<Operation *> &atoms) {
  Value root = traceView(v);
  if (Operation *alloc = allocationOf(root)) {
    atoms.push_back(alloc);
    return true;
  }
  if (isFunctionArgument(root))
    return true;
  auto call = root.getDefiningOp<func::CallOp>();
  if (!call)
    return false;
  atoms.push_back(call);
  for (Value operand : call.getOperands()) {
    if (!isa<BaseMemRefType>(operand.getType()))
      continue;
    Value from = traceView(operand);
    if (Operation *alloc = allocationOf(from))
      atoms.push_back(alloc);
    else if (!isFunctionArgument(from))
      return false;
  }
  return true;
}

/// The one allocation `atoms` names, or null.
Operation *onlyAllocation(ArrayRef<Operation *> atoms) {
  return atoms.size() == 1 &&
                 isa<memref::AllocOp, memref::AllocaOp>(atoms.front())
             ? atoms.front()
             : nullptr;
}

struct SplitDeallocsPass
    : public mlir::par::impl::SplitDeallocsBase<SplitDeallocsPass> {
  void runOnOperation() override {
    SmallVector<bufferization::DeallocOp> deallocs;
    getOperation().walk(
        [&](bufferization::DeallocOp op) { deallocs.push_back(op); });
    for (bufferization::DeallocOp op : deallocs)
      split(op);
  }

  void split(bufferization::DeallocOp op) {
    if (op.getMemrefs().size() < 2 && op.getRetained().empty())
      return;
    // How many of the op's values (deallocated or retained) may alias each
    // atom; a retained value that cannot be told may be anything, and then
    // the op stays as it is.
    llvm::DenseMap<Operation *, unsigned> uses;
    SmallVector<SmallVector<Operation *>> retainedAtoms;
    for (Value r : op.getRetained()) {
      SmallVector<Operation *> atoms;
      if (!atomsOf(r, atoms))
        return;
      for (Operation *atom : atoms)
        ++uses[atom];
      retainedAtoms.push_back(std::move(atoms));
    }
    SmallVector<std::optional<SmallVector<Operation *>>> memrefAtoms;
    for (Value m : op.getMemrefs()) {
      SmallVector<Operation *> atoms;
      if (!atomsOf(m, atoms)) {
        memrefAtoms.push_back(std::nullopt);
        continue;
      }
      for (Operation *atom : atoms)
        ++uses[atom];
      memrefAtoms.push_back(std::move(atoms));
    }
    // A buffer deallocated and retained (a returned allocation), which
    // nothing else in the op may alias, is not freed, and the retained
    // value's ownership is the buffer's condition.
    llvm::DenseMap<Operation *, unsigned> deallocatedAt; // allocation -> index
    for (auto [i, atoms] : llvm::enumerate(memrefAtoms))
      if (atoms)
        if (Operation *alloc = onlyAllocation(*atoms))
          deallocatedAt[alloc] = i;
    SmallVector<Value> ownership(op.getRetained().size());
    llvm::SmallDenseSet<unsigned> taken; // memref indices
    for (auto [i, atoms] : llvm::enumerate(retainedAtoms)) {
      Operation *alloc = onlyAllocation(atoms);
      if (!alloc || uses[alloc] != 2 || !deallocatedAt.count(alloc))
        continue;
      unsigned j = deallocatedAt[alloc];
      ownership[i] = op.getConditions()[j];
      taken.insert(j);
    }
    // A buffer that may alias only atoms nothing else in the op may alias
    // is freed on its own.
    OpBuilder b(op);
    SmallVector<Value> keptMemrefs, keptConditions, keptRetained;
    for (auto [j, m, cond, atoms] :
         llvm::enumerate(op.getMemrefs(), op.getConditions(), memrefAtoms)) {
      if (taken.contains(j))
        continue;
      bool alone = atoms && !atoms->empty() &&
                   llvm::all_of(*atoms, [&](Operation *atom) {
                     return uses[atom] == 1;
                   });
      if (alone) {
        bufferization::DeallocOp::create(b, op.getLoc(), ValueRange{m},
                                         ValueRange{cond}, ValueRange{});
        continue;
      }
      keptMemrefs.push_back(m);
      keptConditions.push_back(cond);
    }
    if (keptMemrefs.size() == op.getMemrefs().size())
      return;
    for (auto [r, own] : llvm::zip(op.getRetained(), ownership))
      if (!own)
        keptRetained.push_back(r);
    // The rest as it was: the retained values it still decides.
    ValueRange rest;
    if (!keptMemrefs.empty() || !keptRetained.empty())
      rest = bufferization::DeallocOp::create(b, op.getLoc(), keptMemrefs,
                                              keptConditions, keptRetained)
                 .getResults();
    unsigned k = 0;
    for (auto [result, own] : llvm::zip(op.getResults(), ownership))
      result.replaceAllUsesWith(own ? own : rest[k++]);
    op.erase();
  }
};

} // namespace
