//===- ReshardPlan.h - How one sharding becomes another ---------*- C++ -*-===//
//
// The reshard planner: the collective steps that turn one sharding into
// another and their cost in bytes per device (ring formulas), shared by
// propagation (to settle conflicts) and partitioning (to emit the steps).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_ANALYSIS_RESHARDPLAN_H
#define PAR_DIALECT_PAR_ANALYSIS_RESHARDPLAN_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::par {

using AxisList = SmallVector<StringRef>;

//===----------------------------------------------------------------------===//
// Reshard planning
//===----------------------------------------------------------------------===//

struct ReshardStep {
  enum class Kind {
    AllReduce,     // partial -> replicated over `axes`
    ReduceScatter, // partial -> split `dim` over `axes`
    AllGather,     // split `dim` over `axes` -> replicated
    AllToAll,      // split `dim` (concat) -> split `dim2` (split) over `axes`
    AllSlice,      // replicated -> split `dim` over `axes` (local)
    MakePartial,   // replicated -> partial over `axes` (neutral value only)
  };
  Kind kind;
  AxisList axes;
  int64_t dim = -1;
  int64_t dim2 = -1;
  ReductionKind reduction = ReductionKind::Sum;
  /// Sharding after this step.
  ShardingAttr after;
};

/// True if `v` holds the identity of `kind` everywhere (a splat constant or
/// a fill of one), so that every device may hold it as a partial value
/// without changing the reduction.
bool isNeutralValue(Value v, ReductionKind kind);

/// Steps turning `from` into `to` (same mesh; either may be null =
/// replicated). Never fails: every pair of valid shardings is reachable.
SmallVector<ReshardStep> planReshard(ShardingAttr from, ShardingAttr to,
                                     int64_t rank);

/// Bytes one device sends for `steps` on a tensor of global type `type`
/// starting from sharding `from`, under the ring formulas. Non-divisible
/// intermediate shapes are costed as if divisible.
double reshardCost(ArrayRef<ReshardStep> steps, ShardingAttr from,
                   RankedTensorType type, MeshOp mesh);

/// Bytes per device for one collective on local tensor types (ring formulas
/// from docs/Formulas.md). Returns 0 for local ops.
double collectiveBytes(Operation *op);

/// Bytes of a tensor type (element width rounded up to bytes).
double tensorBytes(RankedTensorType type);

/// Per-device shape of `type` under `sharding`, rounding down where a split
/// does not divide (for costing only).
SmallVector<int64_t> approxLocalShape(RankedTensorType type,
                                      ShardingAttr sharding, MeshOp mesh);

/// Product of the sizes of `axes` on `mesh`.
int64_t axesProduct(MeshOp mesh, ArrayRef<StringRef> axes);

/// True if every dim of `a` is a prefix of the same dim of `b`, partial axes
/// ignored (b is at least as split as a, consistently).
bool isPrefixSharding(ShardingAttr a, ShardingAttr b);

/// True if axis list `a` is a prefix of `b`.
bool isAxesPrefix(ArrayRef<StringRef> a, ArrayRef<StringRef> b);

/// Length of the common prefix of two axis lists.
size_t commonAxesPrefix(ArrayRef<StringRef> a, ArrayRef<StringRef> b);

/// Bytes of one device's block of `type` under `s` (approxLocalShape).
double localBytes(RankedTensorType type, ShardingAttr s, MeshOp mesh);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_ANALYSIS_RESHARDPLAN_H
