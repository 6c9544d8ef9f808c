//===- SequenceParallel.cpp - par-sequence-parallel -----------------------===//
//
// Megatron sequence parallelism (Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models", 2022) through shardings.
//
// After propagation has decided the tensor-parallel layout, the values
// between a reduction over the axis and the next op that needs them whole
// over it are replicated over the axis: every tensor-parallel device
// computes the same LayerNorms, residual adds and dropouts on the same
// [batch, sequence, hidden] activations. This pass finds those regions,
// splits their values' sequence dim over the axis and seals each region
// with `par.reshard` ops, then propagates again:
//
//   seeds    the rank-3 values a reduction over the axis reaches through
//            reshapes and elementwise ops (a row-parallel projection's
//            output; in the backward, the sum of the column-parallel
//            projections' input gradients). Their sequence dim is dim 1.
//   growth   every user that runs row by row (the sequence is a parallel
//            loop of its rule mapped the same way in all its tensors, none
//            of which is split over the axis, no tensor read from above)
//            joins, and its operands and results on that loop become region
//            values. A reduction over the sequence (a LayerNorm parameter's
//            gradient) joins when its result is small next to its inputs:
//            it stays partial over the axis and partitioning reduces it.
//   borders  a region value defined outside the region is resharded into
//            it (a local slice; after a partial value's all_reduce,
//            par-sink-reductions makes the pair one reduce_scatter); one
//            used outside it is resharded back to the sharding
//            propagation chose (an all_gather), once per value; in a
//            gradient function, once for the forward's users and again
//            (tagged `par.sp_gather = "backward"`, so CSE keeps the two)
//            for the backward's, as Megatron gathers again in the
//            backward: the gathered copy then dies with the forward and
//            the saved activation is the split one.
//
// A reshard fixes its result and leaves its operand alone, so the second
// propagation moves the split through the region and no further. The
// forward's all_reduces after the row-parallel projections thus become
// reduce_scatters into the region and all_gathers before the
// column-parallel ones, the backward's the other way round, with the same
// bytes (docs/Formulas.md).
//
//===----------------------------------------------------------------------===//

#include "par/Communication/Passes.h"
#include "par/Dialect/Par/Analysis/FactorChoice.h"
#include "par/Dialect/Par/Transforms/ShardingPropagation.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/DebugLog.h"

#define DEBUG_TYPE "par-sequence-parallel"

namespace mlir::par {
#define GEN_PASS_DEF_SEQUENCEPARALLEL
#include "par/Communication/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

static constexpr StringLiteral kSharding = ParDialect::kShardingAttrName;

namespace {

/// The sharding propagation left on `v` (null: unknown, i.e. replicated).
ShardingAttr currentSharding(Value v) {
  if (auto res = dyn_cast<OpResult>(v)) {
    Operation *op = res.getOwner();
    if (isa<ShardingConstraintOp, ReshardOp>(op))
      return op->getAttrOfType<ShardingAttr>("sharding");
    auto list = op->getAttrOfType<ArrayAttr>(kSharding);
    if (!list || list.size() != op->getNumResults())
      return {};
    return dyn_cast<ShardingAttr>(list[res.getResultNumber()]);
  }
  auto arg = cast<BlockArgument>(v);
  auto fn = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!fn || arg.getOwner() != &fn.getFunctionBody().front())
    return {};
  return fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(), kSharding);
}

bool splitsOver(ShardingAttr s, StringRef axis) {
  if (!s)
    return false;
  for (int64_t d = 0; d < s.getRank(); ++d)
    if (llvm::is_contained(s.getDimAxes(d), axis))
      return true;
  return llvm::is_contained(s.getPartialAxisNames(), axis);
}

/// Tensors that cost nothing to make at any sharding (inits of linalg ops):
/// propagation shards them with their user, they need no border.
bool isFree(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (isa<tensor::EmptyOp, tensor::SplatOp>(def))
    return true;
  if (auto fill = dyn_cast<linalg::FillOp>(def))
    return isFree(fill.getOutputs()[0]);
  DenseElementsAttr dense;
  return matchPattern(def, m_Constant(&dense)) && dense.isSplat();
}

