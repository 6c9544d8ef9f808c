//===- TestShardingRules.cpp - par-test-sharding-rules --------------------===//
//
// Exposes the sharding-rule interface to FileCheck/-verify-diagnostics, the
// way Triton and IREE expose analyses through test passes.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"

#define DEBUG_TYPE "par-test-sharding-rules"

namespace mlir::par {
#define GEN_PASS_DEF_TESTSHARDINGRULES
#include "par/Dialect/Par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct TestShardingRulesPass
    : public mlir::par::impl::TestShardingRulesBase<TestShardingRulesPass> {
  void runOnOperation() override {
    getOperation().walk([&](Operation *op) {
      bool hasTensors = llvm::any_of(
          llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()),
          [](Type t) { return isa<RankedTensorType>(t); });
      if (!hasTensors || isa<ParDialect>(op->getDialect()))
        return;
      auto iface = dyn_cast<ShardingRuleOpInterface>(op);
      if (!iface) {
        if (!op->hasTrait<OpTrait::ReturnLike>())
          op->emitRemark("no sharding rule");
        return;
      }
      FailureOr<ShardingRule> rule = iface.getShardingRule();
      if (failed(rule))
        op->emitRemark("no sharding rule");
      else
        op->emitRemark() << "sharding rule: " << rule->str();
    });
  }
};
} // namespace
