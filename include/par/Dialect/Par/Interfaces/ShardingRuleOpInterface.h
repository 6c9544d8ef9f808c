//===- ShardingRuleOpInterface.h - Per-op sharding rules -------*- C++ -*-===//
//
// A sharding rule describes an op as a loop nest over "factors" (Shardy's
// term): each tensor dimension of an operand or result iterates over one
// factor, or over none. Two dimensions mapped to the same factor must be
// split the same way. A factor that appears in operands but in no result is a
// reduction: splitting it leaves the results partial. A blocked factor must
// not be split at all (a softmax dimension, a dimension read by
// linalg.index, a minor dimension of a reshape group).
//
// ShardingRuleOpInterface gives an op its rule; upstream ops get it as
// external models (Dialect/Par/Extensions/ShardingRuleModels.h).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_INTERFACES_SHARDINGRULEOPINTERFACE_H
#define PAR_DIALECT_PAR_INTERFACES_SHARDINGRULEOPINTERFACE_H

#include "par/Dialect/Par/IR/ParEnums.h"

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <string>

namespace mlir::par {

enum class FactorKind { Parallel, Reduction, Blocked };

struct ShardingRule {
  static constexpr int64_t kNoFactor = -1;

  /// Loop extent of each factor (ShapedType::kDynamic if unknown).
  llvm::SmallVector<int64_t> factorSizes;
  llvm::SmallVector<FactorKind> factorKinds;
  /// For each op operand: one factor index per tensor dimension. Non-tensor
  /// operands have an empty list and `operandIsTensor` false.
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandDims;
  llvm::SmallVector<bool> operandIsTensor;
  /// For each op result: one factor index per dimension.
  llvm::SmallVector<llvm::SmallVector<int64_t>> resultDims;
  llvm::SmallVector<bool> resultIsTensor;
  /// For destination-style ops: the result each init operand accumulates
  /// into, or -1. Inits of an op with a split reduction factor must hold the
  /// reduction's neutral value.
  llvm::SmallVector<int64_t> operandTiedResult;
  /// How partial results over split reduction factors combine.
  ReductionKind reductionKind = ReductionKind::Sum;

  int64_t addFactor(int64_t size, FactorKind kind) {
    factorSizes.push_back(size);
    factorKinds.push_back(kind);
    return factorSizes.size() - 1;
  }
  int64_t getNumFactors() const { return factorSizes.size(); }
  bool isReduction(int64_t f) const {
    return factorKinds[f] == FactorKind::Reduction;
  }
  bool isBlocked(int64_t f) const {
    return factorKinds[f] == FactorKind::Blocked;
  }
  /// Human-readable form for diagnostics and tests, e.g.
  /// "([i, k], [k, j]) -> ([i, j]) {i=8, j=16, k=4 reduction}".
  std::string str() const;
};

} // namespace mlir::par

#include "par/Dialect/Par/Interfaces/ShardingRuleOpInterface.h.inc"

#endif // PAR_DIALECT_PAR_INTERFACES_SHARDINGRULEOPINTERFACE_H
