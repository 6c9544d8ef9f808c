//===- AdjointModels.h - Adjoints of upstream ops ---------------*- C++ -*-===//
//
// AdjointOpInterface as external models on the upstream ops par-autodiff
// differentiates: linalg.generic (with the scalar tangent rules of its
// body), linalg.softmax, tensor reshapes, slices and concat, and the ops
// whose results carry no gradient (linalg.fill, tensor.empty,
// arith.constant).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRAINING_ADJOINTMODELS_H
#define PAR_TRAINING_ADJOINTMODELS_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::par {

/// Registers the adjoint external models on upstream ops (linalg, tensor,
/// arith).
void registerAdjointModels(DialectRegistry &registry);

} // namespace mlir::par

#endif // PAR_TRAINING_ADJOINTMODELS_H
