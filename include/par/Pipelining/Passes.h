//===- Passes.h - Pipelining passes -----------------------------*- C++ -*-===//
//
// Pipeline stage split, schedule and its verification: the passes of lib/Pipelining (declared in Passes.td next to this header).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINING_PASSES_H
#define PAR_PIPELINING_PASSES_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Pipelining/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Pipelining/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_PIPELINING_PASSES_H
