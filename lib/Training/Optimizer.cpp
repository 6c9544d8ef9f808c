//===- Optimizer.cpp - par-optimizer --------------------------------------===//
//
// A train step is a plain function: call the gradient, update each
// parameter with one elementwise generic (parameter, gradient and state in,
// new parameter and state out). Being elementwise over the parameter's
// shape, the update is sharded exactly like the parameter, and so is the
// state it carries. With zero=1 (ZeRO stage 1) annotations shard the state,
// the gradient it meets and the update further over the data-parallel axes;
// propagation and partitioning turn them into the collectives.
//
//===----------------------------------------------------------------------===//

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
    if (zero != 0 && zero != 1) {
      getOperation().emitError()
          << "zero must be 0 or 1 (got " << static_cast<int64_t>(zero)
          << "): only ZeRO stage 1, the optimizer state sharded over the "
             "data-parallel axes, is implemented";
      return signalPassFailure();
    }
    if (zero == 0 && !zeroAxes.empty()) {
      getOperation().emitError() << "zero-axes is given but zero=0 (set "
                                    "zero=1 to shard the optimizer state)";
      return signalPassFailure();
    }
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
            Value one = cst(nb, l, 1.0);
            yields.push_back(arith::SubFOp::create(
                nb, l, one,
                math::PowFOp::create(nb, l, cst(nb, l, beta1), tv)));
            yields.push_back(arith::SubFOp::create(
                nb, l, one,
                math::PowFOp::create(nb, l, cst(nb, l, beta2), tv)));
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

  /// The layout of each parameter and of its optimizer state (ZeRO-1:
  /// the state also over the data-parallel axes). `param[j]` is null when
  /// parameter j keeps whatever propagation gives it (zero=0, unannotated).
  struct StatePlan {
    MeshOp mesh;                     // null without a mesh
    SmallVector<StringRef> axes;     // zero=1: the data-parallel axes
    SmallVector<ShardingAttr> param; // per parameter
    SmallVector<ShardingAttr> state; // per parameter
  };

  /// Local elements of `type` under `s` on `mesh` (all of them when either
  /// is null).
  static int64_t localElements(RankedTensorType type, ShardingAttr s,
                               MeshOp mesh) {
    int64_t n = type.getNumElements();
    if (!s || !mesh)
      return n;
    for (int64_t d = 0; d < s.getRank(); ++d)
      for (StringRef a : s.getDimAxes(d))
        n /= std::max<int64_t>(1, mesh.getAxisSize(a));
    return n;
  }

  /// Decides the state's layout for the step of `fn`: with zero=0 each
  /// state tensor takes its parameter's annotation; with zero=1 the
  /// data-parallel axes the parameter is not split over are appended to
  /// the first dimension whose local size their device count divides.
  FailureOr<StatePlan> planState(func::FuncOp fn, ArrayRef<unsigned> params) {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    StatePlan plan;
    // The mesh: the data arguments' or parameters' (the first annotation),
    // else the module's only one.
    FlatSymbolRefAttr meshRef;
    for (unsigned i = 0; i < fn.getNumArguments() && !meshRef; ++i)
      if (auto s = fn.getArgAttrOfType<ShardingAttr>(
              i, ParDialect::kShardingAttrName))
        meshRef = s.getMesh();
    if (!meshRef) {
      auto meshes = module.getOps<MeshOp>();
      if (!meshes.empty() && std::next(meshes.begin()) == meshes.end())
        meshRef = FlatSymbolRefAttr::get((*meshes.begin()).getSymNameAttr());
    }
    if (meshRef)
      plan.mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(fn, meshRef);
    for (unsigned p : params) {
      auto s =
          fn.getArgAttrOfType<ShardingAttr>(p, ParDialect::kShardingAttrName);
      plan.param.push_back(s ? s.withoutPartial() : ShardingAttr());
    }
    plan.state = plan.param;
    if (zero == 0)
      return plan;

    if (!plan.mesh) {
      if (!zeroAxes.empty())
        return fn.emitOpError("zero-axes names mesh axes, but the module has "
                              "no single par.mesh the step is on");
      mlir::emitRemark(fn.getLoc(),
                       "zero=1 has no effect: no mesh (the optimizer state "
                       "stays unsharded)");
      return plan;
    }
    // The data-parallel axes: given, or those the data arguments split
    // their batch dim (0) over, in mesh order.
    llvm::SetVector<StringRef> axes;
    if (!zeroAxes.empty()) {
      for (const std::string &a : zeroAxes) {
        if (plan.mesh.getAxisSize(a) < 0) {
          auto diag = fn.emitOpError()
                      << "zero-axes: unknown mesh axis '" << a << "' (mesh @"
                      << plan.mesh.getSymName() << " has";
          for (Attribute n : plan.mesh.getAxisNames())
            diag << " '" << cast<StringAttr>(n).getValue() << "'";
          return diag << ")";
        }
        if (!axes.insert(
                cast<StringAttr>(
                    plan.mesh.getAxisNames()[plan.mesh.getAxisIndex(a)])
                    .getValue()))
          return fn.emitOpError()
                 << "zero-axes: mesh axis '" << a << "' is listed twice";
      }
    } else {
      llvm::DenseSet<StringRef> batchAxes;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        if (fn.getArgAttr(i, ParDialect::kParamAttrName) ||
            fn.getArgAttr(i, ParDialect::kLossScaleAttrName))
          continue;
        auto s =
            fn.getArgAttrOfType<ShardingAttr>(i, ParDialect::kShardingAttrName);
        if (s && s.getRank() > 0 && s.getMesh() == meshRef)
          for (StringRef a : s.getDimAxes(0))
            batchAxes.insert(a);
      }
      for (Attribute n : plan.mesh.getAxisNames())
        if (batchAxes.contains(cast<StringAttr>(n).getValue()))
          axes.insert(cast<StringAttr>(n).getValue());
    }
    plan.axes.assign(axes.begin(), axes.end());
    if (plan.axes.empty()) {
      mlir::emitRemark(fn.getLoc(),
                       "zero=1 has no effect: no data argument splits its dim "
                       "0 over a mesh axis and zero-axes is empty (the "
                       "optimizer state stays sharded like its parameter)");
      return plan;
    }
    for (auto [j, p] : llvm::enumerate(params)) {
      auto type = cast<RankedTensorType>(fn.getArgumentTypes()[p]);
      // Pinned: an unannotated parameter would otherwise take the state's
      // split from the update and be gathered in the forward.
      ShardingAttr ps = plan.param[j];
      if (!ps)
        ps = ShardingAttr::getReplicated(ctx, meshRef, type.getRank());
      else if (ps.getMesh() != meshRef)
        return fn.emitOpError()
               << "zero=1: parameter #" << p << " is on mesh " << ps.getMesh()
               << ", the data-parallel axes on " << meshRef;
      plan.param[j] = ps;
      plan.state[j] = ps;
      llvm::DenseSet<StringRef> used;
      SmallVector<SmallVector<StringRef>> dims;
      for (int64_t d = 0; d < ps.getRank(); ++d) {
        dims.push_back(ps.getDimAxes(d));
        used.insert(dims.back().begin(), dims.back().end());
      }
      SmallVector<StringRef> mine;
      int64_t n = 1;
      for (StringRef a : plan.axes)
        if (!used.contains(a)) {
          mine.push_back(a);
          n *= plan.mesh.getAxisSize(a);
        }
      if (mine.empty() || n == 1)
        continue;
      bool placed = false;
      for (int64_t d = 0; d < type.getRank() && !placed; ++d) {
        if (type.isDynamicDim(d))
          continue;
        int64_t split = 1;
        for (StringRef a : dims[d])
          split *= plan.mesh.getAxisSize(a);
        if (type.getDimSize(d) % (split * n) != 0)
          continue;
        llvm::append_range(dims[d], mine);
        plan.state[j] = ShardingAttr::get(ctx, meshRef, dims);
        placed = true;
      }
      if (!placed)
        mlir::emitRemark(fn.getArgument(p).getLoc())
            << "zero=1: parameter #" << p << " (" << type
            << ") has no dimension that " << n
            << " devices divide: its optimizer state and update "
               "stay unsharded over the data-parallel axes";
    }
    return plan;
  }

  /// `[{}, {"tp"}]`: a sharding's per-dimension axes, without the mesh.
  static void printDims(llvm::raw_ostream &os, ShardingAttr s) {
    if (!s) {
      os << "(open)";
      return;
    }
    os << "[";
    for (int64_t d = 0; d < s.getRank(); ++d) {
      os << (d ? ", {" : "{");
      llvm::interleaveComma(s.getDimAxes(d), os,
                            [&](StringRef a) { os << "\"" << a << "\""; });
      os << "}";
    }
    os << "]";
  }

  /// `report=true`: the state's layout and bytes per rank, and the ring
  /// bytes per step of the gradient reduction and the parameter gather
  /// (docs/Formulas.md) over the data-parallel axes.
  void printStateReport(func::FuncOp step, func::FuncOp fn,
                        ArrayRef<unsigned> params, const StatePlan &plan) {
    unsigned K = stateKinds();
    llvm::raw_ostream &os = llvm::outs();
    os << "par-optimizer: @" << step.getName() << " " << optimizer
       << " zero=" << static_cast<int64_t>(zero);
    if (!plan.axes.empty()) {
      os << " over [";
      llvm::interleaveComma(plan.axes, os,
                            [&](StringRef a) { os << "\"" << a << "\""; });
      os << "]";
    }
    os << "\n";
    int64_t stateBytes = 0, stateBytes0 = 0;
    double reduceBytes = 0, gatherBytes = 0;
    for (auto [j, p] : llvm::enumerate(params)) {
      auto type = cast<RankedTensorType>(fn.getArgumentTypes()[p]);
      int64_t eb = type.getElementTypeBitWidth() / 8;
      int64_t local0 = localElements(type, plan.param[j], plan.mesh) * eb;
      int64_t local = localElements(type, plan.state[j], plan.mesh) * eb;
      stateBytes0 += K * local0;
      stateBytes += K * local;
      if (zero == 0)
        continue;
      os << "  #" << p << " " << type << " ";
      printDims(os, plan.param[j]);
      os << ": state ";
      printDims(os, plan.state[j]);
      os << ", " << K * local << " bytes per rank (zero=0: " << K * local0
         << ")\n";
      if (local0 != local) {
        double n = static_cast<double>(local0) / local;
        reduceBytes += (n - 1) / n * local0;
        gatherBytes += (n - 1) / n * local0;
      }
    }
    os << "  optimizer state per rank: " << stateBytes << " bytes";
    if (zero != 0) {
      os << " (zero=0: " << stateBytes0;
      if (stateBytes > 0 && stateBytes != stateBytes0)
        os << llvm::formatv(", {0:F2}x less",
                            static_cast<double>(stateBytes0) / stateBytes);
      os << ")";
    }
    if (plan.param.empty() ||
        llvm::any_of(plan.param, [](ShardingAttr s) { return !s; }))
      os << " (unannotated parameters counted as replicated)";
    os << "\n";
    if (zero != 0 && gatherBytes > 0)
      os << llvm::formatv(
          "  zero-sharded gradients per step and rank (ring): reduce_scatter "
          "{0} + all_gather {1} = {2} bytes, the all_reduce's 2(n-1)/n*S\n",
          static_cast<int64_t>(reduceBytes), static_cast<int64_t>(gatherBytes),
          static_cast<int64_t>(reduceBytes + gatherBytes));
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
    // Loss scaling: the policy is the split function's (only the last
    // stage reads the scale, but every stage's gradients are scaled).
    LossScaleAttr lossScale;
    if (auto pipe =
            module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName))
      if (auto split = module.lookupSymbol<func::FuncOp>(pipe.getFunc()))
        for (unsigned i = 0; i < split.getNumArguments(); ++i)
          if (auto ls = split.getArgAttrOfType<LossScaleAttr>(
                  i, ParDialect::kLossScaleAttrName))
            lossScale = ls;
    FlatSymbolRefAttr decisionMesh;
    if (lossScale) {
      FailureOr<FlatSymbolRefAttr> mesh = getDecisionMesh(module, fn);
      if (failed(mesh))
        return failure();
      decisionMesh = *mesh;
    }
    if (zero != 0)
      return fn.emitOpError("is a pipeline stage: zero=1 (ZeRO-1 optimizer "
                            "state sharding) is not supported with pipeline "
                            "stages (stages > 0) yet; use zero=0");
    if (clipNorm > 0)
      return fn.emitOpError("clip-norm needs the norm over all stages' "
                            "gradients, which pipelined updates do not "
                            "compute yet");
    SmallVector<unsigned> params;
    for (unsigned i = 0; i < stageArgs.size(); ++i)
      if (fn.getArgAttr(i, ParDialect::kParamAttrName))
        params.push_back(i);
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
    auto scalarF32 = RankedTensorType::get({}, Float32Type::get(&getContext()));
    unsigned scaleArg = types.size();
    if (lossScale) {
      types.append(3, scalarF32);
      resultTypes.append(4, scalarF32);
    }
    std::string name = (fn.getName() + "_update").str();
    if (module.lookupSymbol(name))
      return fn.emitOpError() << "cannot create '" << name
                              << "': the symbol exists";
    OpBuilder b(&getContext());
    b.setInsertionPointAfter(grad);
    Location loc = fn.getLoc();
    auto update = func::FuncOp::create(b, loc, name,
                                       b.getFunctionType(types, resultTypes));
    SmallVector<int64_t> origIdx;
    for (auto [j, p] : llvm::enumerate(params)) {
      origIdx.push_back(stageArgs[p]);
      Attribute sharding = fn.getArgAttr(p, ParDialect::kShardingAttrName);
      for (unsigned rep = 0; rep < 2 + K; ++rep) {
        unsigned a = rep * P + j;
        if (sharding)
          update.setArgAttr(a, ParDialect::kShardingAttrName, sharding);
        if (rep >= 2)
          update.setArgAttr(a, ParDialect::kInitAttrName,
                            InitAttr::get(b.getContext(), InitKind::Zeros));
      }
      // The parameter (argument j) keeps its initialiser and names; its
      // gradient and state take none.
      for (StringRef a : {ParDialect::kInitAttrName, ParDialect::kNameAttrName,
                          ParDialect::kAliasesAttrName})
        if (Attribute attr = fn.getArgAttr(p, a))
          update.setArgAttr(j, a, attr);
      for (unsigned rep = 0; rep < 1 + K; ++rep)
        if (sharding)
          update.setResultAttr(rep * P + j, ParDialect::kShardingAttrName,
                               sharding);
    }
    if (hasStep)
      update.setArgAttr(scaleArg - 1, ParDialect::kInitAttrName,
                        InitAttr::get(b.getContext(), InitKind::Ones));
    if (lossScale) {
      MLIRContext *ctx = b.getContext();
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
    fn->setAttr(ParDialect::kUpdateAttrName, FlatSymbolRefAttr::get(update));
    Block *body = update.addEntryBlock();
    b.setInsertionPointToStart(body);
    ValueRange args = body->getArguments();
    SmallVector<Value> grads(args.slice(P, P));
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

  LogicalResult buildStep(func::FuncOp fn) {
    ModuleOp module = getOperation();
    auto grad = dyn_cast_or_null<func::FuncOp>(
        getLinkedFunction(fn, ParDialect::kGradAttrName).getOperation());
    if (!grad)
      return fn.emitOpError("has parameters but no gradient function recorded "
                            "(run par-autodiff first)");
    SmallVector<unsigned> params;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (fn.getArgAttr(i, ParDialect::kParamAttrName))
        params.push_back(i);
    if (grad.getNumResults() != params.size() + 1)
      return grad.emitOpError("does not return the loss and one gradient per "
                              "parameter");
    FailureOr<StatePlan> plan = planState(fn, params);
    if (failed(plan))
      return failure();
    MLIRContext *ctx = &getContext();
    Location loc = fn.getLoc();
    OpBuilder b(ctx);
    b.setInsertionPointAfter(grad);

    // Loss scaling (par-loss-scale): f's scale argument is state too.
    int64_t scaleIdx = -1;
    LossScaleAttr lossScale;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto ls = fn.getArgAttrOfType<LossScaleAttr>(
              i, ParDialect::kLossScaleAttrName)) {
        scaleIdx = i;
        lossScale = ls;
      }
    FlatSymbolRefAttr decisionMesh;
    if (lossScale) {
      FailureOr<FlatSymbolRefAttr> mesh = getDecisionMesh(module, fn);
      if (failed(mesh))
        return failure();
      decisionMesh = *mesh;
    }

    // Signature: f's arguments, then the state.
    unsigned statePerParam = stateKinds();
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
    for (unsigned k = 0; k < statePerParam; ++k)
      for (unsigned p : params)
        argTypes.push_back(fn.getArgumentTypes()[p]);
    Type lossType = grad.getResultTypes()[0];
    bool adamw = optimizer == "adamw";
    bool cosine = schedule == "cosine";
    // The step number t: AdamW's bias correction and the schedule need it.
    bool hasStep = adamw || cosine;
    int64_t tIdx = hasStep ? (int64_t)argTypes.size() : -1;
    if (hasStep)
      argTypes.push_back(lossType);
    // The scale state after the scale (an argument of f): the good-step
    // count and the hysteresis tracker.
    auto scalarF32 = RankedTensorType::get({}, b.getF32Type());
    int64_t goodIdx = -1, hystIdx = -1;
    if (lossScale) {
      goodIdx = argTypes.size();
      argTypes.push_back(scalarF32);
      hystIdx = argTypes.size();
      argTypes.push_back(scalarF32);
    }
    SmallVector<Type> resultTypes{lossType};
    for (unsigned p : params)
      resultTypes.push_back(fn.getArgumentTypes()[p]);
    for (unsigned k = 0; k < statePerParam; ++k)
      for (unsigned p : params)
        resultTypes.push_back(fn.getArgumentTypes()[p]);
    if (hasStep)
      resultTypes.push_back(lossType);
    // Then the next scale, good-step count and hysteresis tracker, and the
    // all-finite flag (1: the step was taken).
    if (lossScale)
      resultTypes.append(4, scalarF32);

    std::string name = (fn.getName() + "_step").str();
    if (module.lookupSymbol(name))
      return fn.emitOpError() << "cannot create '" << name
                              << "': the symbol exists";
    auto step = func::FuncOp::create(b, loc, name,
                                     b.getFunctionType(argTypes, resultTypes));
    // Keep the user's shardings, initialisers and the frontend's names and
    // data roles (parameters and data arguments keep theirs; state
    // arguments get none); state arguments share their parameter's
    // sharding.
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      for (StringRef a :
           {ParDialect::kShardingAttrName, ParDialect::kInitAttrName,
            ParDialect::kLossScaleAttrName, ParDialect::kNameAttrName,
            ParDialect::kAliasesAttrName, ParDialect::kDataAttrName,
            ParDialect::kVocabAttrName})
        if (Attribute s = fn.getArgAttr(i, a))
          step.setArgAttr(i, a, s);
    // State starts at zero; the step number at one; the hysteresis tracker
    // at the policy's hysteresis.
    for (unsigned i = fn.getNumArguments(); i < argTypes.size(); ++i)
      step.setArgAttr(i, ParDialect::kInitAttrName,
                      (int64_t)i == hystIdx
                          ? InitAttr::get(b.getContext(), InitKind::Fill,
                                          (double)lossScale.getHysteresis())
                          : InitAttr::get(b.getContext(),
                                          (int64_t)i == tIdx ? InitKind::Ones
                                                             : InitKind::Zeros));
    for (unsigned k = 0; k < statePerParam; ++k)
      for (auto [j, p] : llvm::enumerate(params))
        if (ShardingAttr s = plan->state[j])
          step.setArgAttr(fn.getNumArguments() + k * params.size() + j,
                          ParDialect::kShardingAttrName, s);
    // ZeRO-1 pins every parameter (and its result) to its layout, and the
    // state results to theirs, so that the feedback needs no resharding.
    if (zero != 0)
      for (auto [j, p] : llvm::enumerate(params)) {
        step.setArgAttr(p, ParDialect::kShardingAttrName, plan->param[j]);
        step.setResultAttr(1 + j, ParDialect::kShardingAttrName,
                           plan->param[j]);
        for (unsigned k = 0; k < statePerParam; ++k)
          step.setResultAttr(1 + (1 + k) * params.size() + j,
                             ParDialect::kShardingAttrName, plan->state[j]);
      }
    Block *body = step.addEntryBlock();
    b.setInsertionPointToStart(body);
    ValueRange args = body->getArguments();
    SmallVector<Value> newState;
    Value t = hasStep ? args[tIdx] : Value();
    SmallVector<Value> grads;
    Value loss;
    if (microBatches == 1) {
      auto call = func::CallOp::create(
          b, loc, grad, args.take_front(fn.getNumArguments()));
      loss = call.getResult(0);
      for (unsigned j = 0; j < params.size(); ++j)
        grads.push_back(call.getResult(1 + j));
    } else {
      SmallVector<SmallVector<Value>> slices =
          splitMicroBatches(b, fn, args.take_front(fn.getNumArguments()));
      // Sum the micro-batches' losses and gradients, then scale by 1/m.
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
    SmallVector<Value> results{loss};

    // ZeRO-1: each gradient is wanted like its state, from here on (the
    // unscale, the clipping and the update run on the local block). The
    // gradient arrives reduced over the data-parallel axes, so this is a
    // local slice; reducing straight into the slice (a reduce_scatter) is
    // par-sink-reductions' rewrite.
    auto isZeroSharded = [&](unsigned j) {
      return zero != 0 && plan->state[j] != plan->param[j];
    };
    for (auto [j, g] : llvm::enumerate(grads))
      if (isZeroSharded(j))
        g = ShardingConstraintOp::create(b, loc, g.getType(), g,
                                         plan->state[j]);

    // Loss scaling: the gradients are of scale * loss. Unscale them (what
    // clipping and the update see), then decide, over every device, whether
    // all of them are finite.
    Value finite;
    if (lossScale) {
      finite = buildUnscaleAndDecide(b, loc, args[scaleIdx], grads,
                                     decisionMesh);
    }

    // Clipping by the global norm: one scalar factor for all gradients.
    if (clipNorm > 0) {
      auto scalarType = cast<RankedTensorType>(lossType);
      Type st = scalarType.getElementType();
      Value total;
      for (Value g : grads) {
        auto gt = cast<RankedTensorType>(g.getType());
        Value zero = arith::ConstantOp::create(b, loc, st, b.getFloatAttr(st, 0));
        Value init = linalg::FillOp::create(
                         b, loc, zero,
                         tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, st)
                             .getResult())
                         .getResult(0);
        SmallVector<utils::IteratorType> red(gt.getRank(),
                                             utils::IteratorType::reduction);
        Value sq = linalg::GenericOp::create(
                       b, loc, TypeRange{scalarType}, ValueRange{g},
                       ValueRange{init},
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
      Value factor = linalg::GenericOp::create(
                         b, loc, TypeRange{scalarType}, ValueRange{total},
                         ValueRange{tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, st)},
                         ArrayRef<AffineMap>{AffineMap::get(0, 0, {}, ctx),
                                             AffineMap::get(0, 0, {}, ctx)},
                         ArrayRef<utils::IteratorType>{},
                         [&](OpBuilder &nb, Location l, ValueRange a) {
                           Value norm = arith::AddFOp::create(
                               nb, l, math::SqrtOp::create(nb, l, a[0]),
                               arith::ConstantOp::create(nb, l, st, nb.getFloatAttr(st, 1e-6)));
                           Value f = arith::DivFOp::create(
                               nb, l,
                               arith::ConstantOp::create(nb, l, st, nb.getFloatAttr(st, clipNorm)),
                               norm);
                           Value one = arith::ConstantOp::create(nb, l, st, nb.getFloatAttr(st, 1.0));
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
                SmallVector<utils::IteratorType>(r, utils::IteratorType::parallel),
                [&](OpBuilder &nb, Location l, ValueRange a) {
                  linalg::YieldOp::create(
                      nb, l, ValueRange{arith::MulFOp::create(nb, l, a[0], a[1])});
                })
                .getResult(0);
      }
    }

    SmallVector<Value> paramVals, stateVals;
    for (unsigned p : params)
      paramVals.push_back(args[p]);
    for (unsigned k = 0; k < statePerParam; ++k)
      for (unsigned j = 0; j < params.size(); ++j)
        stateVals.push_back(args[fn.getNumArguments() + k * params.size() + j]);
    emitUpdates(b, loc, paramVals, grads, stateVals, t, results);
    // ZeRO-1: the updated parameter back to the parameter's layout (an
    // all_gather over the data-parallel axes).
    for (unsigned j = 0; j < params.size(); ++j)
      if (isZeroSharded(j))
        results[1 + j] = ShardingConstraintOp::create(
            b, loc, results[1 + j].getType(), results[1 + j], plan->param[j]);
    if (lossScale) {
      // A skipped step keeps parameters, state and step number, bit for bit.
      SmallVector<Value> prev(paramVals);
      llvm::append_range(prev, stateVals);
      if (hasStep)
        prev.push_back(t);
      SmallVector<Value> scaleState{args[scaleIdx], args[goodIdx],
                                    args[hystIdx]};
      buildSkipAndNextScale(
          b, loc, finite, prev,
          MutableArrayRef<Value>(results).slice(1, prev.size()), scaleState,
          lossScale, results);
    }
    func::ReturnOp::create(b, loc, results);

    // Which result feeds which argument at the next step.
    SmallVector<int64_t> feedback;
    for (auto [j, p] : llvm::enumerate(params)) {
      feedback.push_back(1 + j);
      feedback.push_back(p);
    }
    int64_t next = 1 + params.size();
    for (unsigned k = 0; k < statePerParam; ++k)
      for (unsigned j = 0; j < params.size(); ++j) {
        feedback.push_back(next++);
        feedback.push_back(fn.getNumArguments() + k * params.size() + j);
      }
    if (hasStep) {
      feedback.push_back(next++);
      feedback.push_back(tIdx);
    }
    if (lossScale) {
      for (int64_t a : {scaleIdx, goodIdx, hystIdx}) {
        feedback.push_back(next++);
        feedback.push_back(a);
      }
      step->setAttr(ParDialect::kLossScaleResultsAttrName,
                    b.getDenseI64ArrayAttr({next - 3, next}));
    }
    step->setAttr(ParDialect::kFeedbackAttrName,
                  b.getDenseI64ArrayAttr(feedback));
    // The links: f -> its step; the step -> the gradient it calls and f's
    // logits function (for sampling from the trained step).
    fn->setAttr(ParDialect::kStepAttrName, FlatSymbolRefAttr::get(step));
    step->setAttr(ParDialect::kGradAttrName, FlatSymbolRefAttr::get(grad));
    if (Attribute mp = fn->getAttr(ParDialect::kMixedPrecisionAttrName))
      step->setAttr(ParDialect::kMixedPrecisionAttrName, mp);
    if (Attribute logits = fn->getAttr(ParDialect::kLogitsAttrName))
      step->setAttr(ParDialect::kLogitsAttrName, logits);
    if (report)
      printStateReport(step, fn, params, *plan);
    return success();
  }
};
} // namespace
