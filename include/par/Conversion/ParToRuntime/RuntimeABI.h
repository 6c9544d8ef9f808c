//===- RuntimeABI.h - How compiled code calls the par runtime ---*- C++ -*-===//
//
// Helpers shared by the bufferization models of par's collectives and the
// lowering passes: declaring the runtime's kernel functions
// (include/par/Runtime/par_kernel_abi.h) and encoding their
// scalar arguments.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CONVERSION_PARTORUNTIME_RUNTIMEABI_H
#define PAR_CONVERSION_PARTORUNTIME_RUNTIMEABI_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir::par {

/// par_dtype_t code of an element type, or failure.
FailureOr<int32_t> getRuntimeDType(Type elementType);

/// The ordered axes code of `axes` on `mesh` (byte k = axis index + 1).
FailureOr<int64_t> getAxesCode(MeshOp mesh, ArrayAttr axes);

/// Coordinates packed 16 bits per axis, in order.
int64_t getCoordsCode(ArrayRef<int64_t> coords);

/// Index of `coords` within the group of `axes` (row-major, listed order).
int64_t getGroupIndex(MeshOp mesh, ArrayAttr axes, ArrayRef<int64_t> coords);

/// Declares (once per module) `name` as an external function taking
/// the types of `args` and returning `results` (nothing by default), and
/// calls it.
func::CallOp emitRuntimeCall(OpBuilder &b, Location loc, Operation *from,
                             StringRef name, ValueRange args,
                             TypeRange results = {});

/// The address of a contiguous memref's first element as an i64.
Value emitBufferAddress(OpBuilder &b, Location loc, Value memref);

} // namespace mlir::par

#endif // PAR_CONVERSION_PARTORUNTIME_RUNTIMEABI_H
