//===- Pipelines.cpp - par pass pipelines ---------------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

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

void mlir::par::registerAllParPasses() {
  registerParPasses();
  PassPipelineRegistration<SPMDPipelineOptions>(
      "par-spmd",
      "Sharding propagation, SPMD partitioning, cleanup and verification",
      buildSPMDPipeline);
}
