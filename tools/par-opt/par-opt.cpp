//===- par-opt.cpp - par's mlir-opt style driver ---------------------------===//
//
// Registers the upstream dialects a model is written in (and that later
// lowering stages need), their interface models, par's dialect, sharding-rule
// models, passes and pipelines, then hands over to MlirOptMain.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Dialect/Par/Transforms/RuntimeABI.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  registry.insert<mlir::par::ParDialect>();
  mlir::par::registerShardingRuleModels(registry);
  mlir::par::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::par::registerAllParPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "par optimizer driver: sharding, partitioning and lowering\n",
      registry));
}
