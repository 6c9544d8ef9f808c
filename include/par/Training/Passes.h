//===- Passes.h - Training passes -------------------------------*- C++ -*-===//
//
// Autodiff and the optimizer: a forward + loss becomes a train step: the passes of lib/Training (declared in Passes.td next to this header).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRAINING_PASSES_H
#define PAR_TRAINING_PASSES_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Training/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Training/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_TRAINING_PASSES_H
