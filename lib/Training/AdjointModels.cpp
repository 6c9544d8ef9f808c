//===- AdjointModels.cpp - Adjoints of upstream ops -----------------------===//
//
// External models of AdjointOpInterface: par-autodiff's adjoint of every op
// it differentiates, reverse mode over whole tensors and forward mode inside
// generic bodies:
//
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
//  * linalg.softmax, tensor reshapes, slices and concat have closed-form
//    adjoints; fills, empties and constants carry no gradient.
//
// The scalar body ops' tangent rules are one table (TangentBuilder) used by
// the linalg.generic model, not an interface: they are only ever applied
// inside a generic's body, and a new scalar op is one case there.
//
//===----------------------------------------------------------------------===//

#include "par/Training/AdjointModels.h"
#include "par/Training/AdjointOpInterface.h"
#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::par;

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
    bool anyTangent = llvm::any_of(
        op->getOperands(), [&](Value v) { return (bool)tangents.lookup(v); });
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
      // Ties go to the operand with a tangent: in a reduction's combiner
      // `max(acc, g)` the accumulator (the final maximum) has none, and g
      // gets the gradient where it attains the maximum.
      Value tx = t(0), ty = t(1);
      if (!tx) {
        std::swap(x, y);
        std::swap(tx, ty);
      }
      Value pickX = arith::CmpFOp::create(
          b, loc, isMax ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE,
          x, y);
      Value zero = constant(type, 0.0);
      out = arith::SelectOp::create(b, loc, pickX, tx, ty ? ty : zero);
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
// linalg.generic
//===----------------------------------------------------------------------===//

/// Erases an adjoint generic whose body could not be differentiated and
/// reports `op`, naming the body op `badOp` when known.
LogicalResult dropAdjoint(linalg::GenericOp op, linalg::GenericOp grad,
                          Operation *badOp) {
  // badOp is in grad's body: take its name before erasing grad.
  std::optional<OperationName> badName;
  if (badOp)
    badName = badOp->getName();
  grad.erase();
  InFlightDiagnostic d =
      op.emitOpError("has a body op par-autodiff cannot differentiate");
  if (badName)
    d << ": '" << *badName << "'";
  return d;
}

/// Whether result `r` of a reduction is combined by a sum (y = acc + g(x)).
bool isSumCombiner(linalg::GenericOp op, int64_t r) {
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  BlockArgument acc = op.getRegionOutputArgs()[r];
  Operation *def = yield.getOperand(r).getDefiningOp();
  return def && isa<arith::AddFOp>(def) &&
         (def->getOperand(0) == acc || def->getOperand(1) == acc);
}

/// Whether result `r` of a reduction is a maximum or minimum
/// (y = max(g(x), acc)): torch's amax of softmax and log_softmax.
bool isExtremumCombiner(linalg::GenericOp op, int64_t r) {
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  BlockArgument acc = op.getRegionOutputArgs()[r];
  Operation *def = yield.getOperand(r).getDefiningOp();
  return def &&
         isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
             arith::MinNumFOp>(def) &&
         (def->getOperand(0) == acc || def->getOperand(1) == acc);
}

/// Reports a reduction with an adjoint whose combiner is not a sum, a
/// maximum or a minimum.
LogicalResult emitCombinerError(linalg::GenericOp op) {
  return op.emitOpError("reduces with a combiner par-autodiff cannot "
                        "differentiate (only sums, maxima and minima)");
}

/// `v` converted to the float type `type` (extf or truncf; v if it is one).
Value castFloat(OpBuilder &b, Location loc, Value v, Type type) {
  auto from = cast<FloatType>(v.getType());
  auto to = cast<FloatType>(type);
  if (from == to)
    return v;
  if (to.getWidth() > from.getWidth())
    return arith::ExtFOp::create(b, loc, to, v);
  return arith::TruncFOp::create(b, loc, to, v);
}

