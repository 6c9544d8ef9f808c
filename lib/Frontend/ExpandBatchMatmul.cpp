//===- ExpandBatchMatmul.cpp - par-expand-batch-matmul --------------------===//
//
// torch's 4-d matmul (attention's q k^T and p v) as a contraction over its
// own batch dims (see Passes.td): the collapse of [batch, heads] into one
// bmm batch dim merges a dp-sharded and a tp-sharded dim, which no block
// sharding of the merged dim expresses, so the partitioner all-gathered the
// heads. The generic keeps both dims, each sharded on its own axis.
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"
#include "StageListener.h"

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

#define DEBUG_TYPE "par-expand-batch-matmul"

namespace mlir::par {
#define GEN_PASS_DEF_EXPANDBATCHMATMUL
#include "par/Frontend/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The leading batch dims of `v` if it is a collapse_shape of a rank-(k+2)
/// tensor with reassociation [[0..k-1], [k], [k+1]] (k >= 2), else null.
static tensor::CollapseShapeOp batchCollapse(Value v) {
  auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>();
  if (!collapse)
    return nullptr;
  SmallVector<ReassociationIndices> groups =
      collapse.getReassociationIndices();
  auto srcType = collapse.getSrcType();
  int64_t rank = srcType.getRank();
  if (groups.size() != 3 || rank < 4 || !srcType.hasStaticShape())
    return nullptr;
  int64_t k = rank - 2;
  if (static_cast<int64_t>(groups[0].size()) != k || groups[1].size() != 1 ||
      groups[2].size() != 1)
    return nullptr;
  return collapse;
}

/// batch_matmul(collapse(A), collapse(B), C) with A: [b.., m, r] and
/// B: [b.., r, n] collapsed over the same batch dims b.. becomes a
/// linalg.generic over (b.., m, n, r) computing C' += A * B with C' the
/// init expanded to [b.., m, n]; the bmm's result is the collapse of it
/// (and an expand_shape of that back to [b.., m, n] folds away).
struct ExpandCollapsedBatchMatmul
    : public OpRewritePattern<linalg::BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::BatchMatmulOp bmm,
                                PatternRewriter &rewriter) const override {
    if (bmm.hasUserDefinedMaps() || !bmm.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(bmm, "transposed or buffer form");
    tensor::CollapseShapeOp lhs = batchCollapse(bmm.getInputs()[0]);
    tensor::CollapseShapeOp rhs = batchCollapse(bmm.getInputs()[1]);
    if (!lhs || !rhs)
      return rewriter.notifyMatchFailure(bmm, "operands are not collapsed");
    auto lhsType = lhs.getSrcType(), rhsType = rhs.getSrcType();
    int64_t rank = lhsType.getRank(), k = rank - 2;
    if (rhsType.getRank() != rank ||
        lhsType.getShape().take_front(k) != rhsType.getShape().take_front(k))
      return rewriter.notifyMatchFailure(bmm, "different batch dims");
    Value init = bmm.getOutputs()[0];
    auto initType = cast<RankedTensorType>(init.getType());
    Type elt = initType.getElementType();
    if (!isa<FloatType>(elt) || lhsType.getElementType() != elt ||
        rhsType.getElementType() != elt)
      return rewriter.notifyMatchFailure(bmm, "not one float type");

    Location loc = bmm.getLoc();
    SmallVector<int64_t> outShape(lhsType.getShape().take_front(k));
    outShape.push_back(lhsType.getDimSize(k));     // m
    outShape.push_back(rhsType.getDimSize(k + 1)); // n
    auto outType = RankedTensorType::get(outShape, elt);
    SmallVector<ReassociationIndices> groups =
        lhs.getReassociationIndices();
    // The init in the expanded shape: a fill of a new empty tensor when it
    // is one (the partitioner wants a split reduction's init a fill),
    // else the init expanded.
    Value newInit;
    if (auto fill = init.getDefiningOp<linalg::FillOp>();
        fill && fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>()) {
      Value empty = tensor::EmptyOp::create(rewriter, loc, outShape, elt);
      newInit = linalg::FillOp::create(rewriter, loc, fill.getInputs()[0],
                                       empty)
                    .getResult(0);
    } else {
      newInit = tensor::ExpandShapeOp::create(rewriter, loc, outType, init,
                                              groups);
    }

    MLIRContext *ctx = rewriter.getContext();
    int64_t loops = k + 3; // b.., m, n, r
    auto dim = [&](int64_t d) { return getAffineDimExpr(d, ctx); };
    SmallVector<AffineExpr> a, b, c;
    for (int64_t d = 0; d < k; ++d) {
      a.push_back(dim(d));
      b.push_back(dim(d));
      c.push_back(dim(d));
    }
    AffineExpr m = dim(k), n = dim(k + 1), r = dim(k + 2);
    a.append({m, r});
    b.append({r, n});
    c.append({m, n});
    SmallVector<AffineMap> maps = {AffineMap::get(loops, 0, a, ctx),
                                   AffineMap::get(loops, 0, b, ctx),
                                   AffineMap::get(loops, 0, c, ctx)};
    SmallVector<utils::IteratorType> iterators(loops,
                                               utils::IteratorType::parallel);
    iterators.back() = utils::IteratorType::reduction;
    auto generic = linalg::GenericOp::create(
        rewriter, loc, outType, ValueRange{lhs.getSrc(), rhs.getSrc()},
        ValueRange{newInit}, maps, iterators,
        [&](OpBuilder &bb, Location l, ValueRange args) {
          Value p = arith::MulFOp::create(bb, l, args[0], args[1]);
          Value s = arith::AddFOp::create(bb, l, args[2], p);
          linalg::YieldOp::create(bb, l, s);
        });
    Value result = generic.getResult(0);
    // Users that expand the bmm back to [b.., m, n] take the generic's
    // result; the others its collapse.
    for (OpOperand &use : llvm::make_early_inc_range(bmm->getUses())) {
      auto expand = dyn_cast<tensor::ExpandShapeOp>(use.getOwner());
      if (expand && expand.getResultType() == outType &&
          expand.getReassociationIndices() == groups)
        rewriter.replaceOp(expand, result);
    }
    if (!bmm->use_empty()) {
      Value collapsed = tensor::CollapseShapeOp::create(
          rewriter, loc, initType, result, groups);
      rewriter.replaceOp(bmm, collapsed);
    } else {
      rewriter.eraseOp(bmm);
    }
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
