//===- AdjointOpInterface.h - Per-op reverse-mode adjoints -----*- C++ -*-===//
//
// AdjointOpInterface gives an op its adjoint for par-autodiff; upstream ops
// get it as external models (Training/AdjointModels.h). A model sees the
// reverse sweep only through AdjointState: the builder, the adjoint of a
// value, whether a value is active, accumulation and zeros. The driver
// (Autodiff.cpp) owns activity analysis, seeding, the reverse walk and the
// final return.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRAINING_ADJOINTOPINTERFACE_H
#define PAR_TRAINING_ADJOINTOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir::par {

/// The reverse sweep as an adjoint model sees it.
class AdjointState {
public:
  virtual ~AdjointState();

  /// The builder the adjoint is built with; its insertion point is before
  /// the gradient function's return, so ops built in order run in order.
  virtual OpBuilder &getBuilder() = 0;
  /// The accumulated adjoint (cotangent) of `v`, a tensor of v's type, or
  /// null if no use of `v` has contributed one.
  virtual Value getAdjoint(Value v) const = 0;
  /// Whether `v` depends on a parameter; only active values get adjoints.
  virtual bool isActive(Value v) const = 0;
  /// Adds `grad` (of v's type) to the adjoint of the active value `v`.
  virtual void accumulate(Value v, Value grad) = 0;
  /// A tensor of `type` filled with zeros, built at the insertion point.
  virtual Value zeros(Location loc, RankedTensorType type) = 0;
};

} // namespace mlir::par

#include "par/Training/AdjointOpInterface.h.inc"

#endif // PAR_TRAINING_ADJOINTOPINTERFACE_H
