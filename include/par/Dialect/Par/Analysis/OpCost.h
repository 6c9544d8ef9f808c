//===- OpCost.h - The arithmetic an op does ---------------------*- C++ -*-===//
//
// One count of an op's arithmetic for every pass that weighs ops: the
// pipeline split balances stages by it (and by bytes), par-recompute
// reports the forward FLOPs it adds (and the bytes it no longer saves).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_ANALYSIS_OPCOST_H
#define PAR_DIALECT_PAR_ANALYSIS_OPCOST_H

#include "mlir/IR/Operation.h"

namespace mlir::par {

/// FLOPs of one op on tensors of static shape: iteration space x scalar ops
/// in the body for linalg ops (a matmul body is a multiply and an add: 2
/// per multiply-accumulate); one per result element otherwise (dynamic
/// sizes count as 1).
double getOpFlops(Operation *op);

/// Bytes of a tensor of static shape (elements x element bytes, at least
/// one byte per element); 0 for anything else.
int64_t getTensorBytes(Type t);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_ANALYSIS_OPCOST_H
