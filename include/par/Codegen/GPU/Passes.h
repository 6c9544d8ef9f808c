//===- Passes.h - Codegen/GPU passes ----------------------------*- C++ -*-===//
//
// GPU code generation: linalg on buffers as gpu.launch kernels, device
// memory for every buffer: the passes of lib/Codegen/GPU (declared in
// Passes.td next to this header).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CODEGEN_GPU_PASSES_H
#define PAR_CODEGEN_GPU_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Codegen/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Codegen/GPU/Passes.h.inc"

} // namespace mlir::par

#endif // PAR_CODEGEN_GPU_PASSES_H
