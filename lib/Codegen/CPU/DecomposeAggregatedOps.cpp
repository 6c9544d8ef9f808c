//===- DecomposeAggregatedOps.cpp - par-decompose-aggregated-ops ----------===//

#include "par/Codegen/CPU/Passes.h"

#include "mlir/IR/PatternMatch.h"

#include <cfloat>

#define DEBUG_TYPE "par-decompose-aggregated-ops"

namespace mlir::par {
#define GEN_PASS_DEF_DECOMPOSEAGGREGATEDOPS
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// A rank-0 f32 generic over `ins` yielding `body`'s values.
SmallVector<Value>
scalarGeneric(OpBuilder &b, Location loc, ValueRange ins, unsigned numResults,
              function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>
                  body) {
  auto type = RankedTensorType::get({}, b.getF32Type());
  SmallVector<Value> outs;
  for (unsigned i = 0; i < numResults; ++i)
    outs.push_back(
        tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, b.getF32Type()));
  auto g = linalg::GenericOp::create(
      b, loc, SmallVector<Type>(numResults, type), ins, outs,
      SmallVector<AffineMap>(ins.size() + numResults,
                             AffineMap::get(0, 0, {}, b.getContext())),
      ArrayRef<utils::IteratorType>{},
      [&](OpBuilder &nb, Location l, ValueRange a) {
        linalg::YieldOp::create(nb, l, body(nb, l, a.take_front(ins.size())));
      });
  return SmallVector<Value>(g.getResults());
}

/// par.all_finite on this device's values: min over every element of
/// (|x| < inf ? 1 : 0), one reduction per input chained through the init.
Value decomposeAllFinite(OpBuilder &b, AllFiniteOp op) {
  Location loc = op.getLoc();
  Type f32 = b.getF32Type();
  Value acc = linalg::FillOp::create(
                  b, loc,
                  arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(1.0))
                      .getResult(),
                  tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, f32)
                      .getResult())
                  .getResult(0);
  for (Value in : op.getInputs()) {
    auto t = cast<RankedTensorType>(in.getType());
    auto elt = cast<FloatType>(t.getElementType());
    int64_t r = t.getRank();
    acc = linalg::GenericOp::create(
              b, loc, TypeRange{acc.getType()}, ValueRange{in}, ValueRange{acc},
              ArrayRef<AffineMap>{b.getMultiDimIdentityMap(r),
                                  AffineMap::get(r, 0, {}, b.getContext())},
              SmallVector<utils::IteratorType>(r,
                                               utils::IteratorType::reduction),
              [&](OpBuilder &nb, Location l, ValueRange a) {
                Value inf = arith::ConstantOp::create(
                    nb, l, elt,
                    nb.getFloatAttr(elt, APFloat::getInf(elt.getFloatSemantics())));
                Value finite = arith::CmpFOp::create(
                    nb, l, arith::CmpFPredicate::OLT,
                    math::AbsFOp::create(nb, l, a[0]), inf);
                Value one = arith::ConstantOp::create(nb, l, f32,
                                                      nb.getF32FloatAttr(1.0));
                Value zero = arith::ConstantOp::create(nb, l, f32,
                                                       nb.getF32FloatAttr(0.0));
                Value v = arith::SelectOp::create(nb, l, finite, one, zero);
                linalg::YieldOp::create(
                    nb, l, arith::MinimumFOp::create(nb, l, a[1], v).getResult());
              })
              .getResult(0);
  }
  return acc;
}

/// par.update_loss_scale as scalar arithmetic (Megatron's
/// DynamicGradScaler; with hysteresis 1, PyTorch's GradScaler).
SmallVector<Value> decomposeUpdateLossScale(OpBuilder &b,
                                            UpdateLossScaleOp op) {
  LossScaleAttr p = op.getPolicy();
  if (!p.isDynamic())
    return {op.getScale(), op.getGood(), op.getHysteresis()};
  return scalarGeneric(
      b, op.getLoc(),
      ValueRange{op.getScale(), op.getGood(), op.getHysteresis(),
                 op.getFinite()},
      3, [&](OpBuilder &nb, Location l, ValueRange a) -> SmallVector<Value> {
        auto c = [&](double v) -> Value {
          return arith::ConstantOp::create(nb, l, nb.getF32Type(),
                                           nb.getF32FloatAttr(v));
        };
        auto sel = [&](Value cond, Value x, Value y) -> Value {
          return arith::SelectOp::create(nb, l, cond, x, y);
        };
        auto cmp = [&](arith::CmpFPredicate pr, Value x, Value y) -> Value {
          return arith::CmpFOp::create(nb, l, pr, x, y);
        };
        Value scale = a[0], good = a[1], hyst = a[2];
        Value fin = cmp(arith::CmpFPredicate::OGT, a[3], c(0.5));
        // Finite: one more good step; at the interval, grow (not past the
        // largest f32) and reset the trackers.
        Value good1 = arith::AddFOp::create(nb, l, good, c(1.0));
        Value grow = cmp(arith::CmpFPredicate::OGE, good1,
                         c((double)p.getInterval()));
        Value grown = arith::MinimumFOp::create(
            nb, l, arith::MulFOp::create(nb, l, scale, c(p.getGrowthValue())),
            c(FLT_MAX));
        Value sFin = sel(grow, grown, scale);
        Value gFin = sel(grow, c(0.0), good1);
        Value hFin = sel(grow, c((double)p.getHysteresis()), hyst);
        // Not finite: the streak ends; back off once the hysteresis is
        // spent, never below the minimum.
        Value hInf = arith::SubFOp::create(nb, l, hyst, c(1.0));
        Value back = cmp(arith::CmpFPredicate::OLE, hInf, c(0.0));
        Value shrunk = arith::MaximumFOp::create(
            nb, l, arith::MulFOp::create(nb, l, scale, c(p.getBackoffValue())),
            c(p.getMinValue()));
        Value sInf = sel(back, shrunk, scale);
        return {sel(fin, sFin, sInf), sel(fin, gFin, c(0.0)),
                sel(fin, hFin, hInf)};
      });
}

struct DecomposeAggregatedOpsPass
    : public mlir::par::impl::DecomposeAggregatedOpsBase<
          DecomposeAggregatedOpsPass> {
  void runOnOperation() override {
    // Collect first, then rewrite (the walk must not see new ops).
    SmallVector<linalg::AggregatedOpInterface> ops;
    getOperation().walk(
        [&](linalg::AggregatedOpInterface op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::AggregatedOpInterface op : ops) {
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> values = op.decomposeOperation(rewriter);
      if (failed(values)) {
        op->emitOpError("cannot be decomposed into structured ops");
        return signalPassFailure();
      }
      rewriter.replaceOp(op, *values);
    }
    // par's loss-scaling ops.
    SmallVector<Operation *> lossScale;
    getOperation().walk([&](Operation *op) {
      if (isa<ScaleLossOp, AllFiniteOp, UpdateLossScaleOp>(op))
        lossScale.push_back(op);
    });
    for (Operation *op : lossScale) {
      rewriter.setInsertionPoint(op);
      if (auto s = dyn_cast<ScaleLossOp>(op))
        rewriter.replaceOp(op, s.getLoss());
      else if (auto af = dyn_cast<AllFiniteOp>(op))
        rewriter.replaceOp(op, decomposeAllFinite(rewriter, af));
      else
        rewriter.replaceOp(op, decomposeUpdateLossScale(
                                   rewriter, cast<UpdateLossScaleOp>(op)));
    }
  }
};
} // namespace
