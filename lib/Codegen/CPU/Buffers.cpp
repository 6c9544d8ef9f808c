//===- Buffers.cpp - Tracing buffers to their allocations -----------------===//

#include "par/Codegen/CPU/Buffers.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

Value mlir::par::traceView(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto meta = dyn_cast<memref::ExtractStridedMetadataOp>(def)) {
      if (v != meta.getBaseBuffer())
        return v;
      v = meta.getSource();
    } else if (auto view = dyn_cast<ViewLikeOpInterface>(def)) {
      v = view.getViewSource();
    } else {
      return v;
    }
  }
  return v;
}

Operation *mlir::par::allocationOf(Value v) {
  Operation *def = traceView(v).getDefiningOp();
  return isa_and_nonnull<memref::AllocOp, memref::AllocaOp>(def) ? def
                                                                  : nullptr;
}

bool mlir::par::mayReferToBuffer(Type t) {
  return !isa<IntegerType, IndexType, FloatType, VectorType>(t);
}

int64_t mlir::par::staticBytes(Type t) {
  auto mem = dyn_cast<MemRefType>(t);
  if (!mem || !mem.hasStaticShape())
    return -1;
  Type elt = mem.getElementType();
  int64_t bits;
  if (elt.isIntOrFloat())
    bits = elt.getIntOrFloatBitWidth();
  else if (isa<IndexType>(elt))
    bits = 64;
  else if (auto c = dyn_cast<ComplexType>(elt);
           c && c.getElementType().isIntOrFloat())
    bits = 2 * c.getElementType().getIntOrFloatBitWidth();
  else
    return -1;
  return (mem.getNumElements() * bits + 7) / 8;
}
