//===- TestShardingRules.cpp - par-test-sharding-rules --------------------===//
//
// Exposes the sharding-rule interface to FileCheck/-verify-diagnostics, the
// way Triton and IREE expose analyses through test passes.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Dialect/Par/Interfaces/ShardingRuleOpInterface.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Pass/Pass.h"

#define DEBUG_TYPE "par-test-sharding-rules"

using namespace mlir;
using namespace mlir::par;

namespace {
/// Emits `sharding rule: <rule>` as a remark on every op that has a rule
/// (and `no sharding rule` on ops with tensor operands or results that have
/// none), so that rules can be pinned with -verify-diagnostics. Factors are
/// named i, j, k, ... in order; `_` marks a dimension with no factor.
struct TestShardingRulesPass
    : public PassWrapper<TestShardingRulesPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestShardingRulesPass)
  StringRef getArgument() const final { return "par-test-sharding-rules"; }
  StringRef getDescription() const final {
    return "Test pass: reports each op's sharding rule as a remark";
  }
  void runOnOperation() override {
    getOperation().walk([&](Operation *op) {
      bool hasTensors = llvm::any_of(
          llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()),
          [](Type t) { return isa<RankedTensorType>(t); });
      // par's annotations and collectives have no rule; its ops that have
      // one (par.recompute_barrier) are reported like the others.
      if (!hasTensors || (isa<ParDialect>(op->getDialect()) &&
                          !isa<ShardingRuleOpInterface>(op)))
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

namespace mlir::par::test {
void registerTestShardingRulesPass() { PassRegistration<TestShardingRulesPass>(); }
} // namespace mlir::par::test
