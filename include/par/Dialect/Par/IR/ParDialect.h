//===- ParDialect.h - par dialect -------------------------------*- C++ -*-===//

#ifndef PAR_DIALECT_PAR_IR_PARDIALECT_H
#define PAR_DIALECT_PAR_IR_PARDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "par/Dialect/Par/IR/ParDialect.h.inc"
#include "par/Dialect/Par/IR/ParEnums.h"

#define GET_ATTRDEF_CLASSES
#include "par/Dialect/Par/IR/ParAttrs.h.inc"

#define GET_OP_CLASSES
#include "par/Dialect/Par/IR/ParOps.h.inc"

namespace mlir::par {

/// Looks up the mesh `symbol` from `from`; emits an error at `from` and
/// returns null if there is none.
MeshOp lookupMesh(Operation *from, FlatSymbolRefAttr symbol,
                  bool emitErrors = true);

/// Checks `sharding` against `mesh` and a value of type `type`: the rank
/// matches, every axis exists. Errors go through `emitError`.
LogicalResult verifyShardingFor(function_ref<InFlightDiagnostic()> emitError,
                                ShardingAttr sharding, MeshOp mesh, Type type);

/// The per-device type of `type` under `sharding` on `mesh`, or failure with
/// a diagnostic naming the dimension and axes if a split does not divide.
FailureOr<RankedTensorType>
getLocalType(function_ref<InFlightDiagnostic()> emitError,
             RankedTensorType type, ShardingAttr sharding, MeshOp mesh);

/// The sharding attached to a function argument/result or op, if any.
ShardingAttr getShardingAnnotation(Operation *op);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_PARDIALECT_H
