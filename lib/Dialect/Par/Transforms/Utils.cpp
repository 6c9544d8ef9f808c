//===- Utils.cpp - Shared sharding analysis -------------------------------===//

#include "par/Dialect/Par/Transforms/ShardingUtils.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::par;

//===----------------------------------------------------------------------===//
// Tie classes
//===----------------------------------------------------------------------===//

void TieClasses::tie(Value a, Value b) {
  if (!isa<RankedTensorType>(a.getType()) ||
      !isa<RankedTensorType>(b.getType()))
    return;
  classes.unionSets(a, b);
}

TieClasses::TieClasses(ModuleOp module) {
  module.walk([&](Operation *op) {
    if (auto branch = dyn_cast<RegionBranchOpInterface>(op)) {
      SmallVector<RegionSuccessor> succs;
      branch.getSuccessorRegions(RegionBranchPoint::parent(), succs);
      for (RegionSuccessor &s : succs) {
        OperandRange operands = branch.getEntrySuccessorOperands(s);
        ValueRange inputs = s.getSuccessorInputs();
        for (auto [a, b] : llvm::zip(operands, inputs))
          tie(a, b);
      }
    }
    // ReturnLike ops (func.return, linalg.yield) are terminators too; only
    // those inside region-branch ops forward values.
    auto term = dyn_cast<RegionBranchTerminatorOpInterface>(op);
    if (term && isa_and_nonnull<RegionBranchOpInterface>(op->getParentOp())) {
      SmallVector<Attribute> noConstants(op->getNumOperands());
      SmallVector<RegionSuccessor> succs;
      term.getSuccessorRegions(noConstants, succs);
      for (RegionSuccessor &s : succs)
        for (auto [a, b] :
             llvm::zip(term.getSuccessorOperands(s), s.getSuccessorInputs()))
          tie(a, b);
    }
    if (auto br = dyn_cast<BranchOpInterface>(op)) {
      for (unsigned i = 0; i < op->getNumSuccessors(); ++i) {
        SuccessorOperands so = br.getSuccessorOperands(i);
        Block *succ = op->getSuccessor(i);
        unsigned produced = so.getProducedOperandCount();
        for (auto [j, v] : llvm::enumerate(so.getForwardedOperands()))
          if (produced + j < succ->getNumArguments())
            tie(v, succ->getArgument(produced + j));
      }
    }
    if (auto call = dyn_cast<CallOpInterface>(op)) {
      auto callee =
          dyn_cast_or_null<FunctionOpInterface>(call.resolveCallable());
      if (callee && !callee.isExternal()) {
        Block &entry = callee.getFunctionBody().front();
        for (auto [a, b] :
             llvm::zip(call.getArgOperands(), entry.getArguments()))
          tie(a, b);
        callee.getFunctionBody().walk([&](Operation *ret) {
          if (ret->getParentOp() != callee.getOperation() ||
              !ret->hasTrait<OpTrait::ReturnLike>())
            return;
          for (auto [a, b] : llvm::zip(op->getResults(), ret->getOperands()))
            tie(a, b);
        });
      }
    }
  });
}

Value TieClasses::leader(Value v) const {
  auto it = classes.findLeader(v);
  if (it == classes.member_end())
    return v;
  return *it;
}

SmallVector<Value> TieClasses::members(Value leaderValue) const {
  auto it = classes.findLeader(leaderValue);
  if (it == classes.member_end())
    return {leaderValue};
  return SmallVector<Value>(it, classes.member_end());
}

//===----------------------------------------------------------------------===//
// Sizes and costs
//===----------------------------------------------------------------------===//

int64_t mlir::par::axesProduct(MeshOp mesh, ArrayRef<StringRef> axes) {
  int64_t n = 1;
  for (StringRef a : axes)
    n *= std::max<int64_t>(1, mesh.getAxisSize(a));
  return n;
}

double mlir::par::tensorBytes(RankedTensorType type) {
  Type elt = type.getElementType();
  double width = 8;
  if (elt.isIntOrFloat())
    width = std::max<unsigned>(8, elt.getIntOrFloatBitWidth());
  else if (auto c = dyn_cast<ComplexType>(elt))
    width = 2 * std::max<unsigned>(8, c.getElementType().getIntOrFloatBitWidth());
  double bytes = width / 8;
  for (int64_t d : type.getShape())
    bytes *= ShapedType::isDynamic(d) ? 1 : d;
  return bytes;
}

