//===- Autodiff.cpp - par-autodiff ----------------------------------------===//
//
// The driver of reverse-mode differentiation over whole tensors:
//
//  * The program is first brought to a small form: named linalg ops become
//    linalg.generic, elementwise tensor arith/math become linalg.generic.
//  * Activity: the values that depend on a parameter (an operand, or a
//    value a region reads from above, such as a gather's table).
//  * A reverse sweep visits ops from the return backwards, keeping one
//    adjoint (a tensor of the value's type) per value the loss depends on,
//    seeded with 1 for the loss. Each op's adjoint is built by its
//    AdjointOpInterface (the models on upstream ops are in
//    AdjointModels.cpp), which sees the sweep as an AdjointState; an op
//    without the interface cannot be differentiated.
//  * The gradient function returns the loss and the adjoint of every
//    parameter (zeros where the loss does not depend on it).
//
// Adjoint generics recompute the forward body instead of storing
// intermediates, and every adjoint is a structured op with a sharding rule,
// so the backward partitions like the forward.
//
//===----------------------------------------------------------------------===//

#include "par/Training/Passes.h"
#include "par/Training/AdjointOpInterface.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

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
// The reverse sweep
//===----------------------------------------------------------------------===//

class ReverseSweep : public AdjointState {
public:
  ReverseSweep(func::FuncOp fn) : fn(fn), b(fn.getContext()) {}

  LogicalResult run(ArrayRef<unsigned> params);

  OpBuilder &getBuilder() override { return b; }
  Value getAdjoint(Value v) const override { return adjoints.lookup(v); }
  bool isActive(Value v) const override { return active.contains(v); }
  void accumulate(Value v, Value grad) override {
    auto it = adjoints.find(v);
    if (it == adjoints.end()) {
      adjoints[v] = grad;
      return;
    }
    it->second = arith::AddFOp::create(b, grad.getLoc(), it->second, grad);
  }
  Value zeros(Location loc, RankedTensorType type) override {
    return fill(loc, type, 0.0);
  }

private:
  /// A tensor of `type` filled with `value`.
  Value fill(Location loc, RankedTensorType type, double value) {
    Value empty = tensor::EmptyOp::create(b, loc, type.getShape(),
                                          type.getElementType());
    Value v = arith::ConstantOp::create(
        b, loc, type.getElementType(),
        b.getFloatAttr(type.getElementType(), value));
    return linalg::FillOp::create(b, loc, v, empty).getResult(0);
  }
  void markActive(Block &body, ArrayRef<unsigned> params);
  LogicalResult visit(Operation *op);

  func::FuncOp fn;
  OpBuilder b;
  DenseMap<Value, Value> adjoints;
  DenseSet<Value> active;
};

void ReverseSweep::markActive(Block &body, ArrayRef<unsigned> params) {
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
}

LogicalResult ReverseSweep::run(ArrayRef<unsigned> params) {
  Block &body = fn.getBody().front();
  // Activity: values that depend on a parameter.
  markActive(body, params);

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  b.setInsertionPoint(ret);
  Location loc = ret.getLoc();
  adjoints[loss] = fill(loc, cast<RankedTensorType>(loss.getType()), 1.0);

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
  if (auto adjoint = dyn_cast<AdjointOpInterface>(op))
    return adjoint.buildAdjoint(*this);
  return op->emitOpError("cannot be differentiated by par-autodiff");
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
    // The links are the forward's: the gradient gets its own below.
    for (StringRef link :
         {ParDialect::kGradAttrName, ParDialect::kStepAttrName,
          ParDialect::kUpdateAttrName, ParDialect::kLogitsAttrName})
      grad->removeAttr(link);
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
    // A pipeline stage's gradients leave the function: the runner sums them
    // over the micro-batches into the update's gradient arguments and sends
    // the input's gradient to the previous stage as its dy. Each must have
    // its argument's layout there, so it is pinned to the argument's
    // sharding; propagation would otherwise be free to return another one
    // (GPT-2's tied table split on d rather than the vocabulary).
    // An argument without a sharding is replicated on the stage's mesh.
    if (fn->hasAttr(ParDialect::kStageAttrName)) {
      FlatSymbolRefAttr mesh;
      for (unsigned i = 0; i < fn.getNumArguments() && !mesh; ++i)
        if (auto s = fn.getArgAttrOfType<ShardingAttr>(
                i, ParDialect::kShardingAttrName))
          mesh = s.getMesh();
      for (auto [j, p] : llvm::enumerate(params)) {
        auto s = fn.getArgAttrOfType<ShardingAttr>(
            p, ParDialect::kShardingAttrName);
        if (!s && mesh) {
          SmallVector<SmallVector<StringRef>> dims(
              cast<RankedTensorType>(fn.getArgumentTypes()[p]).getRank());
          s = ShardingAttr::get(fn.getContext(), mesh, dims);
        }
        if (s)
          grad.setResultAttr(1 + j, ParDialect::kShardingAttrName, s);
      }
    }
    // The seed is in: par.scale_loss forwards its loss from here on.
    grad.walk([](ScaleLossOp op) {
      op.getResult().replaceAllUsesWith(op.getLoss());
      op->erase();
    });
    // An adjoint generic lists its forward op's operands whether its body
    // reads them or not; the ones it does not read go, so that a forward
    // value is kept for the backward only when the backward reads it (the
    // memory plan, par-recompute and par-sink-reductions see true uses).
    {
      RewritePatternSet patterns(fn.getContext());
      linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
      if (failed(applyPatternsGreedily(grad, std::move(patterns))))
        return grad.emitOpError("could not drop the backward's unread "
                                "operands");
    }
    // The link every consumer follows (par-optimizer, the pipeline's stage
    // table): the name is for readers only.
    fn->setAttr(ParDialect::kGradAttrName, FlatSymbolRefAttr::get(grad));
    return success();
  }
};

} // namespace
