//===- Passes.h - Frontend normalisation passes -----------------*- C++ -*-===//
//
// The passes of lib/Frontend (declared in Passes.td next to this header):
// they bring torch-mlir's linalg-on-tensors output to the forms par's
// autodiff and sharding rules take, and `par-normalize-torch`, the pipeline
// of them that par-compile runs first.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_FRONTEND_PASSES_H
#define PAR_FRONTEND_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Frontend/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Frontend/Passes.h.inc"

/// `par-normalize-torch`: every frontend normalisation, in order
/// (lib/Frontend/NormalizeTorch.cpp says why each sits where it does).
void buildNormalizeTorchPipeline(OpPassManager &pm);

/// Registers the `par-normalize-torch` pipeline (the passes register with
/// the generated registerParFrontendPasses()).
void registerParFrontendPipelines();

} // namespace mlir::par

#endif // PAR_FRONTEND_PASSES_H