SmallVector<int64_t> mlir::par::approxLocalShape(RankedTensorType type,
                                                 ShardingAttr sharding,
                                                 MeshOp mesh) {
  SmallVector<int64_t> shape(type.getShape());
  if (!sharding || sharding.getRank() != type.getRank())
    return shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (ShapedType::isDynamic(shape[d]))
      continue;
    shape[d] = std::max<int64_t>(
        1, shape[d] / axesProduct(mesh, sharding.getDimAxes(d)));
  }
  return shape;
}

static double localBytes(RankedTensorType type, ShardingAttr s, MeshOp mesh) {
  return tensorBytes(RankedTensorType::get(approxLocalShape(type, s, mesh),
                                           type.getElementType()));
}

double mlir::par::reshardCost(ArrayRef<ReshardStep> steps, ShardingAttr from,
                              RankedTensorType type, MeshOp mesh) {
  double cost = 0;
  ShardingAttr cur = from;
  for (const ReshardStep &s : steps) {
    double n = axesProduct(mesh, s.axes);
    switch (s.kind) {
    case ReshardStep::Kind::AllReduce:
      cost += 2 * (n - 1) / n * localBytes(type, cur, mesh);
      break;
    case ReshardStep::Kind::ReduceScatter:
    case ReshardStep::Kind::AllToAll:
      cost += (n - 1) / n * localBytes(type, cur, mesh);
      break;
    case ReshardStep::Kind::AllGather:
      cost += (n - 1) / n * localBytes(type, s.after, mesh);
      break;
    case ReshardStep::Kind::AllSlice:
    case ReshardStep::Kind::MakePartial:
      break;
    }
    cur = s.after;
  }
  return cost;
}

double mlir::par::collectiveBytes(Operation *op) {
  auto bytesOf = [](Value v) {
    return tensorBytes(cast<RankedTensorType>(v.getType()));
  };
  auto ring = [](int64_t n) { return n <= 0 ? 0.0 : double(n - 1) / n; };
  if (auto o = dyn_cast<AllReduceOp>(op))
    return 2 * ring(o.getGroupSize()) * bytesOf(o.getInput());
  if (auto o = dyn_cast<AllGatherOp>(op))
    return ring(o.getGroupSize()) * bytesOf(o.getResult());
  if (auto o = dyn_cast<ReduceScatterOp>(op))
    return ring(o.getGroupSize()) * bytesOf(o.getInput());
  if (auto o = dyn_cast<AllToAllOp>(op))
    return ring(o.getGroupSize()) * bytesOf(o.getInput());
  if (auto o = dyn_cast<BroadcastOp>(op))
    return o.getGroupSize() > 1 ? bytesOf(o.getInput()) : 0;
  if (auto o = dyn_cast<SendOp>(op))
    return bytesOf(o.getInput());
  return 0;
}

//===----------------------------------------------------------------------===//
// Reshard planning
//===----------------------------------------------------------------------===//

namespace {
/// A mutable sharding used while planning.
struct WorkSharding {
  SmallVector<AxisList> dims;
  AxisList partial;
  ReductionKind kind = ReductionKind::Sum;

  static WorkSharding from(ShardingAttr s, int64_t rank) {
    WorkSharding w;
    w.dims.resize(rank);
    if (!s)
      return w;
    for (int64_t d = 0; d < rank && d < s.getRank(); ++d)
      w.dims[d] = s.getDimAxes(d);
    w.partial = s.getPartialAxisNames();
    w.kind = s.getPartialKind();
    return w;
  }
  ShardingAttr toAttr(MLIRContext *ctx, FlatSymbolRefAttr mesh) const {
    return ShardingAttr::get(ctx, mesh, dims, partial, kind);
  }
};

bool isPrefix(ArrayRef<StringRef> a, ArrayRef<StringRef> b) {
  return a.size() <= b.size() && llvm::equal(a, b.take_front(a.size()));
}

size_t commonPrefix(ArrayRef<StringRef> a, ArrayRef<StringRef> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  return n;
}
} // namespace

bool mlir::par::isPrefixSharding(ShardingAttr a, ShardingAttr b) {
  if (!a)
    return true;
  if (!b || a.getRank() != b.getRank())
    return false;
  for (int64_t d = 0; d < a.getRank(); ++d)
    if (!isPrefix(a.getDimAxes(d), b.getDimAxes(d)))
      return false;
  return true;
}

