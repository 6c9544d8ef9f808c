//===- RuntimeABI.cpp - How compiled code calls the par runtime -----------===//
//
// See RuntimeABI.h. The codes here are the runtime's kernel ABI
// (include/par/Runtime/par_kernel_abi.h, par_types.h): dtype codes, axes codes (one byte per
// listed mesh axis, index + 1), coordinate codes (16 bits per axis).
//
//===----------------------------------------------------------------------===//

#include "par/Conversion/ParToRuntime/RuntimeABI.h"
#include "par/Runtime/par_types.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::par;

//===----------------------------------------------------------------------===//
// ABI helpers
//===----------------------------------------------------------------------===//

FailureOr<int32_t> mlir::par::getRuntimeDType(Type t) {
  // The runtime's own codes (par_types.h): one table for compiler, runtime
  // and tooling.
  if (t.isF32())
    return PAR_F32;
  if (t.isF64())
    return PAR_F64;
  if (t.isF16())
    return PAR_F16;
  if (t.isBF16())
    return PAR_BF16;
  if (t.isInteger(32))
    return PAR_I32;
  if (t.isInteger(64))
    return PAR_I64;
  if (t.isInteger(8))
    return PAR_I8;
  if (t.isInteger(1))
    return PAR_I1;
  return failure();
}

FailureOr<int64_t> mlir::par::getAxesCode(MeshOp mesh, ArrayAttr axes) {
  if (axes.size() > 8)
    return failure();
  int64_t code = 0;
  for (auto [k, a] : llvm::enumerate(axes.getAsRange<StringAttr>())) {
    int64_t idx = mesh.getAxisIndex(a.getValue());
    if (idx < 0 || idx > 254)
      return failure();
    code |= (idx + 1) << (8 * k);
  }
  return code;
}

int64_t mlir::par::getCoordsCode(ArrayRef<int64_t> coords) {
  int64_t code = 0;
  for (auto [k, c] : llvm::enumerate(coords))
    code |= (c & 0xffff) << (16 * k);
  return code;
}

int64_t mlir::par::getGroupIndex(MeshOp mesh, ArrayAttr axes,
                                 ArrayRef<int64_t> coords) {
  int64_t index = 0;
  for (auto [a, c] : llvm::zip(axes.getAsRange<StringAttr>(), coords))
    index = index * mesh.getAxisSize(a.getValue()) + c;
  return index;
}

func::CallOp mlir::par::emitRuntimeCall(OpBuilder &b, Location loc,
                                        Operation *from, StringRef name,
                                        ValueRange args, TypeRange results) {
  auto module = from->getParentOfType<ModuleOp>();
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn) {
    // Through `b`, so that a rewriter driving `b` sees the declaration.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    fn = func::FuncOp::create(
        b, loc, name, b.getFunctionType(TypeRange(args), results));
    fn.setPrivate();
  }
  return func::CallOp::create(b, loc, fn, args);
}

Value mlir::par::emitBufferAddress(OpBuilder &b, Location loc, Value memref) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}
