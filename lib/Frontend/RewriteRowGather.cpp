//===- RewriteRowGather.cpp - par-rewrite-row-gather ----------------------===//
//
// A generic that gathers one element per point from a computed tensor
// (cross-entropy's target log-probability) as a compare-select-sum over the
// gathered dimension (see Passes.td): the tensor becomes an operand, so its
// sharding is kept and a split dimension is reduced, not all-gathered.
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"
#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallBitVector.h"

#define DEBUG_TYPE "par-rewrite-row-gather"

namespace mlir::par {
#define GEN_PASS_DEF_REWRITEROWGATHER
#include "par/Frontend/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// A gather `rewriteGather` handles: the extract the body yields and the
/// table dimension whose index is data-dependent.
struct RowGather {
  tensor::ExtractOp read;
  int64_t dataDim = -1;
};

/// Whether `op` is an elementwise generic yielding one element of a
/// computed tensor read from above, all of whose indices but one are loop
/// indices spanning their table dimension.
std::optional<RowGather> matchRowGather(linalg::GenericOp op) {
  if (op.getNumResults() != 1 || op.getNumReductionLoops() != 0 ||
      !op.getRegionOutputArgs()[0].use_empty())
    return std::nullopt;
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto read = yield.getOperand(0).getDefiningOp<tensor::ExtractOp>();
  if (!read || read->getBlock() != body ||
      !isa<FloatType>(read.getType()))
    return std::nullopt;
  Value table = read.getTensor();
  if (table.getDefiningOp() && op->isAncestor(table.getDefiningOp()))
    return std::nullopt;
  auto tableType = cast<RankedTensorType>(table.getType());
  if (!tableType.hasStaticShape())
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  llvm::SmallBitVector seen(op.getNumLoops());
  RowGather g{read, -1};
  for (auto [d, idx] : llvm::enumerate(read.getIndices())) {
    auto loop = idx.getDefiningOp<linalg::IndexOp>();
    if (loop && loop->getBlock() == body && !seen.test(loop.getDim()) &&
        ranges[loop.getDim()] == tableType.getDimSize(d)) {
      seen.set(loop.getDim());
      continue;
    }
    if (g.dataDim >= 0)
      return std::nullopt; // Two data-dependent indices.
    g.dataDim = d;
  }
  if (g.dataDim < 0)
    return std::nullopt; // A plain copy, nothing data-dependent.
  // Embedding tables (function arguments) keep their gather (a reduction
  // over a whole vocabulary per element costs V times more), unless their
  // par.sharding splits the gathered dimension: a vocabulary-parallel table
  // (Megatron's masked lookup) is then reduced over its local rows, one
  // all-reduce of the looked-up rows, instead of all-gathered.
  if (auto arg = dyn_cast<BlockArgument>(table)) {
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!fn || arg.getOwner() != &fn.getBody().front())
      return std::nullopt;
    auto s = fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                               ParDialect::kShardingAttrName);
    if (!s || s.getRank() <= g.dataDim || s.getDimAxes(g.dataDim).empty())
      return std::nullopt;
  }
  return g;
}