SmallVector<ReshardStep> mlir::par::planReshard(ShardingAttr from,
                                                ShardingAttr to,
                                                int64_t rank) {
  SmallVector<ReshardStep> steps;
  ShardingAttr any = from ? from : to;
  if (!any)
    return steps;
  MLIRContext *ctx = any.getContext();
  FlatSymbolRefAttr mesh = any.getMesh();
  WorkSharding cur = WorkSharding::from(from, rank);
  WorkSharding tgt = WorkSharding::from(to, rank);
  auto emit = [&](ReshardStep::Kind kind, AxisList axes, int64_t dim = -1,
                  int64_t dim2 = -1,
                  ReductionKind red = ReductionKind::Sum) {
    steps.push_back(
        {kind, std::move(axes), dim, dim2, red, cur.toAttr(ctx, mesh)});
  };

  // 1. Partial axes the target does not keep are reduced: into a split dim
  //    the target wants next (reduce_scatter), else in place (all_reduce).
  bool sameKind = cur.kind == tgt.kind || cur.partial.empty() ||
                  tgt.partial.empty();
  AxisList toReduce;
  for (StringRef a : cur.partial)
    if (!sameKind || !llvm::is_contained(tgt.partial, a))
      toReduce.push_back(a);
  if (!toReduce.empty()) {
    ReductionKind red = cur.kind;
    for (int64_t d = 0; d < rank && !toReduce.empty(); ++d) {
      if (!isPrefix(cur.dims[d], tgt.dims[d]))
        continue;
      AxisList run;
      for (size_t i = cur.dims[d].size(); i < tgt.dims[d].size(); ++i) {
        if (!llvm::is_contained(toReduce, tgt.dims[d][i]))
          break;
        run.push_back(tgt.dims[d][i]);
      }
      if (run.empty())
        continue;
      for (StringRef a : run) {
        llvm::erase(toReduce, a);
        llvm::erase(cur.partial, a);
        cur.dims[d].push_back(a);
      }
      emit(ReshardStep::Kind::ReduceScatter, run, d, -1, red);
    }
    if (!toReduce.empty()) {
      for (StringRef a : toReduce)
        llvm::erase(cur.partial, a);
      emit(ReshardStep::Kind::AllReduce, toReduce, -1, -1, red);
    }
    if (cur.partial.empty())
      cur.kind = ReductionKind::Sum;
  }

  // 2. Splits the target does not share are undone: an axis moving to a dim
  //    that wants it next travels by all_to_all, others are gathered.
  for (int64_t d = 0; d < rank; ++d) {
    size_t common = commonPrefix(cur.dims[d], tgt.dims[d]);
    while (cur.dims[d].size() > common) {
      StringRef a = cur.dims[d].back();
      int64_t moveTo = -1;
      for (int64_t d2 = 0; d2 < rank && moveTo < 0; ++d2)
        if (d2 != d && isPrefix(cur.dims[d2], tgt.dims[d2]) &&
            tgt.dims[d2].size() > cur.dims[d2].size() &&
            tgt.dims[d2][cur.dims[d2].size()] == a)
          moveTo = d2;
      if (moveTo >= 0) {
        cur.dims[d].pop_back();
        cur.dims[moveTo].push_back(a);
        emit(ReshardStep::Kind::AllToAll, {a}, d, moveTo);
        continue;
      }
      AxisList gathered(cur.dims[d].begin() + common, cur.dims[d].end());
      cur.dims[d].resize(common);
      emit(ReshardStep::Kind::AllGather, gathered, d);
    }
  }

  // 3. Missing splits are taken locally.
  for (int64_t d = 0; d < rank; ++d) {
    if (cur.dims[d].size() >= tgt.dims[d].size())
      continue;
    AxisList extra(tgt.dims[d].begin() + cur.dims[d].size(),
                   tgt.dims[d].end());
    cur.dims[d] = tgt.dims[d];
    emit(ReshardStep::Kind::AllSlice, extra, d);
  }

  // 4. Partial axes the target has and the source lacks: only a neutral
  //    value (e.g. a zero fill for sum) can be declared partial for free.
  AxisList makePartial;
  for (StringRef a : tgt.partial)
    if (!llvm::is_contained(cur.partial, a))
      makePartial.push_back(a);
  if (!makePartial.empty()) {
    for (StringRef a : makePartial)
      cur.partial.push_back(a);
    cur.kind = tgt.kind;
    emit(ReshardStep::Kind::MakePartial, makePartial, -1, -1, tgt.kind);
  }
  return steps;
}

