//===- ShardingPropagation.cpp - par-sharding-propagation -----------------===//
//
// A worklist fixed point over every op of the module. State lives on tie
// classes (values control flow forces to agree). A class's sharding only
// ever grows (each dim's axis list is extended, never changed), so the fixed
// point is reached in at most (#classes x #axes) updates. Annotated classes
// are fixed: annotations always win. See docs/RationalePropagation.md.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/ShardingPropagation.h"
#include "par/Dialect/Par/Analysis/FactorChoice.h"
#include "par/Dialect/Par/Analysis/TieClasses.h"
#include "par/Dialect/Par/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/DebugLog.h"

#include <deque>

#define DEBUG_TYPE "par-sharding-propagation"

namespace mlir::par {
#define GEN_PASS_DEF_SHARDINGPROPAGATION
#include "par/Dialect/Par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The fixed point over one module (propagateShardings).
struct Propagator {
  void run(ModuleOp module);
  PropagationStats stats;

private:
  /// Sets `leader`'s sharding if it is not fixed and `s` extends the
  /// current one; returns true on change.
  bool update(Value leader, ShardingAttr s);
  void seed(ModuleOp module);
  void writeBack(ModuleOp module);

  std::shared_ptr<TieClasses> ties;
  DenseMap<Value, ShardingAttr> state;
  DenseSet<Value> fixed;
};

} // namespace

bool Propagator::update(Value leader, ShardingAttr s) {
  if (!s || fixed.contains(leader))
    return false;
  s = s.withoutPartial();
  ShardingAttr cur = state.lookup(leader);
  if (cur == s)
    return false;
  if (!cur) {
    if (s.isFullyReplicated())
      return false; // No information beyond "unknown".
    state[leader] = s;
    return true;
  }
  if (cur.getMesh() != s.getMesh() || !isPrefixSharding(cur, s))
    return false; // Never take back a decision: keeps the lattice monotone.
  state[leader] = s;
  return true;
}

void Propagator::seed(ModuleOp module) {
  auto fix = [&](Value v, ShardingAttr s) {
    Value l = ties->leader(v);
    if (fixed.contains(l))
      return; // The first annotation of a class wins; partition reshards.
    state[l] = s;
    fixed.insert(l);
  };
  module.walk([&](FunctionOpInterface fn) {
    if (fn.isExternal())
      return;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto s = fn.getArgAttrOfType<ShardingAttr>(
              i, ParDialect::kShardingAttrName))
        fix(fn.getArgument(i), s);
  });
  module.walk([&](Operation *op) {
    if (auto c = dyn_cast<ShardingConstraintOp>(op))
      fix(c.getResult(), c.getSharding());
    else if (auto r = dyn_cast<ReshardOp>(op))
      fix(r.getResult(), r.getSharding());
  });
  // A result annotation constrains the returned value like a
  // sharding_constraint would.
  module.walk([&](FunctionOpInterface fn) {
    if (fn.isExternal())
      return;
    for (Block &block : fn.getFunctionBody()) {
      Operation *term = block.getTerminator();
      if (!term || !term->hasTrait<OpTrait::ReturnLike>())
        continue;
      for (unsigned i = 0; i < fn.getNumResults() && i < term->getNumOperands();
           ++i)
        if (auto s = fn.getResultAttrOfType<ShardingAttr>(
                i, ParDialect::kShardingAttrName))
          if (isa<RankedTensorType>(term->getOperand(i).getType()))
            fix(term->getOperand(i), s);
    }
  });
  // Shardings left on ops by an earlier run are starting points, not
  // constraints.
  module.walk([&](Operation *op) {
    if (isa<ShardingConstraintOp, ReshardOp>(op))
      return;
    auto list = op->getAttrOfType<ArrayAttr>(ParDialect::kShardingAttrName);
    if (!list || list.size() != op->getNumResults())
      return;
    for (auto [v, a] : llvm::zip(op->getResults(), list))
      if (auto s = dyn_cast<ShardingAttr>(a))
        update(ties->leader(v), s);
  });
}

