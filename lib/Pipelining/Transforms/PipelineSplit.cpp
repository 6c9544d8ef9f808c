//===- PipelineSplit.cpp - par-pipeline-split -----------------------------===//
//
// Cuts a forward + loss into pipeline stages. The function is one block of
// ops; a cut between two ops is legal when exactly one floating-point
// tensor produced before it is used after it: that tensor is the activation
// sent to the next stage, and its gradient is what comes back. Cheap values
// (constants, empties and fills of them) never count: each stage recreates
// the ones it uses. The cuts minimise the largest stage cost.
//
// Each stage becomes two functions: `_fwd`, which computes the stage's
// output, and a scalar function par-autodiff differentiates into the
// stage's backward (the last stage's is the loss; the others' is
// sum(y * dy), whose gradient is the vector-Jacobian product with the
// incoming dy). docs/RationalePipeline.md has the rationale.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Passes.h"
#include "par/Dialect/Par/Analysis/OpCost.h"
#include "par/Dialect/Par/Transforms/Passes.h"
#include "par/Dialect/Par/Transforms/ShardingPropagation.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

#define DEBUG_TYPE "par-pipeline-split"

namespace mlir::par {
#define GEN_PASS_DEF_PIPELINESPLIT
#include "par/Pipelining/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

struct PipelineSplitPass
    : public mlir::par::impl::PipelineSplitBase<PipelineSplitPass> {
  using PipelineSplitBase::PipelineSplitBase;

  // The function being split.
  func::FuncOp fn;
  // Cheap ops, recreated per stage.
  DenseSet<Operation *> remat;
  // The other top-level ops in order, and each one's position.
  SmallVector<Operation *> heavy;
  DenseMap<Operation *, int64_t> position;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages < 1) {
      module.emitError() << "par-pipeline-split needs stages >= 1 (got "
                         << static_cast<int64_t>(stages) << ")";
      return signalPassFailure();
    }
    if (failed(findFunction()))
      return signalPassFailure();
    // The activations' shardings: what propagation gives them in the whole
    // function (op results get `par.sharding`; removed again below). As
    // par-spmd propagates: cheap shared inits first get one copy per use
    // (par-split-constants), or one shared init carries a sharding between
    // unrelated users (GPT-2's residual stream took the heads' split, and
    // the stages all-gathered it around every projection).
    OpPassManager prepare(ModuleOp::getOperationName());
    prepare.addPass(createSplitConstants());
    if (failed(runPipeline(prepare, module)))
      return signalPassFailure();
    propagateShardings(module);
    if (failed(split()))
      return signalPassFailure();
    // Leave no op-level shardings behind: par-spmd propagates again over
    // the new functions, from the boundary shardings set here.
    module.walk([](Operation *op) {
      if (!isa<func::FuncOp>(op))
        op->removeAttr(ParDialect::kShardingAttrName);
    });
  }

  LogicalResult findFunction() {
    ModuleOp module = getOperation();
    if (!funcName.empty()) {
      fn = module.lookupSymbol<func::FuncOp>(funcName);
      if (!fn)
        return module.emitError() << "par-pipeline-split: no function named '"
                                  << funcName << "'";
      return success();
    }
    for (auto f : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (f.getArgAttr(i, ParDialect::kParamAttrName)) {
          if (fn && fn != f)
            return module.emitError()
                   << "par-pipeline-split: several functions have "
                      "par.param arguments (@"
                   << fn.getName() << ", @" << f.getName()
                   << "); choose one with func=NAME";
          fn = f;
        }
    if (!fn)
      return module.emitError("par-pipeline-split: no function has "
                              "arguments marked par.param");
    return success();
  }

  bool isRemat(Operation *op) {
    if (remat.contains(op))
      return true;
    if (matchPattern(op, m_Constant()) || isa<tensor::EmptyOp>(op))
      return true;
    // Fills and splats of cheap values, and any side-effect-free op computed
    // from cheap values only (no argument reaches it: HF GPT2's causal mask
    // built from iotas and compares), are recomputed in each stage that
    // uses them rather than sent.
    if (!isa<linalg::FillOp, tensor::SplatOp>(op) &&
        !(isMemoryEffectFree(op) && op->getNumResults() > 0))
      return false;
    for (Value v : usedValues(op)) {
      Operation *d = v.getDefiningOp();
      if (!d || !remat.contains(d))
        return false;
    }
    return true;
  }

  /// The values `op` uses that are defined outside it: its operands and
  /// what its regions capture (a generic body's constants).
  static SmallVector<Value> usedValues(Operation *op) {
    SmallVector<Value> used(op->getOperands());
    op->walk([&](Operation *inner) {
      if (inner == op)
        return;
      for (Value v : inner->getOperands())
        if (!op->isAncestor(v.getParentRegion()->getParentOp()))
          used.push_back(v);
    });
    return used;
  }

  /// The top-level op of the function containing `user`.
  Operation *topLevel(Operation *user) {
    return fn.getBody().front().findAncestorOpInBlock(*user);
  }

  LogicalResult split() {
    Block &body = fn.getBody().front();
    if (!llvm::hasSingleElement(fn.getBody()))
      return fn.emitOpError("has several blocks; par-pipeline-split cuts "
                            "single-block functions");
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() != 1 ||
        !isa<RankedTensorType>(ret.getOperand(0).getType()) ||
        cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() != 0)
      return fn.emitOpError("must return one scalar tensor, the loss, to be "
                            "split into pipeline stages");
    for (Operation &op : body.without_terminator()) {
      if (isRemat(&op)) {
        remat.insert(&op);
        continue;
      }
      position[&op] = heavy.size();
      heavy.push_back(&op);
    }
    int64_t n = heavy.size();
    int64_t S = stages;
    if (S > n)
      return fn.emitOpError() << "cannot be split into " << S
                              << " stages: it has only " << n
                              << " ops to place";

    // Stage pins.
    SmallVector<int64_t> pin(n, -1);
    for (int64_t i = 0; i < n; ++i)
      if (auto a = heavy[i]->getAttrOfType<IntegerAttr>(
              ParDialect::kStageAttrName)) {
        if (a.getInt() < 0 || a.getInt() >= S)
          return heavy[i]->emitOpError()
                 << "has par.stage = " << a.getInt()
                 << ", out of range for " << S << " stages (0.."
                 << S - 1 << ")";
        pin[i] = a.getInt();
      }

    // The values crossing each cut (after heavy op i): defined at <= i,
    // used at > i. lastUse = n for the returned value.
    SmallVector<int64_t> crossing(n, 0);
    SmallVector<Value> crossValue(n);
    SmallVector<bool> crossOk(n, true);
    for (int64_t i = 0; i < n; ++i)
      for (Value v : heavy[i]->getResults()) {
        int64_t last = i;
        for (Operation *user : v.getUsers()) {
          Operation *top = topLevel(user);
          last = std::max(last, top == ret.getOperation() ? n
                                                          : position.lookup(top));
        }
        for (int64_t c = i; c < last && c < n; ++c) {
          ++crossing[c];
          crossValue[c] = v;
          auto tt = dyn_cast<RankedTensorType>(v.getType());
          if (!tt || !tt.hasStaticShape() ||
              !isa<FloatType>(tt.getElementType()))
            crossOk[c] = false;
        }
      }
    // Legal cut points: 0 <= c < n-1 with one float tensor crossing.
    SmallVector<int64_t> cuts;
    for (int64_t c = 0; c + 1 < n; ++c)
      if (crossing[c] == 1 && crossOk[c])
        cuts.push_back(c);
    if ((int64_t)cuts.size() < S - 1)
      return fn.emitOpError()
             << "cannot be split into " << S << " stages: only "
             << cuts.size()
             << " point(s) between its ops have a single activation crossing";

    SmallVector<double> prefix(n + 1, 0);
    for (int64_t i = 0; i < n; ++i)
      prefix[i + 1] = prefix[i] + getOpCost(heavy[i]);
    // Ends of stages: candidate indices into `ends` (cuts, then n-1).
    SmallVector<int64_t> ends(cuts);
    ends.push_back(n - 1);
    int64_t E = ends.size();
    // Ops [a, b] can form stage k if no op in it is pinned elsewhere.
    auto segmentOk = [&](int64_t a, int64_t b, int64_t k) {
      for (int64_t i = a; i <= b; ++i)
        if (pin[i] >= 0 && pin[i] != k)
          return false;
      return true;
    };
    const double inf = std::numeric_limits<double>::infinity();
    // best[k][e]: stages 0..k covering ops 0..ends[e], minimal max cost.
    SmallVector<SmallVector<double>> best(S, SmallVector<double>(E, inf));
    SmallVector<SmallVector<int64_t>> from(S, SmallVector<int64_t>(E, -1));
    for (int64_t e = 0; e < E; ++e)
      if (segmentOk(0, ends[e], 0))
        best[0][e] = prefix[ends[e] + 1];
    for (int64_t k = 1; k < S; ++k)
      for (int64_t e = 0; e < E; ++e)
        for (int64_t q = 0; q < e; ++q) {
          if (best[k - 1][q] == inf ||
              !segmentOk(ends[q] + 1, ends[e], k))
            continue;
          double c = std::max(best[k - 1][q],
                              prefix[ends[e] + 1] - prefix[ends[q] + 1]);
          if (c < best[k][e]) {
            best[k][e] = c;
            from[k][e] = q;
          }
        }
    if (best[S - 1][E - 1] == inf)
      return fn.emitOpError()
             << "cannot be split into " << S
             << " stages that respect the par.stage annotations";
    // Stage k covers ops [begin[k], end[k]].
    SmallVector<int64_t> stageEnd(S), stageBegin(S);
    for (int64_t k = S - 1, e = E - 1; k >= 0; --k) {
      stageEnd[k] = ends[e];
      e = from[k][e];
    }
    for (int64_t k = 0; k < S; ++k)
      stageBegin[k] = k == 0 ? 0 : stageEnd[k - 1] + 1;

    if (report)
      reportStages(prefix, stageBegin, stageEnd);
    return emitStages(crossValue, stageBegin, stageEnd, ret);
  }

  /// report=true: each stage's ops, cost and parameter bytes.
  void reportStages(ArrayRef<double> prefix, ArrayRef<int64_t> stageBegin,
                    ArrayRef<int64_t> stageEnd) {
    int64_t n = prefix.size() - 1, S = stageEnd.size();
    double total = prefix[n], worst = 0;
    llvm::outs() << "par-pipeline-split: @" << fn.getName() << " into " << S
                 << " stages (cost = FLOPs + " << llvm::format("%g", kFlopsPerByte)
                 << " x bytes)\n";
    for (int64_t k = 0; k < S; ++k) {
      double c = prefix[stageEnd[k] + 1] - prefix[stageBegin[k]];
      worst = std::max(worst, c);
      llvm::outs() << "  stage " << k << ": ops " << stageBegin[k] << ".."
                   << stageEnd[k] << ", cost "
                   << llvm::format("%.4g", c) << ", parameters "
                   << paramBytes(stageBegin[k], stageEnd[k])
                   << " bytes\n";
    }
    llvm::outs() << "  imbalance (largest / mean cost): "
                 << llvm::format("%.3f", worst / (total / S)) << "\n";
  }

  /// The stage functions of each stage, and the module's stage table.
  LogicalResult emitStages(ArrayRef<Value> crossValue,
                           ArrayRef<int64_t> stageBegin,
                           ArrayRef<int64_t> stageEnd, func::ReturnOp ret) {
    int64_t S = stageEnd.size();
    ModuleOp module = getOperation();
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(fn);
    SmallVector<StageAttr> table;
    for (int64_t k = 0; k < S; ++k) {
      Value in = k > 0 ? crossValue[stageEnd[k - 1]] : Value();
      Value out = k + 1 < S ? crossValue[stageEnd[k]] : ret.getOperand(0);
      SmallVector<Part> parts{Part::Forward, Part::Whole};
      if (splitBackward) {
        if (k > 0)
          parts.push_back(Part::Input);
        parts.push_back(Part::Weight);
      }
      // The stage table entry names each function made here.
      DenseMap<Part, FlatSymbolRefAttr> made;
      for (Part part : parts) {
        FailureOr<func::FuncOp> stage = buildStage(
            b, k, stageBegin[k], stageEnd[k], in, out, k + 1 == S, part);
        if (failed(stage))
          return failure();
        made[part] = FlatSymbolRefAttr::get(*stage);
      }
      table.push_back(StageAttr::get(
          b.getContext(), made.lookup(Part::Forward), made.lookup(Part::Whole),
          made.lookup(Part::Input), made.lookup(Part::Weight),
          /*backward=*/{}, /*input_grad=*/{}, /*weight_grad=*/{},
          /*update=*/{}, /*stash_forward=*/{}, /*stash_backward=*/{},
          /*stash_input_grad=*/{}, /*stash_weight_grad=*/{}));
    }
    module->setAttr(ParDialect::kPipelineAttrName,
                    PipelineAttr::get(b.getContext(),
                                      FlatSymbolRefAttr::get(fn), table,
                                      /*step=*/{}, /*logits=*/{},
                                      /*schedule=*/{}, /*axis=*/{},
                                      /*micro_batches=*/0, /*programs=*/{}));
    return success();
  }

  /// Bytes of the parameters ops [a, b] use.
  int64_t paramBytes(int64_t a, int64_t b) {
    int64_t bytes = 0;
    for (unsigned i : usedArgs(a, b))
      if (fn.getArgAttr(i, ParDialect::kParamAttrName))
        bytes += getTensorBytes(fn.getArgumentTypes()[i]);
    return bytes;
  }

  /// The function's arguments ops [a, b] use (also from nested regions),
  /// in argument order.
  SmallVector<unsigned> usedArgs(int64_t a, int64_t b) {
    llvm::SmallBitVector used(fn.getNumArguments());
    for (int64_t i = a; i <= b; ++i)
      heavy[i]->walk([&](Operation *op) {
        for (Value v : op->getOperands())
          if (auto arg = dyn_cast<BlockArgument>(v))
            if (arg.getOwner() == &fn.getBody().front())
              used.set(arg.getArgNumber());
      });
    SmallVector<unsigned> out;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (used.test(i))
        out.push_back(i);
    return out;
  }

  /// The sharding propagation gave `v` (null if none).
  Attribute shardingOf(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return fn.getArgAttr(arg.getArgNumber(), ParDialect::kShardingAttrName);
    Operation *d = v.getDefiningOp();
    auto list = d ? d->getAttrOfType<ArrayAttr>(ParDialect::kShardingAttrName)
                  : ArrayAttr();
    unsigned r = cast<OpResult>(v).getResultNumber();
    if (!list || r >= list.size() || isa<UnitAttr>(list[r]))
      return {};
    return list[r];
  }

  /// Which function of a stage buildStage makes.
  enum class Part {
    Forward, // `_fwd`: the stage's output
    Whole,   // the scalar to differentiate: parameters and input
    Input,   // `_bi`: the same scalar, only the input differentiated
    Weight,  // `_bw`: the same scalar, only the parameters differentiated
  };

  /// Clones ops [a, b] into a new function: `@f_s<k>_fwd` (returns `out`)
  /// or a scalar `@f_s<k>[_bi|_bw]` to differentiate.
  FailureOr<func::FuncOp> buildStage(OpBuilder &b, int64_t k, int64_t a,
                                     int64_t e, Value in, Value out, bool last,
                                     Part part) {
    bool fwd = part == Part::Forward;
    bool paramsDiff = part == Part::Whole || part == Part::Weight;
    bool inputDiff = part == Part::Whole || part == Part::Input;
    MLIRContext *ctx = b.getContext();
    Location loc = fn.getLoc();
    SmallVector<unsigned> args = usedArgs(a, e);
    SmallVector<Type> types;
    for (unsigned i : args)
      types.push_back(fn.getArgumentTypes()[i]);
    if (in)
      types.push_back(in.getType());
    bool hasDy = !fwd && !last;
    if (hasDy)
      types.push_back(out.getType());
    Type scalar = fn.getResultTypes()[0];
    Type resultType = fwd ? out.getType() : scalar;
    StringRef suffix = part == Part::Forward ? "_fwd"
                       : part == Part::Input ? "_bi"
                       : part == Part::Weight ? "_bw"
                                              : "";
    std::string name = (fn.getName() + "_s" + Twine(k) + suffix).str();
    if (getOperation().lookupSymbol(name)) {
      fn.emitOpError() << "cannot create '" << name << "': the symbol exists";
      return failure();
    }
    auto stage = func::FuncOp::create(b, loc, name,
                                      b.getFunctionType(types, resultType));
    b.setInsertionPointAfter(stage);
    for (auto [j, i] : llvm::enumerate(args))
      for (NamedAttribute attr : fn.getArgAttrDict(i) ? fn.getArgAttrDict(i).getValue() : ArrayRef<NamedAttribute>()) {
        if (!paramsDiff && attr.getName() == ParDialect::kParamAttrName)
          continue;
        stage.setArgAttr(j, attr.getName(), attr.getValue());
      }
    unsigned inIndex = args.size();
    if (in) {
      if (Attribute s = shardingOf(in))
        stage.setArgAttr(inIndex, ParDialect::kShardingAttrName, s);
      if (inputDiff)
        stage.setArgAttr(inIndex, ParDialect::kParamAttrName,
                         UnitAttr::get(ctx));
    }
    if (hasDy)
      if (Attribute s = shardingOf(out))
        stage.setArgAttr(inIndex + (in ? 1 : 0),
                         ParDialect::kShardingAttrName, s);
    if (fwd && !last)
      if (Attribute s = shardingOf(out))
        stage.setResultAttr(0, ParDialect::kShardingAttrName, s);
    stage->setAttr(ParDialect::kStageAttrName, b.getI64IntegerAttr(k));
    if (part == Part::Input || part == Part::Weight)
      stage->setAttr(ParDialect::kStagePartAttrName,
                     b.getStringAttr(part == Part::Input ? "input" : "weight"));
    SmallVector<int64_t> argIdx(args.begin(), args.end());
    stage->setAttr(ParDialect::kStageArgsAttrName,
                   b.getDenseI64ArrayAttr(argIdx));

    Block *entry = stage.addEntryBlock();
    OpBuilder nb = OpBuilder::atBlockBegin(entry);
    IRMapping map;
    for (auto [j, i] : llvm::enumerate(args))
      map.map(fn.getArgument(i), entry->getArgument(j));
    if (in)
      map.map(in, entry->getArgument(inIndex));
    // Recreates a cheap value (and the cheap values it is made of).
    std::function<LogicalResult(Value)> need = [&](Value v) -> LogicalResult {
      if (map.contains(v) || isa<BlockArgument>(v))
        return success();
      Operation *d = v.getDefiningOp();
      if (!d || d->getBlock() != &fn.getBody().front())
        return success(); // Defined inside the op being cloned.
      if (!remat.contains(d))
        return fn.emitOpError()
               << "stage " << k << " needs a value computed in another "
               << "stage (internal error in the cut search)";
      for (Value o : usedValues(d))
        if (failed(need(o)))
          return failure();
      nb.clone(*d, map);
      return success();
    };
    for (int64_t i = a; i <= e; ++i) {
      LogicalResult ok = success();
      heavy[i]->walk([&](Operation *op) {
        for (Value v : op->getOperands())
          if (failed(need(v)))
            ok = failure();
      });
      if (failed(ok))
        return failure();
      nb.clone(*heavy[i], map);
    }
    if (failed(need(out)))
      return failure();
    Value y = map.lookupOrDefault(out);
    if (fwd || last) {
      func::ReturnOp::create(nb, loc, y);
      return stage;
    }
    // sum(y * dy): its gradient is the vector-Jacobian product with dy.
    auto yt = cast<RankedTensorType>(y.getType());
    auto st = cast<RankedTensorType>(scalar);
    Type elt = st.getElementType();
    int64_t r = yt.getRank();
    Value dy = entry->getArgument(inIndex + (in ? 1 : 0));
    Value zero = arith::ConstantOp::create(nb, loc, elt, nb.getFloatAttr(elt, 0));
    Value init =
        linalg::FillOp::create(nb, loc, zero,
                               tensor::EmptyOp::create(nb, loc,
                                                       ArrayRef<int64_t>{}, elt)
                                   .getResult())
            .getResult(0);
    Value dot =
        linalg::GenericOp::create(
            nb, loc, TypeRange{st}, ValueRange{y, dy}, ValueRange{init},
            ArrayRef<AffineMap>{nb.getMultiDimIdentityMap(r),
                                nb.getMultiDimIdentityMap(r),
                                AffineMap::get(r, 0, {}, ctx)},
            SmallVector<utils::IteratorType>(r, utils::IteratorType::reduction),
            [&](OpBuilder &bb, Location l, ValueRange v) {
              // A 16-bit activation (mixed precision) is widened: the dot
              // product sums in the loss's type.
              auto widen = [&](Value x) -> Value {
                return x.getType() == elt
                           ? x
                           : arith::ExtFOp::create(bb, l, elt, x).getResult();
              };
              Value m = arith::MulFOp::create(bb, l, widen(v[0]), widen(v[1]));
              linalg::YieldOp::create(
                  bb, l, ValueRange{arith::AddFOp::create(bb, l, v[2], m)});
            })
            .getResult(0);
    func::ReturnOp::create(nb, loc, dot);
    return stage;
  }
};
} // namespace