//===----------------------------------------------------------------------===//
// Factor choice
//===----------------------------------------------------------------------===//

MeshOp mlir::par::findMesh(Operation *from, ArrayRef<ShardingAttr> shardings) {
  for (ShardingAttr s : shardings)
    if (s)
      if (MeshOp m = lookupMesh(from, s.getMesh(), /*emitErrors=*/false))
        return m;
  return {};
}

namespace {
/// Implied shardings of an op's operands and results for a factor choice.
void buildImplied(Operation *op, const ShardingRule &rule,
                  OpShardingChoice &choice, FlatSymbolRefAttr meshSym) {
  MLIRContext *ctx = op->getContext();
  AxisList partial;
  for (int64_t f = 0; f < rule.getNumFactors(); ++f)
    if (rule.isReduction(f))
      llvm::append_range(partial, choice.factorAxes[f]);
  auto make = [&](ArrayRef<int64_t> dims, bool isPartial) {
    SmallVector<AxisList> axes;
    for (int64_t f : dims)
      axes.push_back(f == ShardingRule::kNoFactor || rule.isBlocked(f)
                         ? AxisList()
                         : choice.factorAxes[f]);
    return ShardingAttr::get(ctx, meshSym, axes,
                             isPartial ? ArrayRef<StringRef>(partial)
                                       : ArrayRef<StringRef>(),
                             rule.reductionKind);
  };
  choice.operands.clear();
  choice.results.clear();
  for (int64_t i = 0; i < (int64_t)rule.operandDims.size(); ++i)
    choice.operands.push_back(
        rule.operandIsTensor[i]
            ? make(rule.operandDims[i], rule.operandTiedResult[i] >= 0)
            : ShardingAttr());
  for (int64_t r = 0; r < (int64_t)rule.resultDims.size(); ++r)
    choice.results.push_back(rule.resultIsTensor[r]
                                 ? make(rule.resultDims[r], true)
                                 : ShardingAttr());
}

double totalCost(const OpShardingChoice &choice,
                 ArrayRef<ShardingAttr> operandShardings,
                 ArrayRef<ShardingAttr> resultShardings,
                 ArrayRef<RankedTensorType> operandTypes,
                 ArrayRef<RankedTensorType> resultTypes, MeshOp mesh) {
  double cost = 0;
  for (auto [i, implied] : llvm::enumerate(choice.operands)) {
    if (!implied)
      continue;
    RankedTensorType type = operandTypes[i];
    ShardingAttr cur = operandShardings[i];
    cost += reshardCost(planReshard(cur, implied, type.getRank()), cur, type,
                        mesh);
  }
  for (auto [r, implied] : llvm::enumerate(choice.results)) {
    if (!implied || !resultShardings[r])
      continue; // An unknown result takes whatever the op produces.
    RankedTensorType type = resultTypes[r];
    cost += reshardCost(
        planReshard(implied, resultShardings[r], type.getRank()), implied,
        type, mesh);
  }
  return cost;
}
} // namespace

