//===- Partition.cpp - par-partition --------------------------------------===//
//
// Turns a program whose tensors carry global types and shardings into the
// per-device (SPMD) program. Every op with a sharding rule runs on local
// blocks with the factor split chosen by chooseOpSharding (the same choice
// propagation made); where an operand's sharding differs from what the op
// needs, or the op's output differs from the result's sharding, the reshard
// planner's steps become collectives. Structural ops (scf, cf, func) only
// change types: control flow ties their values into one sharding.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Dialect/Par/Analysis/FactorChoice.h"
#include "par/Dialect/Par/Analysis/TieClasses.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/Support/DebugLog.h"

#define DEBUG_TYPE "par-partition"

namespace mlir::par {
#define GEN_PASS_DEF_PARTITION
#include "par/Dialect/Par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

static constexpr StringLiteral kGlobalTypeAttr = ParDialect::kGlobalTypeAttrName;

namespace {

std::string str(Attribute a) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << a;
  return s;
}

struct PartitionPass : public mlir::par::impl::PartitionBase<PartitionPass> {
  void runOnOperation() override;

private:
  LogicalResult partitionFunction(FunctionOpInterface fn);
  LogicalResult partitionRuleOp(Operation *op, const ShardingRule &rule);
  /// Tensors a rule op's body reads from above (a gather's table) are read
  /// at global indices, so each device gets them whole first.
  LogicalResult replicateCaptured(Operation *op);
  LogicalResult partitionStructural(Operation *op);
  LogicalResult partitionAllFinite(AllFiniteOp op);
  LogicalResult checkNoRuleOp(Operation *op);
  /// Emits the collectives turning `value` (local, of global type `global`,
  /// sharded `from`) into sharding `to`; returns the new local value.
  FailureOr<Value> materialize(OpBuilder &b, Location loc, Value value,
                               RankedTensorType global, ShardingAttr from,
                               ShardingAttr to, Operation *user);
  /// Local type of `v` under its class's sharding.
  FailureOr<RankedTensorType> localTypeOf(Value v, Location loc);

  /// `v` replaces `old` and holds sharding `s`: later users must see both.
  void noteNewValue(Value v, Value old, ShardingAttr s) {
    if (v == old)
      return;
    classSharding[ties->leader(v)] = s;
    globalTypes[v] = globalTypes.lookup(old);
  }

  ShardingAttr shardingOf(Value v) const {
    return classSharding.lookup(ties->leader(v));
  }
  MeshOp meshOf(Operation *from, ShardingAttr s) const {
    return s ? lookupMesh(from, s.getMesh(), /*emitErrors=*/false) : MeshOp();
  }

  std::shared_ptr<TieClasses> ties;
  DenseMap<Value, ShardingAttr> classSharding;
  DenseMap<Value, RankedTensorType> globalTypes;
};

} // namespace

void PartitionPass::runOnOperation() {
  ModuleOp module = getOperation();
  ties = std::make_shared<TieClasses>(module);
  classSharding.clear();
  globalTypes.clear();

  // Each class's sharding: from function arguments, then ops (propagation's
  // `par.sharding` lists, and annotation results).
  auto record = [&](Value v, ShardingAttr s) {
    if (s && isa<RankedTensorType>(v.getType()))
      classSharding.try_emplace(ties->leader(v), s);
  };
  module.walk([&](FunctionOpInterface fn) {
    if (fn.isExternal())
      return;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      record(fn.getArgument(i), fn.getArgAttrOfType<ShardingAttr>(
                                    i, ParDialect::kShardingAttrName));
  });
  module.walk([&](Operation *op) {
    if (auto c = dyn_cast<ShardingConstraintOp>(op))
      return record(c.getResult(), c.getSharding());
    if (auto r = dyn_cast<ReshardOp>(op))
      return record(r.getResult(), r.getSharding());
    auto list = op->getAttrOfType<ArrayAttr>(ParDialect::kShardingAttrName);
    if (!list || list.size() != op->getNumResults())
      return;
    for (auto [v, a] : llvm::zip(op->getResults(), list))
      record(v, dyn_cast<ShardingAttr>(a));
  });

  SmallVector<FunctionOpInterface> fns;
  module.walk([&](FunctionOpInterface fn) {
    // Functions over tensors have builtin function types; others (e.g. an
    // llvm.func already lowered) have nothing to partition.
    if (!fn.isExternal() && isa<FunctionType>(fn.getFunctionType()))
      fns.push_back(fn);
  });
  // Global types first, for all functions: calls look across functions.
  for (FunctionOpInterface fn : fns)
    fn->walk([&](Operation *op) {
      for (Value v : op->getResults())
        if (auto t = dyn_cast<RankedTensorType>(v.getType()))
          globalTypes[v] = t;
      for (Region &r : op->getRegions())
        for (Block &b : r)
          for (BlockArgument a : b.getArguments())
            if (auto t = dyn_cast<RankedTensorType>(a.getType()))
              globalTypes[a] = t;
    });
  for (FunctionOpInterface fn : fns)
    if (failed(partitionFunction(fn)))
      return signalPassFailure();
  module.walk([&](Operation *op) {
    if (!isa<FunctionOpInterface>(op))
      op->removeAttr(ParDialect::kShardingAttrName);
  });
}

