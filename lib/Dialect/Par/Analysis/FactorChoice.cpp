//===- FactorChoice.cpp - How an op runs given shardings ------------------===//
//
// See FactorChoice.h.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Analysis/FactorChoice.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::par;

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
        cands, [&](const AxisList &c) { return isAxesPrefix(c, *longest); });
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
          size_t common = commonAxesPrefix(held, c);
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