OpShardingChoice mlir::par::chooseOpSharding(
    Operation *op, const ShardingRule &rule,
    ArrayRef<ShardingAttr> operandShardings,
    ArrayRef<ShardingAttr> resultShardings, MeshOp mesh,
    ArrayRef<RankedTensorType> operandTypes,
    ArrayRef<RankedTensorType> resultTypes) {
  // Costs are in global terms: callers pass the global types.
  SmallVector<RankedTensorType> opTypes(operandTypes), resTypes(resultTypes);
  if (opTypes.empty())
    for (Value v : op->getOperands())
      opTypes.push_back(dyn_cast<RankedTensorType>(v.getType()));
  if (resTypes.empty())
    for (Value v : op->getResults())
      resTypes.push_back(dyn_cast<RankedTensorType>(v.getType()));
  operandTypes = opTypes;
  resultTypes = resTypes;
  int64_t numFactors = rule.getNumFactors();
  OpShardingChoice choice;
  choice.factorAxes.resize(numFactors);
  FlatSymbolRefAttr meshSym = FlatSymbolRefAttr::get(mesh.getSymNameAttr());

  // 1. Candidates per factor, in operand-then-result order.
  struct Use {
    ShardingAttr sharding;
    int64_t dim;
    RankedTensorType type;
  };
  SmallVector<SmallVector<AxisList>> candidates(numFactors);
  SmallVector<SmallVector<Use>> uses(numFactors);
  auto collect = [&](ArrayRef<int64_t> dims, ShardingAttr s,
                     RankedTensorType t) {
    if (!s || !t || s.getMesh() != meshSym || s.getRank() != (int64_t)dims.size())
      return;
    for (auto [d, f] : llvm::enumerate(dims)) {
      if (f == ShardingRule::kNoFactor || rule.isBlocked(f))
        continue;
      AxisList axes = s.getDimAxes(d);
      uses[f].push_back({s, (int64_t)d, t});
      if (!llvm::is_contained(candidates[f], axes))
        candidates[f].push_back(axes);
    }
  };
  for (auto [i, s] : llvm::enumerate(operandShardings))
    if (rule.operandIsTensor[i])
      collect(rule.operandDims[i], s, operandTypes[i]);
  for (auto [r, s] : llvm::enumerate(resultShardings))
    if (rule.resultIsTensor[r])
      collect(rule.resultDims[r], s && s.isPartial() ? s.withoutPartial() : s,
              resultTypes[r]);

  // 2. One choice per factor.
  for (int64_t f = 0; f < numFactors; ++f) {
    SmallVector<AxisList> &cands = candidates[f];
    if (cands.empty())
      continue;
    // Longest candidate if all are prefixes of it.
    const AxisList *longest = &cands.front();
    for (const AxisList &c : cands)
      if (c.size() > longest->size())
        longest = &c;
    bool compatible = llvm::all_of(
        cands, [&](const AxisList &c) { return isPrefix(c, *longest); });
    AxisList chosen;
    if (compatible) {
      chosen = *longest;
    } else {
      // Least bytes: gathering whatever each use holds beyond the common
      // prefix with the candidate.
      double best = -1;
      for (const AxisList &c : cands) {
        double cost = 0;
        for (const Use &u : uses[f]) {
          AxisList held = u.sharding.getDimAxes(u.dim);
          size_t common = commonPrefix(held, c);
          AxisList removed(held.begin() + common, held.end());
          double n = axesProduct(mesh, removed);
          cost += (n - 1) * localBytes(u.type, u.sharding, mesh);
        }
        if (best < 0 || cost < best) {
          best = cost;
          chosen = c;
        }
      }
    }
    // Keep only a prefix that divides the loop extent.
    int64_t size = rule.factorSizes[f];
    while (!chosen.empty() &&
           (ShapedType::isDynamic(size) ||
            size % axesProduct(mesh, chosen) != 0))
      chosen.pop_back();
    // Drop axes unknown to the mesh.
    while (!chosen.empty() && mesh.getAxisIndex(chosen.back()) < 0)
      chosen.pop_back();
    choice.factorAxes[f] = chosen;
  }

  // 3. An axis may split one factor only: give it to the claimant whose
  //    choice reshards the fewest bytes (ties: lowest factor index).
  while (true) {
    StringRef dup;
    SmallVector<int64_t> claimants;
    for (StringAttr axisAttr : mesh.getAxisNames().getAsRange<StringAttr>()) {
      StringRef axis = axisAttr.getValue();
      claimants.clear();
      for (int64_t f = 0; f < numFactors; ++f)
        if (llvm::is_contained(choice.factorAxes[f], axis))
          claimants.push_back(f);
      if (claimants.size() > 1) {
        dup = axis;
        break;
      }
    }
    if (dup.empty())
      break;
    double best = -1;
    SmallVector<AxisList> bestAxes;
    for (int64_t keep : claimants) {
      OpShardingChoice trial;
      trial.factorAxes = choice.factorAxes;
      for (int64_t g : claimants) {
        if (g == keep)
          continue;
        AxisList &axes = trial.factorAxes[g];
        axes.resize(llvm::find(axes, dup) - axes.begin());
      }
      buildImplied(op, rule, trial, meshSym);
      double cost = totalCost(trial, operandShardings, resultShardings,
                              operandTypes, resultTypes, mesh);
      if (best < 0 || cost < best) {
        best = cost;
        bestAxes = trial.factorAxes;
      }
    }
    choice.factorAxes = bestAxes;
  }

  buildImplied(op, rule, choice, meshSym);
  choice.cost = totalCost(choice, operandShardings, resultShardings,
                          operandTypes, resultTypes, mesh);
  return choice;
}
