//===- Autodiff.cpp - par-autodiff ----------------------------------------===//
//
// Reverse mode over whole tensors, forward mode inside generic bodies:
//
//  * The program is first brought to a small form: named linalg ops become
//    linalg.generic, elementwise tensor arith/math become linalg.generic.
//  * A reverse sweep visits ops from the return backwards, keeping one
//    adjoint (a tensor of the value's type) per value the loss depends on.
//  * For a generic and one of its inputs, the adjoint is a new generic over
//    the same loops: it recomputes the body, differentiates the yielded
//    values with respect to that input's block argument by forward-mode
//    tangent propagation over the scalar body ops, and accumulates
//    `dy * tangent`; loops the input does not index become reductions, which
//    is how broadcasts sum their gradients.
//  * A tensor the body reads from above with tensor.extract (a gather's
//    table) gets a scatter-add: a generic over the same loops plus one loop
//    per data-dependent index, which adds `dy * tangent` where the loop
//    equals the index.
//
// Recomputing inside each adjoint generic costs flops but needs no stored
// intermediates beyond the generic's own operands, and every adjoint is a
// structured op with a sharding rule, so the backward partitions like the
// forward.
//
//===----------------------------------------------------------------------===//

#include "par/Training/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

#define DEBUG_TYPE "par-autodiff"

namespace mlir::par {
#define GEN_PASS_DEF_AUTODIFF
#include "par/Training/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

static constexpr StringLiteral kParamAttr = ParDialect::kParamAttrName;

namespace {

//===----------------------------------------------------------------------===//
// Scalar tangents
//===----------------------------------------------------------------------===//

/// Forward-mode derivative of the body of a generic with respect to one
/// block argument. A null Value stands for a zero tangent.
class TangentBuilder {
public:
  TangentBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// Tangents of `values` after propagating over `ops` (already cloned into
  /// the insertion block), with `seed` the only argument of tangent 1.
  LogicalResult propagate(ArrayRef<Operation *> ops, Value seed) {
    tangents[seed] = constant(seed.getType(), 1.0);
    for (Operation *op : ops)
      if (failed(visit(op)))
        return failure();
    return success();
  }
  Value tangent(Value v) const { return tangents.lookup(v); }
  Operation *failedOp = nullptr;

private:
  Value constant(Type t, double v) {
    return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
  }
  Value add(Value a, Value c) {
    if (!a)
      return c;
    if (!c)
      return a;
    return arith::AddFOp::create(b, loc, a, c);
  }
  Value mul(Value a, Value c) {
    if (!a || !c)
      return {};
    return arith::MulFOp::create(b, loc, a, c);
  }
  Value neg(Value a) { return a ? arith::NegFOp::create(b, loc, a) : Value(); }