FailureOr<RankedTensorType> PartitionPass::localTypeOf(Value v, Location loc) {
  auto global = globalTypes.lookup(v);
  if (!global)
    return failure();
  ShardingAttr s = shardingOf(v);
  if (!s)
    return global;
  MeshOp mesh = lookupMesh(v.getParentRegion()->getParentOp(), s.getMesh());
  if (!mesh)
    return failure();
  return getLocalType([&]() { return emitError(loc); }, global, s, mesh);
}

FailureOr<Value> PartitionPass::materialize(OpBuilder &b, Location loc,
                                            Value value,
                                            RankedTensorType global,
                                            ShardingAttr from, ShardingAttr to,
                                            Operation *user) {
  ShardingAttr any = from ? from : to;
  if (!any)
    return value;
  MeshOp mesh = lookupMesh(user, any.getMesh());
  if (!mesh)
    return failure();
  StringRef meshSym = any.getMesh().getValue();
  SmallVector<ReshardStep> steps = planReshard(from, to, global.getRank());
  for (const ReshardStep &s : steps) {
    FailureOr<RankedTensorType> type = getLocalType(
        [&]() {
          return emitError(loc) << "cannot reshard " << global << " from "
                                << (from ? str(from) : "replicated") << " to "
                                << str(to) << ": ";
        },
        global, s.after, mesh);
    if (failed(type))
      return failure();
    ArrayAttr axes = b.getStrArrayAttr(s.axes);
    Operation *created = nullptr;
    switch (s.kind) {
    case ReshardStep::Kind::AllReduce:
      created = AllReduceOp::create(b, loc, *type, value, meshSym, axes,
                                    s.reduction);
      break;
    case ReshardStep::Kind::ReduceScatter:
      created = ReduceScatterOp::create(b, loc, *type, value, meshSym, axes,
                                        (uint64_t)s.dim, s.reduction);
      break;
    case ReshardStep::Kind::AllGather:
      created = AllGatherOp::create(b, loc, *type, value, meshSym, axes,
                                    (uint64_t)s.dim);
      break;
    case ReshardStep::Kind::AllToAll:
      created = AllToAllOp::create(b, loc, *type, value, meshSym, axes,
                                   /*split_dim=*/(uint64_t)s.dim2,
                                   /*concat_dim=*/(uint64_t)s.dim);
      break;
    case ReshardStep::Kind::AllSlice:
      created = AllSliceOp::create(b, loc, *type, value, meshSym, axes,
                                   (uint64_t)s.dim);
      break;
    case ReshardStep::Kind::MakePartial:
      if (!isNeutralValue(value, s.reduction))
        return emitError(loc)
               << "'" << user->getName() << "' reduces over a loop split on "
               << "mesh axes " << str(axes)
               << ", so its init must hold the neutral value of "
               << stringifyReductionKind(s.reduction)
               << " (e.g. a linalg.fill of 0 for sum)";
      continue;
    }
    ++numCollectives;
    // A ZeRO-3 gather keeps its phase: the forward's and the backward's
    // gathers of one parameter must not become one (CSE).
    if (Attribute phase = user->getAttr(ParDialect::kZeROGatherAttrName))
      created->setAttr(ParDialect::kZeROGatherAttrName, phase);
    // So does sequence parallelism's backward gather.
    if (Attribute phase = user->getAttr(ParDialect::kSPGatherAttrName))
      created->setAttr(ParDialect::kSPGatherAttrName, phase);
    value = created->getResult(0);
  }
  return value;
}

