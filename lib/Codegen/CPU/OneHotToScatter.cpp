//===- OneHotToScatter.cpp - par-one-hot-to-scatter ------------------------===//
//
// An embedding's gradient is a scatter-add: row tokens[b, s] of the table's
// gradient gets dy[b, s, :]. par-autodiff writes it the only way linalg on
// tensors can, as a one-hot accumulation: a generic over the gather's loops
// plus a parallel loop r over the table's rows that adds dy where
// `linalg.index r == token`,
//
//   out[r, d] += select(r == X(b, s), v(b, s, d), 0)   for all b, s, d, r
//
// which costs rows x (batch x sequence x width) iterations: nothing for a
// test vocabulary of 96, hours for GPT-2's 50,257. On buffers, this pass
// drops the loop r and writes the one row the comparison selects:
//
//   for b, s, d:  x = X(b, s, d);  if 0 <= x < rows:  out[x, d] += v(b, s, d)
//
// The other loops keep their order, so every element of `out` receives the
// same additions in the same order as before: the results are bit for bit
// those of the one-hot form (x + 0 = x; a -0.0 accumulator would become
// +0.0 in the one-hot form, and stays -0.0 here).
//
// Matched: a linalg.generic on buffers with one output and a parallel loop
// r such that linalg.index r has one use, `arith.cmpi eq` against a value X
// that does not depend on r; the comparison's one use is a select of (v, 0)
// whose one use is `out + select` (either order), yielded; no input's
// indexing map uses r. Anything else is left to par-parallelize-loops.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#define DEBUG_TYPE "par-one-hot-to-scatter"

namespace mlir::par {
#define GEN_PASS_DEF_ONEHOTTOSCATTER
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The parts of a matched generic.
struct OneHot {
  unsigned row = 0;               // the loop r
  linalg::IndexOp index;          // linalg.index r
  arith::CmpIOp cmp;              // r == X
  Value selected;                 // X
  arith::SelectOp select;         // select(cmp, v, 0)
  Operation *accumulate = nullptr; // out + select
};

/// True if `v`, defined in `body` or above it, depends on linalg.index
/// `row` (through the body's ops).
bool dependsOnRow(Value v, Block *body, unsigned row) {
  SmallVector<Value> todo{v};
  DenseSet<Value> seen;
  while (!todo.empty()) {
    Value x = todo.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    Operation *def = x.getDefiningOp();
    if (!def || def->getBlock() != body)
      continue; // a block argument (r-free inputs) or a value from above
    if (auto idx = dyn_cast<linalg::IndexOp>(def))
      if (idx.getDim() == row)
        return true;
    for (Value o : def->getOperands())
      todo.push_back(o);
  }
  return false;
}

std::optional<OneHot> match(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumResults() != 0)
    return std::nullopt;
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  if (yield.getNumOperands() != 1)
    return std::nullopt;
  BlockArgument out = body->getArguments().back();
  auto iters = op.getIteratorTypesArray();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (auto idx : body->getOps<linalg::IndexOp>()) {
    unsigned r = idx.getDim();
    if (iters[r] != utils::IteratorType::parallel || !idx->hasOneUse())
      continue;
    // The only read of r.
    if (llvm::count_if(body->getOps<linalg::IndexOp>(),
                       [&](linalg::IndexOp o) { return o.getDim() == r; }) !=
        1)
      continue;
    // No input is indexed by r; the output is.
    bool inputUsesRow = false;
    for (unsigned i = 0; i + 1 < maps.size(); ++i)
      inputUsesRow |= maps[i].isFunctionOfDim(r);
    if (inputUsesRow || !maps.back().isFunctionOfDim(r))
      continue;
    OneHot m;
    m.row = r;
    m.index = idx;
    m.cmp = dyn_cast<arith::CmpIOp>(*idx->user_begin());
    if (!m.cmp || m.cmp.getPredicate() != arith::CmpIPredicate::eq ||
        !m.cmp->hasOneUse())
      continue;
    m.selected = m.cmp.getLhs() == idx.getResult() ? m.cmp.getRhs()
                                                   : m.cmp.getLhs();
    if (m.selected == idx.getResult() || dependsOnRow(m.selected, body, r))
      continue;
    m.select = dyn_cast<arith::SelectOp>(*m.cmp->user_begin());
    if (!m.select || m.select.getCondition() != m.cmp.getResult() ||
        !matchPattern(m.select.getFalseValue(), m_AnyZeroFloat()) ||
        !m.select->hasOneUse() ||
        dependsOnRow(m.select.getTrueValue(), body, r))
      continue;
    m.accumulate = *m.select->user_begin();
    if (!isa<arith::AddFOp>(m.accumulate) ||
        !llvm::is_contained(m.accumulate->getOperands(), out) ||
        !m.accumulate->hasOneUse() ||
        *m.accumulate->user_begin() != yield.getOperation())
      continue;
    return m;
  }
  return std::nullopt;
}

