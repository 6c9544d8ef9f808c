//===- MixedPrecision.cpp - par-mixed-precision ---------------------------===//
//
// Every function with par.param arguments computes in a 16-bit type while
// its parameters stay f32 (the master weights the optimizer updates). Ops
// are visited in order; each is one of four kinds:
//
//   matmul       contractions (linalg.matmul, batch_matmul, a generic whose
//                reduction is a multiply-accumulate): 16-bit inputs, f32
//                accumulator and result (cuBLAS's f16/bf16 GEMM with f32
//                compute);
//   elementwise  all-parallel generics: 16-bit inputs and result; the body
//                widens its inputs and computes in f32, rounding once when
//                it yields (as the fused kernels of Megatron and PyTorch do);
//   reduction    other generics with reduction loops (LayerNorm statistics,
//                the log-sum-exp of cross-entropy, the loss);
//   softmax      linalg.softmax.
// Kinds on the keep-list (default: reduction, softmax) read f32 inputs and
// produce f32. Structural ops (reshapes, slices, transposes, broadcasts,
// sharding constraints) carry whatever type reaches them. A cast is made
// once per value and type, and a value widened from 16 bits is narrowed by
// reusing its source, so there are no cast chains. Function results keep
// their types. The gradient of a master weight is f32 through the cast's
// adjoint.
//
//===----------------------------------------------------------------------===//

#include "par/Training/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "par-mixed-precision"

