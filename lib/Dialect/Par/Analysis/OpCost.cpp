//===- OpCost.cpp - The arithmetic an op does -----------------------------===//

#include "par/Dialect/Par/Analysis/OpCost.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <iterator>

using namespace mlir;

double mlir::par::getOpFlops(Operation *op) {
  if (auto l = dyn_cast<linalg::LinalgOp>(op)) {
    double space = 1;
    for (int64_t r : l.getStaticLoopRanges())
      space *= ShapedType::isDynamic(r) ? 1 : r;
    int64_t body = 0;
    if (Block *blk = l.getBlock())
      body = std::distance(blk->begin(), blk->end()) - 1;
    return space * std::max<int64_t>(1, body);
  }
  double n = 0;
  for (Type t : op->getResultTypes())
    if (auto tt = dyn_cast<RankedTensorType>(t))
      n += tt.hasStaticShape() ? tt.getNumElements() : 0;
  return n;
}

int64_t mlir::par::getTensorBytes(Type t) {
  auto tt = dyn_cast<RankedTensorType>(t);
  if (!tt || !tt.hasStaticShape())
    return 0;
  return tt.getNumElements() *
         std::max<int64_t>(1, tt.getElementTypeBitWidth() / 8);
}

double mlir::par::getOpCost(Operation *op) {
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += getTensorBytes(v.getType());
  for (Type t : op->getResultTypes())
    bytes += getTensorBytes(t);
  return getOpFlops(op) + kFlopsPerByte * bytes;
}

double mlir::par::getFunctionCost(FunctionOpInterface fn) {
  double cost = 0;
  fn->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == fn.getOperation())
      return WalkResult::advance();
    cost += getOpCost(op);
    return isa<linalg::LinalgOp>(op) ? WalkResult::skip()
                                     : WalkResult::advance();
  });
  return cost;
}
