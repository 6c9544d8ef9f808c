//===- ParDialect.h - par dialect -------------------------------*- C++ -*-===//

#ifndef PAR_DIALECT_PAR_IR_PARDIALECT_H
#define PAR_DIALECT_PAR_IR_PARDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "par/Dialect/Par/IR/ParDialect.h.inc"
#include "par/Dialect/Par/IR/ParEnums.h"
#include "par/Pipelining/Schedule.h"

#include "llvm/ADT/Hashing.h"

namespace par::pipeline {
/// Actions are parameters of #par.program.
inline llvm::hash_code hash_value(const Action &a) {
  return llvm::hash_combine(static_cast<uint8_t>(a.op), a.mb, a.stage, a.peer);
}
} // namespace par::pipeline

namespace mlir {
class AsmParser;
class AsmPrinter;
namespace par {
class StageAttr;
class ProgramAttr;
/// `[#par.x<...>, ...]`: the list parameters of #par.pipeline.
template <typename AttrT>
FailureOr<SmallVector<AttrT>> parseAttrList(AsmParser &parser);
template <typename AttrT>
void printAttrList(AsmPrinter &printer, ArrayRef<AttrT> attrs);
/// `[fwd(mb=0, s=0), send_act(mb=0, s=1, to=1), ...]`: #par.program's.
FailureOr<SmallVector<::par::pipeline::Action>> parseActions(AsmParser &parser);
void printActions(AsmPrinter &printer,
                  ArrayRef<::par::pipeline::Action> actions);
} // namespace par
} // namespace mlir

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

/// The mesh axes a forward (a function with `par.param` arguments) splits
/// its batch over: those splitting dim 0 of its data arguments (neither
/// parameters nor the loss scale), in first-seen order; empty for other
/// functions.
SmallVector<StringRef> getDataParallelAxes(FunctionOpInterface fn);

/// A float tensor `v` converted elementwise to element type `elt` (one
/// linalg.generic whose body is an arith.truncf or arith.extf); `v` itself
/// when it already has that type.
Value createFloatCast(OpBuilder &b, Location loc, Value v, Type elt);

/// The function a link attribute (`par.grad`, `par.step`, `par.update`,
/// `par.logits`) on `fn` names, or null when there is none.
FunctionOpInterface getLinkedFunction(Operation *fn, StringRef linkName);

/// The errors of proving `pipeline`'s programs complete and deadlock-free
/// under blocking send/recv (lib/Pipelining/Schedule's verifier); empty when they are,
/// or when there are none.
std::vector<std::string> verifyPipelinePrograms(PipelineAttr pipeline);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_PARDIALECT_H
