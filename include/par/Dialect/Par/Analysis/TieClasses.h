//===- TieClasses.h - Values forced to share a sharding ---------*- C++ -*-===//
//
// Control flow (region branches, cf branches, calls) forces values to share
// one sharding; propagation and partitioning both read these classes.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_ANALYSIS_TIECLASSES_H
#define PAR_DIALECT_PAR_ANALYSIS_TIECLASSES_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/EquivalenceClasses.h"

namespace mlir::par {

//===----------------------------------------------------------------------===//
// Tie classes
//===----------------------------------------------------------------------===//

/// Union-find over the tensor values of a module: region-branch operands and
/// successor inputs (scf.for, scf.if, scf.while), branch operands and block
/// arguments (cf), call operands/results and callee arguments/returns.
class TieClasses {
public:
  explicit TieClasses(ModuleOp module);
  /// The representative of `v`'s class.
  Value leader(Value v) const;
  /// Every member of the class whose leader is `leader`.
  SmallVector<Value> members(Value leader) const;

private:
  void tie(Value a, Value b);
  llvm::EquivalenceClasses<Value> classes;
};

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_ANALYSIS_TIECLASSES_H
