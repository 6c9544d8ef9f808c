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

#include "par/Dialect/Par/IR/ParDialect.h"

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
/// The gradients of scale * loss made true (`grads` unscaled in place,
/// which is what clipping and the update see), and the step's decision: a
/// rank-0 f32 flag from par.all_finite over every device of `mesh`.
Value buildUnscaleAndDecide(OpBuilder &b, Location loc, Value scale,
                            MutableArrayRef<Value> grads,
                            FlatSymbolRefAttr mesh);
/// The step-or-skip of a train step or stage update: each `next[k]` becomes
/// `finite ? next[k] : prev[k]`; then the next scale state (from
/// par.update_loss_scale of scale, good, hysteresis) and the flag itself
/// are appended to `results`.
void buildSkipAndNextScale(OpBuilder &b, Location loc, Value finite,
                           ArrayRef<Value> prev, MutableArrayRef<Value> next,
                           ValueRange scaleState, LossScaleAttr policy,
                           SmallVectorImpl<Value> &results);
/// The mesh the all-finite decision spans: the module's only par.mesh, or
/// null when there is none (one device). Fails (with a diagnostic) when
/// there are several.
FailureOr<FlatSymbolRefAttr> getDecisionMesh(ModuleOp module, Operation *at);

} // namespace mlir::par

#endif // PAR_TRAINING_LOSSSCALE_H
