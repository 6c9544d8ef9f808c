//===- par-opt.cpp - par's mlir-opt style driver ---------------------------===//
//
// Registers the upstream dialects a model is written in (and that later
// lowering stages need), their interface models, par's dialect with its
// models, passes and pipelines (par/InitAll.h) and the test passes, then
// hands over to MlirOptMain.
//
//===----------------------------------------------------------------------===//

#include "par/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace mlir::par::test {
void registerTestShardingRulesPass();
void registerTestEmulateGPULaunchPass();
void registerTestLowerEmulatedGPUPipeline();
} // namespace mlir::par::test

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  mlir::par::registerAllParDialects(registry);
  mlir::par::registerAllParPasses();
  mlir::par::test::registerTestShardingRulesPass();
  mlir::par::test::registerTestEmulateGPULaunchPass();
  mlir::par::test::registerTestLowerEmulatedGPUPipeline();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "par optimizer driver: sharding, partitioning and lowering\n",
      registry));
}
