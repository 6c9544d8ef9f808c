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
// The lookup of a split table (par-local-row-index's form) is the same
// comparison on a reduction loop r over the table's rows:
//
//   out[b, s, d] += select(r == X(b, s), T[r, d], 0)   for all b, s, d, r
//
// and becomes the gather of the one row:
//
//   for b, s, d:  x = X(b, s);  if 0 <= x < rows:  out[b, s, d] += T[x, d]
//
// (bit for bit again: the other rows added zeros).
//
// Matched: a linalg.generic on buffers with one output and a loop r such
// that linalg.index r has one use, `arith.cmpi eq` against a value X that
// does not depend on r; the comparison's one use is a select of (v, 0), or
// of (1, 0) multiplied by v, whose one use is `out + ...` (either order),
// yielded. Scatter: r parallel, the output indexed by r, no input. Gather:
// r the reduction, the output not indexed by r (v may read inputs indexed
// by r). Anything else is left to par-parallelize-loops.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"

#include "par/Dialect/Par/Analysis/LoopDependence.h"

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
  bool gather = false;            // r a reduction: read one row
  linalg::IndexOp index;          // linalg.index r
  arith::CmpIOp cmp;              // r == X
  Value selected;                 // X
  arith::SelectOp select;         // select(cmp, v, 0) or select(cmp, 1, 0)
  Operation *multiply = nullptr;  // v * select(cmp, 1, 0), if that form
  Value added;                    // v
  Operation *accumulate = nullptr; // out + ...
};

/// True if `v` depends on loop `row` through linalg.index or an input
/// indexed by it (the output, the accumulator, is not counted).
bool dependsOnRow(Value v, Block *body, unsigned row,
                  ArrayRef<AffineMap> maps) {
  return readsLoop(v, body, row, maps.drop_back());
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
    if (!idx->hasOneUse())
      continue;
    // The only read of r.
    if (llvm::count_if(body->getOps<linalg::IndexOp>(),
                       [&](linalg::IndexOp o) { return o.getDim() == r; }) !=
        1)
      continue;
    // Scatter: no input is indexed by r, the output is. Gather: r is the
    // reduction, the output is not indexed by it.
    bool inputUsesRow = false;
    for (unsigned i = 0; i + 1 < maps.size(); ++i)
      inputUsesRow |= maps[i].isFunctionOfDim(r);
    OneHot m;
    m.gather = iters[r] == utils::IteratorType::reduction;
    if (m.gather ? maps.back().isFunctionOfDim(r) ||
                       llvm::count(iters, utils::IteratorType::reduction) != 1
                 : iters[r] != utils::IteratorType::parallel ||
                       inputUsesRow || !maps.back().isFunctionOfDim(r))
      continue;
    m.row = r;
    m.index = idx;
    m.cmp = dyn_cast<arith::CmpIOp>(*idx->user_begin());
    if (!m.cmp || m.cmp.getPredicate() != arith::CmpIPredicate::eq ||
        !m.cmp->hasOneUse())
      continue;
    m.selected = m.cmp.getLhs() == idx.getResult() ? m.cmp.getRhs()
                                                   : m.cmp.getLhs();
    if (m.selected == idx.getResult() ||
        dependsOnRow(m.selected, body, r, maps))
      continue;
    m.select = dyn_cast<arith::SelectOp>(*m.cmp->user_begin());
    if (!m.select || m.select.getCondition() != m.cmp.getResult() ||
        !matchPattern(m.select.getFalseValue(), m_AnyZeroFloat()) ||
        !m.select->hasOneUse())
      continue;
    // v * select(cmp, 1, 0): v is added where the row matches (v * 1 = v).
    Operation *sum = *m.select->user_begin();
    m.added = m.select.getTrueValue();
    if (isa<arith::MulFOp>(sum) &&
        matchPattern(m.select.getTrueValue(), m_OneFloat()) &&
        sum->hasOneUse()) {
      m.multiply = sum;
      m.added = sum->getOperand(0) == m.select.getResult() ? sum->getOperand(1)
                                                           : sum->getOperand(0);
      sum = *sum->user_begin();
    }
    // The scatter adds a row-free value; the gather's reads the row.
    if (m.added == m.select.getResult() ||
        (!m.gather && dependsOnRow(m.added, body, r, maps)))
      continue;
    m.accumulate = sum;
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
  // The row loop's value is not known yet: a placeholder for the indices
  // of the inputs that do not use it.
  ivs[m.row] = zero;
  Block *body = op.getBody();
  IRMapping map;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  // The inputs indexed by the row (a gather's table) are read, and what
  // depends on them computed, once the row is known (below).
  auto loadInputs = [&](bool rowInputs) {
    for (unsigned i = 0; i + 1 < maps.size(); ++i) {
      Value in = op.getDpsInputOperand(i)->get();
      BlockArgument arg = body->getArgument(i);
      if (arg.use_empty() || maps[i].isFunctionOfDim(m.row) != rowInputs)
        continue;
      if (isa<MemRefType>(in.getType()))
        map.map(arg, memref::LoadOp::create(rw, loc, in,
                                            apply(rw, loc, maps[i], ivs)));
      else
        map.map(arg, in); // a scalar input
    }
  };
  auto cloneBody = [&](bool rowOps) {
    for (Operation &o : body->without_terminator()) {
      if (&o == m.index || &o == m.cmp || &o == m.select ||
          &o == m.multiply || &o == m.accumulate)
        continue;
      bool readsRow = llvm::any_of(o.getResults(), [&](Value v) {
        return dependsOnRow(v, body, m.row, maps);
      });
      if (readsRow != rowOps)
        continue;
      if (auto idx = dyn_cast<linalg::IndexOp>(o)) {
        map.map(idx.getResult(), ivs[idx.getDim()]);
        continue;
      }
      rw.clone(o, map);
    }
  };
  // Everything but the row loop's part, in order: X (and a scatter's v).
  loadInputs(/*rowInputs=*/false);
  cloneBody(/*rowOps=*/false);
  Value x = map.lookupOrDefault(m.selected);
  Value rows = getValueOrCreateConstantIndexOp(rw, loc, ranges[m.row].size);
  Value inside = arith::AndIOp::create(
      rw, loc,
      arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::sge, x, zero),
      arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::slt, x, rows));
  auto guard = scf::IfOp::create(rw, loc, inside, /*withElseRegion=*/false);
  rw.setInsertionPoint(guard.thenBlock()->getTerminator());
  ivs[m.row] = x;
  loadInputs(/*rowInputs=*/true);
  cloneBody(/*rowOps=*/true);
  Value outBuf = op.getDpsInitOperand(0)->get();
  SmallVector<Value> at = apply(rw, loc, maps.back(), ivs);
  Value old = memref::LoadOp::create(rw, loc, outBuf, at);
  map.map(body->getArguments().back(), old);
  map.map((m.multiply ? m.multiply->getResult(0) : m.select.getResult()),
          map.lookupOrDefault(m.added));
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
