//===- LoopDependence.h - Which values of a linalg body read a loop -------===//
//
// Header-only: used before partitioning's products are bufferized
// (par-local-row-index) and on buffers (par-one-hot-to-scatter).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_ANALYSIS_LOOPDEPENDENCE_H
#define PAR_DIALECT_PAR_ANALYSIS_LOOPDEPENDENCE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::par {

/// True if `v`, defined in `body` (a linalg op's block) or above it,
/// depends on loop `loop`: through `linalg.index loop`, or through block
/// argument i < maps.size() whose indexing map maps[i] reads the loop.
/// Values from above the body depend on no loop.
inline bool readsLoop(Value v, Block *body, unsigned loop,
                      ArrayRef<AffineMap> maps) {
  SmallVector<Value> pending{v};
  DenseSet<Value> seen;
  while (!pending.empty()) {
    Value x = pending.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      if (arg.getOwner() == body && arg.getArgNumber() < maps.size() &&
          maps[arg.getArgNumber()].isFunctionOfDim(loop))
        return true;
      continue;
    }
    Operation *def = x.getDefiningOp();
    if (def->getBlock() != body)
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(def))
      if (index.getDim() == loop)
        return true;
    for (Value o : def->getOperands())
      pending.push_back(o);
  }
  return false;
}

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_ANALYSIS_LOOPDEPENDENCE_H
