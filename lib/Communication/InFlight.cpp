//===- InFlight.cpp - The buffers of a started collective -----------------===//
//
// See par/Communication/InFlight.h.
//
//===----------------------------------------------------------------------===//

#include "par/Communication/InFlight.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace mlir::par;

BufferRoot mlir::par::getBufferRoot(Value v) {
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
    return {v, entry ? BufferRoot::Kind::Argument : BufferRoot::Kind::Unknown};
  }
  if (isa<memref::AllocOp, memref::AllocaOp>(v.getDefiningOp()))
    return {v, BufferRoot::Kind::Allocation};
  return {v, BufferRoot::Kind::Unknown};
}

bool mlir::par::mayAlias(const BufferRoot &a, const BufferRoot &b) {
  if (a.value == b.value)
    return true;
  if (a.kind == BufferRoot::Kind::Unknown ||
      b.kind == BufferRoot::Kind::Unknown)
    return true;
  // Two arguments may be the same buffer; an allocation is fresh.
  return a.kind == BufferRoot::Kind::Argument &&
         b.kind == BufferRoot::Kind::Argument;
}

static bool mayAliasAny(const BufferRoot &r, ArrayRef<BufferRoot> roots) {
  return llvm::any_of(roots,
                      [&](const BufferRoot &o) { return mayAlias(r, o); });
}

InFlight::InFlight(ValueRange ins, ValueRange outs) {
  for (Value v : ins)
    inputs.push_back(getBufferRoot(v));
  for (Value v : outs)
    outputs.push_back(getBufferRoot(v));
}

bool InFlight::conflicts(Operation *op) const {
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
      BufferRoot root = getBufferRoot(v);
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