/// Rewrites shape-carrying attributes of ops whose types just changed.
static LogicalResult fixupLocalShapes(Operation *op) {
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    auto type = expand.getResultType();
    if (type.hasStaticShape())
      expand.setStaticOutputShape(type.getShape());
    return success();
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    // Only untouched (full) dims may be split, so a size larger than the
    // (now local) source dim is a split full dim: its size is the local
    // size. (Dropped dims cannot be told from the new result type, which is
    // why this does not go through getDroppedDims.)
    SmallVector<int64_t> sizes(slice.getStaticSizes());
    auto src = slice.getSourceType();
    for (int64_t d = 0; d < src.getRank(); ++d)
      if (!ShapedType::isDynamic(sizes[d]) && !src.isDynamicDim(d) &&
          sizes[d] > src.getDimSize(d))
        sizes[d] = src.getDimSize(d);
    slice.setStaticSizes(sizes);
    return success();
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
    SmallVector<int64_t> sizes(insert.getStaticSizes());
    auto src = insert.getSourceType();
    for (int64_t d = 0; d < src.getRank(); ++d)
      if (!ShapedType::isDynamic(sizes[d]))
        sizes[d] = src.getDimSize(d);
    insert.setStaticSizes(sizes);
    return success();
  }
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    auto type = dyn_cast<RankedTensorType>(cst.getType());
    if (dense && type && dense.getType() != type) {
      if (!dense.isSplat())
        return op->emitOpError("non-splat constant cannot be split");
      cst.setValueAttr(DenseElementsAttr::get(
          type, dense.getSplatValue<Attribute>()));
    }
    return success();
  }
  if (auto splat = dyn_cast<tensor::SplatOp>(op))
    return success();
  if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
    if (!empty.getDynamicSizes().empty() &&
        empty.getType().getNumDynamicDims() != (int64_t)empty.getDynamicSizes().size())
      return op->emitOpError("dynamic sizes do not match the local type");
    return success();
  }
  return success();
}

LogicalResult PartitionPass::partitionRuleOp(Operation *op,
                                             const ShardingRule &rule) {
  SmallVector<ShardingAttr> operandShardings, resultShardings;
  for (Value v : op->getOperands())
    operandShardings.push_back(
        isa<RankedTensorType>(v.getType()) ? shardingOf(v) : ShardingAttr());
  for (Value v : op->getResults())
    resultShardings.push_back(
        isa<RankedTensorType>(v.getType()) ? shardingOf(v) : ShardingAttr());
  SmallVector<ShardingAttr> all(operandShardings);
  llvm::append_range(all, resultShardings);
  MeshOp mesh = findMesh(op, all);
  if (!mesh)
    return success(); // Nothing here is sharded: the op runs replicated.
  FlatSymbolRefAttr meshSym = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  // In a partitioned program nothing is unknown: no sharding = replicated.
  auto known = [&](ShardingAttr s, Value v) -> ShardingAttr {
    if (s || !isa<RankedTensorType>(v.getType()))
      return s;
    return ShardingAttr::getReplicated(
        op->getContext(), meshSym,
        cast<RankedTensorType>(v.getType()).getRank());
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    operandShardings[i] = known(operandShardings[i], v);
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    resultShardings[i] = known(resultShardings[i], v);

  SmallVector<RankedTensorType> operandTypes, resultTypes;
  auto globalOf = [&](Value v) -> RankedTensorType {
    if (!isa<RankedTensorType>(v.getType()))
      return {};
    RankedTensorType t = globalTypes.lookup(v);
    return t ? t : cast<RankedTensorType>(v.getType());
  };
  for (Value v : op->getOperands())
    operandTypes.push_back(globalOf(v));
  for (Value v : op->getResults())
    resultTypes.push_back(globalOf(v));
  OpShardingChoice choice =
      chooseOpSharding(op, rule, operandShardings, resultShardings, mesh,
                       operandTypes, resultTypes);
  LDBG() << "partitioning " << op->getName() << " cost " << choice.cost;

  OpBuilder b(op);
  for (auto [i, want] : llvm::enumerate(choice.operands)) {
    if (!want)
      continue;
    Value v = op->getOperand(i);
    RankedTensorType global = globalTypes.lookup(v);
    if (!global)
      global = cast<RankedTensorType>(v.getType());
    FailureOr<Value> local = materialize(b, op->getLoc(), v, global,
                                         operandShardings[i], want, op);
    if (failed(local))
      return failure();
    op->setOperand(i, *local);
  }
  for (auto [r, produced] : llvm::enumerate(choice.results)) {
    if (!produced)
      continue;
    Value res = op->getResult(r);
    RankedTensorType global = globalTypes.lookup(res);
    FailureOr<RankedTensorType> type = getLocalType(
        [&]() { return op->emitOpError() << "result #" << r << ": "; },
        global, produced, mesh);
    if (failed(type))
      return failure();
    res.setType(*type);
  }
  if (failed(fixupLocalShapes(op)))
    return failure();
  b.setInsertionPointAfter(op);
  for (auto [r, produced] : llvm::enumerate(choice.results)) {
    if (!produced)
      continue;
    Value res = op->getResult(r);
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : res.getUses())
      uses.push_back(&use);
    FailureOr<Value> out =
        materialize(b, op->getLoc(), res, globalTypes.lookup(res), produced,
                    resultShardings[r], op);
    if (failed(out))
      return failure();
    noteNewValue(*out, res, resultShardings[r]);
    for (OpOperand *use : uses)
      use->set(*out);
  }
  return success();
}

