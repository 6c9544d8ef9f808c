//===- Passes.h - Codegen/CPU passes ----------------------------*- C++ -*-===//
//
// CPU code generation: fusion, decomposition, entry points: the passes of lib/Codegen/CPU (declared in Passes.td next to this header).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CODEGEN_CPU_PASSES_H
#define PAR_CODEGEN_CPU_PASSES_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Codegen/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Codegen/CPU/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_CODEGEN_CPU_PASSES_H