  LogicalResult visit(Operation *op) {
    auto t = [&](unsigned i) { return tangents.lookup(op->getOperand(i)); };
    bool anyTangent = llvm::any_of(op->getOperands(), [&](Value v) {
      return (bool)tangents.lookup(v);
    });
    if (!anyTangent || op->getNumResults() != 1)
      return success(); // Constants, index computations, comparisons.
    Value r = op->getResult(0);
    Value x = op->getNumOperands() > 0 ? op->getOperand(0) : Value();
    Value y = op->getNumOperands() > 1 ? op->getOperand(1) : Value();
    Type type = r.getType();
    Value out;
    if (isa<arith::AddFOp>(op)) {
      out = add(t(0), t(1));
    } else if (isa<arith::SubFOp>(op)) {
      out = add(t(0), neg(t(1)));
    } else if (isa<arith::MulFOp>(op)) {
      out = add(mul(t(0), y), mul(x, t(1)));
    } else if (isa<arith::DivFOp>(op)) {
      // (t0 - r * t1) / y
      Value num = add(t(0), neg(mul(r, t(1))));
      out = num ? arith::DivFOp::create(b, loc, num, y).getResult() : Value();
    } else if (isa<arith::NegFOp>(op)) {
      out = neg(t(0));
    } else if (isa<math::ExpOp>(op)) {
      out = mul(r, t(0));
    } else if (isa<math::LogOp>(op)) {
      out = arith::DivFOp::create(b, loc, t(0), x);
    } else if (isa<math::TanhOp>(op)) {
      Value one = constant(type, 1.0);
      Value d = arith::SubFOp::create(b, loc, one, mul(r, r));
      out = mul(d, t(0));
    } else if (isa<math::ErfOp>(op)) {
      // 2/sqrt(pi) * exp(-x^2)
      Value e = math::ExpOp::create(b, loc, neg(mul(x, x)));
      out = mul(mul(constant(type, 2.0 / std::sqrt(M_PI)), e), t(0));
    } else if (isa<math::SqrtOp>(op)) {
      Value d = arith::DivFOp::create(b, loc, constant(type, 0.5), r);
      out = mul(d, t(0));
    } else if (isa<math::RsqrtOp>(op)) {
      // -0.5 * r / x
      Value d = arith::DivFOp::create(b, loc, mul(constant(type, -0.5), r), x);
      out = mul(d, t(0));
    } else if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
                   arith::MinNumFOp>(op)) {
      bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(op);
      Value pickX = arith::CmpFOp::create(
          b, loc, isMax ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE,
          x, y);
      Value zero = constant(type, 0.0);
      out = arith::SelectOp::create(b, loc, pickX, t(0) ? t(0) : zero,
                                    t(1) ? t(1) : zero);
    } else if (auto sel = dyn_cast<arith::SelectOp>(op)) {
      Value zero = constant(type, 0.0);
      Value tt = tangents.lookup(sel.getTrueValue());
      Value tf = tangents.lookup(sel.getFalseValue());
      if (tt || tf)
        out = arith::SelectOp::create(b, loc, sel.getCondition(),
                                      tt ? tt : zero, tf ? tf : zero);
    } else if (isa<arith::ExtFOp>(op)) {
      out = arith::ExtFOp::create(b, loc, type, t(0));
    } else if (isa<arith::TruncFOp>(op)) {
      out = arith::TruncFOp::create(b, loc, type, t(0));
    } else if (isa<arith::CmpFOp, arith::FPToSIOp, arith::FPToUIOp>(op)) {
      return success(); // Not differentiable: no tangent flows on.
    } else {
      failedOp = op;
      return failure();
    }
    if (out)
      tangents[r] = out;
    return success();
  }

  OpBuilder &b;
  Location loc;
  DenseMap<Value, Value> tangents;
};

//===----------------------------------------------------------------------===//
// The reverse sweep
//===----------------------------------------------------------------------===//

class ReverseSweep {
public:
  ReverseSweep(func::FuncOp fn) : fn(fn), b(fn.getContext()) {}

  LogicalResult run(ArrayRef<unsigned> params);

private:
  Value zeros(Location loc, RankedTensorType type) {
    Value empty = tensor::EmptyOp::create(b, loc, type.getShape(),
                                          type.getElementType());
    Value zero = arith::ConstantOp::create(
        b, loc, type.getElementType(),
        b.getFloatAttr(type.getElementType(), 0.0));
    return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
  }
  void accumulate(Value v, Value grad) {
    auto it = adjoints.find(v);
    if (it == adjoints.end()) {
      adjoints[v] = grad;
      return;
    }
    it->second = arith::AddFOp::create(b, grad.getLoc(), it->second, grad);
  }
  bool isActive(Value v) const { return active.contains(v); }
  LogicalResult visit(Operation *op);
  LogicalResult visitGeneric(linalg::GenericOp op);
  LogicalResult visitCapturedRead(linalg::GenericOp op, tensor::ExtractOp read);
  LogicalResult visitSoftmax(linalg::SoftmaxOp op);