/// The ops of a gradient function's body its loss (the first result)
/// depends on: its forward. Empty for other functions (all forward).
llvm::DenseSet<Operation *> forwardOf(FunctionOpInterface fn) {
  llvm::DenseSet<Operation *> forward;
  auto module = fn->getParentOfType<ModuleOp>();
  bool isGrad = false;
  module.walk([&](FunctionOpInterface f) {
    if (auto g = f->getAttrOfType<FlatSymbolRefAttr>(ParDialect::kGradAttrName))
      isGrad |= g.getValue() == fn.getName();
  });
  Block &body = fn.getFunctionBody().front();
  auto ret = body.getTerminator();
  if (!isGrad || ret->getNumOperands() == 0)
    return forward;
  SmallVector<Value> work{ret->getOperand(0)};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *def = v.getDefiningOp();
    if (!def)
      continue;
    Operation *top = body.findAncestorOpInBlock(*def);
    if (!top || !forward.insert(top).second)
      continue;
    // Its operands and what its regions read from above.
    top->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (!top->isAncestor(operand.getParentBlock()->getParentOp()) ||
            operand.getParentBlock() == &body)
          work.push_back(operand);
    });
  }
  return forward;
}

/// The operands, then the results, of an op: the slots of its rule.
SmallVector<Value> slotsOf(Operation *op) {
  SmallVector<Value> slots(op->getOperands());
  llvm::append_range(slots, op->getResults());
  return slots;
}

/// The residual-stream regions of one function and their borders.
class ResidualRegions {
public:
  ResidualRegions(FunctionOpInterface fn, MeshOp mesh, StringRef axis)
      : fn(fn), mesh(mesh), axis(axis),
        meshSym(FlatSymbolRefAttr::get(mesh.getSymNameAttr())) {}

  /// Seeds: the rank-3 values reductions over the axis reach.
  void findSeeds();
  /// The regions: the seeds' row-wise users, transitively.
  void grow();
  /// The axis divides every region value's sequence dim.
  LogicalResult checkDivisible();
  /// The borders as reshards, the region's results as split shardings.
  void apply(int64_t &entries, int64_t &exits);
  void regatherViews(Value v, function_ref<bool(Operation *)> isForward);

  bool empty() const { return seqDim.empty(); }
  size_t size() const { return seqDim.size(); }

private:
  const ShardingRule *ruleOf(Operation *op);
  /// For `op` reached through `v` split on dim `d`: the sequence dim of
  /// each slot (-1: none), or nothing if `op` cannot run row by row.
  std::optional<SmallVector<int64_t>> rowLocal(Operation *op, Value v,
                                               int64_t d);
  void accept(Operation *op, ArrayRef<int64_t> dims);
  void claim(Value v, int64_t d);
  /// `v`'s sharding with the axis appended to dim `d`.
  ShardingAttr split(Value v, int64_t d) const;
  ShardingAttr current(Value v) const;

  FunctionOpInterface fn;
  MeshOp mesh;
  StringRef axis;
  FlatSymbolRefAttr meshSym;
  DenseMap<Operation *, std::optional<ShardingRule>> rules;
  /// Region values and their sequence dims, in discovery order.
  llvm::MapVector<Value, int64_t> seqDim;
  SmallVector<Value> worklist;
  SetVector<Operation *> ops;
};

const ShardingRule *ResidualRegions::ruleOf(Operation *op) {
  auto it = rules.find(op);
  if (it == rules.end()) {
    std::optional<ShardingRule> rule;
    if (auto iface = dyn_cast<ShardingRuleOpInterface>(op))
      if (FailureOr<ShardingRule> r = iface.getShardingRule(); succeeded(r))
        rule = std::move(*r);
    it = rules.try_emplace(op, std::move(rule)).first;
  }
  return it->second ? &*it->second : nullptr;
}

ShardingAttr ResidualRegions::current(Value v) const {
  if (ShardingAttr s = currentSharding(v))
    return s.withoutPartial();
  return ShardingAttr::getReplicated(
      fn->getContext(), meshSym, cast<RankedTensorType>(v.getType()).getRank());
}

ShardingAttr ResidualRegions::split(Value v, int64_t d) const {
  ShardingAttr s = current(v);
  SmallVector<AxisList> dims;
  for (int64_t i = 0; i < s.getRank(); ++i)
    dims.push_back(s.getDimAxes(i));
  dims[d].push_back(axis);
  return ShardingAttr::get(fn->getContext(), s.getMesh(), dims);
}

void ResidualRegions::claim(Value v, int64_t d) {
  if (seqDim.try_emplace(v, d).second)
    worklist.push_back(v);
}