/// Operands of an adjoint generic: every original operand (values the body
/// may read), then dy of each result with an adjoint, with the original
/// indexing maps passed through `widen`.
struct AdjointOperands {
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  /// The results whose dy is an operand, in operand order.
  SmallVector<int64_t> dyResults;
  /// Extremum (max/min) reductions: result r and the position in `inputs`
  /// of the result itself, which the recomputed body reads as its
  /// accumulator (so `max(g(x), y)` picks g where g is the maximum).
  SmallVector<std::pair<int64_t, unsigned>> resultAccs;
};

AdjointOperands getAdjointOperands(linalg::GenericOp op, AdjointState &state,
                                   function_ref<AffineMap(AffineMap)> widen) {
  AdjointOperands ops;
  for (OpOperand &o : op->getOpOperands()) {
    ops.inputs.push_back(o.get());
    ops.maps.push_back(widen(op.getMatchingIndexingMap(&o)));
  }
  for (auto [r, res] : llvm::enumerate(op.getResults()))
    if (Value dy = state.getAdjoint(res)) {
      ops.inputs.push_back(dy);
      ops.maps.push_back(widen(op.getIndexingMapMatchingResult(res)));
      ops.dyResults.push_back(r);
    }
  if (op.getNumReductionLoops() > 0)
    for (auto [r, res] : llvm::enumerate(op.getResults()))
      if (state.getAdjoint(res) && isExtremumCombiner(op, r)) {
        ops.resultAccs.emplace_back(r, ops.inputs.size());
        ops.inputs.push_back(res);
        ops.maps.push_back(widen(op.getIndexingMapMatchingResult(res)));
      }
  return ops;
}

/// Loops the output map `out` indexes are parallel, the others reductions.
SmallVector<utils::IteratorType> getAdjointIterators(AffineMap out) {
  llvm::SmallBitVector used(out.getNumDims());
  for (AffineExpr e : out.getResults())
    used.set(cast<AffineDimExpr>(e).getPosition());
  SmallVector<utils::IteratorType> iters;
  for (int64_t l = 0, e = out.getNumDims(); l < e; ++l)
    iters.push_back(used.test(l) ? utils::IteratorType::parallel
                                 : utils::IteratorType::reduction);
  return iters;
}

/// Builds, in the body of an adjoint generic of `op` (block arguments
/// `args`: op's operands, then dy of each of `dyResults`, then the
/// accumulator), the recomputed body of `op`, mapped by `map`, and calls
/// `add(dy * tangent)` for each result whose yielded value has a tangent
/// with respect to `wrt` (a value of op's body). If a body op has no
/// tangent rule, yields the accumulator, sets `badOp` and fails.
LogicalResult recomputeWithTangents(OpBuilder &nb, Location nloc,
                                    linalg::GenericOp op, ValueRange args,
                                    const AdjointOperands &ops, Value wrt,
                                    IRMapping &map,
                                    function_ref<void(Value)> add,
                                    Operation *&badOp) {
  // Inputs map to themselves; in a reduction the running value is
  // irrelevant to the derivative of a sum, so its output reads its init; a
  // maximum's reads the final maximum, so the combiner's tangent is g's
  // where g attains it.
  ArrayRef<int64_t> dyResults = ops.dyResults;
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  for (auto [i, arg] : llvm::enumerate(body->getArguments()))
    map.map(arg, args[i]);
  for (auto [r, pos] : ops.resultAccs)
    map.map(op.getRegionOutputArgs()[r], args[pos]);
  SmallVector<Operation *> cloned;
  for (Operation &bop : body->without_terminator())
    cloned.push_back(nb.clone(bop, map));
  Value seed = map.lookup(wrt);
  TangentBuilder tb(nb, nloc);
  if (failed(tb.propagate(cloned, seed))) {
    badOp = tb.failedOp;
    linalg::YieldOp::create(nb, nloc, args.back());
    return failure();
  }
  for (auto [k, r] : llvm::enumerate(dyResults)) {
    Value yielded = map.lookup(yield.getOperand(r));
    Value t =
        yielded == seed
            ? arith::ConstantOp::create(nb, nloc, seed.getType(),
                                        nb.getFloatAttr(seed.getType(), 1.0))
                  .getResult()
            : tb.tangent(yielded);
    if (!t)
      continue;
    Value dy = args[op->getNumOperands() + k];
    // Mixed precision: the tangent is in the seed's type, dy in the
    // result's; the product is in the wider of the two.
    Type wider = cast<FloatType>(dy.getType()).getWidth() >=
                         cast<FloatType>(t.getType()).getWidth()
                     ? dy.getType()
                     : t.getType();
    add(arith::MulFOp::create(nb, nloc, castFloat(nb, nloc, dy, wider),
                              castFloat(nb, nloc, t, wider)));
  }
  return success();
}