/// Indices of `map` applied to `ivs`.
SmallVector<Value> apply(OpBuilder &b, Location loc, AffineMap map,
                         ArrayRef<Value> ivs) {
  SmallVector<Value> out;
  for (unsigned i = 0; i < map.getNumResults(); ++i) {
    AffineExpr e = map.getResult(i);
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      out.push_back(ivs[d.getPosition()]);
      continue;
    }
    out.push_back(
        affine::AffineApplyOp::create(b, loc, map.getSubMap({i}), ivs));
  }
  return out;
}

void rewrite(IRRewriter &rw, linalg::GenericOp op, OneHot m) {
  Location loc = op.getLoc();
  rw.setInsertionPoint(op);
  SmallVector<Range, 4> ranges =
      cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(rw, loc);
  Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
  Value one = arith::ConstantIndexOp::create(rw, loc, 1);
  SmallVector<Value> ivs(ranges.size());
  // The loops other than r, in their order.
  for (unsigned d = 0; d < ranges.size(); ++d) {
    if (d == m.row)
      continue;
    Value ub = getValueOrCreateConstantIndexOp(rw, loc, ranges[d].size);
    auto loop = scf::ForOp::create(rw, loc, zero, ub, one);
    ivs[d] = loop.getInductionVar();
    rw.setInsertionPoint(loop.getBody()->getTerminator());
  }
  // The row loop's value is not known yet: a placeholder for the inputs'
  // indices (none of them uses it).
  ivs[m.row] = zero;
  Block *body = op.getBody();
  IRMapping map;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (unsigned i = 0; i + 1 < maps.size(); ++i) {
    Value in = op.getDpsInputOperand(i)->get();
    BlockArgument arg = body->getArgument(i);
    if (arg.use_empty())
      continue;
    if (isa<MemRefType>(in.getType()))
      map.map(arg, memref::LoadOp::create(rw, loc, in,
                                          apply(rw, loc, maps[i], ivs)));
    else
      map.map(arg, in); // a scalar input
  }
  // Everything but the row loop's part, in order: X and v.
  for (Operation &o : body->without_terminator()) {
    if (&o == m.index || &o == m.cmp || &o == m.select || &o == m.accumulate)
      continue;
    if (auto idx = dyn_cast<linalg::IndexOp>(o)) {
      map.map(idx.getResult(), ivs[idx.getDim()]);
      continue;
    }
    rw.clone(o, map);
  }
  Value x = map.lookupOrDefault(m.selected);
  Value rows = getValueOrCreateConstantIndexOp(rw, loc, ranges[m.row].size);
  Value inside = arith::AndIOp::create(
      rw, loc,
      arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::sge, x, zero),
      arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::slt, x, rows));
  auto guard = scf::IfOp::create(rw, loc, inside, /*withElseRegion=*/false);
  rw.setInsertionPoint(guard.thenBlock()->getTerminator());
  ivs[m.row] = x;
  Value outBuf = op.getDpsInitOperand(0)->get();
  SmallVector<Value> at = apply(rw, loc, maps.back(), ivs);
  Value old = memref::LoadOp::create(rw, loc, outBuf, at);
  map.map(body->getArguments().back(), old);
  map.map(m.select.getResult(), map.lookupOrDefault(m.select.getTrueValue()));
  Value sum = rw.clone(*m.accumulate, map)->getResult(0);
  memref::StoreOp::create(rw, loc, sum, outBuf, at);
  rw.eraseOp(op);
}

struct OneHotToScatterPass
    : public mlir::par::impl::OneHotToScatterBase<OneHotToScatterPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, OneHot>> found;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (std::optional<OneHot> m = match(op))
        found.push_back({op, *m});
    });
    IRRewriter rw(&getContext());
    for (auto &[op, m] : found)
      rewrite(rw, op, m);
  }
};

} // namespace
