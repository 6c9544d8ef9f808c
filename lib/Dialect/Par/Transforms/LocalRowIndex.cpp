//===- LocalRowIndex.cpp - par-local-row-index -----------------------------===//
//
// A vocabulary-parallel lookup compares each local row's global number with
// the token: par-rewrite-row-gather gives the generic an iota over the
// table's rows as an input (a loop read through linalg.index could not be
// split), and partitioning gives each device its block of it,
// `par.all_slice` of the iota. Its adjoint compares the same input. After
// partitioning, that block is known to be the contiguous rows
// off, off + 1, ... (off its first element), so
//
//   iota_shard[r] == X    is    r == X - off
//
// This pass rewrites the comparison into the second form and drops the
// input: the generic then reads its row loop through linalg.index, the
// one-hot form par-one-hot-to-scatter turns into a gather (the lookup) or
// a scatter (its gradient) of the one row, instead of a pass over every
// local row for every token.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/Passes.h"

#include "par/Dialect/Par/Analysis/LoopDependence.h"

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "par-local-row-index"

namespace mlir::par {
#define GEN_PASS_DEF_LOCALROWINDEX
#include "par/Dialect/Par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// Whether `v` is a device's block of the iota 0, 1, ..., n - 1:
/// `par.all_slice` (dimension 0) of a one-loop generic without inputs
/// yielding its index, cast to an integer.
bool isIotaShard(Value v) {
  auto slice = v.getDefiningOp<AllSliceOp>();
  if (!slice || slice.getDim() != 0)
    return false;
  auto iota = slice.getInput().getDefiningOp<linalg::GenericOp>();
  if (!iota || iota.getNumDpsInputs() != 0 || iota.getNumResults() != 1 ||
      iota.getNumLoops() != 1 || !iota.getIndexingMapsArray()[0].isIdentity())
    return false;
  auto yield = cast<linalg::YieldOp>(iota.getBody()->getTerminator());
  Value y = yield.getOperand(0);
  if (auto cast = y.getDefiningOp<arith::IndexCastOp>())
    y = cast.getIn();
  auto index = y.getDefiningOp<linalg::IndexOp>();
  return index && index.getDim() == 0;
}

/// Rewrites the comparisons of `op`'s iota-shard inputs; true if any.
bool rewrite(RewriterBase &rw, linalg::GenericOp op) {
  bool changed = false;
  Block *body = op.getBody();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (OpOperand *in : op.getDpsInputOperands()) {
    if (!isIotaShard(in->get()))
      continue;
    AffineMap map = maps[in->getOperandNumber()];
    BlockArgument arg = body->getArgument(in->getOperandNumber());
    if (map.getNumResults() != 1 || !isa<AffineDimExpr>(map.getResult(0)) ||
        !arg.hasOneUse())
      continue;
    unsigned r = cast<AffineDimExpr>(map.getResult(0)).getPosition();
    auto cmp = dyn_cast<arith::CmpIOp>(*arg.user_begin());
    if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
      continue;
    Value x = cmp.getLhs() == arg ? cmp.getRhs() : cmp.getLhs();
    if (x == arg || readsLoop(x, body, r, maps))
      continue;
    // The block's first row number, read once before the generic.
    rw.setInsertionPoint(op);
    Location loc = op.getLoc();
    Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
    Value off = tensor::ExtractOp::create(rw, loc, in->get(), zero);
    rw.setInsertionPoint(cmp);
    Value local = arith::SubIOp::create(rw, loc, x, off);
    if (!local.getType().isIndex())
      local = arith::IndexCastOp::create(rw, loc, rw.getIndexType(), local);
    Value row = linalg::IndexOp::create(rw, loc, r);
    rw.replaceOpWithNewOp<arith::CmpIOp>(cmp, arith::CmpIPredicate::eq, row,
                                         local);
    changed = true;
  }
  return changed;
}

struct LocalRowIndexPass
    : public mlir::par::impl::LocalRowIndexBase<LocalRowIndexPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> generics;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (op.hasPureTensorSemantics())
        generics.push_back(op);
    });
    IRRewriter rw(&getContext());
    bool changed = false;
    for (linalg::GenericOp op : generics)
      changed |= rewrite(rw, op);
    if (!changed)
      return;
    // The iota shards are no longer read: drop them from the generics.
    RewritePatternSet patterns(&getContext());
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