  func::FuncOp fn;
  OpBuilder b;
  DenseMap<Value, Value> adjoints;
  DenseSet<Value> active;
};

LogicalResult ReverseSweep::run(ArrayRef<unsigned> params) {
  Block &body = fn.getBody().front();
  // Activity: values that depend on a parameter.
  for (unsigned p : params)
    active.insert(body.getArgument(p));
  auto isActiveFn = [&](Value v) { return active.contains(v); };
  for (Operation &op : body.without_terminator()) {
    bool depends = llvm::any_of(op.getOperands(), isActiveFn);
    if (!depends && op.getNumRegions()) {
      // A value a region reads from above (a gather's table) is an input
      // too, though not an operand.
      SetVector<Value> captured;
      getUsedValuesDefinedAbove(op.getRegions(), captured);
      depends = llvm::any_of(captured, isActiveFn);
    }
    if (depends)
      for (Value r : op.getResults())
        if (isa<FloatType>(getElementTypeOrSelf(r.getType())))
          active.insert(r);
  }

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  auto lossType = cast<RankedTensorType>(loss.getType());
  b.setInsertionPoint(ret);
  Location loc = ret.getLoc();
  {
    Value empty = tensor::EmptyOp::create(b, loc, lossType.getShape(),
                                          lossType.getElementType());
    Value one = arith::ConstantOp::create(
        b, loc, lossType.getElementType(),
        b.getFloatAttr(lossType.getElementType(), 1.0));
    adjoints[loss] = linalg::FillOp::create(b, loc, one, empty).getResult(0);
  }

  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    bool needed = llvm::any_of(op->getResults(), [&](Value r) {
      return adjoints.count(r) && isActive(r);
    });
    if (!needed)
      continue;
    if (failed(visit(op)))
      return failure();
  }

  SmallVector<Value> results{loss};
  for (unsigned p : params) {
    Value arg = body.getArgument(p);
    Value g = adjoints.lookup(arg);
    results.push_back(g ? g : zeros(loc, cast<RankedTensorType>(arg.getType())));
  }
  func::ReturnOp::create(b, loc, results);
  ret.erase();
  fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(),
                               ValueRange(results).getTypes()));
  return success();
}

LogicalResult ReverseSweep::visit(Operation *op) {
  b.setInsertionPoint(fn.getBody().front().getTerminator());
  Location loc = op->getLoc();
  if (auto g = dyn_cast<linalg::GenericOp>(op))
    return visitGeneric(g);
  if (auto s = dyn_cast<linalg::SoftmaxOp>(op))
    return visitSoftmax(s);
  if (auto e = dyn_cast<tensor::ExpandShapeOp>(op)) {
    if (isActive(e.getSrc()))
      accumulate(e.getSrc(), tensor::CollapseShapeOp::create(
                                 b, loc, e.getSrcType(), adjoints[e.getResult()],
                                 e.getReassociationIndices()));
    return success();
  }
  if (auto c = dyn_cast<tensor::CollapseShapeOp>(op)) {
    if (isActive(c.getSrc()))
      accumulate(c.getSrc(),
                 tensor::ExpandShapeOp::create(
                     b, loc, c.getSrcType(), adjoints[c.getResult()],
                     c.getReassociationIndices()));
    return success();
  }
  if (auto s = dyn_cast<tensor::ExtractSliceOp>(op)) {
    if (isActive(s.getSource())) {
      Value z = zeros(loc, s.getSourceType());
      accumulate(s.getSource(),
                 tensor::InsertSliceOp::create(
                     b, loc, adjoints[s.getResult()], z, s.getMixedOffsets(),
                     s.getMixedSizes(), s.getMixedStrides()));
    }
    return success();
  }
  if (auto ins = dyn_cast<tensor::InsertSliceOp>(op)) {
    Value dy = adjoints[ins.getResult()];
    if (isActive(ins.getSource()))
      accumulate(ins.getSource(),
                 tensor::ExtractSliceOp::create(
                     b, loc, ins.getSourceType(), dy, ins.getMixedOffsets(),
                     ins.getMixedSizes(), ins.getMixedStrides()));
    if (isActive(ins.getDest())) {
      Value z = zeros(loc, ins.getSourceType());
      accumulate(ins.getDest(), tensor::InsertSliceOp::create(
                                    b, loc, z, dy, ins.getMixedOffsets(),
                                    ins.getMixedSizes(), ins.getMixedStrides()));
    }
    return success();
  }
  if (auto cat = dyn_cast<tensor::ConcatOp>(op)) {
    Value dy = adjoints[cat.getResult()];
    int64_t dim = cat.getDim(), offset = 0;
    auto type = cat.getResultType();
    for (Value in : cat.getInputs()) {
      auto it = cast<RankedTensorType>(in.getType());
      if (isActive(in)) {
        SmallVector<OpFoldResult> offs(type.getRank(), b.getIndexAttr(0));
        SmallVector<OpFoldResult> sizes, strides(type.getRank(),
                                                 b.getIndexAttr(1));
        for (int64_t d : it.getShape())
          sizes.push_back(b.getIndexAttr(d));
        offs[dim] = b.getIndexAttr(offset);
        accumulate(in, tensor::ExtractSliceOp::create(b, loc, it, dy, offs,
                                                      sizes, strides));
      }
      offset += it.getDimSize(dim);
    }
    return success();
  }
  if (isa<linalg::FillOp, tensor::EmptyOp, arith::ConstantOp>(op))
    return success();
  return op->emitOpError("cannot be differentiated by par-autodiff");
}