namespace mlir::par {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "par/Training/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

constexpr StringLiteral kKinds[] = {"matmul", "elementwise", "reduction",
                                    "softmax"};

/// The element type of `v` if it is a ranked float tensor.
FloatType floatElementType(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t ? dyn_cast<FloatType>(t.getElementType()) : FloatType();
}

RankedTensorType withElementType(Type t, Type elt) {
  return cast<RankedTensorType>(t).clone(elt);
}

struct MixedPrecisionPass
    : public mlir::par::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  FloatType compute, wide;
  llvm::StringSet<> keepKinds;
  /// (value, element type) -> the cast of value to it.
  DenseMap<std::pair<Value, Type>, Value> casts;
  /// A widening cast's result -> its 16-bit source.
  DenseMap<Value, Value> widenedFrom;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ModuleOp module = getOperation();
    if (computeType == "f16")
      compute = Float16Type::get(ctx);
    else if (computeType == "bf16")
      compute = BFloat16Type::get(ctx);
    else {
      module.emitError() << "par-mixed-precision: unknown compute type '"
                         << computeType << "' (expected f16 or bf16)";
      return signalPassFailure();
    }
    wide = Float32Type::get(ctx);
    SmallVector<std::string> kinds(keep.begin(), keep.end());
    if (kinds.empty())
      kinds = {"reduction", "softmax"};
    if (kinds.size() == 1 && kinds[0] == "none")
      kinds.clear();
    for (const std::string &k : kinds) {
      if (!llvm::is_contained(kKinds, StringRef(k))) {
        module.emitError() << "par-mixed-precision: keep-list entry '" << k
                           << "' names no op kind (expected matmul, "
                              "elementwise, reduction or softmax)";
        return signalPassFailure();
      }
      keepKinds.insert(k);
    }
    SmallVector<func::FuncOp> todo;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (fn.getArgAttr(i, ParDialect::kParamAttrName)) {
          todo.push_back(fn);
          break;
        }
    }
    if (todo.empty()) {
      module.emitError("par-mixed-precision: no function has arguments "
                       "marked par.param (the master weights)");
      return signalPassFailure();
    }
    for (func::FuncOp fn : todo)
      if (failed(convert(fn)))
        return signalPassFailure();
  }

  LogicalResult convert(func::FuncOp fn) {
    if (auto done = fn->getAttrOfType<TypeAttr>(
            ParDialect::kMixedPrecisionAttrName))
      return fn.emitOpError() << "is already in mixed precision ("
                              << done.getValue()
                              << " compute): par-mixed-precision runs once";
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      if (!fn.getArgAttr(i, ParDialect::kParamAttrName))
        continue;
      FloatType t = floatElementType(fn.getArgument(i));
      if (t && t != wide)
        return fn.emitOpError()
               << "parameter #" << i << " is " << fn.getArgumentTypes()[i]
               << ": par-mixed-precision keeps f32 master weights and casts "
                  "their uses, so it needs an f32 program";
    }
    if (!fn.getBody().hasOneBlock())
      return fn.emitOpError("par-mixed-precision needs a single-block "
                            "function");
    // One form for the rules below: elementwise tensor ops and named ops
    // other than contractions and softmax become generics.
    {
      RewritePatternSet patterns(fn.getContext());
      linalg::populateElementwiseToLinalgConversionPatterns(patterns);
      if (failed(applyPatternsGreedily(fn, std::move(patterns))))
        return fn.emitOpError("could not prepare for mixed precision");
      IRRewriter rewriter(fn.getContext());
      SmallVector<linalg::LinalgOp> named;
      fn.walk([&](linalg::LinalgOp op) {
        if (!isa<linalg::GenericOp, linalg::FillOp, linalg::TransposeOp,
                 linalg::BroadcastOp, linalg::CopyOp>(op) &&
            !linalg::isaContractionOpInterface(op))
          named.push_back(op);
      });
      for (linalg::LinalgOp op : named) {
        rewriter.setInsertionPoint(op);
        if (failed(linalg::generalizeNamedOp(rewriter, op)))
          return op->emitOpError("cannot be expressed as linalg.generic");
      }
    }
    casts.clear();
    widenedFrom.clear();
    SmallVector<Operation *> ops;
    for (Operation &op : fn.getBody().front())
      ops.push_back(&op);
    for (Operation *op : ops)
      if (failed(visit(op)))
        return failure();
    fn->setAttr(ParDialect::kMixedPrecisionAttrName, TypeAttr::get(compute));
    return success();
  }

  /// `v` as a tensor of element type `elt` (v itself if it is one).
  Value castTo(OpBuilder &b, Location loc, Value v, Type elt) {
    FloatType from = floatElementType(v);
    if (!from || from == elt)
      return v;
    auto key = std::make_pair(v, elt);
    if (Value c = casts.lookup(key))
      return c;
    // A widened value narrows to its source, exactly.
    if (Value src = widenedFrom.lookup(v); src && floatElementType(src) == elt)
      return src;
    OpBuilder::InsertionGuard g(b);
    // A function argument (a parameter) is cast at its first use, where
    // `b` stands (ops are visited in order): casting every parameter at
    // the top would make each cast live across the whole function, and no
    // pipeline stage could be cut between.
    if (!isa<BlockArgument>(v))
      b.setInsertionPointAfterValue(v);
    Value cast = createFloatCast(b, loc, v, elt);
    if (elt.getIntOrFloatBitWidth() > from.getWidth())
      widenedFrom[cast] = v;
    casts[key] = cast;
    return cast;
  }

  /// The op's kind, or "" for a structural op.
  StringRef kindOf(Operation *op) {
    if (isa<linalg::SoftmaxOp>(op))
      return "softmax";
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if (!linalgOp || isa<linalg::FillOp, linalg::TransposeOp,
                         linalg::BroadcastOp, linalg::CopyOp>(op))
      return "";
    if (linalg::isaContractionOpInterface(linalgOp))
      return "matmul";
    if (linalgOp.getNumReductionLoops() == 0)
      return "elementwise";
    return "reduction";
  }

  /// Whether `op` keeps f32: its kind is on the keep-list, or a
  /// `par.precision` attribute says so.
  FailureOr<bool> keeps(Operation *op, StringRef kind) {
    if (auto p = op->getAttrOfType<StringAttr>(ParDialect::kPrecisionAttrName)) {
      if (p.getValue() == "f32")
        return true;
      if (p.getValue() == "compute")
        return false;
      return op->emitOpError("has 'par.precision' = ")
             << p << ", expected \"f32\" or \"compute\"";
    }
    return keepKinds.contains(kind);
  }

  LogicalResult visit(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      auto fn = cast<func::FuncOp>(op->getParentOp());
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        if (auto t = dyn_cast<RankedTensorType>(fn.getResultTypes()[i]))
          ret.setOperand(i, castTo(b, loc, v, t.getElementType()));
      return success();
    }
    StringRef kind = kindOf(op);
    if (kind.empty())
      return visitStructural(op);
    FailureOr<bool> keep = keeps(op, kind);
    if (failed(keep))
      return failure();
    if (*keep) {
      // Whatever arrives in 16 bits is widened back.
      for (OpOperand &o : op->getOpOperands())
        if (FloatType t = floatElementType(o.get()); t && t == compute)
          o.set(castTo(b, loc, o.get(), wide));
      if (auto g = dyn_cast<linalg::GenericOp>(op))
        return retypeBody(g);
      return success();
    }
    if (kind == "softmax") {
      auto sm = cast<linalg::SoftmaxOp>(op);
      Value in = castTo(b, loc, sm.getInput(), compute);
      auto outType = withElementType(sm.getOutput().getType(), compute);
      Value init = tensor::EmptyOp::create(b, loc, outType.getShape(), compute);
      auto nsm = linalg::SoftmaxOp::create(b, loc, TypeRange{outType}, in, init,
                                           sm.getDimension());
      sm.getResult()[0].replaceAllUsesWith(nsm.getResult()[0]);
      sm->erase();
      return success();
    }
    auto linalgOp = cast<linalg::LinalgOp>(op);
    // Inputs in the compute type.
    for (OpOperand *o : linalgOp.getDpsInputOperands())
      if (FloatType t = floatElementType(o->get()); t && t == wide)
        o->set(castTo(b, loc, o->get(), compute));
    // Accumulators stay f32: an init that arrives in 16 bits (a value an
    // earlier op retyped, e.g. elementwise-to-linalg's reuse of an operand
    // as the init) is widened back.
    if (kind != "elementwise")
      for (OpOperand &o : linalgOp.getDpsInitsMutable())
        if (FloatType t = floatElementType(o.get()); t && t == compute)
          o.set(castTo(b, loc, o.get(), wide));
    if (kind == "matmul") {
      // Named contractions rebuild their region for the new input types;
      // the accumulator stays f32.
      // The BLAS path knows the named forms: rebuild them for the new input
      // types (their regions follow the operands).
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) &&
          !linalgOp.hasUserDefinedMaps()) {
        Operation *named =
            isa<linalg::MatmulOp>(op)
                ? linalg::MatmulOp::create(b, loc, linalgOp.getDpsInputs(),
                                           linalgOp.getDpsInits())
                      .getOperation()
                : linalg::BatchMatmulOp::create(b, loc,
                                                linalgOp.getDpsInputs(),
                                                linalgOp.getDpsInits())
                      .getOperation();
        op->replaceAllUsesWith(named->getResults());
        op->erase();
        return success();
      }
      linalg::GenericOp g;
      if (!isa<linalg::GenericOp>(op)) {
        IRRewriter rewriter(b);
        rewriter.setInsertionPoint(op);
        FailureOr<linalg::GenericOp> gen =
            linalg::generalizeNamedOp(rewriter, linalgOp);
        if (failed(gen))
          return op->emitOpError("cannot be expressed as linalg.generic");
        g = *gen;
      } else {
        g = cast<linalg::GenericOp>(op);
      }
      return retypeBody(g);
    }
    auto g = cast<linalg::GenericOp>(op);
    if (kind == "elementwise") {
      // Outputs in the compute type too: a fresh init, or the old one cast
      // when the body reads it.
      for (auto [i, init] : llvm::enumerate(g.getDpsInits())) {
        if (floatElementType(init) != wide) {
          // Already 16 bits (an operand reused as the init, retyped by the
          // op that made it): the result follows.
          if (floatElementType(init) == compute)
            g.getResult(i).setType(cast<RankedTensorType>(init.getType()));
          continue;
        }
        bool read = !g.getRegionOutputArgs()[i].use_empty();
        Value n = read ? castTo(b, loc, init, compute)
                       : tensor::EmptyOp::create(
                             b, loc,
                             cast<RankedTensorType>(init.getType()).getShape(),
                             compute)
                             .getResult();
        g.setDpsInitOperand(i, n);
        g.getResult(i).setType(cast<RankedTensorType>(n.getType()));
      }
    }
    return retypeBody(g);
  }

  /// After operand or result types of `g` changed: block arguments take the
  /// new element types; each narrowed one is widened once at the top of
  /// the body, and each yielded value is rounded to its output's type.
  LogicalResult retypeBody(linalg::GenericOp g) {
    Block *body = g.getBody();
    OpBuilder b = OpBuilder::atBlockBegin(body);
    Location loc = g.getLoc();
    for (OpOperand &o : g->getOpOperands()) {
      BlockArgument arg = body->getArgument(o.getOperandNumber());
      Type elt = getElementTypeOrSelf(o.get().getType());
      Type old = arg.getType();
      if (elt == old)
        continue;
      arg.setType(elt);
      if (arg.use_empty())
        continue;
      if (!isa<FloatType>(elt) || !isa<FloatType>(old))
        return g.emitOpError("cannot change a block argument from ")
               << old << " to " << elt;
      auto widened = arith::ExtFOp::create(b, loc, old, arg);
      arg.replaceAllUsesExcept(widened, widened);
    }
    auto yield = cast<linalg::YieldOp>(body->getTerminator());
    b.setInsertionPoint(yield);
    for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
      Type want = getElementTypeOrSelf(g.getResult(i).getType());
      if (v.getType() == want)
        continue;
      yield.setOperand(i, arith::TruncFOp::create(b, loc, want, v));
    }
    return success();
  }

  /// Structural ops carry the type of what reaches them.
  LogicalResult visitStructural(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (isa<linalg::TransposeOp, linalg::BroadcastOp, linalg::CopyOp>(op)) {
      auto l = cast<linalg::LinalgOp>(op);
      Value in = l.getDpsInputs()[0];
      Value init = l.getDpsInits()[0];
      Type elt = getElementTypeOrSelf(in.getType());
      if (getElementTypeOrSelf(init.getType()) == elt)
        return success();
      auto t = withElementType(init.getType(), elt);
      Value n = tensor::EmptyOp::create(b, loc, t.getShape(), elt);
      IRRewriter rewriter(b);
      Operation *nop = nullptr;
      if (auto tr = dyn_cast<linalg::TransposeOp>(op))
        nop = linalg::TransposeOp::create(rewriter, loc, in, n,
                                          tr.getPermutation());
      else if (auto br = dyn_cast<linalg::BroadcastOp>(op))
        nop = linalg::BroadcastOp::create(rewriter, loc, in, n,
                                          br.getDimensions());
      else
        nop = linalg::CopyOp::create(rewriter, loc, in, n);
      rewriter.replaceOp(op, nop->getResults());
      return success();
    }
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
            tensor::ExtractSliceOp, ShardingConstraintOp, ReshardOp>(op)) {
      Type elt = getElementTypeOrSelf(op->getOperand(0).getType());
      Value r = op->getResult(0);
      if (getElementTypeOrSelf(r.getType()) != elt)
        r.setType(withElementType(r.getType(), elt));
      return success();
    }
    // Everything else reads f32, as before.
    for (OpOperand &o : op->getOpOperands())
      if (FloatType t = floatElementType(o.get()); t && t == compute)
        o.set(castTo(b, loc, o.get(), wide));
    return success();
  }
};

} // namespace
