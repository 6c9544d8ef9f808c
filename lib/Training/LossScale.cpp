//===- LossScale.cpp - par-loss-scale and the train step's pieces ---------===//
//
// par-loss-scale gives every forward + loss a loss-scale argument (program
// state, f32, starting at the policy's initial value) and returns the loss
// through par.scale_loss, so that par-autodiff seeds the backward with the
// scale. par-optimizer then builds the rest into the train step: unscale,
// the global all-finite check, the step-or-skip select and the next scale
// (see Optimizer.cpp and LossScale.h).
//
//===----------------------------------------------------------------------===//

#include "par/Training/LossScale.h"
#include "par/Training/Passes.h"

#define DEBUG_TYPE "par-loss-scale"

namespace mlir::par {
#define GEN_PASS_DEF_LOSSSCALE
#include "par/Training/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// A generic over `ref`'s shape: `fn` of the elements of `ins` (rank-0
/// inputs broadcast), in `ref`'s type.
Value elementwise(OpBuilder &b, Location loc, Value ref, ValueRange ins,
                  function_ref<Value(OpBuilder &, Location, ValueRange)> fn) {
  auto type = cast<RankedTensorType>(ref.getType());
  int64_t r = type.getRank();
  SmallVector<AffineMap> maps;
  for (Value in : ins)
    maps.push_back(cast<RankedTensorType>(in.getType()).getRank() == 0 && r > 0
                       ? AffineMap::get(r, 0, {}, b.getContext())
                       : b.getMultiDimIdentityMap(r));
  maps.push_back(b.getMultiDimIdentityMap(r));
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ins,
             ValueRange{tensor::EmptyOp::create(b, loc, type.getShape(),
                                                type.getElementType())},
             maps,
             SmallVector<utils::IteratorType>(r, utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange a) {
               linalg::YieldOp::create(nb, l, fn(nb, l, a.drop_back()));
             })
      .getResult(0);
}

Value toType(OpBuilder &b, Location loc, Value v, Type t) {
  if (v.getType() == t)
    return v;
  if (cast<FloatType>(t).getWidth() > cast<FloatType>(v.getType()).getWidth())
    return arith::ExtFOp::create(b, loc, t, v);
  return arith::TruncFOp::create(b, loc, t, v);
}

} // namespace

Value mlir::par::buildReciprocal(OpBuilder &b, Location loc, Value scale) {
  return elementwise(b, loc, scale, scale,
                     [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                       Value one = arith::ConstantOp::create(
                           nb, l, a[0].getType(),
                           nb.getFloatAttr(a[0].getType(), 1.0));
                       return arith::DivFOp::create(nb, l, one, a[0]);
                     });
}

Value mlir::par::buildUnscale(OpBuilder &b, Location loc, Value g, Value inv) {
  return elementwise(b, loc, g, ValueRange{g, inv},
                     [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                       return arith::MulFOp::create(
                           nb, l, a[0], toType(nb, l, a[1], a[0].getType()));
                     });
}

Value mlir::par::buildSelectIfFinite(OpBuilder &b, Location loc, Value finite,
                                     Value next, Value prev) {
  return elementwise(
      b, loc, next, ValueRange{finite, next, prev},
      [](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value half = arith::ConstantOp::create(nb, l, a[0].getType(),
                                               nb.getFloatAttr(a[0].getType(), 0.5));
        Value ok = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT, a[0],
                                         half);
        return arith::SelectOp::create(nb, l, ok, a[1], a[2]);
      });
}

Value mlir::par::buildUnscaleAndDecide(OpBuilder &b, Location loc,
                                       Value scale,
                                       MutableArrayRef<Value> grads,
                                       FlatSymbolRefAttr mesh) {
  Value inv = buildReciprocal(b, loc, scale);
  for (Value &g : grads)
    g = buildUnscale(b, loc, g, inv);
  return AllFiniteOp::create(b, loc, scale.getType(), ValueRange(grads), mesh);
}

