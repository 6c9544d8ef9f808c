//===- ExpandBatchMatmul.cpp - par-expand-batch-matmul --------------------===//
//
// torch's 4-d matmul (attention's q k^T and p v) as a contraction over its
// own batch dims (see Passes.td): torch-mlir collapses [batch, heads] into
// the one batch dim of a linalg.batch_matmul, which merges a dp-sharded and
// a tp-sharded dim that no block sharding of the merged dim expresses, so
// the partitioner all-gathered the heads. The generic keeps the dims apart,
// each sharded on its own axis; GQA's p v, whose operands merge different
// batch shapes, runs over the finest shape both are merges of.
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"
#include "StageListener.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <set>

#define DEBUG_TYPE "par-expand-batch-matmul"

namespace mlir::par {
#define GEN_PASS_DEF_EXPANDBATCHMATMUL
#include "par/Frontend/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The number k >= 1 of leading batch dims the reassociation
/// `[[0..k-1], [k], [k+1]]` of a rank-(k+2) tensor into rank 3 merges (the
/// matrix dims kept), or 0 for any other reassociation.
static int64_t leadingMerge(ArrayRef<ReassociationIndices> groups) {
  if (groups.size() != 3 || groups[1].size() != 1 || groups[2].size() != 1)
    return 0;
  int64_t k = groups[0].size();
  for (auto [i, d] : llvm::enumerate(groups[0]))
    if (d != static_cast<int64_t>(i))
      return 0;
  if (k < 1 || groups[1][0] != k || groups[2][0] != k + 1)
    return 0;
  return k;
}

/// The leading batch shape of `t` (a rank-(k+2) tensor).
static SmallVector<int64_t> batchOf(RankedTensorType t, int64_t k) {
  return SmallVector<int64_t>(t.getShape().take_front(k));
}

/// The finest batch shape each of `shapes` (their leading batch dims) is a
/// merge of consecutive dims of: the union of their prefix products, which
/// must form a divisibility chain. Empty when there is none.
static SmallVector<int64_t> commonBatch(ArrayRef<SmallVector<int64_t>> shapes) {
  std::set<int64_t> cuts;
  int64_t total = -1;
  for (const SmallVector<int64_t> &sh : shapes) {
    int64_t p = 1;
    for (int64_t d : sh) {
      p *= d;
      cuts.insert(p);
    }
    if (total >= 0 && p != total)
      return {};
    total = p;
  }
  SmallVector<int64_t> out;
  int64_t prev = 1;
  for (int64_t c : cuts) {
    if (c == 1)
      continue;
    if (c % prev)
      return {};
    out.push_back(c / prev);
    prev = c;
  }
  return out;
}

/// The reassociation from `common` (+ 2 matrix dims) to `batch` (+ 2).
static std::optional<SmallVector<ReassociationIndices>>
groupsFor(ArrayRef<int64_t> common, ArrayRef<int64_t> batch) {
  SmallVector<ReassociationIndices> groups;
  int64_t c = 0, n = common.size();
  for (int64_t d : batch) {
    ReassociationIndices g;
    int64_t p = 1;
    while (c < n && (p < d || g.empty())) {
      p *= common[c];
      g.push_back(c++);
    }
    if (p != d)
      return std::nullopt;
    groups.push_back(g);
  }
  if (c != n)
    return std::nullopt;
  groups.push_back({n});
  groups.push_back({n + 1});
  return groups;
}

/// A batch_matmul on operands collapsed over leading batch dims.
struct Operand {
  tensor::CollapseShapeOp collapse;
  RankedTensorType type; // the uncollapsed operand's
  int64_t k = 0;         // its batch dims
};

static std::optional<Operand> collapsedOperand(Value v) {
  auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>();
  if (!collapse || !collapse.getSrcType().hasStaticShape())
    return std::nullopt;
  int64_t k = leadingMerge(collapse.getReassociationIndices());
  if (!k)
    return std::nullopt;
  return Operand{collapse, collapse.getSrcType(), k};
}

/// batch_matmul(collapse(A), collapse(B), C), A: [a.., m, r] and
/// B: [b.., r, n] with a.. and b.. merges of one batch shape c.. (the
/// finest: [batch, heads], or GQA's [batch, kv heads, repeats]), becomes a
/// linalg.generic over (c.., m, n, r) computing C' += A' * B', A' and B' the
/// operands expanded to c.. where they merged dims of it, C' the init on
/// c..; users that expand the bmm's result back to a merge of c.. take the
/// generic's result (collapsed to their batch shape where it merges dims of
/// c..), others its collapse to the bmm's shape.
struct ExpandCollapsedBatchMatmul
    : public OpRewritePattern<linalg::BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::BatchMatmulOp bmm,
                                PatternRewriter &rewriter) const override {
    if (bmm.hasUserDefinedMaps() || !bmm.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(bmm, "transposed or buffer form");
    std::optional<Operand> lhs = collapsedOperand(bmm.getInputs()[0]);
    std::optional<Operand> rhs = collapsedOperand(bmm.getInputs()[1]);
    if (!lhs || !rhs)
      return rewriter.notifyMatchFailure(bmm, "operands are not collapsed");
    Value init = bmm.getOutputs()[0];
    auto initType = cast<RankedTensorType>(init.getType());
    Type elt = initType.getElementType();
    if (!isa<FloatType>(elt) || lhs->type.getElementType() != elt ||
        rhs->type.getElementType() != elt || !initType.hasStaticShape())
      return rewriter.notifyMatchFailure(bmm, "not one float type");

    // The expands of the result back over leading batch dims: their batch
    // shapes join the operands' in the common shape when they can.
    SmallVector<tensor::ExpandShapeOp> expands;
    for (Operation *user : bmm->getUsers())
      if (auto ex = dyn_cast<tensor::ExpandShapeOp>(user))
        if (ex.getResultType().hasStaticShape() &&
            leadingMerge(ex.getReassociationIndices()))
          expands.push_back(ex);
    SmallVector<SmallVector<int64_t>> shapes = {batchOf(lhs->type, lhs->k),
                                                batchOf(rhs->type, rhs->k)};
    for (tensor::ExpandShapeOp ex : expands)
      shapes.push_back(batchOf(ex.getResultType(),
                               leadingMerge(ex.getReassociationIndices())));
    SmallVector<int64_t> common = commonBatch(shapes);
    // Each expand's reassociation from the common shape; when one has none
    // (a shape no chain of merges relates), the expands are users like any.
    SmallVector<SmallVector<ReassociationIndices>> expandGroups;
    for (auto [i, ex] : llvm::enumerate(expands)) {
      auto g = common.empty() ? std::nullopt : groupsFor(common, shapes[2 + i]);
      if (!g) {
        expands.clear();
        expandGroups.clear();
        shapes.resize(2);
        common = commonBatch(shapes);
        break;
      }
      expandGroups.push_back(*g);
    }
    if (common.size() < 2)
      return rewriter.notifyMatchFailure(bmm, "no batch dims to keep apart");
    auto ga = groupsFor(common, shapes[0]), gb = groupsFor(common, shapes[1]);
    auto gc = groupsFor(common, {initType.getDimSize(0)});
    if (!ga || !gb || !gc)
      return rewriter.notifyMatchFailure(bmm, "batch shapes do not chain");

    Location loc = bmm.getLoc();
    int64_t k = common.size();
    // Each operand on the common batch shape.
    auto onCommon = [&](Operand o,
                        ArrayRef<ReassociationIndices> groups) -> Value {
      Value src = o.collapse.getSrc();
      if (o.k == k)
        return src;
      SmallVector<int64_t> shape(common);
      shape.append({o.type.getDimSize(o.k), o.type.getDimSize(o.k + 1)});
      return tensor::ExpandShapeOp::create(
          rewriter, loc, RankedTensorType::get(shape, elt), src, groups);
    };
    Value a = onCommon(*lhs, *ga), b = onCommon(*rhs, *gb);
    SmallVector<int64_t> outShape(common);
    outShape.append({initType.getDimSize(1), initType.getDimSize(2)});
    auto outType = RankedTensorType::get(outShape, elt);
    // The init on the common shape: a fill of a new empty tensor when it
    // is a fill (torch's zeros; the partitioner wants a split reduction's
    // init a fill), else the init expanded.
    Value newInit;
    if (auto fill = init.getDefiningOp<linalg::FillOp>();
        fill && fill.getInputs()[0].getType() == elt) {
      Value empty = tensor::EmptyOp::create(rewriter, loc, outShape, elt);
      newInit = linalg::FillOp::create(rewriter, loc, fill.getInputs()[0],
                                       empty)
                    .getResult(0);
    } else {
      newInit =
          tensor::ExpandShapeOp::create(rewriter, loc, outType, init, *gc);
    }

    MLIRContext *ctx = rewriter.getContext();
    int64_t loops = k + 3; // c.., m, n, r
    auto dim = [&](int64_t d) { return getAffineDimExpr(d, ctx); };
    SmallVector<AffineExpr> ea, eb, ec;
    for (int64_t d = 0; d < k; ++d) {
      ea.push_back(dim(d));
      eb.push_back(dim(d));
      ec.push_back(dim(d));
    }
    AffineExpr m = dim(k), n = dim(k + 1), r = dim(k + 2);
    ea.append({m, r});
    eb.append({r, n});
    ec.append({m, n});
    SmallVector<AffineMap> maps = {AffineMap::get(loops, 0, ea, ctx),
                                   AffineMap::get(loops, 0, eb, ctx),
                                   AffineMap::get(loops, 0, ec, ctx)};
    SmallVector<utils::IteratorType> iterators(loops,
                                               utils::IteratorType::parallel);
    iterators.back() = utils::IteratorType::reduction;
    auto generic = linalg::GenericOp::create(
        rewriter, loc, outType, ValueRange{a, b}, ValueRange{newInit}, maps,
        iterators, [&](OpBuilder &bb, Location l, ValueRange args) {
          Value p = arith::MulFOp::create(bb, l, args[0], args[1]);
          Value s = arith::AddFOp::create(bb, l, args[2], p);
          linalg::YieldOp::create(bb, l, s);
        });
    Value result = generic.getResult(0);
    for (auto [ex, groups] : llvm::zip_equal(expands, expandGroups)) {
      RankedTensorType t = ex.getResultType();
      if (t == outType)
        rewriter.replaceOp(ex, result);
      else
        rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(ex, t, result,
                                                             groups);
    }
    if (!bmm->use_empty())
      rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(bmm, initType,
                                                           result, *gc);
    else
      rewriter.eraseOp(bmm);
    return success();
  }
};

struct ExpandBatchMatmulPass
    : public mlir::par::impl::ExpandBatchMatmulBase<ExpandBatchMatmulPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandCollapsedBatchMatmul>(&getContext());
    FrozenRewritePatternSet frozen(std::move(patterns));
    if (failed(applyPatternsKeepingStage(getOperation(), frozen)))
      return signalPassFailure();
  }
};

} // namespace