LogicalResult PartitionPass::replicateCaptured(Operation *op) {
  SetVector<Value> captured;
  getUsedValuesDefinedAbove(op->getRegions(), captured);
  for (Value v : captured) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    ShardingAttr s = type ? shardingOf(v) : ShardingAttr();
    if (!s || s.isFullyReplicated())
      continue;
    RankedTensorType global = globalTypes.lookup(v);
    if (!global)
      global = type;
    ShardingAttr whole = ShardingAttr::getReplicated(
        op->getContext(), s.getMesh(), global.getRank());
    OpBuilder b(op);
    FailureOr<Value> full =
        materialize(b, op->getLoc(), v, global, s, whole, op);
    if (failed(full))
      return failure();
    noteNewValue(*full, v, whole);
    for (Region &r : op->getRegions())
      replaceAllUsesInRegionWith(v, *full, r);
  }
  return success();
}

LogicalResult PartitionPass::partitionAllFinite(AllFiniteOp op) {
  // Each device checks the block it holds, whatever its sharding; a min
  // over every axis of the mesh makes the decision global: the devices
  // holding replicas agree by construction, and those of other pipeline
  // stages (which never see these tensors) take the same decision.
  FlatSymbolRefAttr meshSym = op.getMeshAttr();
  if (!meshSym)
    return success();
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, meshSym);
  if (!mesh)
    return op.emitOpError() << "refers to " << meshSym
                            << ", which is not a par.mesh";
  OpBuilder b(op);
  b.setInsertionPointAfter(op);
  op.removeMeshAttr();
  ArrayAttr axes = mesh.getAxisNames();
  if (axes.empty())
    return success();
  Value global = AllReduceOp::create(b, op.getLoc(), op.getType(), op.getResult(), meshSym.getValue(),
                                     axes, ReductionKind::Min);
  op.getResult().replaceAllUsesExcept(global, global.getDefiningOp());
  noteNewValue(global, op.getResult(),
               ShardingAttr::getReplicated(op.getContext(), meshSym, 0));
  return success();
}

LogicalResult PartitionPass::partitionStructural(Operation *op) {
  // Results of region/branch/call ops share their class's sharding with the
  // values flowing into them; only their types change.
  for (Value res : op->getResults()) {
    if (!isa<RankedTensorType>(res.getType()))
      continue;
    FailureOr<RankedTensorType> type = localTypeOf(res, op->getLoc());
    if (failed(type))
      return failure();
    res.setType(*type);
  }
  return success();
}

