//===- TestLowerEmulatedGPU.cpp - par-test-lower-cpu-emulating-gpu --------===//
//
// The CPU lowering with the cuda target's kernels in place of the CPU's
// loops: bufferization, the runtime's matmuls, par-gpu-map-linalg, the
// kernels run on the host (par-test-emulate-gpu-launch), then the rest of
// the CPU lowering. A train step built this way runs under par-run like
// any CPU artifact, so its results can be checked against the unsharded
// reference: the GPU kernels' indexing, reductions and folded fills on a
// whole program, without a GPU.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/GPU/Passes.h"
#include "par/Conversion/ParToRuntime/Passes.h"
#include "par/Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace mlir::par::test {
std::unique_ptr<Pass> createTestEmulateGPULaunchPass();

void registerTestLowerEmulatedGPUPipeline() {
  PassPipelineRegistration<>(
      "par-test-lower-cpu-emulating-gpu",
      "The CPU lowering with par-gpu-map-linalg's kernels emulated on the "
      "host (test only)",
      [](OpPassManager &pm) {
        buildBufferizePhase(pm);
        pm.addPass(createMatmulToRuntime());
        pm.addPass(createMapLinalgToGPU());
        pm.addPass(createTestEmulateGPULaunchPass());
        buildLowerCPUPhase(pm);
      });
}
} // namespace mlir::par::test
