//===- ShardingPropagation.h - Propagation as a function -------*- C++ -*-===//
//
// The fixed point of par-sharding-propagation, callable from other passes
// (par-pipeline-split reads the activations' shardings from it) without
// nesting a pass manager.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_TRANSFORMS_SHARDINGPROPAGATION_H
#define PAR_DIALECT_PAR_TRANSFORMS_SHARDINGPROPAGATION_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>

namespace mlir::par {

struct PropagationStats {
  int64_t iterations = 0; // ops visited
  int64_t conflicts = 0;  // operands whose sharding the choice changed
};

/// Propagates shardings over `module` to a fixed point and writes them back
/// as `par.sharding` attributes on function arguments/results and ops.
PropagationStats propagateShardings(ModuleOp module);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_TRANSFORMS_SHARDINGPROPAGATION_H
