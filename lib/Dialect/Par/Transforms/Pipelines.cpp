//===- Pipelines.cpp - par pass pipelines ---------------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::par;

void mlir::par::buildSPMDPipeline(OpPassManager &pm,
                                  const SPMDPipelineOptions &options) {
  // Cheap shared tensors (empty, fill, splat) get one copy per use, so that
  // one shared init does not force one sharding on all its users.
  pm.addPass(createSplitConstants());
  // Propagation needs the whole unsharded program to see every annotation
  // and every op's rule.
  pm.addPass(createShardingPropagation());
  // Partitioning reads propagation's shardings and makes types local.
  pm.addPass(createPartition());
  // Cleanup: fold what partitioning left (e.g. casts, duplicate constants).
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // The stage's contract.
  pm.addPass(createVerifySPMD());
  if (options.report)
    pm.addPass(createCommReport());
}

LogicalResult mlir::par::buildLowerCPUPipeline(OpPassManager &pm) {
  // Entry points get C interfaces first (func-to-LLVM reads the attribute).
  // Bufferization turns collectives into runtime calls (their bufferization
  // models) and gives function boundaries contiguous memrefs, which the
  // runtime's pointer-based ABI and par-run's descriptors rely on.
  // Deallocation frees every temporary; returned buffers belong to the
  // caller. Matmuls take the BLAS path before the remaining linalg becomes
  // loops. math.tanh (GELU) is expanded to exp-based arithmetic before the
  // math conversions, which would otherwise call libm's tanhf per element;
  // only tanh, the other math ops keep their LLVM intrinsics. Then the
  // standard conversions to the LLVM dialect, and finally one packed
  // wrapper per entry point.
  return parsePassPipeline(
      "par-mark-entry-points,"
      "par-decompose-aggregated-ops,"
      "func.func(convert-elementwise-to-linalg),"
      "par-fuse-elementwise,"
      "one-shot-bufferize{bufferize-function-boundaries "
      "function-boundary-type-conversion=identity-layout-map "
      "allow-return-allocs-from-loops},"
      "buffer-deallocation-pipeline,"
      "convert-bufferization-to-memref,"
      "par-matmul-to-runtime,"
      "func.func(convert-linalg-to-loops),"
      "func.func(math-expand-ops{ops=tanh}),"
      "lower-affine,"
      "convert-scf-to-cf,"
      "expand-strided-metadata,"
      "finalize-memref-to-llvm,"
      "convert-math-to-llvm,"
      "convert-math-to-libm,"
      "convert-arith-to-llvm,"
      "convert-index-to-llvm,"
      "convert-func-to-llvm,"
      "convert-cf-to-llvm,"
      "reconcile-unrealized-casts,"
      "par-emit-packed-entry",
      pm);
}

void mlir::par::registerAllParPasses() {
  registerParPasses();
  PassPipelineRegistration<SPMDPipelineOptions>(
      "par-spmd",
      "Sharding propagation, SPMD partitioning, cleanup and verification",
      buildSPMDPipeline);
  PassPipelineRegistration<>(
      "par-lower-cpu",
      "Bufferize a partitioned program and lower it to the LLVM dialect, "
      "collectives and matmuls as par runtime calls",
      [](OpPassManager &pm) {
        if (failed(buildLowerCPUPipeline(pm)))
          llvm::report_fatal_error("par-lower-cpu: bad pipeline string");
      });
}