void ResidualRegions::findSeeds() {
  // Results an op leaves partial over the axis while their sharding does
  // not hold it: partitioning all-reduces them there.
  SmallVector<Value> partials;
  fn->walk([&](Operation *op) {
    const ShardingRule *rule = ruleOf(op);
    if (!rule || isa<ShardingConstraintOp, ReshardOp>(op))
      return;
    SmallVector<ShardingAttr> in, out;
    for (Value v : op->getOperands())
      in.push_back(isa<RankedTensorType>(v.getType()) ? currentSharding(v)
                                                      : ShardingAttr());
    for (Value v : op->getResults())
      out.push_back(isa<RankedTensorType>(v.getType()) ? currentSharding(v)
                                                       : ShardingAttr());
    OpShardingChoice choice = chooseOpSharding(op, *rule, in, out, mesh);
    for (auto [r, produced] : llvm::enumerate(choice.results))
      if (produced &&
          llvm::is_contained(produced.getPartialAxisNames(), axis) &&
          !splitsOver(out[r], axis))
        partials.push_back(op->getResult(r));
  });
  // Through reshapes and elementwise ops (which partitioning and
  // par-sink-reductions move the reduction past) to the first rank-3
  // values: the residual stream's [batch, sequence, hidden].
  DenseSet<Value> seen;
  SmallVector<std::pair<Value, int>> stack;
  for (Value p : partials)
    stack.push_back({p, 0});
  while (!stack.empty()) {
    auto [v, depth] = stack.pop_back_val();
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !seen.insert(v).second || splitsOver(currentSharding(v), axis))
      continue;
    if (type.getRank() == 3) {
      LDBG() << "seed " << v;
      claim(v, 1);
      continue;
    }
    if (depth >= 8)
      continue;
    for (Operation *user : v.getUsers()) {
      const ShardingRule *rule = ruleOf(user);
      if (!rule || isa<ShardingConstraintOp, ReshardOp>(user) ||
          llvm::any_of(rule->factorKinds,
                       [](FactorKind k) { return k == FactorKind::Reduction; }))
        continue;
      for (Value r : user->getResults())
        stack.push_back({r, depth + 1});
    }
  }
}

std::optional<SmallVector<int64_t>>
ResidualRegions::rowLocal(Operation *op, Value v, int64_t d) {
  const ShardingRule *rule = ruleOf(op);
  if (!rule || isa<ShardingConstraintOp, ReshardOp>(op))
    return std::nullopt;
  // A tensor read from above (a gather's table) is read at global indices.
  SetVector<Value> captured;
  getUsedValuesDefinedAbove(op->getRegions(), captured);
  if (llvm::any_of(captured, [](Value c) {
        return isa<RankedTensorType>(c.getType());
      }))
    return std::nullopt;
  SmallVector<Value> slots = slotsOf(op);
  auto dimsOf = [&](int64_t slot) -> ArrayRef<int64_t> {
    int64_t nOperands = op->getNumOperands();
    return slot < nOperands ? ArrayRef(rule->operandDims[slot])
                            : ArrayRef(rule->resultDims[slot - nOperands]);
  };
  int64_t factor = ShardingRule::kNoFactor;
  for (auto [slot, w] : llvm::enumerate(slots))
    if (w == v && (int64_t)dimsOf(slot).size() > d) {
      factor = dimsOf(slot)[d];
      break;
    }
  if (factor == ShardingRule::kNoFactor || rule->isBlocked(factor))
    return std::nullopt;

  SmallVector<int64_t> dims(slots.size(), -1);
  double reducedBytes = 0, resultBytes = 0;
  for (auto [slot, w] : llvm::enumerate(slots)) {
    auto type = dyn_cast<RankedTensorType>(w.getType());
    if (!type)
      continue;
    // Ops that already split over the axis are the tensor-parallel ones.
    if (splitsOver(currentSharding(w), axis))
      return std::nullopt;
    ArrayRef<int64_t> map = dimsOf(slot);
    if (llvm::count(map, factor) > 1)
      return std::nullopt;
    auto it = llvm::find(map, factor);
    if (it != map.end())
      dims[slot] = it - map.begin();
    bool isResult = slot >= op->getNumOperands();
    if (isResult)
      resultBytes += tensorBytes(type);
    else if (dims[slot] >= 0)
      reducedBytes += tensorBytes(type);
    // The sequence runs through every result of a row-wise op.
    if (isResult && dims[slot] < 0 && !rule->isReduction(factor))
      return std::nullopt;
    // A region value must meet the op on its own sequence dim.
    auto known = seqDim.find(w);
    if (known != seqDim.end() && known->second != dims[slot])
      return std::nullopt;
  }
  // A reduction over the sequence leaves its results partial over the
  // axis: worth it when they are small next to what would be gathered.
  if (rule->isReduction(factor) && 2 * resultBytes > reducedBytes)
    return std::nullopt;
  return dims;
}