/// Erases an adjoint generic whose body could not be differentiated and
/// reports `op`, naming the body op `badOp` when known.
static LogicalResult dropAdjoint(linalg::GenericOp op, linalg::GenericOp grad,
                                 Operation *badOp) {
  grad.erase();
  InFlightDiagnostic d =
      op.emitOpError("has a body op par-autodiff cannot differentiate");
  if (badOp)
    d << ": '" << badOp->getName() << "'";
  return d;
}

LogicalResult ReverseSweep::visitGeneric(linalg::GenericOp op) {
  Location loc = op.getLoc();
  int64_t numLoops = op.getNumLoops();
  bool hasReduction = op.getNumReductionLoops() > 0;
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());

  // In a reduction, the body's derivative is only the input's contribution
  // when each result is combined by a sum (y = acc + g(x)).
  if (hasReduction)
    for (auto [r, res] : llvm::enumerate(op.getResults())) {
      if (!adjoints.count(res))
        continue;
      BlockArgument acc = op.getRegionOutputArgs()[r];
      Operation *def = yield.getOperand(r).getDefiningOp();
      if (!def || !isa<arith::AddFOp>(def) ||
          (def->getOperand(0) != acc && def->getOperand(1) != acc))
        return op.emitOpError("reduces with a combiner par-autodiff cannot "
                              "differentiate (only sums)");
    }

  // Inits: in a reduction only a sum combiner passes its init through.
  for (OpOperand &init : op.getDpsInitsMutable()) {
    int64_t r = init.getOperandNumber() - op.getNumDpsInputs();
    if (!isActive(init.get()) || !adjoints.count(op.getResult(r)))
      continue;
    BlockArgument acc = op.getRegionOutputArgs()[r];
    if (acc.use_empty())
      continue; // The init only gives the shape.
    if (!hasReduction)
      continue; // Handled like an input below.
    Operation *def = yield.getOperand(r).getDefiningOp();
    if (!def || !isa<arith::AddFOp>(def) ||
        (def->getOperand(0) != acc && def->getOperand(1) != acc))
      return op.emitOpError("reduces with a combiner par-autodiff cannot "
                            "differentiate (only sums)");
    accumulate(init.get(), adjoints[op.getResult(r)]);
  }

  // Operands to differentiate: active inputs, and for elementwise generics
  // active inits read by the body.
  SmallVector<OpOperand *> targets;
  for (OpOperand *in : op.getDpsInputOperands())
    if (isActive(in->get()) &&
        isa<FloatType>(getElementTypeOrSelf(in->get().getType())))
      targets.push_back(in);
  if (!hasReduction)
    for (OpOperand &init : op.getDpsInitsMutable())
      if (isActive(init.get()) &&
          !op.getRegionOutputArgs()[init.getOperandNumber() -
                                    op.getNumDpsInputs()]
               .use_empty())
        targets.push_back(&init);

  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (OpOperand *target : targets) {
    AffineMap targetMap = op.getMatchingIndexingMap(target);
    if (!targetMap.isProjectedPermutation())
      return op.emitOpError("has an indexing map par-autodiff cannot "
                            "transpose: ")
             << AffineMapAttr::get(targetMap);
    auto targetType = cast<RankedTensorType>(target->get().getType());

    // Operands of the adjoint generic: every original operand (values the
    // body may read), then dy of each result with an adjoint.
    SmallVector<Value> inputs;
    SmallVector<AffineMap> inMaps;
    for (OpOperand &o : op->getOpOperands()) {
      inputs.push_back(o.get());
      inMaps.push_back(op.getMatchingIndexingMap(&o));
    }
    SmallVector<int64_t> dyResults;
    for (auto [r, res] : llvm::enumerate(op.getResults()))
      if (adjoints.count(res)) {
        inputs.push_back(adjoints[res]);
        inMaps.push_back(op.getIndexingMapMatchingResult(res));
        dyResults.push_back(r);
      }
    SmallVector<utils::IteratorType> iters;
    llvm::SmallBitVector used(numLoops);
    for (AffineExpr e : targetMap.getResults())
      used.set(cast<AffineDimExpr>(e).getPosition());
    for (int64_t l = 0; l < numLoops; ++l)
      iters.push_back(used.test(l) ? utils::IteratorType::parallel
                                   : utils::IteratorType::reduction);
    SmallVector<AffineMap> allMaps(inMaps);
    allMaps.push_back(targetMap);

    Value init = zeros(loc, targetType);
    bool failedBody = false;
    Operation *badOp = nullptr;
    auto grad = linalg::GenericOp::create(
        b, loc, TypeRange{targetType}, inputs, ValueRange{init}, allMaps,
        iters, [&](OpBuilder &nb, Location nloc, ValueRange args) {
          // Recompute the body: inputs map to themselves; in a reduction
          // the running value is irrelevant to the derivative (sum
          // combiners), so outputs read their init.
          IRMapping map;
          for (auto [i, arg] : llvm::enumerate(body->getArguments()))
            map.map(arg, args[i]);
          SmallVector<Operation *> cloned;
          for (Operation &bop : body->without_terminator())
            cloned.push_back(nb.clone(bop, map));
          Value seed = args[target->getOperandNumber()];
          TangentBuilder tb(nb, nloc);
          if (failed(tb.propagate(cloned, seed))) {
            failedBody = true;
            badOp = tb.failedOp;
            linalg::YieldOp::create(nb, nloc, args.back());
            return;
          }
          Value acc = args.back();
          for (auto [k, r] : llvm::enumerate(dyResults)) {
            Value yielded = map.lookup(yield.getOperand(r));
            Value t = yielded == seed ? arith::ConstantOp::create(
                                            nb, nloc, seed.getType(),
                                            nb.getFloatAttr(seed.getType(), 1.0))
                                            .getResult()
                                      : tb.tangent(yielded);
            if (!t)
              continue;
            Value dy = args[op->getNumOperands() + k];
            Value contrib = arith::MulFOp::create(nb, nloc, dy, t);
            acc = arith::AddFOp::create(nb, nloc, acc, contrib);
          }
          linalg::YieldOp::create(nb, nloc, acc);
        });
    if (failedBody)
      return dropAdjoint(op, grad, badOp);
    accumulate(target->get(), grad.getResult(0));
  }

  // Active values the body reads from above: tensors read element by element
  // with tensor.extract in the body itself (a gather) get a scatter-add;
  // nothing else can be differentiated.
  SetVector<Value> captured;
  getUsedValuesDefinedAbove(op.getRegion(), captured);
  for (Value v : captured) {
    if (!isActive(v))
      continue;
    if (!isa<RankedTensorType>(v.getType()))
      return op.emitOpError("reads a value of type ")
             << v.getType()
             << " defined outside its body that depends on a parameter; "
                "par-autodiff differentiates only tensors read there with "
                "tensor.extract";
    SmallVector<tensor::ExtractOp> reads;
    for (Operation *user : v.getUsers()) {
      if (!op->isProperAncestor(user) || isa<tensor::DimOp>(user))
        continue;
      auto read = dyn_cast<tensor::ExtractOp>(user);
      if (!read || read->getBlock() != body)
        return op.emitOpError("reads a tensor defined outside its body "
                              "through '")
               << user->getName()
               << "'; par-autodiff differentiates only tensor.extract "
                  "directly in the body";
      reads.push_back(read);
    }
    llvm::sort(reads, [](tensor::ExtractOp x, tensor::ExtractOp y) {
      return x->isBeforeInBlock(y);
    });
    for (tensor::ExtractOp read : reads)
      if (failed(visitCapturedRead(op, read)))
        return failure();
  }
  return success();
}

