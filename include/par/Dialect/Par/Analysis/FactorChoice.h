//===- FactorChoice.h - How an op runs given shardings ----------*- C++ -*-===//
//
// The per-op factor choice: which mesh axes each of an op's sharding-rule
// factors is split over, given the shardings around it, settled by the
// fewest resharding bytes. Propagation and partitioning decide the same way.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_ANALYSIS_FACTORCHOICE_H
#define PAR_DIALECT_PAR_ANALYSIS_FACTORCHOICE_H

#include "par/Dialect/Par/Analysis/ReshardPlan.h"
#include "par/Dialect/Par/Interfaces/ShardingRuleOpInterface.h"

namespace mlir::par {

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


/// The mesh of the first non-null sharding, looked up from `from`.
MeshOp findMesh(Operation *from, ArrayRef<ShardingAttr> shardings);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_ANALYSIS_FACTORCHOICE_H
