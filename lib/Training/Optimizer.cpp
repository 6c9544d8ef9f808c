//===- Optimizer.cpp - par-optimizer --------------------------------------===//
//
// A train step is a plain function: call the gradient, update each
// parameter with one elementwise generic (parameter, gradient and state in,
// new parameter and state out). Being elementwise over the parameter's
// shape, the update is sharded exactly like the parameter, and so is the
// state it carries. With zero=1 or 2 (ZeRO stages 1 and 2) annotations
// shard the state, the gradient it meets and the update further over the
// data-parallel axes; with zero=3 the parameters too, gathered where the
// gradient function uses them. Propagation and partitioning turn them into
// the collectives. The layout is lib/Communication's (ZeRO.h); this file
// places it on the step.
//
//===----------------------------------------------------------------------===//

#include "par/Communication/ZeRO.h"
#include "par/Training/LossScale.h"
#include "par/Training/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

#define DEBUG_TYPE "par-optimizer"

namespace mlir::par {
#define GEN_PASS_DEF_OPTIMIZER
#include "par/Training/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

struct OptimizerPass : public mlir::par::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "adamw") {
      getOperation().emitError() << "unknown optimizer '" << optimizer
                                 << "' (expected sgd, momentum or adamw)";
      return signalPassFailure();
    }
    if (schedule != "constant" && schedule != "cosine") {
      getOperation().emitError() << "unknown schedule '" << schedule
                                 << "' (expected constant or cosine)";
      return signalPassFailure();
    }
    if (schedule == "cosine" && (warmupSteps < 0 || totalSteps <= warmupSteps)) {
      getOperation().emitError()
          << "the cosine schedule needs total-steps > warmup-steps >= 0 (got "
          << static_cast<int64_t>(totalSteps) << " and "
          << static_cast<int64_t>(warmupSteps) << ")";
      return signalPassFailure();
    }
    if (microBatches < 1) {
      getOperation().emitError() << "micro-batches must be >= 1 (got "
                                 << static_cast<int64_t>(microBatches) << ")";
      return signalPassFailure();
    }
    if (failed(verifyZeROOptions(getOperation(), zeroOptions())))
      return signalPassFailure();
    SmallVector<func::FuncOp> todo;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (fn.getArgAttr(i, ParDialect::kParamAttrName)) {
          todo.push_back(fn);
          break;
        }
    for (func::FuncOp fn : todo) {
      // Half backwards of a stage (ZB-H1) share the stage's update.
      if (fn->hasAttr(ParDialect::kStagePartAttrName))
        continue;
      if (failed(fn->hasAttr(ParDialect::kStageAttrName) ? buildUpdate(fn)
                                                          : buildStep(fn)))
        return signalPassFailure();
    }
  }

  /// `fn(a)` or `fn(a, b)` applied elementwise (a generic over a's shape).
  static Value
  elementwise(OpBuilder &b, Location loc, Value lhs, Value rhs,
              function_ref<Value(OpBuilder &, Location, ValueRange)> fn) {
    auto type = cast<RankedTensorType>(lhs.getType());
    int64_t r = type.getRank();
    SmallVector<Value> ins{lhs};
    if (rhs)
      ins.push_back(rhs);
    SmallVector<AffineMap> maps(ins.size() + 1, b.getMultiDimIdentityMap(r));
    return linalg::GenericOp::create(
               b, loc, TypeRange{type}, ins,
               ValueRange{tensor::EmptyOp::create(b, loc, type.getShape(),
                                                  type.getElementType())},
               maps,
               SmallVector<utils::IteratorType>(r, utils::IteratorType::parallel),
               [&](OpBuilder &nb, Location l, ValueRange a) {
                 linalg::YieldOp::create(nb, l,
                                         ValueRange{fn(nb, l, a.drop_back())});
               })
        .getResult(0);
  }

  /// Scales every value (a sum over the micro-batches) by 1 / micro-batches.
  void averageOverMicroBatches(OpBuilder &b, Location loc,
                               MutableArrayRef<Value> values) {
    double inv = 1.0 / static_cast<double>(microBatches);
    for (Value &v : values)
      v = elementwise(b, loc, v, Value(),
                      [&](OpBuilder &nb, Location l, ValueRange a) {
                        Type et = a[0].getType();
                        return arith::MulFOp::create(
                            nb, l, a[0],
                            arith::ConstantOp::create(
                                nb, l, et, nb.getFloatAttr(et, inv)));
                      });
  }

  /// The operands of each micro-batch's gradient call: parameters as they
  /// are, every other argument `[m*B, ...]` viewed as `[B, m, ...]` and
  /// sliced at k on the m dim (rows i*m + k). The major `B` dim inherits the
  /// batch's sharding and the sliced dim is never split: no communication.
  SmallVector<SmallVector<Value>> splitMicroBatches(OpBuilder &b,
                                                    func::FuncOp fn,
                                                    ValueRange args) {
    int64_t m = microBatches;
    Location loc = fn.getLoc();
    SmallVector<SmallVector<Value>> out(m, SmallVector<Value>(args));
    for (auto [i, arg] : llvm::enumerate(args)) {
      if (fn.getArgAttr(i, ParDialect::kParamAttrName) ||
          fn.getArgAttr(i, ParDialect::kLossScaleAttrName))
        continue;
      auto type = cast<RankedTensorType>(arg.getType());
      auto microType = cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      SmallVector<int64_t> wide{microType.getDimSize(0), m};
      llvm::append_range(wide, type.getShape().drop_front());
      SmallVector<ReassociationIndices> groups{{0, 1}};
      for (int64_t d = 1; d < type.getRank(); ++d)
        groups.push_back({d + 1});
      auto wideType = RankedTensorType::get(wide, type.getElementType());
      Value view =
          tensor::ExpandShapeOp::create(b, loc, wideType, arg, groups);
      SmallVector<int64_t> sizes(wide);
      sizes[1] = 1;
      for (int64_t k = 0; k < m; ++k) {
        SmallVector<int64_t> offsets(wide.size(), 0);
        offsets[1] = k;
        out[k][i] = tensor::ExtractSliceOp::create(
            b, loc, microType, view, ValueRange{}, ValueRange{}, ValueRange{},
            b.getDenseI64ArrayAttr(offsets), b.getDenseI64ArrayAttr(sizes),
            b.getDenseI64ArrayAttr(SmallVector<int64_t>(wide.size(), 1)));
      }
    }
    return out;
  }

  unsigned stateKinds() {
    return optimizer == "sgd" ? 0 : optimizer == "momentum" ? 1 : 2;
  }

  /// The values an update needs that are the same for every element of
  /// every parameter in a step: AdamW's bias corrections 1 - beta^t and the
  /// scheduled learning rate. Computed once per step (and element type), as
  /// 0-d tensors that the updates read through scalar maps; in the updates'
  /// bodies they would cost two powf (and a cos) per element, since LLVM
  /// cannot hoist a load of t that may alias the outputs. Same operations
  /// in the same order as the per-element form: the values are bit for bit
  /// the same.
  struct StepScalars {
    Value bc1, bc2; // AdamW: 1 - beta1^t, 1 - beta2^t
    Value lr;       // cosine schedule: lr * factor(t)
  };

  StepScalars emitStepScalars(OpBuilder &b, Location loc, Value t, Type elt) {
    StepScalars s;
    bool adamw = optimizer == "adamw", cosine = schedule == "cosine";
    if (!t || (!adamw && !cosine))
      return s;
    MLIRContext *ctx = b.getContext();
    auto scalarType = RankedTensorType::get({}, elt);
    unsigned n = (adamw ? 2 : 0) + (cosine ? 1 : 0);
    SmallVector<Value> outs;
    for (unsigned i = 0; i < n; ++i)
      outs.push_back(tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, elt));
    SmallVector<AffineMap> maps(1 + n, AffineMap::get(0, 0, {}, ctx));
    auto cst = [&](OpBuilder &nb, Location l, double v) -> Value {
      return arith::ConstantOp::create(nb, l, elt, nb.getFloatAttr(elt, v));
    };
    auto op = linalg::GenericOp::create(
        b, loc, TypeRange(SmallVector<Type>(n, scalarType)), ValueRange{t},
        outs, maps, ArrayRef<utils::IteratorType>{},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value tv = a[0];
          SmallVector<Value> yields;
          if (adamw) {
            // In f64, rounded once to the element type: torch.optim.AdamW
            // computes 1 - beta^t in Python floats. From the f32-rounded
            // beta2 (0.999 is 0.99900001287 in f32) 1 - beta2 would be
            // 1.29e-5 too small, every step's update 6.4e-6 too small
            // (test/Import/Inputs/f64_reference.py measured it).
            Type f64 = nb.getF64Type();
            Value t64 = elt == f64 ? tv
                                   : arith::ExtFOp::create(nb, l, f64, tv)
                                         .getResult();
            auto bc = [&](double beta) -> Value {
              auto c64 = [&](double v) -> Value {
                return arith::ConstantOp::create(nb, l, f64,
                                                 nb.getF64FloatAttr(v));
              };
              Value r = arith::SubFOp::create(
                  nb, l, c64(1.0),
                  math::PowFOp::create(nb, l, c64(beta), t64));
              return elt == f64 ? r
                                : arith::TruncFOp::create(nb, l, elt, r)
                                      .getResult();
            };
            yields.push_back(bc(beta1));
            yields.push_back(bc(beta2));
          }
          if (cosine) {
            // lr * (t <= W ? t / W : 0.5 (1 + cos(pi min(1, (t-W)/(T-W)))))
            double W = warmupSteps, T = totalSteps;
            Value warm = W > 0 ? arith::DivFOp::create(nb, l, tv, cst(nb, l, W))
                                     .getResult()
                               : cst(nb, l, 1.0);
            Value prog = arith::DivFOp::create(
                nb, l, arith::SubFOp::create(nb, l, tv, cst(nb, l, W)),
                cst(nb, l, T - W));
            prog = arith::MinimumFOp::create(
                nb, l, arith::MaximumFOp::create(nb, l, prog, cst(nb, l, 0.0)),
                cst(nb, l, 1.0));
            Value cosv = math::CosOp::create(
                nb, l, arith::MulFOp::create(nb, l, prog, cst(nb, l, M_PI)));
            Value decayf = arith::MulFOp::create(
                nb, l, cst(nb, l, 0.5),
                arith::AddFOp::create(nb, l, cst(nb, l, 1.0), cosv));
            Value inWarmup = arith::CmpFOp::create(
                nb, l, arith::CmpFPredicate::OLE, tv, cst(nb, l, W));
            Value factor =
                arith::SelectOp::create(nb, l, inWarmup, warm, decayf);
            yields.push_back(
                arith::MulFOp::create(nb, l, cst(nb, l, this->lr), factor));
          }
          linalg::YieldOp::create(nb, l, yields);
        });
    unsigned i = 0;
    if (adamw) {
      s.bc1 = op.getResult(i++);
      s.bc2 = op.getResult(i++);
    }
    if (cosine)
      s.lr = op.getResult(i++);
    return s;
  }

  /// The update of every parameter from its gradient, state (kind-major:
  /// state[k * #params + j]) and the step number `t` (null when unused):
  /// appends the new parameters, then the new state grouped by kind, then
  /// t + 1 when there is a step number. Each parameter's update is one
  /// elementwise generic (one loop nest): parameter, gradient and state in,
  /// the per-step scalars (emitStepScalars) through scalar maps, the new
  /// parameter and state out.
  void emitUpdates(OpBuilder &b, Location loc, ArrayRef<Value> params,
                   ArrayRef<Value> grads, ArrayRef<Value> state, Value t,
                   SmallVector<Value> &results) {
    MLIRContext *ctx = b.getContext();
    unsigned statePerParam = stateKinds();
    bool hasStep = t != nullptr;
    SmallVector<Value> newState;
    // The per-step scalars, once per element type (the parameters' types
    // normally agree), before every update.
    llvm::SmallDenseMap<Type, StepScalars> scalarsOf;
    for (Value param : params) {
      Type elt = cast<RankedTensorType>(param.getType()).getElementType();
      if (!scalarsOf.count(elt))
        scalarsOf[elt] = emitStepScalars(b, loc, t, elt);
    }
    for (auto [j, param] : llvm::enumerate(params)) {
      Value g = grads[j];
      auto type = cast<RankedTensorType>(param.getType());
      Type elt = type.getElementType();
      StepScalars scalars = scalarsOf[elt];
      auto cst = [&](OpBuilder &nb, Location l, double v) -> Value {
        return arith::ConstantOp::create(nb, l, elt, nb.getFloatAttr(elt, v));
      };
      int64_t rank = type.getRank();
      AffineMap id = b.getMultiDimIdentityMap(rank);
      AffineMap scalar = AffineMap::get(rank, 0, {}, ctx);
      SmallVector<utils::IteratorType> iters(rank,
                                             utils::IteratorType::parallel);
      SmallVector<Value> ins{param, g};
      SmallVector<AffineMap> maps{id, id};
      for (unsigned k = 0; k < statePerParam; ++k) {
        ins.push_back(state[k * params.size() + j]);
        maps.push_back(id);
      }
      // The scalar inputs' positions in the body's arguments (-1: none).
      auto addScalar = [&](Value v) -> int64_t {
        if (!v)
          return -1;
        ins.push_back(v);
        maps.push_back(scalar);
        return ins.size() - 1;
      };
      int64_t bc1Index = addScalar(scalars.bc1);
      int64_t bc2Index = addScalar(scalars.bc2);
      int64_t lrIndex = addScalar(scalars.lr);
      SmallVector<Value> outs;
      for (unsigned k = 0; k < 1 + statePerParam; ++k) {
        outs.push_back(tensor::EmptyOp::create(b, loc, type.getShape(), elt));
        maps.push_back(id);
      }
      auto update = linalg::GenericOp::create(
          b, loc, TypeRange(SmallVector<Type>(outs.size(), type)), ins, outs,
          maps, iters, [&](OpBuilder &nb, Location l, ValueRange a) {
            Value pv = a[0], gv = a[1];
            Value lr = lrIndex >= 0 ? a[lrIndex] : cst(nb, l, this->lr);
            if (optimizer == "sgd") {
              Value d = arith::MulFOp::create(nb, l, lr, gv);
              linalg::YieldOp::create(
                  nb, l, ValueRange{arith::SubFOp::create(nb, l, pv, d)});
              return;
            }
            if (optimizer == "momentum") {
              Value buf = arith::AddFOp::create(
                  nb, l, arith::MulFOp::create(nb, l, cst(nb, l, momentum), a[2]),
                  gv);
              Value np = arith::SubFOp::create(
                  nb, l, pv, arith::MulFOp::create(nb, l, lr, buf));
              linalg::YieldOp::create(nb, l, ValueRange{np, buf});
              return;
            }
            // AdamW.
            Value m = a[2], v = a[3];
            Value b1 = cst(nb, l, beta1), b2 = cst(nb, l, beta2);
            Value nm = arith::AddFOp::create(
                nb, l, arith::MulFOp::create(nb, l, b1, m),
                arith::MulFOp::create(nb, l, cst(nb, l, 1.0 - beta1), gv));
            Value nv = arith::AddFOp::create(
                nb, l, arith::MulFOp::create(nb, l, b2, v),
                arith::MulFOp::create(
                    nb, l, cst(nb, l, 1.0 - beta2),
                    arith::MulFOp::create(nb, l, gv, gv)));
            Value mhat = arith::DivFOp::create(nb, l, nm, a[bc1Index]);
            Value vhat = arith::DivFOp::create(nb, l, nv, a[bc2Index]);
            Value denom = arith::AddFOp::create(
                nb, l, math::SqrtOp::create(nb, l, vhat),
                cst(nb, l, epsilon));
            Value adam = arith::DivFOp::create(nb, l, mhat, denom);
            Value decay = arith::MulFOp::create(
                nb, l, arith::MulFOp::create(nb, l, lr, cst(nb, l, weightDecay)),
                pv);
            Value np = arith::SubFOp::create(
                nb, l,
                arith::SubFOp::create(nb, l, pv, decay),
                arith::MulFOp::create(nb, l, lr, adam));
            linalg::YieldOp::create(nb, l, ValueRange{np, nm, nv});
          });
      results.push_back(update.getResult(0));
      for (unsigned k = 0; k < statePerParam; ++k)
        newState.push_back(update.getResult(1 + k));
    }
    // State results are grouped by kind, like the arguments.
    for (unsigned k = 0; k < statePerParam; ++k)
      for (unsigned j = 0; j < params.size(); ++j)
        results.push_back(newState[j * statePerParam + k]);
    if (hasStep) {
      auto tt = cast<RankedTensorType>(t.getType());
      Value one = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(
                      tt, b.getFloatAttr(tt.getElementType(), 1.0)));
      results.push_back(arith::AddFOp::create(b, loc, t, one));
    }
  }

  /// Loss scaling of a pipeline: the policy is the split function's (only
  /// the last stage reads the scale, but every stage's gradients are
  /// scaled); null without one.
  LossScaleAttr findPipelineLossScale() {
    ModuleOp module = getOperation();
    LossScaleAttr lossScale;
    if (auto pipe =
            module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName))
      if (auto split = module.lookupSymbol<func::FuncOp>(pipe.getFunc()))
        for (unsigned i = 0; i < split.getNumArguments(); ++i)
          if (auto ls = split.getArgAttrOfType<LossScaleAttr>(
                  i, ParDialect::kLossScaleAttrName))
            lossScale = ls;
    return lossScale;
  }

  /// The stage update function `name` of the stage `fn` with parameters
  /// `params` (see buildUpdate), with its attributes and no body: the
  /// parameters keep their initialisers and names, gradients and state
  /// share their parameter's sharding, state starts at zero, t at one, the
  /// loss scale state at the policy's values. `scaleArg` is set to the
  /// scale's argument (after t).
  func::FuncOp createStageUpdate(OpBuilder &b, func::FuncOp fn,
                                 DenseI64ArrayAttr stageArgs,
                                 ArrayRef<unsigned> params, StringRef name,
                                 LossScaleAttr lossScale,
                                 const OptimizerStateLayout &layout,
                                 unsigned &scaleArg) {
    MLIRContext *ctx = b.getContext();
    unsigned P = params.size(), K = stateKinds();
    Type lossType = fn.getResultTypes()[0];
    bool hasStep = optimizer == "adamw" || schedule == "cosine";
    SmallVector<Type> types, resultTypes;
    for (unsigned rep = 0; rep < 2 + K; ++rep)
      for (unsigned p : params)
        types.push_back(fn.getArgumentTypes()[p]);
    for (unsigned rep = 0; rep < 1 + K; ++rep)
      for (unsigned p : params)
        resultTypes.push_back(fn.getArgumentTypes()[p]);
    if (hasStep) {
      types.push_back(lossType);
      resultTypes.push_back(lossType);
    }
    // The scale state after the optimizer's (fed back like it: result
    // P + i is state argument 2P + i), then the all-finite flag.
    auto scalarF32 = RankedTensorType::get({}, Float32Type::get(ctx));
    scaleArg = types.size();
    if (lossScale) {
      types.append(3, scalarF32);
      resultTypes.append(4, scalarF32);
    }
    auto update = func::FuncOp::create(b, fn.getLoc(), name,
                                       b.getFunctionType(types, resultTypes));
    SmallVector<int64_t> origIdx;
    for (auto [j, p] : llvm::enumerate(params)) {
      origIdx.push_back(stageArgs[p]);
      Attribute sharding = fn.getArgAttr(p, ParDialect::kShardingAttrName);
      // ZeRO-1/2: the state (and the update on it) split further over the
      // data-parallel axes; the parameter and its gradient sum as before.
      // Both pinned: a free gradient argument would take the state's split
      // from the constraint, and the backward's sum would not fit it.
      // ZeRO-3: the parameter kept (argument and result) split like its
      // state; its gradient sum still arrives in the parameter's layout.
      Attribute stateSharding = sharding, paramSharding = sharding;
      if (layout.isZeROSharded(j)) {
        stateSharding = layout.state[j];
        sharding = layout.param[j];
        paramSharding = layout.stored(j);
      }
      for (unsigned rep = 0; rep < 2 + K; ++rep) {
        unsigned a = rep * P + j;
        Attribute sh =
            rep >= 2 ? stateSharding : rep == 0 ? paramSharding : sharding;
        if (sh)
          update.setArgAttr(a, ParDialect::kShardingAttrName, sh);
        if (rep >= 2)
          update.setArgAttr(a, ParDialect::kInitAttrName,
                            InitAttr::get(ctx, InitKind::Zeros));
      }
      // The parameter (argument j) keeps its initialiser and names; its
      // gradient and state take none.
      for (StringRef a : {ParDialect::kInitAttrName, ParDialect::kNameAttrName,
                          ParDialect::kAliasesAttrName,
                          ParDialect::kSliceAttrName})
        if (Attribute attr = fn.getArgAttr(p, a))
          update.setArgAttr(j, a, attr);
      for (unsigned rep = 0; rep < 1 + K; ++rep)
        if (Attribute sh = rep >= 1 ? stateSharding : paramSharding)
          update.setResultAttr(rep * P + j, ParDialect::kShardingAttrName, sh);
    }
    if (hasStep)
      update.setArgAttr(scaleArg - 1, ParDialect::kInitAttrName,
                        InitAttr::get(ctx, InitKind::Ones));
    if (lossScale) {
      update.setArgAttr(scaleArg, ParDialect::kLossScaleAttrName, lossScale);
      update.setArgAttr(scaleArg, ParDialect::kInitAttrName,
                        InitAttr::get(ctx, InitKind::Fill,
                                      lossScale.getInitValue()));
      update.setArgAttr(scaleArg + 1, ParDialect::kInitAttrName,
                        InitAttr::get(ctx, InitKind::Zeros));
      update.setArgAttr(scaleArg + 2, ParDialect::kInitAttrName,
                        InitAttr::get(ctx, InitKind::Fill,
                                      (double)lossScale.getHysteresis()));
      int64_t scaleResult = scaleArg - P;
      update->setAttr(ParDialect::kLossScaleResultsAttrName,
                      b.getDenseI64ArrayAttr({scaleResult, scaleResult + 3}));
    }
    update->setAttr(ParDialect::kStageAttrName,
                    fn->getAttr(ParDialect::kStageAttrName));
    update->setAttr(ParDialect::kStageArgsAttrName,
                    b.getDenseI64ArrayAttr(origIdx));
    return update;
  }

  /// For a pipeline stage (par-pipeline-split's `f_s<k>`): `f_s<k>_update(
  /// params..., grads..., state..., [t]) -> (params'..., state'..., [t'])`.
  /// The pipeline driver sums each gradient over the micro-batches; the
  /// update averages (1 / micro-batches) and applies the optimizer, so a
  /// stage's parameters and state never leave its ranks.
  LogicalResult buildUpdate(func::FuncOp fn) {
    ModuleOp module = getOperation();
    auto stageArgs =
        fn->getAttrOfType<DenseI64ArrayAttr>(ParDialect::kStageArgsAttrName);
    auto grad = dyn_cast_or_null<func::FuncOp>(
        getLinkedFunction(fn, ParDialect::kGradAttrName).getOperation());
    if (!stageArgs || !grad)
      return fn.emitOpError("is a pipeline stage without par.stage_args or "
                            "its gradient (run par-pipeline-split, then "
                            "par-autodiff)");
    LossScaleAttr lossScale = findPipelineLossScale();
    FlatSymbolRefAttr decisionMesh;
    if (lossScale) {
      FailureOr<FlatSymbolRefAttr> mesh = getDecisionMesh(module, fn);
      if (failed(mesh))
        return failure();
      decisionMesh = *mesh;
    }
    if (clipNorm > 0)
      return fn.emitOpError("clip-norm needs the norm over all stages' "
                            "gradients, which pipelined updates do not "
                            "compute yet");
    SmallVector<unsigned> params;
    for (unsigned i = 0; i < stageArgs.size(); ++i)
      if (fn.getArgAttr(i, ParDialect::kParamAttrName))
        params.push_back(i);
    unsigned P = params.size(), K = stateKinds();
    bool hasStep = optimizer == "adamw" || schedule == "cosine";
    // ZeRO-1/2: each stage's state split over the data-parallel axes, as
    // the unpipelined step's (the stage function's data and activation
    // arguments say which axes those are).
    FailureOr<OptimizerStateLayout> layout =
        planOptimizerState(fn, params, zeroOptions());
    if (failed(layout))
      return failure();
    // ZeRO-3: every function of the stage takes the split parameters and
    // gathers each where it uses it (F and B each gather; the update runs
    // on the shards and keeps them).
    if (zero == 3 && failed(gatherStageParameters(fn, stageArgs, params,
                                                  *layout)))
      return failure();
    std::string name = (fn.getName() + "_update").str();
    if (module.lookupSymbol(name))
      return fn.emitOpError()
             << "cannot create '" << name << "': the symbol exists";
    OpBuilder b(&getContext());
    b.setInsertionPointAfter(grad);
    Location loc = fn.getLoc();
    unsigned scaleArg = 0;
    func::FuncOp update =
        createStageUpdate(b, fn, stageArgs, params, name, lossScale, *layout,
                          scaleArg);
    fn->setAttr(ParDialect::kUpdateAttrName, FlatSymbolRefAttr::get(update));
    Block *body = update.addEntryBlock();
    b.setInsertionPointToStart(body);
    ValueRange args = body->getArguments();
    SmallVector<Value> grads(args.slice(P, P));
    // ZeRO-1/2: the gradient sums wanted in their state's layout (the dp
    // reduction becomes a reduce_scatter), the update on the local block.
    constrainGradientsToState(b, loc, grads, *layout);
    if (microBatches > 1)
      averageOverMicroBatches(b, loc, grads);
    Value t = hasStep ? args[scaleArg - 1] : Value();
    Value finite;
    if (lossScale) {
      // The decision spans every stage: all_finite reduces over every mesh
      // axis, the pipeline's included, and every rank runs its stage's
      // update at the end of the step.
      finite = buildUnscaleAndDecide(b, loc, args[scaleArg], grads,
                                     decisionMesh);
    }
    SmallVector<Value> results;
    SmallVector<Value> paramVals(args.take_front(P)),
        stateVals(args.slice(2 * P, K * P));
    emitUpdates(b, loc, paramVals, grads, stateVals, t, results);
    // ZeRO-1/2: the updated parameters back in their layout (all_gather).
    constrainParametersToLayout(
        b, loc, MutableArrayRef<Value>(results).take_front(P), *layout);
    if (lossScale) {
      SmallVector<Value> prev(paramVals);
      llvm::append_range(prev, stateVals);
      if (hasStep)
        prev.push_back(t);
      buildSkipAndNextScale(
          b, loc, finite, prev, MutableArrayRef<Value>(results).take_front(prev.size()),
          args.slice(scaleArg, 3), lossScale, results);
    }
    func::ReturnOp::create(b, loc, results);
    return success();
  }

  /// ZeRO-3 for pipeline stage `fn` (par-pipeline-split's `f_s<k>`, whose
  /// parameters are the arguments `params`): every function of the stage
  /// the executor may call with its parameters (the forward, the loss
  /// scalars and their gradients: B, and ZB-H1's BI and BW) takes them split
  /// like their state and gathers each at its uses (gatherParametersAtUses;
  /// par-pipeline-stash later carries each gather into the half that reads
  /// it). They all take the stage's arguments first, in one order
  /// (`par.stage_args`), which is checked.
  LogicalResult gatherStageParameters(func::FuncOp fn,
                                      DenseI64ArrayAttr stageArgs,
                                      ArrayRef<unsigned> params,
                                      const OptimizerStateLayout &layout) {
    ModuleOp module = getOperation();
    auto pipe =
        module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName);
    auto k = fn->getAttrOfType<IntegerAttr>(ParDialect::kStageAttrName);
    if (!pipe || !k || k.getInt() < 0 ||
        k.getInt() >= static_cast<int64_t>(pipe.getStages().size()))
      return fn.emitOpError("is a pipeline stage the module's #par.pipeline "
                            "does not list (run par-pipeline-split)");
    StageAttr stage = pipe.getStages()[k.getInt()];
    llvm::SetVector<func::FuncOp> fns;
    for (FlatSymbolRefAttr sym :
         {stage.getForward(), stage.getLoss(), stage.getInputLoss(),
          stage.getWeightLoss()}) {
      auto f = sym ? module.lookupSymbol<func::FuncOp>(sym) : func::FuncOp();
      if (!f)
        continue;
      fns.insert(f);
      if (auto g = dyn_cast_or_null<func::FuncOp>(
              getLinkedFunction(f, ParDialect::kGradAttrName).getOperation()))
        fns.insert(g);
    }
    for (func::FuncOp f : fns) {
      auto args =
          f->getAttrOfType<DenseI64ArrayAttr>(ParDialect::kStageArgsAttrName);
      if (args && args != stageArgs)
        return f.emitOpError()
               << "takes other arguments than its stage's @" << fn.getName()
               << " (par.stage_args differ): zero=3 cannot give it the split "
                  "parameters";
      for (unsigned p : params)
        if (p >= f.getNumArguments() ||
            f.getArgumentTypes()[p] != fn.getArgumentTypes()[p])
          return f.emitOpError()
                 << "has no argument #" << p << " of type "
                 << fn.getArgumentTypes()[p] << " (parameter #" << p
                 << " of its stage's @" << fn.getName()
                 << "): zero=3 cannot give it the split parameter";
      // The pipeline executor calls them; a call in the module would pass
      // whole parameters.
      if (failed(checkNoCaller(f, "a pipeline stage function")))
        return failure();
      (void)gatherParametersAtUses(f, params, layout);
    }
    return success();
  }

  /// par-optimizer's zero and zero-axes options, as ZeRO.h takes them.
  ZeROOptions zeroOptions() { return ZeROOptions{zero, *zeroAxes}; }

  /// Where the train step `f_step` built from `f` keeps what. Arguments:
  /// f's (every data argument with an m-fold dim 0 under micro-batches),
  /// the state grouped by kind, the step number t, the loss scale's
  /// good-step count and hysteresis tracker (the scale itself is one of f's
  /// arguments). Results: the loss, the new parameters, the new state,
  /// t + 1, then the next scale, good-step count and hysteresis tracker and
  /// the all-finite flag.
  struct StepSignature {
    /// f's parameter arguments.
    SmallVector<unsigned> params;
    unsigned numFnArgs = 0;
    unsigned statePerParam = 0;
    /// The step number t: AdamW's bias correction and the schedule need it.
    bool hasStep = false;
    int64_t tIdx = -1;
    /// par-loss-scale's policy (null without loss scaling), the mesh the
    /// all-finite decision spans, and the scale state's arguments.
    LossScaleAttr lossScale;
    FlatSymbolRefAttr decisionMesh;
    int64_t scaleIdx = -1, goodIdx = -1, hystIdx = -1;

    /// The state argument of kind `k` of parameter `j`.
    unsigned stateArg(unsigned k, unsigned j) const {
      return numFnArgs + k * params.size() + j;
    }
  };

  /// Loss scaling (par-loss-scale): f's scale argument is state too.
  LogicalResult findLossScale(func::FuncOp fn, StepSignature &sig) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto ls = fn.getArgAttrOfType<LossScaleAttr>(
              i, ParDialect::kLossScaleAttrName)) {
        sig.scaleIdx = i;
        sig.lossScale = ls;
      }
    if (!sig.lossScale)
      return success();
    FailureOr<FlatSymbolRefAttr> mesh = getDecisionMesh(getOperation(), fn);
    if (failed(mesh))
      return failure();
    sig.decisionMesh = *mesh;
    return success();
  }

  /// The step's type (StepSignature); sets the positions of t and of the
  /// scale state. Fails when micro-batches cannot be stacked.
  FailureOr<FunctionType> stepType(func::FuncOp fn, func::FuncOp grad,
                                   StepSignature &sig) {
    MLIRContext *ctx = &getContext();
    SmallVector<Type> argTypes(fn.getArgumentTypes());
    // With micro-batches, f is the program of one micro-batch and the step
    // takes m of them: every data argument's dim 0 grows m-fold.
    if (microBatches > 1)
      for (auto [i, type] : llvm::enumerate(argTypes)) {
        if (fn.getArgAttr(i, ParDialect::kParamAttrName) ||
            fn.getArgAttr(i, ParDialect::kLossScaleAttrName))
          continue;
        auto tt = dyn_cast<RankedTensorType>(type);
        if (!tt || tt.getRank() == 0 || tt.isDynamicDim(0))
          return fn.emitOpError()
                 << "cannot accumulate micro-batches: data argument #" << i
                 << " (" << type
                 << ") has no static batch dim 0 to stack them along";
        SmallVector<int64_t> shape(tt.getShape());
        shape[0] *= microBatches;
        type = RankedTensorType::get(shape, tt.getElementType());
      }
    for (unsigned k = 0; k < sig.statePerParam; ++k)
      for (unsigned p : sig.params)
        argTypes.push_back(fn.getArgumentTypes()[p]);
    Type lossType = grad.getResultTypes()[0];
    sig.hasStep = optimizer == "adamw" || schedule == "cosine";
    if (sig.hasStep) {
      sig.tIdx = argTypes.size();
      argTypes.push_back(lossType);
    }
    // The scale state after the scale (an argument of f): the good-step
    // count and the hysteresis tracker.
    auto scalarF32 = RankedTensorType::get({}, Float32Type::get(ctx));
    if (sig.lossScale) {
      sig.goodIdx = argTypes.size();
      argTypes.push_back(scalarF32);
      sig.hystIdx = argTypes.size();
      argTypes.push_back(scalarF32);
    }
    SmallVector<Type> resultTypes{lossType};
    for (unsigned p : sig.params)
      resultTypes.push_back(fn.getArgumentTypes()[p]);
    for (unsigned k = 0; k < sig.statePerParam; ++k)
      for (unsigned p : sig.params)
        resultTypes.push_back(fn.getArgumentTypes()[p]);
    if (sig.hasStep)
      resultTypes.push_back(lossType);
    // Then the next scale, good-step count and hysteresis tracker, and the
    // all-finite flag (1: the step was taken).
    if (sig.lossScale)
      resultTypes.append(4, scalarF32);
    return FunctionType::get(ctx, argTypes, resultTypes);
  }

  /// The step's argument and result attributes: f's shardings, initialisers
  /// and the frontend's names and data roles (parameters and data arguments
  /// keep theirs; state arguments get none); the state's initialisers and
  /// layout; with ZeRO every parameter (and its result) pinned to its stored
  /// layout, and the state results to theirs, so that the feedback needs
  /// no resharding.
  void annotateStep(func::FuncOp step, func::FuncOp fn,
                    const StepSignature &sig,
                    const OptimizerStateLayout &layout) {
    MLIRContext *ctx = &getContext();
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      for (StringRef a :
           {ParDialect::kShardingAttrName, ParDialect::kInitAttrName,
            ParDialect::kLossScaleAttrName, ParDialect::kNameAttrName,
            ParDialect::kAliasesAttrName, ParDialect::kSliceAttrName,
            ParDialect::kDataAttrName,
            ParDialect::kVocabAttrName})
        if (Attribute s = fn.getArgAttr(i, a))
          step.setArgAttr(i, a, s);
    // State starts at zero; the step number at one; the hysteresis tracker
    // at the policy's hysteresis.
    for (unsigned i = fn.getNumArguments(); i < step.getNumArguments(); ++i)
      step.setArgAttr(i, ParDialect::kInitAttrName,
                      (int64_t)i == sig.hystIdx
                          ? InitAttr::get(ctx, InitKind::Fill,
                                          (double)sig.lossScale.getHysteresis())
                          : InitAttr::get(ctx, (int64_t)i == sig.tIdx
                                                   ? InitKind::Ones
                                                   : InitKind::Zeros));
    unsigned P = sig.params.size();
    for (unsigned k = 0; k < sig.statePerParam; ++k)
      for (unsigned j = 0; j < P; ++j)
        if (ShardingAttr s = layout.state[j])
          step.setArgAttr(sig.stateArg(k, j), ParDialect::kShardingAttrName, s);
    if (zero == 0)
      return;
    // zero=3: parameters are kept (and fed back) split like their state.
    for (auto [j, p] : llvm::enumerate(sig.params)) {
      step.setArgAttr(p, ParDialect::kShardingAttrName, layout.stored(j));
      step.setResultAttr(1 + j, ParDialect::kShardingAttrName,
                         layout.stored(j));
      for (unsigned k = 0; k < sig.statePerParam; ++k)
        step.setResultAttr(1 + (1 + k) * P + j, ParDialect::kShardingAttrName,
                           layout.state[j]);
    }
  }

  /// The loss and the gradients in the step's body: one call of the
  /// gradient function, or with micro-batches one per micro-batch, their
  /// losses and gradients summed and scaled by 1/m.
  void emitGradients(OpBuilder &b, Location loc, func::FuncOp step,
                     func::FuncOp fn, func::FuncOp grad, unsigned numParams,
                     Value &loss, SmallVector<Value> &grads) {
    ValueRange fnArgs = step.getArguments().take_front(fn.getNumArguments());
    if (microBatches == 1) {
      auto call = func::CallOp::create(b, loc, grad, fnArgs);
      loss = call.getResult(0);
      for (unsigned j = 0; j < numParams; ++j)
        grads.push_back(call.getResult(1 + j));
      return;
    }
    SmallVector<SmallVector<Value>> slices = splitMicroBatches(b, fn, fnArgs);
    SmallVector<Value> sums;
    for (ArrayRef<Value> operands : slices) {
      auto call = func::CallOp::create(b, loc, grad, operands);
      if (sums.empty()) {
        sums.assign(call.getResults().begin(), call.getResults().end());
        continue;
      }
      for (auto [k, r] : llvm::enumerate(call.getResults()))
        sums[k] = elementwise(b, loc, sums[k], r,
                              [](OpBuilder &nb, Location l, ValueRange a) {
                                return arith::AddFOp::create(nb, l, a[0], a[1]);
                              });
    }
    averageOverMicroBatches(b, loc, sums);
    loss = sums[0];
    grads.assign(sums.begin() + 1, sums.end());
    step->setAttr(ParDialect::kMicroBatchesAttrName,
                  b.getI64IntegerAttr(microBatches));
  }

  /// Clipping by the global norm: every gradient times one scalar factor
  /// min(1, clip-norm / (sqrt(sum of squares) + 1e-6)), a rank-0 tensor of
  /// the loss's type `lossType`.
  void clipByGlobalNorm(OpBuilder &b, Location loc, Type lossType,
                        MutableArrayRef<Value> grads) {
    MLIRContext *ctx = b.getContext();
    auto scalarType = cast<RankedTensorType>(lossType);
    Type st = scalarType.getElementType();
    Value total;
    for (Value g : grads) {
      auto gt = cast<RankedTensorType>(g.getType());
      Value zeroValue =
          arith::ConstantOp::create(b, loc, st, b.getFloatAttr(st, 0));
      Value init = linalg::FillOp::create(
                       b, loc, zeroValue,
                       tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, st)
                           .getResult())
                       .getResult(0);
      SmallVector<utils::IteratorType> red(gt.getRank(),
                                           utils::IteratorType::reduction);
      Value sq =
          linalg::GenericOp::create(
              b, loc, TypeRange{scalarType}, ValueRange{g}, ValueRange{init},
              ArrayRef<AffineMap>{b.getMultiDimIdentityMap(gt.getRank()),
                                  AffineMap::get(gt.getRank(), 0, {}, ctx)},
              red,
              [&](OpBuilder &nb, Location l, ValueRange a) {
                Value m = arith::MulFOp::create(nb, l, a[0], a[0]);
                linalg::YieldOp::create(
                    nb, l, ValueRange{arith::AddFOp::create(nb, l, a[1], m)});
              })
              .getResult(0);
      total = total ? arith::AddFOp::create(b, loc, total, sq).getResult() : sq;
    }
    // factor = min(1, c / (sqrt(total) + 1e-6)), as a scalar tensor.
    Value factor =
        linalg::GenericOp::create(
            b, loc, TypeRange{scalarType}, ValueRange{total},
            ValueRange{
                tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, st)},
            ArrayRef<AffineMap>{AffineMap::get(0, 0, {}, ctx),
                                AffineMap::get(0, 0, {}, ctx)},
            ArrayRef<utils::IteratorType>{},
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value norm = arith::AddFOp::create(
                  nb, l, math::SqrtOp::create(nb, l, a[0]),
                  arith::ConstantOp::create(nb, l, st,
                                            nb.getFloatAttr(st, 1e-6)));
              Value f = arith::DivFOp::create(
                  nb, l,
                  arith::ConstantOp::create(nb, l, st,
                                            nb.getFloatAttr(st, clipNorm)),
                  norm);
              Value one = arith::ConstantOp::create(nb, l, st,
                                                    nb.getFloatAttr(st, 1.0));
              linalg::YieldOp::create(
                  nb, l, ValueRange{arith::MinimumFOp::create(nb, l, f, one)});
            })
            .getResult(0);
    for (Value &g : grads) {
      auto gt = cast<RankedTensorType>(g.getType());
      int64_t r = gt.getRank();
      g = linalg::GenericOp::create(
              b, loc, TypeRange{gt}, ValueRange{g, factor},
              ValueRange{tensor::EmptyOp::create(b, loc, gt.getShape(), st)},
              ArrayRef<AffineMap>{b.getMultiDimIdentityMap(r),
                                  AffineMap::get(r, 0, {}, ctx),
                                  b.getMultiDimIdentityMap(r)},
              SmallVector<utils::IteratorType>(r,
                                               utils::IteratorType::parallel),
              [&](OpBuilder &nb, Location l, ValueRange a) {
                linalg::YieldOp::create(
                    nb, l,
                    ValueRange{arith::MulFOp::create(nb, l, a[0], a[1])});
              })
              .getResult(0);
    }
  }

  /// The update and the step's return: every parameter's update
  /// (emitUpdates), with ZeRO-1/2 the new parameters back in their layout,
  /// under loss scaling the step-or-skip and the next scale state. `results`
  /// holds the loss.
  void emitUpdateAndReturn(OpBuilder &b, Location loc, func::FuncOp step,
                           const StepSignature &sig,
                           const OptimizerStateLayout &layout, Value finite,
                           ArrayRef<Value> grads, SmallVector<Value> &results) {
    ValueRange args = step.getArguments();
    unsigned P = sig.params.size();
    Value t = sig.hasStep ? args[sig.tIdx] : Value();
    SmallVector<Value> paramVals, stateVals;
    for (unsigned p : sig.params)
      paramVals.push_back(args[p]);
    for (unsigned k = 0; k < sig.statePerParam; ++k)
      for (unsigned j = 0; j < P; ++j)
        stateVals.push_back(args[sig.stateArg(k, j)]);
    emitUpdates(b, loc, paramVals, grads, stateVals, t, results);
    // ZeRO-1/2: the updated parameter back to the parameter's layout (an
    // all_gather over the data-parallel axes); ZeRO-3 keeps it split.
    constrainParametersToLayout(
        b, loc, MutableArrayRef<Value>(results).slice(1, P), layout);
    if (sig.lossScale) {
      // A skipped step keeps parameters, state and step number, bit for bit.
      SmallVector<Value> prev(paramVals);
      llvm::append_range(prev, stateVals);
      if (sig.hasStep)
        prev.push_back(t);
      SmallVector<Value> scaleState{args[sig.scaleIdx], args[sig.goodIdx],
                                    args[sig.hystIdx]};
      buildSkipAndNextScale(
          b, loc, finite, prev,
          MutableArrayRef<Value>(results).slice(1, prev.size()), scaleState,
          sig.lossScale, results);
    }
    func::ReturnOp::create(b, loc, results);
  }

  /// Which result feeds which argument at the next step (`par.feedback`),
  /// where the scale state's results are, and the links: f -> its step; the
  /// step -> the gradient it calls, f's mixed precision and logits function
  /// (for sampling from the trained step).
  void linkStep(func::FuncOp step, func::FuncOp fn, func::FuncOp grad,
                const StepSignature &sig) {
    Builder b(&getContext());
    unsigned P = sig.params.size();
    SmallVector<int64_t> feedback;
    for (auto [j, p] : llvm::enumerate(sig.params)) {
      feedback.push_back(1 + j);
      feedback.push_back(p);
    }
    int64_t next = 1 + P;
    for (unsigned k = 0; k < sig.statePerParam; ++k)
      for (unsigned j = 0; j < P; ++j) {
        feedback.push_back(next++);
        feedback.push_back(sig.stateArg(k, j));
      }
    if (sig.hasStep) {
      feedback.push_back(next++);
      feedback.push_back(sig.tIdx);
    }
    if (sig.lossScale) {
      for (int64_t a : {sig.scaleIdx, sig.goodIdx, sig.hystIdx}) {
        feedback.push_back(next++);
        feedback.push_back(a);
      }
      step->setAttr(ParDialect::kLossScaleResultsAttrName,
                    b.getDenseI64ArrayAttr({next - 3, next}));
    }
    step->setAttr(ParDialect::kFeedbackAttrName,
                  b.getDenseI64ArrayAttr(feedback));
    fn->setAttr(ParDialect::kStepAttrName, FlatSymbolRefAttr::get(step));
    step->setAttr(ParDialect::kGradAttrName, FlatSymbolRefAttr::get(grad));
    if (Attribute mp = fn->getAttr(ParDialect::kMixedPrecisionAttrName))
      step->setAttr(ParDialect::kMixedPrecisionAttrName, mp);
    if (Attribute logits = fn->getAttr(ParDialect::kLogitsAttrName))
      step->setAttr(ParDialect::kLogitsAttrName, logits);
  }

  /// `f_step(f's arguments, state..., [t], [scale state]) -> (loss,
  /// params'..., state'..., [t'], [scale state', finite])` for a function
  /// `f` with parameters and a gradient (par-autodiff's `f_grad`): the
  /// gradients, with ZeRO in their state's layout, unscaled and checked
  /// under loss scaling, clipped, and the update.
  LogicalResult buildStep(func::FuncOp fn) {
    auto grad = dyn_cast_or_null<func::FuncOp>(
        getLinkedFunction(fn, ParDialect::kGradAttrName).getOperation());
    if (!grad)
      return fn.emitOpError("has parameters but no gradient function recorded "
                            "(run par-autodiff first)");
    StepSignature sig;
    sig.numFnArgs = fn.getNumArguments();
    sig.statePerParam = stateKinds();
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (fn.getArgAttr(i, ParDialect::kParamAttrName))
        sig.params.push_back(i);
    if (grad.getNumResults() != sig.params.size() + 1)
      return grad.emitOpError("does not return the loss and one gradient per "
                              "parameter");
    FailureOr<OptimizerStateLayout> layout =
        planOptimizerState(fn, sig.params, zeroOptions());
    if (failed(layout) || failed(findLossScale(fn, sig)))
      return failure();
    FailureOr<FunctionType> type = stepType(fn, grad, sig);
    if (failed(type))
      return failure();
    std::string name = (fn.getName() + "_step").str();
    if (getOperation().lookupSymbol(name))
      return fn.emitOpError()
             << "cannot create '" << name << "': the symbol exists";
    OpBuilder b(&getContext());
    b.setInsertionPointAfter(grad);
    Location loc = fn.getLoc();
    auto step = func::FuncOp::create(b, loc, name, *type);
    annotateStep(step, fn, sig, *layout);
    // ZeRO-3: the gradient function takes the split parameters and gathers
    // each where it uses it (the step's call ties its arguments to the
    // step's).
    SmallVector<ParameterGathers> gathers;
    if (zero == 3) {
      if (failed(checkNoCaller(grad, "the train step's gradient function")))
        return failure();
      gathers = gatherParametersAtUses(grad, sig.params, *layout);
    }
    b.setInsertionPointToStart(step.addEntryBlock());

    Value loss;
    SmallVector<Value> grads;
    emitGradients(b, loc, step, fn, grad, sig.params.size(), loss, grads);
    SmallVector<Value> results{loss};
    // ZeRO: the unscale, the clipping and the update run on the local
    // block of each gradient.
    constrainGradientsToState(b, loc, grads, *layout);
    // Loss scaling: the gradients are of scale * loss. Unscale them (what
    // clipping and the update see), then decide, over every device, whether
    // all of them are finite.
    Value finite;
    if (sig.lossScale)
      finite = buildUnscaleAndDecide(b, loc, step.getArgument(sig.scaleIdx),
                                     grads, sig.decisionMesh);
    if (clipNorm > 0)
      clipByGlobalNorm(b, loc, grad.getResultTypes()[0], grads);
    emitUpdateAndReturn(b, loc, step, sig, *layout, finite, grads, results);
    linkStep(step, fn, grad, sig);
    if (report)
      printOptimizerStateReport(llvm::outs(), step, fn, sig.params, *layout,
                                optimizer, sig.statePerParam, zeroOptions(),
                                gathers);
    return success();
  }

  /// ZeRO-3 changes the layout of `f`'s parameters (`what`: the gradient
  /// function the train step calls, or a pipeline stage's function): no
  /// function may call it (it would get split parameters it does not
  /// expect).
  LogicalResult checkNoCaller(func::FuncOp f, StringRef what) {
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(f, getOperation());
    if (uses)
      for (const SymbolTable::SymbolUse &use : *uses)
        if (isa<CallOpInterface>(use.getUser()))
          return use.getUser()->emitOpError()
                 << "calls @" << f.getName() << ", " << what
                 << " whose parameters zero=3 shards over the data-parallel "
                    "axes";
    return success();
  }
};
} // namespace
