//===- OpCost.h - The arithmetic an op does ---------------------*- C++ -*-===//
//
// One count of an op's arithmetic for every pass that weighs ops: the
// pipeline split balances stages by it (and by bytes), the pipeline
// schedule weighs each stage's actions by it, par-recompute reports the
// forward FLOPs it adds (and the bytes it no longer saves).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_ANALYSIS_OPCOST_H
#define PAR_DIALECT_PAR_ANALYSIS_OPCOST_H

#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::par {

/// FLOPs of one op on tensors of static shape: iteration space x scalar ops
/// in the body for linalg ops (a matmul body is a multiply and an add: 2
/// per multiply-accumulate); one per result element otherwise (dynamic
/// sizes count as 1).
double getOpFlops(Operation *op);

/// Bytes of a tensor of static shape (elements x element bytes, at least
/// one byte per element); 0 for anything else.
int64_t getTensorBytes(Type t);

/// Flop-equivalents per byte moved in the cost model: a core does a few
/// flops in the time it streams one byte from memory.
constexpr double kFlopsPerByte = 4.0;

/// An op's cost: its FLOPs plus kFlopsPerByte per byte of its tensor
/// operands and results.
double getOpCost(Operation *op);

/// A function's cost: the sum of getOpCost over the ops of its body (a
/// linalg op counted once, with its body).
double getFunctionCost(FunctionOpInterface fn);

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_ANALYSIS_OPCOST_H