LogicalResult ReverseSweep::visitCapturedRead(linalg::GenericOp op,
                                              tensor::ExtractOp read) {
  // d table[idx] += dy * d(yield)/d(read) over the generic's loops. A table
  // dim indexed by `linalg.index k` (each loop once, spanning the dim) is
  // indexed by loop k; any other (data-dependent) index gets a new loop over
  // the table dim that contributes only where it equals the index: a
  // scatter-add written as a structured op, so it has a sharding rule and
  // runs like any reduction.
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto tableType = cast<RankedTensorType>(read.getTensor().getType());
  int64_t numLoops = op.getNumLoops();
  SmallVector<AffineExpr> tableExprs;
  SmallVector<int64_t> dataDims; // Table dims with data-dependent indices.
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  llvm::SmallBitVector seen(numLoops);
  for (auto [d, idx] : llvm::enumerate(read.getIndices())) {
    auto loop = idx.getDefiningOp<linalg::IndexOp>();
    if (loop && loop->getBlock() == body && !seen.test(loop.getDim()) &&
        ranges[loop.getDim()] == tableType.getDimSize(d) &&
        !ShapedType::isDynamic(ranges[loop.getDim()])) {
      seen.set(loop.getDim());
      tableExprs.push_back(getAffineDimExpr(loop.getDim(), ctx));
      continue;
    }
    tableExprs.push_back(getAffineDimExpr(numLoops + dataDims.size(), ctx));
    dataDims.push_back(d);
  }
  int64_t total = numLoops + dataDims.size();
  auto widen = [&](AffineMap m) {
    return AffineMap::get(total, 0, m.getResults(), ctx);
  };

  // Operands: every original operand (the body is recomputed), then dy of
  // each result with an adjoint.
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand &o : op->getOpOperands()) {
    inputs.push_back(o.get());
    maps.push_back(widen(op.getMatchingIndexingMap(&o)));
  }
  SmallVector<int64_t> dyResults;
  for (auto [r, res] : llvm::enumerate(op.getResults()))
    if (adjoints.count(res)) {
      inputs.push_back(adjoints[res]);
      maps.push_back(widen(op.getIndexingMapMatchingResult(res)));
      dyResults.push_back(r);
    }
  AffineMap tableMap = AffineMap::get(total, 0, tableExprs, ctx);
  maps.push_back(tableMap);
  llvm::SmallBitVector used(total);
  for (AffineExpr e : tableExprs)
    used.set(cast<AffineDimExpr>(e).getPosition());
  SmallVector<utils::IteratorType> iters;
  for (int64_t l = 0; l < total; ++l)
    iters.push_back(used.test(l) ? utils::IteratorType::parallel
                                 : utils::IteratorType::reduction);

  Operation *badOp = nullptr;
  bool failedBody = false;
  auto grad = linalg::GenericOp::create(
      b, loc, TypeRange{tableType}, inputs,
      ValueRange{zeros(loc, tableType)}, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        IRMapping map;
        for (auto [i, arg] : llvm::enumerate(body->getArguments()))
          map.map(arg, args[i]);
        SmallVector<Operation *> cloned;
        for (Operation &bop : body->without_terminator())
          cloned.push_back(nb.clone(bop, map));
        Value seed = map.lookup(read.getResult());
        Type elt = seed.getType();
        TangentBuilder tb(nb, nloc);
        Value acc = args.back();
        if (failed(tb.propagate(cloned, seed))) {
          failedBody = true;
          badOp = tb.failedOp;
          linalg::YieldOp::create(nb, nloc, acc);
          return;
        }
        Value contrib;
        for (auto [k, r] : llvm::enumerate(dyResults)) {
          Value yielded = map.lookup(yield.getOperand(r));
          Value t = yielded == seed
                        ? arith::ConstantOp::create(nb, nloc, elt,
                                                    nb.getFloatAttr(elt, 1.0))
                              .getResult()
                        : tb.tangent(yielded);
          if (!t)
            continue;
          Value dy = args[op->getNumOperands() + k];
          Value c = arith::MulFOp::create(nb, nloc, dy, t);
          contrib = contrib ? arith::AddFOp::create(nb, nloc, contrib, c)
                                  .getResult()
                            : c;
        }
        if (!contrib) {
          linalg::YieldOp::create(nb, nloc, acc);
          return;
        }
        // Only where each new loop equals its data-dependent index.
        Value hit;
        for (auto [k, d] : llvm::enumerate(dataDims)) {
          Value loop = linalg::IndexOp::create(nb, nloc, numLoops + k);
          Value idx = map.lookupOrDefault(read.getIndices()[d]);
          Value eq = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq,
                                           loop, idx);
          hit = hit ? arith::AndIOp::create(nb, nloc, hit, eq).getResult()
                    : eq;
        }
        if (hit)
          contrib = arith::SelectOp::create(
              nb, nloc, hit, contrib,
              arith::ConstantOp::create(nb, nloc, elt,
                                        nb.getFloatAttr(elt, 0.0)));
        Value sum = arith::AddFOp::create(nb, nloc, acc, contrib);
        linalg::YieldOp::create(nb, nloc, sum);
      });
  if (failedBody)
    return dropAdjoint(op, grad, badOp);
  accumulate(read.getTensor(), grad.getResult(0));
  return success();
}