void ResidualRegions::accept(Operation *op, ArrayRef<int64_t> dims) {
  LDBG() << "region op " << *op;
  ops.insert(op);
  for (auto [slot, w] : llvm::enumerate(slotsOf(op)))
    if (dims[slot] >= 0 && !isFree(w))
      claim(w, dims[slot]);
}

void ResidualRegions::grow() {
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    int64_t d = seqDim.lookup(v);
    SmallVector<Operation *> users(v.getUsers());
    if (Operation *def = v.getDefiningOp())
      users.push_back(def); // the producer may run row by row too
    for (Operation *user : users) {
      if (ops.contains(user))
        continue;
      if (std::optional<SmallVector<int64_t>> dims = rowLocal(user, v, d))
        accept(user, *dims);
    }
  }
}

LogicalResult ResidualRegions::checkDivisible() {
  int64_t n = mesh.getAxisSize(axis);
  for (auto [v, d] : seqDim) {
    auto type = cast<RankedTensorType>(v.getType());
    int64_t size = type.getDimSize(d);
    int64_t held = axesProduct(mesh, current(v).getDimAxes(d));
    if (!ShapedType::isDynamic(size) && size % (held * n) == 0)
      continue;
    return emitError(v.getLoc())
           << "sequence-parallel: the sequence (dim " << d << ", " << size
           << ") of " << type << " in @" << fn.getName()
           << " cannot be split over '" << axis << "' (" << n << ")"
           << (held > 1 ? " on top of its other axes" : "")
           << "; use a sequence length divisible by the tensor-parallel size";
  }
  return success();
}

/// The backward reads a gathered region value through the forward's
/// reshapes of it (a projection's [b*s, h] input): it gets its own gather
/// of `v` and its own copies of those reshapes, placed before its first
/// such use, so that the forward's gathered copy dies with the forward.
void ResidualRegions::regatherViews(
    Value v, function_ref<bool(Operation *)> isForward) {
  // The forward's reshape chains from v's exit, and the backward's uses of
  // them.
  Operation *exitOp = nullptr;
  for (Operation *user : v.getUsers())
    if (isa<ReshardOp>(user) && !ops.contains(user))
      exitOp = user;
  if (!exitOp)
    return;
  SmallVector<OpOperand *> backwardUses;
  SmallVector<Operation *> views; // in def-use order
  SmallVector<Value> work{exitOp->getResult(0)};
  while (!work.empty()) {
    Value x = work.pop_back_val();
    for (OpOperand &use : x.getUses()) {
      Operation *user = use.getOwner();
      if (!isForward(user))
        backwardUses.push_back(&use);
      else if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user)) {
        views.push_back(user);
        work.push_back(user->getResult(0));
      }
    }
  }
  if (backwardUses.empty())
    return;
  Block *block = exitOp->getBlock();
  Operation *first = nullptr;
  for (OpOperand *use : backwardUses) {
    Operation *top = block->findAncestorOpInBlock(*use->getOwner());
    if (!top)
      return;
    if (!first || top->isBeforeInBlock(first))
      first = top;
  }
  OpBuilder b(first);
  auto again = ReshardOp::create(b, v.getLoc(), v.getType(), v, current(v));
  again->setAttr(ParDialect::kSPGatherAttrName, b.getStringAttr("backward"));
  IRMapping map;
  map.map(exitOp->getResult(0), again.getResult());
  for (Operation *view : views)
    if (map.contains(view->getOperand(0)))
      b.clone(*view, map);
  for (OpOperand *use : backwardUses)
    use->set(map.lookup(use->get()));
}