void mlir::par::buildSkipAndNextScale(OpBuilder &b, Location loc, Value finite,
                                      ArrayRef<Value> prev,
                                      MutableArrayRef<Value> next,
                                      ValueRange scaleState,
                                      LossScaleAttr policy,
                                      SmallVectorImpl<Value> &results) {
  for (auto [n, p] : llvm::zip_equal(next, prev))
    n = buildSelectIfFinite(b, loc, finite, n, p);
  Type scalar = finite.getType();
  auto state = UpdateLossScaleOp::create(
      b, loc, TypeRange{scalar, scalar, scalar}, scaleState[0], scaleState[1],
      scaleState[2], finite, policy);
  llvm::append_range(results, state.getResults());
  results.push_back(finite);
}

FailureOr<FlatSymbolRefAttr> mlir::par::getDecisionMesh(ModuleOp module,
                                                        Operation *at) {
  auto meshes = module.getOps<MeshOp>();
  if (meshes.empty())
    return FlatSymbolRefAttr();
  if (std::next(meshes.begin()) != meshes.end())
    return at->emitOpError("has a loss scale, but the module has several "
                           "meshes: the all-finite decision needs the one "
                           "every rank is on");
  return FlatSymbolRefAttr::get((*meshes.begin()).getSymNameAttr());
}

namespace {

struct LossScalePass : public mlir::par::impl::LossScaleBase<LossScalePass> {
  using LossScaleBase::LossScaleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (policy != "static" && policy != "dynamic") {
      module.emitError() << "par-loss-scale: unknown policy '" << policy
                         << "' (expected static or dynamic; par-compile's "
                            "loss-scale= also takes none and auto)";
      return signalPassFailure();
    }
    LossScaleAttr attr = LossScaleAttr::getChecked(
        [&]() { return module.emitError() << "par-loss-scale: "; },
        &getContext(),
        policy == "dynamic" ? LossScaleKind::Dynamic : LossScaleKind::Static,
        APFloat(initScale), APFloat(growthFactor), APFloat(backoffFactor),
        static_cast<int64_t>(growthInterval), static_cast<int64_t>(hysteresis),
        APFloat(minScale));
    if (!attr)
      return signalPassFailure();
    SmallVector<func::FuncOp> todo;
    for (auto fn : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (fn.getArgAttr(i, ParDialect::kParamAttrName)) {
          todo.push_back(fn);
          break;
        }
    if (todo.empty()) {
      module.emitError("par-loss-scale: no function has arguments marked "
                       "par.param (a forward + loss to scale)");
      return signalPassFailure();
    }
    for (func::FuncOp fn : todo)
      if (failed(scale(fn, attr)))
        return signalPassFailure();
  }

  LogicalResult scale(func::FuncOp fn, LossScaleAttr attr) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (fn.getArgAttr(i, ParDialect::kLossScaleAttrName))
        return fn.emitOpError() << "already has a loss scale (argument #" << i
                                << "): par-loss-scale runs once";
    if (fn->hasAttr(ParDialect::kStageAttrName))
      return fn.emitOpError("is a pipeline stage: run par-loss-scale on the "
                            "whole forward, before par-pipeline-split (the "
                            "other stages' gradients are scaled through the "
                            "last stage's)");
    auto lossType = fn.getNumResults() == 1
                        ? dyn_cast<RankedTensorType>(fn.getResultTypes()[0])
                        : RankedTensorType();
    if (!lossType || lossType.getRank() != 0 ||
        !isa<FloatType>(lossType.getElementType()))
      return fn.emitOpError("must return one scalar floating-point loss to "
                            "be scaled");
    if (!fn.getBody().hasOneBlock())
      return fn.emitOpError("par-loss-scale needs a single-block function");
    MLIRContext *ctx = fn.getContext();
    auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
    unsigned idx = fn.getNumArguments();
    if (failed(fn.insertArgument(idx, scalar, {}, fn.getLoc())))
      return fn.emitOpError("cannot add the loss-scale argument");
    fn.setArgAttr(idx, ParDialect::kLossScaleAttrName, attr);
    fn.setArgAttr(idx, ParDialect::kInitAttrName,
                  InitAttr::get(ctx, InitKind::Fill, attr.getInitValue()));
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    OpBuilder b(ret);
    Value loss = ret.getOperand(0);
    Value scaled = ScaleLossOp::create(b, ret.getLoc(), loss.getType(), loss,
                                       fn.getArgument(idx));
    ret.setOperand(0, scaled);
    return success();
  }
};

} // namespace
