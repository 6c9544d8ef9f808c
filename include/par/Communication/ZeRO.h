//===- ZeRO.h - ZeRO-1/2/3: state, gradients, parameters over dp -*- C++ -*-===//
//
// Where a train step's optimizer state, gradients and parameters live, as
// par-optimizer asks for it (lib/Training/Optimizer.cpp). With zero=0 each
// state tensor is sharded like its parameter. With zero=1 (DeepSpeed's ZeRO
// stage 1, GSPMD's weight-update sharding) it is also split over the
// data-parallel axes, and so are the gradient it meets and the update: the
// step only carries annotations (`par.sharding` on its arguments and
// results, `par.sharding_constraint` on the gradients and the updated
// parameters), which propagation and partitioning turn into the collectives
// (the gradient's reduction becomes a reduce_scatter, the updated parameter
// is all_gathered; docs/Formulas.md).
//
// zero=2 (ZeRO stage 2: gradients reduce-scattered, never reduced whole) is
// the same program: par's zero=1 already reduces each gradient straight into
// its shard (RationaleCommunication.md says why the stages coincide here).
//
// zero=3 (ZeRO stage 3, FSDP's FULL_SHARD) keeps the parameters themselves
// in their state's layout between steps (the step's parameter arguments and
// results, and the gradient function's parameter arguments), and gathers
// each one where it is used: one `par.sharding_constraint` back to the
// parameter's own layout before its first use in the forward and another
// before its first use in the backward (`par.zero_gather`), so that the
// gathered copy of the forward dies there and the backward gathers again.
// Under mixed precision the gather follows the cast to the compute type, so
// it moves 16-bit elements.
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
  /// 0: the state sharded like its parameter; 1: ZeRO stage 1 (state and
  /// update over the data-parallel axes); 2: stage 2 (gradients too: the
  /// same program as 1 here); 3: stage 3 (parameters too).
  int64_t stage = 0;
  /// zero>=1: the mesh axes to shard the state over; empty: those the data
  /// arguments split their batch dim (0) over, in mesh order.
  ArrayRef<std::string> axes;
};

/// Checks the options on their own, before any function is rewritten: the
/// stage is 0, 1, 2 or 3, and axes are given only with a stage >= 1. Reports
/// an error on `op` (the module) otherwise.
LogicalResult verifyZeROOptions(Operation *op, const ZeROOptions &options);

/// The layout of each parameter of a train step and of its optimizer state
/// (every state kind of a parameter shares it).
struct OptimizerStateLayout {
  /// The step's mesh: the first annotated argument's, else the module's only
  /// one; null without either.
  MeshOp mesh;
  /// The ZeRO stage (ZeROOptions::stage).
  int64_t stage = 0;
  /// zero>=1: the data-parallel axes the state is split over (empty when
  /// ZeRO has no effect).
  SmallVector<StringRef> axes;
  /// Per parameter: its sharding (without partial axes), pinned with zero>=1
  /// (replicated when unannotated); null when it keeps whatever propagation
  /// gives it. With zero=3 the layout the parameter is computed with (where
  /// it is gathered to), not the one it is kept in.
  SmallVector<ShardingAttr> param;
  /// Per parameter: its state's sharding.
  SmallVector<ShardingAttr> state;

  /// Whether parameter `j`'s state is split further than the parameter, so
  /// that its gradient and update run on the local block of the state.
  bool isZeROSharded(unsigned j) const { return state[j] != param[j]; }
  /// Whether parameter `j` itself is kept split like its state between
  /// steps (zero=3) and gathered where it is used.
  bool isParameterSharded(unsigned j) const {
    return stage == 3 && isZeROSharded(j);
  }
  /// The sharding parameter `j` is kept in between steps (the step's
  /// argument and result): its state's with zero=3, else its own.
  ShardingAttr stored(unsigned j) const {
    return isParameterSharded(j) ? state[j] : param[j];
  }
};

/// Decides the layout for the step of `fn`, whose parameters are the
/// arguments `params`: with zero=0 each state takes its parameter's
/// annotation; with zero>=1 the data-parallel axes a parameter is not split
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

/// ZeRO-1/2, on the updated parameters (`params[j]`): each back in its
/// parameter's layout (an all_gather over the data-parallel axes) where its
/// state is split further. Nothing with zero=3: the parameter stays split.
void constrainParametersToLayout(OpBuilder &b, Location loc,
                                 MutableArrayRef<Value> params,
                                 const OptimizerStateLayout &layout);

/// What gatherParametersAtUses made for parameter j: the gathers (one per
/// phase that uses it: forward, backward) and their element type (the
/// compute type when the gather follows the cast to it).
struct ParameterGathers {
  unsigned forward = 0, backward = 0;
  Type elementType;
};

/// ZeRO-3, on the gradient function `grad` of the step (par-autodiff's:
/// forward then backward in one body; `params` its parameter arguments in
/// the layout's order): every parameter kept split (isParameterSharded) gets
/// that split as its argument's sharding, and each use a gathered copy in
/// the parameter's layout, one `par.sharding_constraint` (carrying
/// `par.zero_gather` = "forward" or "backward", so that the two gathers stay
/// two after partitioning) right before the first op of each phase that
/// uses it. The forward is what the loss depends on; the backward, the
/// rest. A use by a cast to a narrower float type (mixed precision) is
/// left on the shard and the cast's result gathered instead (16-bit
/// bytes). Returns what it made per parameter.
SmallVector<ParameterGathers>
gatherParametersAtUses(func::FuncOp grad, ArrayRef<unsigned> params,
                       const OptimizerStateLayout &layout);

/// par-optimizer's `report=true` for the step `step` of `fn`: the state's
/// layout and bytes per rank (`stateKinds` tensors per parameter, as zero=0
/// would have them too), and with zero>=1 the ring bytes per step of the
/// gradient reduction and the parameter gathers over the data-parallel axes
/// (`gathers`: zero=3's, per parameter; empty otherwise), and the model
/// state per rank (parameters + gradients + optimizer state, the ZeRO
/// paper's figure; docs/Formulas.md).
void printOptimizerStateReport(llvm::raw_ostream &os, func::FuncOp step,
                               func::FuncOp fn, ArrayRef<unsigned> params,
                               const OptimizerStateLayout &layout,
                               StringRef optimizer, unsigned stateKinds,
                               const ZeROOptions &options,
                               ArrayRef<ParameterGathers> gathers);

} // namespace mlir::par

#endif // PAR_COMMUNICATION_ZERO_H
