//===- ZeRO.h - ZeRO-1: optimizer state over data-parallel axes -*- C++ -*-===//
//
// Where a train step's optimizer state lives, as par-optimizer asks for it
// (lib/Training/Optimizer.cpp). With zero=0 each state tensor is sharded
// like its parameter. With zero=1 (DeepSpeed's ZeRO stage 1, GSPMD's
// weight-update sharding) it is also split over the data-parallel axes, and
// so are the gradient it meets and the update: the step only carries
// annotations (`par.sharding` on its arguments and results,
// `par.sharding_constraint` on the gradients and the updated parameters),
// which propagation and partitioning turn into the collectives (the
// gradient's reduction becomes a reduce_scatter, the updated parameter is
// all_gathered; docs/Formulas.md).
//
// Nothing here knows the step's signature: par-optimizer places the layout
// on it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_COMMUNICATION_ZERO_H
#define PAR_COMMUNICATION_ZERO_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::par {

/// par-optimizer's `zero` and `zero-axes` options.
struct ZeROOptions {
  /// 0: the state sharded like its parameter; 1: ZeRO stage 1.
  int64_t stage = 0;
  /// zero=1: the mesh axes to shard the state over; empty: those the data
  /// arguments split their batch dim (0) over, in mesh order.
  ArrayRef<std::string> axes;
};

/// Checks the options on their own, before any function is rewritten: the
/// stage is 0 or 1, and axes are given only with stage 1. Reports an error
/// on `op` (the module) otherwise.
LogicalResult verifyZeROOptions(Operation *op, const ZeROOptions &options);

/// The layout of each parameter of a train step and of its optimizer state
/// (every state kind of a parameter shares it).
struct OptimizerStateLayout {
  /// The step's mesh: the first annotated argument's, else the module's only
  /// one; null without either.
  MeshOp mesh;
  /// zero=1: the data-parallel axes the state is split over (empty when
  /// ZeRO has no effect).
  SmallVector<StringRef> axes;
  /// Per parameter: its sharding (without partial axes), pinned with zero=1
  /// (replicated when unannotated); null when it keeps whatever propagation
  /// gives it.
  SmallVector<ShardingAttr> param;
  /// Per parameter: its state's sharding.
  SmallVector<ShardingAttr> state;

  /// Whether parameter `j`'s state is split further than the parameter, so
  /// that its gradient and update run on the local block of the state.
  bool isZeROSharded(unsigned j) const { return state[j] != param[j]; }
};

/// Decides the layout for the step of `fn`, whose parameters are the
/// arguments `params`: with zero=0 each state takes its parameter's
/// annotation; with zero=1 the data-parallel axes a parameter is not split
/// over are appended to the first dimension of the state whose local size
/// their device count divides. Emits an error on `fn` and fails for a
/// zero-axes entry that is unknown or listed twice, zero-axes without a mesh
/// and a parameter on another mesh; remarks where zero=1 has no effect (no
/// mesh, no data-parallel axis, a parameter no dimension of which the
/// devices divide).
FailureOr<OptimizerStateLayout> planOptimizerState(func::FuncOp fn,
                                                   ArrayRef<unsigned> params,
                                                   const ZeROOptions &options);

/// ZeRO-1, on the step's gradients (`grads[j]` of parameter j): each is
/// wanted in its state's layout from here on (a `par.sharding_constraint`
/// where the state is split further). The gradient arrives reduced over the
/// data-parallel axes, so this is a local slice; reducing straight into the
/// slice (a reduce_scatter) is par-sink-reductions' rewrite.
void constrainGradientsToState(OpBuilder &b, Location loc,
                               MutableArrayRef<Value> grads,
                               const OptimizerStateLayout &layout);

/// ZeRO-1, on the updated parameters (`params[j]`): each back in its
/// parameter's layout (an all_gather over the data-parallel axes) where its
/// state is split further.
void constrainParametersToLayout(OpBuilder &b, Location loc,
                                 MutableArrayRef<Value> params,
                                 const OptimizerStateLayout &layout);

/// par-optimizer's `report=true` for the step `step` of `fn`: the state's
/// layout and bytes per rank (`stateKinds` tensors per parameter, as zero=0
/// would have them too), and with zero=1 the ring bytes per step of the
/// gradient reduction and the parameter gather over the data-parallel axes
/// (docs/Formulas.md).
void printOptimizerStateReport(llvm::raw_ostream &os, func::FuncOp step,
                               func::FuncOp fn, ArrayRef<unsigned> params,
                               const OptimizerStateLayout &layout,
                               StringRef optimizer, unsigned stateKinds,
                               const ZeROOptions &options);

} // namespace mlir::par

#endif // PAR_COMMUNICATION_ZERO_H