/// The widest float element type among the dy operands of `ops` and `elt`:
/// where an input is narrower than the results (mixed precision), its
/// gradient accumulates in the results' precision and is rounded once.
Type accumulatorType(linalg::GenericOp op, const AdjointOperands &ops,
                     Type elt) {
  auto widest = cast<FloatType>(elt);
  for (size_t i = op->getNumOperands(); i < ops.inputs.size(); ++i)
    if (auto t = dyn_cast<FloatType>(getElementTypeOrSelf(ops.inputs[i])))
      if (t.getWidth() > widest.getWidth())
        widest = t;
  return widest;
}

/// A tensor `v` rounded elementwise to element type `elt`.
Value roundTensor(OpBuilder &b, Location loc, Value v, Type elt) {
  return createFloatCast(b, loc, v, elt);
}

/// The adjoint of the operand `target` (an input, or an elementwise
/// generic's init the body reads): a generic over op's loops with target's
/// indexing map as output.
LogicalResult buildOperandAdjoint(linalg::GenericOp op, OpOperand *target,
                                  AdjointState &state) {
  OpBuilder &b = state.getBuilder();
  Location loc = op.getLoc();
  AffineMap targetMap = op.getMatchingIndexingMap(target);
  if (!targetMap.isProjectedPermutation())
    return op.emitOpError("has an indexing map par-autodiff cannot "
                          "transpose: ")
           << AffineMapAttr::get(targetMap);
  auto targetType = cast<RankedTensorType>(target->get().getType());
  AdjointOperands ops =
      getAdjointOperands(op, state, [](AffineMap m) { return m; });
  SmallVector<utils::IteratorType> iters = getAdjointIterators(targetMap);
  ops.maps.push_back(targetMap);

  Type accType = accumulatorType(op, ops, targetType.getElementType());
  // A 16-bit gradient summed over loops (a broadcast input: LayerNorm's
  // gain, a bias) accumulates in f32 and is rounded once.
  if (cast<FloatType>(accType).getWidth() < 32 &&
      llvm::is_contained(iters, utils::IteratorType::reduction))
    accType = b.getF32Type();
  auto accTensor = targetType.clone(accType);
  Value init = state.zeros(loc, accTensor);
  bool failedBody = false;
  Operation *badOp = nullptr;
  Value wrt = op.getBody()->getArgument(target->getOperandNumber());
  auto grad = linalg::GenericOp::create(
      b, loc, TypeRange{accTensor}, ops.inputs, ValueRange{init}, ops.maps,
      iters, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        IRMapping map;
        Value acc = args.back();
        auto add = [&](Value contrib) {
          acc = arith::AddFOp::create(nb, nloc, acc,
                                      castFloat(nb, nloc, contrib, accType));
        };
        if (failed(recomputeWithTangents(nb, nloc, op, args, ops, wrt,
                                         map, add, badOp))) {
          failedBody = true;
          return;
        }
        linalg::YieldOp::create(nb, nloc, acc);
      });
  if (failedBody)
    return dropAdjoint(op, grad, badOp);
  state.accumulate(target->get(),
                   roundTensor(b, loc, grad.getResult(0),
                               targetType.getElementType()));
  return success();
}

