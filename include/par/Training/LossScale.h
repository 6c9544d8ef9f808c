//===- LossScale.h - Loss-scaling pieces of a train step --------*- C++ -*-===//
//
// What par-optimizer builds into a train step whose forward has a loss
// scale (par-loss-scale): the unscale, the step-or-skip select, the mesh
// the all-finite decision spans. Implemented in LossScale.cpp, next to the
// par-loss-scale pass.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRAINING_LOSSSCALE_H
#define PAR_TRAINING_LOSSSCALE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::par {

/// 1 / scale, a rank-0 f32 tensor.
Value buildReciprocal(OpBuilder &b, Location loc, Value scale);
/// g * inv elementwise (inv a rank-0 tensor), in g's type.
Value buildUnscale(OpBuilder &b, Location loc, Value g, Value inv);
/// finite ? next : prev elementwise (finite a rank-0 f32 flag, 1 or 0): a
/// skipped step leaves `prev` bit for bit.
Value buildSelectIfFinite(OpBuilder &b, Location loc, Value finite, Value next,
                          Value prev);
/// The mesh the all-finite decision spans: the module's only par.mesh, or
/// null when there is none (one device). Fails (with a diagnostic) when
/// there are several.
FailureOr<FlatSymbolRefAttr> getDecisionMesh(ModuleOp module, Operation *at);

} // namespace mlir::par

#endif // PAR_TRAINING_LOSSSCALE_H