LogicalResult ReverseSweep::visitSoftmax(linalg::SoftmaxOp op) {
  // dx = y * (dy - sum_d(dy * y)), over the softmax dimension d.
  Location loc = op.getLoc();
  Value x = op.getInput();
  if (!isActive(x))
    return success();
  Value y = op.getResult()[0];
  Value dy = adjoints[y];
  auto type = cast<RankedTensorType>(y.getType());
  int64_t rank = type.getRank(), dim = op.getDimension();
  SmallVector<int64_t> redShape;
  SmallVector<AffineExpr> redExprs;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) {
      redShape.push_back(type.getDimSize(d));
      redExprs.push_back(b.getAffineDimExpr(d));
    }
  auto redType = RankedTensorType::get(redShape, type.getElementType());
  AffineMap id = b.getMultiDimIdentityMap(rank);
  AffineMap red = AffineMap::get(rank, 0, redExprs, b.getContext());
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  iters[dim] = utils::IteratorType::reduction;
  Value s = linalg::GenericOp::create(
                b, loc, TypeRange{redType}, ValueRange{dy, y},
                ValueRange{zeros(loc, redType)},
                ArrayRef<AffineMap>{id, id, red}, iters,
                [&](OpBuilder &nb, Location nloc, ValueRange a) {
                  Value p = arith::MulFOp::create(nb, nloc, a[0], a[1]);
                  linalg::YieldOp::create(
                      nb, nloc, ValueRange{arith::AddFOp::create(nb, nloc, a[2], p)});
                })
                .getResult(0);
  SmallVector<utils::IteratorType> par(rank, utils::IteratorType::parallel);
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  Value dx = linalg::GenericOp::create(
                 b, loc, TypeRange{type}, ValueRange{dy, y, s},
                 ValueRange{empty}, ArrayRef<AffineMap>{id, id, red, id}, par,
                 [&](OpBuilder &nb, Location nloc, ValueRange a) {
                   Value d = arith::SubFOp::create(nb, nloc, a[0], a[2]);
                   linalg::YieldOp::create(
                       nb, nloc, ValueRange{arith::MulFOp::create(nb, nloc, a[1], d)});
                 })
                 .getResult(0);
  accumulate(x, dx);
  return success();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct AutodiffPass : public mlir::par::impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> todo;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (fn.getArgAttr(i, kParamAttr)) {
          todo.push_back(fn);
          break;
        }
    }
    if (todo.empty()) {
      module.emitError("par-autodiff: no function has arguments marked "
                       "par.param, so there is nothing to differentiate");
      return signalPassFailure();
    }
    for (func::FuncOp fn : todo)
      if (failed(differentiate(fn)))
        return signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp fn) {
    SmallVector<unsigned> params;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      if (!fn.getArgAttr(i, kParamAttr))
        continue;
      auto t = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      if (!t || !isa<FloatType>(t.getElementType()))
        return fn.emitOpError() << "parameter #" << i
                                << " must be a floating-point tensor, got "
                                << fn.getArgumentTypes()[i];
      params.push_back(i);
    }
    if (fn.getNumResults() != 1)
      return fn.emitOpError() << "must return exactly one value, the loss, "
                                 "to be differentiated (it returns "
                              << fn.getNumResults() << ")";
    auto lossType = dyn_cast<RankedTensorType>(fn.getResultTypes()[0]);
    if (!lossType || lossType.getRank() != 0 ||
        !isa<FloatType>(lossType.getElementType()))
      return fn.emitOpError() << "the loss must be a scalar floating-point "
                                 "tensor (e.g. tensor<f32>), got "
                              << fn.getResultTypes()[0];
    if (!fn.getBody().hasOneBlock())
      return fn.emitOpError("par-autodiff needs a single-block function");

    // The gradient function starts as a copy of the forward.
    OpBuilder mb(fn);
    mb.setInsertionPointAfter(fn);
    auto grad = cast<func::FuncOp>(mb.clone(*fn));
    std::string name = (fn.getName() + "_grad").str();
    if (SymbolTable::lookupNearestSymbolFrom(fn, mb.getStringAttr(name)))
      return fn.emitOpError() << "cannot create '" << name
                              << "': the symbol exists";
    grad.setName(name);
    grad.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    for (unsigned i = 0; i < grad.getNumArguments(); ++i)
      grad.removeArgAttr(i, kParamAttr);

    // Small form: generics everywhere.
    {
      RewritePatternSet patterns(fn.getContext());
      linalg::populateElementwiseToLinalgConversionPatterns(patterns);
      if (failed(applyPatternsGreedily(grad, std::move(patterns))))
        return grad.emitOpError("could not prepare for differentiation");
      IRRewriter rewriter(fn.getContext());
      SmallVector<linalg::LinalgOp> named;
      // Fills stay: they carry no gradient, and partitioning recognises a
      // fill of the neutral value as a valid partial init.
      grad.walk([&](linalg::LinalgOp op) {
        if (!isa<linalg::GenericOp, linalg::FillOp>(op))
          named.push_back(op);
      });
      for (linalg::LinalgOp op : named) {
        rewriter.setInsertionPoint(op);
        if (failed(linalg::generalizeNamedOp(rewriter, op)))
          return op->emitOpError("cannot be expressed as linalg.generic");
      }
    }
    ReverseSweep sweep(grad);
    if (failed(sweep.run(params))) {
      grad.erase();
      return failure();
    }
    return success();
  }
};

} // namespace
