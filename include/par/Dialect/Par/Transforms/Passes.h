//===- Passes.h - par passes ------------------------------------*- C++ -*-===//

#ifndef PAR_DIALECT_PAR_TRANSFORMS_PASSES_H
#define PAR_DIALECT_PAR_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "par/Dialect/Par/IR/ParDialect.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Dialect/Par/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Dialect/Par/Transforms/Passes.h.inc"

/// Options of the `par-spmd` pipeline.
struct SPMDPipelineOptions
    : public PassPipelineOptions<SPMDPipelineOptions> {
  Option<bool> report{*this, "report",
                      llvm::cl::desc("Print the communication report"),
                      llvm::cl::init(false)};
};

/// Propagation, partitioning, cleanup and the stage's verify pass.
void buildSPMDPipeline(OpPassManager &pm, const SPMDPipelineOptions &options);

/// Bufferization and lowering of a partitioned program to the LLVM dialect
/// for the CPU, with collectives and matmuls as par runtime calls.
LogicalResult buildLowerCPUPipeline(OpPassManager &pm);

/// Registers every par pass and the `par-spmd` pipeline.
void registerAllParPasses();

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_TRANSFORMS_PASSES_H