/// The rewrite: one more (reduction) loop over the gathered dimension, the
/// table and an iota over that dimension as inputs, and a sum of
/// `select(iota == index, table, 0)`.
void rewriteGather(linalg::GenericOp op, RowGather g) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Value table = g.read.getTensor();
  auto tableType = cast<RankedTensorType>(table.getType());
  auto resultType = cast<RankedTensorType>(op.getResult(0).getType());
  Type elt = resultType.getElementType();
  int64_t numLoops = op.getNumLoops(), total = numLoops + 1;
  int64_t vocab = tableType.getDimSize(g.dataDim);
  Attribute stage = op->getAttr(ParDialect::kStageAttrName);
  auto pin = [&](Operation *o) {
    if (stage)
      o->setAttr(ParDialect::kStageAttrName, stage);
    return o;
  };

  // iota[v] = v.
  Type i64 = b.getI64Type();
  Value iotaInit = pin(tensor::EmptyOp::create(b, loc, {vocab}, i64))->getResult(0);
  auto iota = linalg::GenericOp::create(
      b, loc, TypeRange{iotaInit.getType()}, ValueRange{}, ValueRange{iotaInit},
      ArrayRef<AffineMap>{b.getMultiDimIdentityMap(1)},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location nloc, ValueRange) {
        Value i = linalg::IndexOp::create(nb, nloc, 0);
        linalg::YieldOp::create(
            nb, nloc, ValueRange{arith::IndexCastOp::create(nb, nloc, i64, i)});
      });
  pin(iota);
  Value empty =
      pin(tensor::EmptyOp::create(b, loc, resultType.getShape(), elt))->getResult(0);
  Value zero = pin(arith::ConstantOp::create(b, loc, elt, b.getZeroAttr(elt)))
                   ->getResult(0);
  Value init = pin(linalg::FillOp::create(b, loc, zero, empty))->getResult(0);

  auto widen = [&](AffineMap m) {
    return AffineMap::get(total, 0, m.getResults(), ctx);
  };
  SmallVector<Value> inputs(op.getDpsInputs());
  SmallVector<AffineMap> maps;
  for (OpOperand *in : op.getDpsInputOperands())
    maps.push_back(widen(op.getMatchingIndexingMap(in)));
  SmallVector<AffineExpr> tableExprs;
  for (auto [d, idx] : llvm::enumerate(g.read.getIndices()))
    tableExprs.push_back(
        (int64_t)d == g.dataDim
            ? getAffineDimExpr(numLoops, ctx)
            : getAffineDimExpr(idx.getDefiningOp<linalg::IndexOp>().getDim(),
                               ctx));
  inputs.push_back(table);
  maps.push_back(AffineMap::get(total, 0, tableExprs, ctx));
  inputs.push_back(iota.getResult(0));
  maps.push_back(AffineMap::get(total, 0, {getAffineDimExpr(numLoops, ctx)},
                                ctx));
  maps.push_back(widen(op.getMatchingIndexingMap(op.getDpsInitOperand(0))));
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  iters.push_back(utils::IteratorType::reduction);

  Block *body = op.getBody();
  unsigned numIn = op.getNumDpsInputs();
  auto sum = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, inputs, ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        IRMapping map;
        for (unsigned i = 0; i < numIn; ++i)
          map.map(body->getArgument(i), args[i]);
        for (Operation &bop : body->without_terminator())
          if (&bop != g.read.getOperation())
            nb.clone(bop, map);
        Value idx = map.lookupOrDefault(g.read.getIndices()[g.dataDim]);
        Value idx64 = arith::IndexCastOp::create(nb, nloc, i64, idx);
        Value hit = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq,
                                          args[numIn + 1], idx64);
        Value z = arith::ConstantOp::create(nb, nloc, elt, nb.getZeroAttr(elt));
        Value picked = arith::SelectOp::create(nb, nloc, hit, args[numIn], z);
        Value acc = arith::AddFOp::create(nb, nloc, args.back(), picked);
        linalg::YieldOp::create(nb, nloc, ValueRange{acc});
      });
  sum->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  // Index computations only the old extract needed (its row index, a
  // linalg.index that would pin the loop to global indices) go.
  Block *nbody = sum.getBody();
  bool changed = true;
  while (changed) {
    changed = false;
    // Collected first: llvm::reverse over the body's range is a
    // std::reverse_iterator, whose base is the op being erased.
    SmallVector<Operation *> dead;
    for (Operation &bop : nbody->without_terminator())
      if (bop.use_empty() && isMemoryEffectFree(&bop))
        dead.push_back(&bop);
    for (Operation *bop : llvm::reverse(dead))
      bop->erase();
    changed = !dead.empty();
  }
  op.getResult(0).replaceAllUsesWith(sum.getResult(0));
  op.erase();
}

struct RewriteRowGatherPass
    : public mlir::par::impl::RewriteRowGatherBase<RewriteRowGatherPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, RowGather>> matches;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<RowGather> g = matchRowGather(op))
        matches.emplace_back(op, *g);
    });
    for (auto &[op, g] : matches)
      rewriteGather(op, g);
  }
};

} // namespace