void Propagator::run(ModuleOp module) {
  ties = std::make_shared<TieClasses>(module);
  state.clear();
  fixed.clear();
  seed(module);

  // Ops that move shardings, with their rules, and the ops touching each
  // class (to revisit when the class changes).
  SmallVector<Operation *> ops;
  DenseMap<Operation *, ShardingRule> rules;
  DenseMap<Value, SmallVector<Operation *>> touching;
  module.walk([&](Operation *op) {
    if (isa<ShardingConstraintOp>(op)) {
      ops.push_back(op);
    } else if (auto iface = dyn_cast<ShardingRuleOpInterface>(op)) {
      FailureOr<ShardingRule> rule = iface.getShardingRule();
      if (failed(rule))
        return;
      rules[op] = std::move(*rule);
      ops.push_back(op);
    } else {
      return;
    }
    for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
      if (isa<RankedTensorType>(v.getType()))
        touching[ties->leader(v)].push_back(op);
  });

  std::deque<Operation *> worklist(ops.begin(), ops.end());
  DenseSet<Operation *> queued(ops.begin(), ops.end());
  auto changed = [&](Value leader, Operation *from) {
    for (Operation *user : touching.lookup(leader))
      if (user != from && queued.insert(user).second)
        worklist.push_back(user);
  };

  while (!worklist.empty()) {
    Operation *op = worklist.front();
    worklist.pop_front();
    queued.erase(op);
    ++stats.iterations;

    if (auto c = dyn_cast<ShardingConstraintOp>(op)) {
      // The operand is pulled towards the constrained sharding.
      Value l = ties->leader(c.getInput());
      if (update(l, c.getSharding()))
        changed(l, op);
      continue;
    }

    const ShardingRule &rule = rules[op];
    SmallVector<ShardingAttr> operandShardings, resultShardings;
    for (Value v : op->getOperands())
      operandShardings.push_back(isa<RankedTensorType>(v.getType())
                                     ? state.lookup(ties->leader(v))
                                     : ShardingAttr());
    for (Value v : op->getResults())
      resultShardings.push_back(isa<RankedTensorType>(v.getType())
                                    ? state.lookup(ties->leader(v))
                                    : ShardingAttr());
    SmallVector<ShardingAttr> all(operandShardings);
    llvm::append_range(all, resultShardings);
    MeshOp mesh = findMesh(op, all);
    if (!mesh)
      continue;
    OpShardingChoice choice =
        chooseOpSharding(op, rule, operandShardings, resultShardings, mesh);
    LDBG() << "propagating through " << op->getName() << " cost "
           << choice.cost;
    for (auto [v, s] : llvm::zip(op->getOperands(), choice.operands))
      if (s) {
        Value l = ties->leader(v);
        if (update(l, s))
          changed(l, op);
      }
    for (auto [v, s] : llvm::zip(op->getResults(), choice.results))
      if (s) {
        Value l = ties->leader(v);
        if (update(l, s))
          changed(l, op);
      }
    for (auto [cur, want] : llvm::zip(operandShardings, choice.operands))
      if (cur && want && cur != want.withoutPartial())
        ++stats.conflicts;
  }

  writeBack(module);
}

void Propagator::writeBack(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  auto get = [&](Value v) { return state.lookup(ties->leader(v)); };
  module.walk([&](FunctionOpInterface fn) {
    if (fn.isExternal())
      return;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (ShardingAttr s = get(fn.getArgument(i)))
        fn.setArgAttr(i, ParDialect::kShardingAttrName, s);
    Operation *term = fn.getFunctionBody().back().getTerminator();
    if (term && term->hasTrait<OpTrait::ReturnLike>())
      for (unsigned i = 0; i < fn.getNumResults() && i < term->getNumOperands();
           ++i)
        if (!fn.getResultAttr(i, ParDialect::kShardingAttrName))
          if (ShardingAttr s = get(term->getOperand(i)))
            fn.setResultAttr(i, ParDialect::kShardingAttrName, s);
  });
  module.walk([&](Operation *op) {
    if (op->getNumResults() == 0 ||
        isa<ShardingConstraintOp, ReshardOp, FunctionOpInterface>(op))
      return;
    SmallVector<ShardingAttr> shardings;
    for (Value v : op->getResults())
      shardings.push_back(isa<RankedTensorType>(v.getType()) ? get(v)
                                                             : ShardingAttr());
    ShardingAttr any;
    for (ShardingAttr s : shardings)
      if (s)
        any = s;
    if (!any)
      return;
    SmallVector<Attribute> entries;
    for (auto [v, s] : llvm::zip(op->getResults(), shardings)) {
      if (s)
        entries.push_back(s);
      else if (auto t = dyn_cast<RankedTensorType>(v.getType()))
        entries.push_back(
            ShardingAttr::getReplicated(ctx, any.getMesh(), t.getRank()));
      else
        entries.push_back(UnitAttr::get(ctx));
    }
    op->setAttr(ParDialect::kShardingAttrName, ArrayAttr::get(ctx, entries));
  });
}

PropagationStats mlir::par::propagateShardings(ModuleOp module) {
  Propagator p;
  p.run(module);
  return p.stats;
}

namespace {
struct ShardingPropagationPass
    : public mlir::par::impl::ShardingPropagationBase<ShardingPropagationPass> {
  void runOnOperation() override {
    PropagationStats s = propagateShardings(getOperation());
    numIterations += s.iterations;
    numConflicts += s.conflicts;
  }
};
} // namespace