void ResidualRegions::apply(int64_t &entries, int64_t &exits) {
  MLIRContext *ctx = fn->getContext();
  // Into the region: values made outside it.
  SmallVector<std::pair<Value, int64_t>> values(seqDim.begin(), seqDim.end());
  for (auto [v, d] : values) {
    Operation *def = v.getDefiningOp();
    if (def && ops.contains(def))
      continue;
    OpBuilder b(ctx);
    b.setInsertionPointAfterValue(v);
    auto in = ReshardOp::create(b, v.getLoc(), v.getType(), v, split(v, d));
    v.replaceUsesWithIf(in.getResult(), [&](OpOperand &use) {
      return ops.contains(use.getOwner());
    });
    ++entries;
  }
  // Out of it: one reshard per value and phase, before its first outside
  // user in that phase.
  llvm::DenseSet<Operation *> forward = forwardOf(fn);
  Block &body = fn.getFunctionBody().front();
  auto exit = [&](Value v, ArrayRef<OpOperand *> uses, bool backward) {
    OpBuilder b(ctx);
    Operation *def = v.getDefiningOp(), *first = nullptr;
    for (OpOperand *use : uses) {
      Operation *user = use->getOwner();
      if (user->getBlock() != def->getBlock()) {
        first = nullptr;
        break;
      }
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    if (first)
      b.setInsertionPoint(first);
    else
      b.setInsertionPointAfter(def);
    auto out = ReshardOp::create(b, v.getLoc(), v.getType(), v, current(v));
    if (backward)
      out->setAttr(ParDialect::kSPGatherAttrName, b.getStringAttr("backward"));
    for (OpOperand *use : uses)
      use->set(out.getResult());
    ++exits;
  };
  auto isForward = [&](Operation *user) {
    Operation *top = body.findAncestorOpInBlock(*user);
    return forward.empty() || !top || forward.contains(top);
  };
  for (auto [v, d] : values) {
    Operation *def = v.getDefiningOp();
    if (!def || !ops.contains(def))
      continue;
    SmallVector<OpOperand *> fwd, bwd;
    for (OpOperand &use : v.getUses()) {
      if (ops.contains(use.getOwner()))
        continue;
      (isForward(use.getOwner()) ? fwd : bwd).push_back(&use);
    }
    if (!fwd.empty())
      exit(v, fwd, /*backward=*/false);
    if (!bwd.empty())
      exit(v, bwd, /*backward=*/!fwd.empty());
    else if (!fwd.empty())
      regatherViews(v, isForward);
    // The region's own results start split (propagation's seeds).
    auto list = def->getAttrOfType<ArrayAttr>(kSharding);
    SmallVector<Attribute> entriesOf;
    for (Value r : def->getResults()) {
      Attribute a;
      if (list && list.size() == def->getNumResults())
        a = list[cast<OpResult>(r).getResultNumber()];
      if (auto t = dyn_cast<RankedTensorType>(r.getType()); t && !a)
        a = ShardingAttr::getReplicated(ctx, meshSym, t.getRank());
      if (!a)
        a = UnitAttr::get(ctx);
      if (r == v)
        a = split(v, d);
      entriesOf.push_back(a);
    }
    def->setAttr(kSharding, ArrayAttr::get(ctx, entriesOf));
  }
}

struct SequenceParallelPass
    : public mlir::par::impl::SequenceParallelBase<SequenceParallelPass> {
  using Base::Base;
  void runOnOperation() override;
};

void SequenceParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<MeshOp> meshes, others;
  module.walk([&](MeshOp m) {
    (m.getAxisIndex(axis) >= 0 ? meshes : others).push_back(m);
  });
  // Errors point at the first mesh, or at the first function if there is
  // none (an unannotated model).
  auto where = [&]() -> Operation * {
    if (!others.empty())
      return others.front();
    Operation *first = module;
    module.walk([&](FunctionOpInterface fn) {
      if (first == module && !fn.isExternal())
        first = fn;
    });
    return first;
  };
  if (meshes.empty()) {
    where()->emitError()
        << "sequence-parallel: no par.mesh has the axis '" << axis
        << "' (sequence parallelism splits the activations over the "
           "tensor-parallel axis; annotate a mesh with it, or name another "
           "axis)";
    return signalPassFailure();
  }
  // Collect every function's regions first: apply() changes the shardings
  // the other functions' seeds would be read from through calls.
  SmallVector<std::unique_ptr<ResidualRegions>> regions;
  bool any = false;
  for (MeshOp mesh : meshes) {
    if (mesh.getAxisSize(axis) <= 1)
      continue;
    module.walk([&](FunctionOpInterface fn) {
      if (fn.isExternal())
        return;
      auto r = std::make_unique<ResidualRegions>(fn, mesh, axis);
      r->findSeeds();
      r->grow();
      if (r->empty())
        return;
      any = true;
      regions.push_back(std::move(r));
    });
  }
  if (!any && llvm::any_of(meshes,
                           [&](MeshOp m) { return m.getAxisSize(axis) > 1; })) {
    meshes.front().emitError()
        << "sequence-parallel: no reduction over '" << axis
        << "' reaches a [batch, sequence, hidden] activation: sequence "
           "parallelism needs Megatron pairs (weights split by columns, then "
           "by rows, over '"
        << axis << "') around a rank-3 residual stream";
    return signalPassFailure();
  }
  for (auto &r : regions)
    if (failed(r->checkDivisible()))
      return signalPassFailure();
  for (auto &r : regions) {
    numSplit += r->size();
    int64_t entries = 0, exits = 0;
    r->apply(entries, exits);
    numEntries += entries;
    numExits += exits;
  }
  // The split moves through the region, the reshards stop it at the
  // borders.
  propagateShardings(module);
}

} // namespace
