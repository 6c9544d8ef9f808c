//===- Passes.h - Conversion/ParToRuntime passes ----------------*- C++ -*-===//
//
// Memref-form par ops and matmuls to par runtime calls: the passes of lib/Conversion/ParToRuntime (declared in Passes.td next to this header).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CONVERSION_PARTORUNTIME_PASSES_H
#define PAR_CONVERSION_PARTORUNTIME_PASSES_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Conversion/ParToRuntime/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Conversion/ParToRuntime/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_CONVERSION_PARTORUNTIME_PASSES_H
