//===- ShardingUtils.h - Shared sharding analysis ---------------*- C++ -*-===//
//
// The pieces propagation and partitioning share, so that both decide the same
// way: tie classes (values that control flow forces to share a sharding), the
// reshard planner (how one sharding becomes another, step by step, and what
// that costs in bytes), and the per-op factor choice.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_TRANSFORMS_SHARDINGUTILS_H
#define PAR_DIALECT_PAR_TRANSFORMS_SHARDINGUTILS_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/EquivalenceClasses.h"

namespace mlir::par {

using AxisList = SmallVector<StringRef>;

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
/// from ANCHORS.md). Returns 0 for local ops.
double collectiveBytes(Operation *op);

/// Bytes of a tensor type (element width rounded up to bytes).
double tensorBytes(RankedTensorType type);

/// Per-device shape of `type` under `sharding`, rounding down where a split
/// does not divide (for costing only).
SmallVector<int64_t> approxLocalShape(RankedTensorType type,
                                      ShardingAttr sharding, MeshOp mesh);

//===----------------------------------------------------------------------===//
// Factor choice
//===----------------------------------------------------------------------===//

/// The shardings an op runs with: its rule's factors split over axes.
struct OpShardingChoice {
  /// Axes each factor is split over.
  SmallVector<AxisList> factorAxes;
  /// Implied per-operand/per-result shardings (null for non-tensors).
  /// Results carry partial axes for split reduction factors; init operands
  /// tied to such results carry them too.
  SmallVector<ShardingAttr> operands;
  SmallVector<ShardingAttr> results;
  /// Estimated bytes to reshard the given shardings into this choice.
  double cost = 0;
};

/// Chooses how an op with `rule` runs given the current shardings of its
/// operands and results (null = unknown). Deterministic. Candidates for a
/// factor come from every value mapping it; compatible ones (one a prefix of
/// the other) merge to the longest; conflicts and axes claimed by two
/// factors are settled by the least resharding bytes, ties by operand order.
/// Costs use `operandTypes`/`resultTypes` (the global types; null entries
/// for non-tensors) or, if empty, the op's current types.
OpShardingChoice chooseOpSharding(Operation *op, const ShardingRule &rule,
                                  ArrayRef<ShardingAttr> operandShardings,
                                  ArrayRef<ShardingAttr> resultShardings,
                                  MeshOp mesh,
                                  ArrayRef<RankedTensorType> operandTypes = {},
                                  ArrayRef<RankedTensorType> resultTypes = {});

/// Product of the sizes of `axes` on `mesh`.
int64_t axesProduct(MeshOp mesh, ArrayRef<StringRef> axes);

/// True if every dim of `a` is a prefix of the same dim of `b`, partial axes
/// ignored (b is at least as split as a, consistently).
bool isPrefixSharding(ShardingAttr a, ShardingAttr b);

/// The mesh of the first non-null sharding, looked up from `from`.
MeshOp findMesh(Operation *from, ArrayRef<ShardingAttr> shardings);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_TRANSFORMS_SHARDINGUTILS_H
