//===- Passes.h - Dialect/Par/Transforms passes -----------------*- C++ -*-===//
//
// Sharding propagation, SPMD partitioning and its
// verification: the passes of lib/Dialect/Par/Transforms (declared in
// Passes.td next to this header). The passes on the program's
// communication are lib/Communication's (par/Communication/Passes.h).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_TRANSFORMS_PASSES_H
#define PAR_DIALECT_PAR_TRANSFORMS_PASSES_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Dialect/Par/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Dialect/Par/Transforms/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_TRANSFORMS_PASSES_H