LogicalResult PartitionPass::checkNoRuleOp(Operation *op) {
  auto check = [&](Value v, StringRef what, unsigned i) -> LogicalResult {
    if (!isa<RankedTensorType>(v.getType()))
      return success();
    ShardingAttr s = shardingOf(v);
    if (!s || s.isFullyReplicated())
      return success();
    return op->emitOpError() << "has no sharding rule, so it cannot run with "
                             << what << " #" << i << " sharded as " << s;
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (failed(check(v, "operand", i)))
      return failure();
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    if (failed(check(v, "result", i)))
      return failure();
  return success();
}

LogicalResult PartitionPass::partitionFunction(FunctionOpInterface fn) {
  // Rules are read off the global types, before anything changes.
  SmallVector<Operation *> ops;
  DenseMap<Operation *, ShardingRule> rules;
  fn->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == fn.getOperation())
      return;
    ops.push_back(op);
    if (auto iface = dyn_cast<ShardingRuleOpInterface>(op)) {
      FailureOr<ShardingRule> rule = iface.getShardingRule();
      if (succeeded(rule))
        rules[op] = std::move(*rule);
    }
  });

  // Block arguments next: every op below sees local types.
  WalkResult argsOk = fn->walk([&](Block *block) {
    for (BlockArgument arg : block->getArguments()) {
      if (!isa<RankedTensorType>(arg.getType()))
        continue;
      Location loc = arg.getLoc();
      FailureOr<RankedTensorType> type = localTypeOf(arg, loc);
      if (failed(type))
        return WalkResult::interrupt();
      arg.setType(*type);
    }
    return WalkResult::advance();
  });
  if (argsOk.wasInterrupted())
    return failure();

  for (Operation *op : ops) {
    if (isa<ShardingConstraintOp, ReshardOp>(op)) {
      // Both become the collectives from the operand's sharding to theirs:
      // a constraint that propagation already met becomes nothing.
      Value input = op->getOperand(0), result = op->getResult(0);
      auto target = op->getAttrOfType<ShardingAttr>("sharding");
      OpBuilder b(op);
      FailureOr<Value> v =
          materialize(b, op->getLoc(), input, globalTypes.lookup(result),
                      shardingOf(input), target, op);
      if (failed(v))
        return failure();
      noteNewValue(*v, result, target);
      result.replaceAllUsesWith(*v);
      op->erase();
      continue;
    }
    if (op->hasTrait<OpTrait::ReturnLike>() &&
        op->getParentOp() == fn.getOperation()) {
      // Returned values take the function result's annotation.
      OpBuilder b(op);
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        if (!isa<RankedTensorType>(v.getType()) || i >= fn.getNumResults())
          continue;
        auto want = fn.getResultAttrOfType<ShardingAttr>(
            i, ParDialect::kShardingAttrName);
        ShardingAttr have = shardingOf(v);
        Value orig = v;
        if (want && want != have) {
          FailureOr<Value> nv = materialize(b, op->getLoc(), v,
                                            globalTypes.lookup(orig), have,
                                            want, op);
          if (failed(nv))
            return failure();
          op->setOperand(i, *nv);
        } else if (!want && have) {
          fn.setResultAttr(i, ParDialect::kShardingAttrName, have);
          want = have;
        }
        if (want && globalTypes.lookup(orig))
          fn.setResultAttr(i, kGlobalTypeAttr,
                           TypeAttr::get(globalTypes.lookup(orig)));
      }
      continue;
    }
    if (auto af = dyn_cast<AllFiniteOp>(op)) {
      if (failed(partitionAllFinite(af)))
        return failure();
      continue;
    }
    auto rule = rules.find(op);
    if (rule != rules.end()) {
      if (failed(replicateCaptured(op)) ||
          failed(partitionRuleOp(op, rule->second)))
        return failure();
      continue;
    }
    if (isa<RegionBranchOpInterface, RegionBranchTerminatorOpInterface,
            BranchOpInterface, CallOpInterface>(op) ||
        op->hasTrait<OpTrait::ReturnLike>()) {
      if (failed(partitionStructural(op)))
        return failure();
      continue;
    }
    if (failed(checkNoRuleOp(op)))
      return failure();
  }

  // The signature follows the entry block and the returned values.
  Block &entry = fn.getFunctionBody().front();
  SmallVector<Type> inputs(entry.getArgumentTypes());
  SmallVector<Type> results(fn.getResultTypes());
  Operation *term = fn.getFunctionBody().back().getTerminator();
  if (term && term->hasTrait<OpTrait::ReturnLike>())
    results = SmallVector<Type>(term->getOperandTypes());
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    BlockArgument arg = fn.getArgument(i);
    if (ShardingAttr s = shardingOf(arg)) {
      fn.setArgAttr(i, ParDialect::kShardingAttrName, s);
      fn.setArgAttr(i, kGlobalTypeAttr, TypeAttr::get(globalTypes.lookup(arg)));
    }
  }
  fn.setType(FunctionType::get(fn->getContext(), inputs, results));
  return success();
}
