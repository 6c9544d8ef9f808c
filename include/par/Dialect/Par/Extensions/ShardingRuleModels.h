//===- ShardingRuleModels.h - Sharding rules of upstream ops ----*- C++ -*-===//
//
// ShardingRuleOpInterface as external models on the upstream ops a model is
// written in (linalg structured ops, tensor reshapes and slices, arith and
// math elementwise ops), derived from the ops' own indexing maps.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_EXTENSIONS_SHARDINGRULEMODELS_H
#define PAR_DIALECT_PAR_EXTENSIONS_SHARDINGRULEMODELS_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::par {

/// Registers the sharding-rule external models on upstream ops (linalg,
/// tensor, arith, math).
void registerShardingRuleModels(DialectRegistry &registry);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_EXTENSIONS_SHARDINGRULEMODELS_H