/// The scatter-add adjoint of a table the body of `op` reads from above
/// with `read`.
LogicalResult buildCapturedReadAdjoint(linalg::GenericOp op,
                                       tensor::ExtractOp read,
                                       AdjointState &state) {
  // d table[idx] += dy * d(yield)/d(read) over the generic's loops. A table
  // dim indexed by `linalg.index k` (each loop once, spanning the dim) is
  // indexed by loop k; any other (data-dependent) index gets a new loop over
  // the table dim that contributes only where it equals the index: a
  // scatter-add written as a structured op, so it has a sharding rule and
  // runs like any reduction.
  OpBuilder &b = state.getBuilder();
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Block *body = op.getBody();
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
  AdjointOperands ops = getAdjointOperands(op, state, [&](AffineMap m) {
    return AffineMap::get(total, 0, m.getResults(), ctx);
  });
  AffineMap tableMap = AffineMap::get(total, 0, tableExprs, ctx);
  ops.maps.push_back(tableMap);
  SmallVector<utils::IteratorType> iters = getAdjointIterators(tableMap);

  Operation *badOp = nullptr;
  bool failedBody = false;
  Type elt = read.getType();
  auto grad = linalg::GenericOp::create(
      b, loc, TypeRange{tableType}, ops.inputs,
      ValueRange{state.zeros(loc, tableType)}, ops.maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        IRMapping map;
        Value acc = args.back();
        Value contrib;
        auto add = [&](Value c) {
          c = castFloat(nb, nloc, c, elt);
          contrib =
              contrib ? arith::AddFOp::create(nb, nloc, contrib, c).getResult()
                      : c;
        };
        if (failed(recomputeWithTangents(nb, nloc, op, args, ops,
                                         read.getResult(), map, add, badOp))) {
          failedBody = true;
          return;
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
          hit = hit ? arith::AndIOp::create(nb, nloc, hit, eq).getResult() : eq;
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
  state.accumulate(read.getTensor(), grad.getResult(0));
  return success();
}

/// Active values the body of `op` reads from above: tensors read element by
/// element with tensor.extract in the body itself (a gather) get a
/// scatter-add; nothing else can be differentiated.
LogicalResult buildCapturedAdjoints(linalg::GenericOp op, AdjointState &state) {
  Block *body = op.getBody();
  SetVector<Value> captured;
  getUsedValuesDefinedAbove(op.getRegion(), captured);
  for (Value v : captured) {
    if (!state.isActive(v))
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
      if (failed(buildCapturedReadAdjoint(op, read, state)))
        return failure();
  }
  return success();
}

/// A generic's adjoint: the inits a sum passes through, one adjoint generic
/// per active input (and per active init an elementwise body reads), and a
/// scatter-add per table the body reads from above.
LogicalResult genericAdjoint(linalg::GenericOp op, AdjointState &state) {
  bool hasReduction = op.getNumReductionLoops() > 0;

  // In a reduction, the body's derivative is only the input's
  // contribution when each result is combined by a sum (y = acc + g(x)).
  if (hasReduction)
    for (auto [r, res] : llvm::enumerate(op.getResults()))
      if (state.getAdjoint(res) && !isSumCombiner(op, r) &&
          !isExtremumCombiner(op, r))
        return emitCombinerError(op);

  // Inits: in a reduction only a sum combiner passes its init through.
  for (OpOperand &init : op.getDpsInitsMutable()) {
    int64_t r = init.getOperandNumber() - op.getNumDpsInputs();
    Value dy = state.getAdjoint(op.getResult(r));
    if (!state.isActive(init.get()) || !dy)
      continue;
    if (op.getRegionOutputArgs()[r].use_empty())
      continue; // The init only gives the shape.
    if (!hasReduction)
      continue; // Handled like an input below.
    if (isExtremumCombiner(op, r))
      return op.emitOpError("takes the maximum or minimum with an init that "
                            "depends on a parameter; par-autodiff "
                            "differentiates only a constant init (torch's "
                            "-inf) there");
    if (!isSumCombiner(op, r))
      return emitCombinerError(op);
    state.accumulate(init.get(), dy);
  }

  // Operands to differentiate: active inputs, and for elementwise
  // generics active inits read by the body.
  SmallVector<OpOperand *> targets;
  for (OpOperand *in : op.getDpsInputOperands())
    if (state.isActive(in->get()) &&
        isa<FloatType>(getElementTypeOrSelf(in->get().getType())))
      targets.push_back(in);
  if (!hasReduction)
    for (OpOperand &init : op.getDpsInitsMutable())
      if (state.isActive(init.get()) &&
          !op.getRegionOutputArgs()[init.getOperandNumber() -
                                    op.getNumDpsInputs()]
               .use_empty())
        targets.push_back(&init);
  for (OpOperand *target : targets)
    if (failed(buildOperandAdjoint(op, target, state)))
      return failure();
  return buildCapturedAdjoints(op, state);
}

//===----------------------------------------------------------------------===//
// linalg.softmax
//===----------------------------------------------------------------------===//

/// dx = y * (dy - sum_d(dy * y)), over the softmax dimension d.
LogicalResult softmaxAdjoint(linalg::SoftmaxOp op, AdjointState &state) {
  OpBuilder &b = state.getBuilder();
  Location loc = op.getLoc();
  Value x = op.getInput();
  if (!state.isActive(x))
    return success();
  Value y = op.getResult()[0];
  Value dy = state.getAdjoint(y);
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
  Value s =
      linalg::GenericOp::create(
          b, loc, TypeRange{redType}, ValueRange{dy, y},
          ValueRange{state.zeros(loc, redType)},
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
  Value dx =
      linalg::GenericOp::create(
          b, loc, TypeRange{type}, ValueRange{dy, y, s}, ValueRange{empty},
          ArrayRef<AffineMap>{id, id, red, id}, par,
          [&](OpBuilder &nb, Location nloc, ValueRange a) {
            Value d = arith::SubFOp::create(nb, nloc, a[0], a[2]);
            linalg::YieldOp::create(
                nb, nloc, ValueRange{arith::MulFOp::create(nb, nloc, a[1], d)});
          })
          .getResult(0);
  state.accumulate(x, dx);
  return success();
}

//===----------------------------------------------------------------------===//
// tensor reshapes, slices and concat
//===----------------------------------------------------------------------===//

/// expand_shape and collapse_shape: the other one, with the same
/// reassociation.
template <typename OpTy, typename InverseTy>
LogicalResult reshapeAdjoint(OpTy op, AdjointState &state) {
  if (state.isActive(op.getSrc()))
    state.accumulate(op.getSrc(),
                     InverseTy::create(state.getBuilder(), op.getLoc(),
                                       op.getSrcType(),
                                       state.getAdjoint(op.getResult()),
                                       op.getReassociationIndices()));
  return success();
}

/// extract_slice: dy inserted into zeros.
LogicalResult extractSliceAdjoint(tensor::ExtractSliceOp s,
                                  AdjointState &state) {
  Location loc = s.getLoc();
  if (state.isActive(s.getSource())) {
    Value z = state.zeros(loc, s.getSourceType());
    state.accumulate(s.getSource(), tensor::InsertSliceOp::create(
                                        state.getBuilder(), loc,
                                        state.getAdjoint(s.getResult()), z,
                                        s.getMixedOffsets(), s.getMixedSizes(),
                                        s.getMixedStrides()));
  }
  return success();
}

/// insert_slice: the slice of dy for the source; dy with the slice zeroed
/// for the destination.
LogicalResult insertSliceAdjoint(tensor::InsertSliceOp ins,
                                 AdjointState &state) {
  OpBuilder &b = state.getBuilder();
  Location loc = ins.getLoc();
  Value dy = state.getAdjoint(ins.getResult());
  if (state.isActive(ins.getSource()))
    state.accumulate(ins.getSource(),
                     tensor::ExtractSliceOp::create(
                         b, loc, ins.getSourceType(), dy, ins.getMixedOffsets(),
                         ins.getMixedSizes(), ins.getMixedStrides()));
  if (state.isActive(ins.getDest())) {
    Value z = state.zeros(loc, ins.getSourceType());
    state.accumulate(ins.getDest(),
                     tensor::InsertSliceOp::create(
                         b, loc, z, dy, ins.getMixedOffsets(),
                         ins.getMixedSizes(), ins.getMixedStrides()));
  }
  return success();
}

/// concat: each input's slice of dy.
LogicalResult concatAdjoint(tensor::ConcatOp cat, AdjointState &state) {
  OpBuilder &b = state.getBuilder();
  Location loc = cat.getLoc();
  Value dy = state.getAdjoint(cat.getResult());
  int64_t dim = cat.getDim(), offset = 0;
  auto type = cat.getResultType();
  for (Value in : cat.getInputs()) {
    auto it = cast<RankedTensorType>(in.getType());
    if (state.isActive(in)) {
      SmallVector<OpFoldResult> offs(type.getRank(), b.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes,
          strides(type.getRank(), b.getIndexAttr(1));
      for (int64_t d : it.getShape())
        sizes.push_back(b.getIndexAttr(d));
      offs[dim] = b.getIndexAttr(offset);
      state.accumulate(in, tensor::ExtractSliceOp::create(b, loc, it, dy, offs,
                                                          sizes, strides));
    }
    offset += it.getDimSize(dim);
  }
  return success();
}

/// par.scale_loss: the identity forward, the scale times dy backward.
LogicalResult scaleLossAdjoint(ScaleLossOp op, AdjointState &state) {
  Value dy = state.getAdjoint(op.getResult());
  if (!dy || !state.isActive(op.getLoss()))
    return success();
  OpBuilder &b = state.getBuilder();
  Location loc = op.getLoc();
  auto type = cast<RankedTensorType>(op.getLoss().getType());
  Type elt = type.getElementType();
  AffineMap scalar = AffineMap::get(0, 0, {}, b.getContext());
  Value seeded =
      linalg::GenericOp::create(
          b, loc, TypeRange{type}, ValueRange{dy, op.getScale()},
          ValueRange{tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, elt)},
          SmallVector<AffineMap>(3, scalar), ArrayRef<utils::IteratorType>{},
          [&](OpBuilder &nb, Location l, ValueRange a) {
            linalg::YieldOp::create(
                nb, l,
                arith::MulFOp::create(nb, l, a[0], castFloat(nb, l, a[1], elt))
                    .getResult());
          })
          .getResult(0);
  state.accumulate(op.getLoss(), seeded);
  return success();
}

//===----------------------------------------------------------------------===//
// Ops whose results carry no gradient
//===----------------------------------------------------------------------===//

/// linalg.fill, tensor.empty, arith.constant: nothing flows back.
template <typename OpTy> LogicalResult noAdjoint(OpTy, AdjointState &) {
  return success();
}

//===----------------------------------------------------------------------===//
// The models
//===----------------------------------------------------------------------===//

/// The model of OpTy whose adjoint is `Rule`.
template <typename OpTy, LogicalResult (*Rule)(OpTy, AdjointState &)>
struct AdjointModel
    : public AdjointOpInterface::ExternalModel<AdjointModel<OpTy, Rule>, OpTy> {
  LogicalResult buildAdjoint(Operation *op, AdjointState &state) const {
    return Rule(cast<OpTy>(op), state);
  }
};

template <typename OpTy, LogicalResult (*Rule)(OpTy, AdjointState &)>
void attach(MLIRContext *ctx) {
  OpTy::template attachInterface<AdjointModel<OpTy, Rule>>(*ctx);
}

} // namespace

void mlir::par::registerAdjointModels(DialectRegistry &registry) {
  using namespace tensor;
  registry.addExtension(+[](MLIRContext *ctx, linalg::LinalgDialect *) {
    attach<linalg::GenericOp, genericAdjoint>(ctx);
    attach<linalg::SoftmaxOp, softmaxAdjoint>(ctx);
    attach<linalg::FillOp, noAdjoint<linalg::FillOp>>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, TensorDialect *) {
    attach<ExpandShapeOp, reshapeAdjoint<ExpandShapeOp, CollapseShapeOp>>(ctx);
    attach<CollapseShapeOp, reshapeAdjoint<CollapseShapeOp, ExpandShapeOp>>(
        ctx);
    attach<ExtractSliceOp, extractSliceAdjoint>(ctx);
    attach<InsertSliceOp, insertSliceAdjoint>(ctx);
    attach<ConcatOp, concatAdjoint>(ctx);
    attach<EmptyOp, noAdjoint<EmptyOp>>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, ParDialect *) {
    attach<ScaleLossOp, scaleLossAdjoint>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    attach<arith::ConstantOp, noAdjoint<arith::ConstantOp>>(ctx);
  });
}
