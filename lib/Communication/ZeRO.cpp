//===- ZeRO.cpp - ZeRO-1/2/3: state, gradients, parameters over dp -------===//
//
// See ZeRO.h. The layout is decided per parameter from its annotation, the
// mesh and the data-parallel axes; the step (and with zero=3 the gradient
// function) only gets annotations, and propagation and partitioning make
// the collectives.
//
//===----------------------------------------------------------------------===//

#include "par/Communication/ZeRO.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::par;

LogicalResult mlir::par::verifyZeROOptions(Operation *op,
                                           const ZeROOptions &options) {
  if (options.stage < 0 || options.stage > 3)
    return op->emitError()
           << "zero must be 0, 1, 2 or 3 (got " << options.stage
           << "): the ZeRO stages shard over the data-parallel axes the "
              "optimizer state (1), the gradients too (2) and the "
              "parameters too (3)";
  if (options.stage == 0 && !options.axes.empty())
    return op->emitError() << "zero-axes is given but zero=0 (set "
                              "zero=1, 2 or 3 to shard the optimizer state)";
  return success();
}

/// The step's mesh: the data arguments' or parameters' (the first
/// annotation), else the module's only one; null without either.
static FlatSymbolRefAttr findStepMesh(func::FuncOp fn) {
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto s =
            fn.getArgAttrOfType<ShardingAttr>(i, ParDialect::kShardingAttrName))
      return s.getMesh();
  auto meshes = fn->getParentOfType<ModuleOp>().getOps<MeshOp>();
  if (!meshes.empty() && std::next(meshes.begin()) == meshes.end())
    return FlatSymbolRefAttr::get((*meshes.begin()).getSymNameAttr());
  return FlatSymbolRefAttr();
}

/// The data-parallel axes of the step of `fn` on `mesh`: `options.axes`
/// (each checked against the mesh, in the given order), or those the data
/// arguments split their batch dim (0) over, in mesh order.
static FailureOr<SmallVector<StringRef>>
findDataParallelAxes(func::FuncOp fn, MeshOp mesh, FlatSymbolRefAttr meshRef,
                     const ZeROOptions &options) {
  llvm::SetVector<StringRef> axes;
  if (!options.axes.empty()) {
    for (const std::string &a : options.axes) {
      if (mesh.getAxisSize(a) < 0) {
        auto diag = fn.emitOpError()
                    << "zero-axes: unknown mesh axis '" << a << "' (mesh @"
                    << mesh.getSymName() << " has";
        for (Attribute n : mesh.getAxisNames())
          diag << " '" << cast<StringAttr>(n).getValue() << "'";
        return diag << ")";
      }
      if (!axes.insert(
              cast<StringAttr>(mesh.getAxisNames()[mesh.getAxisIndex(a)])
                  .getValue()))
        return fn.emitOpError()
               << "zero-axes: mesh axis '" << a << "' is listed twice";
    }
    return SmallVector<StringRef>(axes.begin(), axes.end());
  }
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
  for (Attribute n : mesh.getAxisNames())
    if (batchAxes.contains(cast<StringAttr>(n).getValue()))
      axes.insert(cast<StringAttr>(n).getValue());
  return SmallVector<StringRef>(axes.begin(), axes.end());
}

/// Parameter `p`'s state, sharded like `ps` and split further over the
/// data-parallel axes `ps` does not use, on the first dimension whose local
/// size their device count divides; `ps` itself (with a remark) when no
/// dimension does.
static ShardingAttr splitStateOver(func::FuncOp fn, unsigned p, ShardingAttr ps,
                                   MeshOp mesh,
                                   ArrayRef<StringRef> dataParallel,
                                   int64_t stage) {
  auto type = cast<RankedTensorType>(fn.getArgumentTypes()[p]);
  llvm::DenseSet<StringRef> used;
  SmallVector<SmallVector<StringRef>> dims;
  for (int64_t d = 0; d < ps.getRank(); ++d) {
    dims.push_back(ps.getDimAxes(d));
    used.insert(dims.back().begin(), dims.back().end());
  }
  SmallVector<StringRef> mine;
  int64_t n = 1;
  for (StringRef a : dataParallel)
    if (!used.contains(a)) {
      mine.push_back(a);
      n *= mesh.getAxisSize(a);
    }
  if (mine.empty() || n == 1)
    return ps;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (type.isDynamicDim(d))
      continue;
    int64_t split = 1;
    for (StringRef a : dims[d])
      split *= mesh.getAxisSize(a);
    if (type.getDimSize(d) % (split * n) != 0)
      continue;
    llvm::append_range(dims[d], mine);
    return ShardingAttr::get(fn.getContext(), ps.getMesh(), dims);
  }
  mlir::emitRemark(fn.getArgument(p).getLoc())
      << "zero=" << stage << ": parameter #" << p << " (" << type
      << ") has no dimension that " << n
      << " devices divide: its optimizer state and update "
         "stay unsharded over the data-parallel axes"
      << (stage == 3 ? " (and so does the parameter)" : "");
  return ps;
}

FailureOr<OptimizerStateLayout>
mlir::par::planOptimizerState(func::FuncOp fn, ArrayRef<unsigned> params,
                              const ZeROOptions &options) {
  OptimizerStateLayout layout;
  FlatSymbolRefAttr meshRef = findStepMesh(fn);
  if (meshRef)
    layout.mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(fn, meshRef);
  for (unsigned p : params) {
    auto s =
        fn.getArgAttrOfType<ShardingAttr>(p, ParDialect::kShardingAttrName);
    layout.param.push_back(s ? s.withoutPartial() : ShardingAttr());
  }
  layout.state = layout.param;
  layout.stage = options.stage;
  if (options.stage == 0)
    return layout;

  if (!layout.mesh) {
    if (!options.axes.empty())
      return fn.emitOpError("zero-axes names mesh axes, but the module has "
                            "no single par.mesh the step is on");
    mlir::emitRemark(fn.getLoc())
        << "zero=" << options.stage
        << " has no effect: no mesh (the optimizer state stays unsharded)";
    return layout;
  }
  FailureOr<SmallVector<StringRef>> axes =
      findDataParallelAxes(fn, layout.mesh, meshRef, options);
  if (failed(axes))
    return failure();
  layout.axes = std::move(*axes);
  if (layout.axes.empty()) {
    mlir::emitRemark(fn.getLoc())
        << "zero=" << options.stage
        << " has no effect: no data argument splits its dim 0 over a mesh "
           "axis and zero-axes is empty (the optimizer state stays sharded "
           "like its parameter)";
    return layout;
  }
  for (auto [j, p] : llvm::enumerate(params)) {
    // Pinned: an unannotated parameter would otherwise take the state's
    // split from the update and be gathered in the forward.
    ShardingAttr ps = layout.param[j];
    if (!ps)
      ps = ShardingAttr::getReplicated(
          fn.getContext(), meshRef,
          cast<RankedTensorType>(fn.getArgumentTypes()[p]).getRank());
    else if (ps.getMesh() != meshRef)
      return fn.emitOpError()
             << "zero=" << options.stage << ": parameter #" << p
             << " is on mesh " << ps.getMesh()
             << ", the data-parallel axes on " << meshRef;
    layout.param[j] = ps;
    layout.state[j] =
        splitStateOver(fn, p, ps, layout.mesh, layout.axes, options.stage);
  }
  return layout;
}

void mlir::par::constrainGradientsToState(OpBuilder &b, Location loc,
                                          MutableArrayRef<Value> grads,
                                          const OptimizerStateLayout &layout) {
  for (auto [j, g] : llvm::enumerate(grads))
    if (layout.isZeROSharded(j))
      g = ShardingConstraintOp::create(b, loc, g.getType(), g, layout.state[j]);
}

void mlir::par::constrainParametersToLayout(
    OpBuilder &b, Location loc, MutableArrayRef<Value> params,
    const OptimizerStateLayout &layout) {
  for (auto [j, v] : llvm::enumerate(params))
    if (layout.isZeROSharded(j) && !layout.isParameterSharded(j))
      v = ShardingConstraintOp::create(b, loc, v.getType(), v, layout.param[j]);
}

/// The ops of `body` the value `loss` depends on (through operands and
/// values their regions read from above): the forward of a gradient
/// function.
static DenseSet<Operation *> opsFeeding(Block &body, Value loss) {
  DenseSet<Operation *> seen;
  SmallVector<Value> todo{loss};
  while (!todo.empty()) {
    Value v = todo.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def)
      continue;
    def = body.findAncestorOpInBlock(*def);
    if (!def || !seen.insert(def).second)
      continue;
    llvm::append_range(todo, def->getOperands());
    SetVector<Value> captured;
    getUsedValuesDefinedAbove(def->getRegions(), captured);
    llvm::append_range(todo, captured);
  }
  return seen;
}

/// Whether `op` only casts its one input to a narrower float type (mixed
/// precision's compute-type copy of a master weight): an elementwise
/// generic whose body is one truncf.
static bool isNarrowingCast(Operation *op) {
  auto g = dyn_cast<linalg::GenericOp>(op);
  if (!g || g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getNumParallelLoops() != g.getNumLoops() ||
      !llvm::all_of(g.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return false;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 2)
    return false;
  auto trunc = dyn_cast<arith::TruncFOp>(body.front());
  return trunc && trunc.getIn() == body.getArgument(0) &&
         body.getTerminator()->getOperand(0) == trunc.getResult();
}

SmallVector<ParameterGathers>
mlir::par::gatherParametersAtUses(func::FuncOp grad, ArrayRef<unsigned> params,
                                  const OptimizerStateLayout &layout) {
  SmallVector<ParameterGathers> made(params.size());
  // Adjoint generics carry their forward body to recompute it; where the
  // derivative does not read the recomputed value (a bias, an embedding
  // table), it is dead. Erase it first, so that only real uses get a
  // gather.
  {
    RewritePatternSet patterns(grad.getContext());
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    (void)applyPatternsGreedily(grad, std::move(patterns),
                                GreedyRewriteConfig().enableFolding(false));
  }
  Block &body = grad.getBody().front();
  Value loss = body.getTerminator()->getOperand(0);
  DenseSet<Operation *> forward = opsFeeding(body, loss);
  MLIRContext *ctx = grad.getContext();
  for (auto [j, p] : llvm::enumerate(params)) {
    if (!layout.isParameterSharded(j))
      continue;
    BlockArgument arg = body.getArgument(p);
    grad.setArgAttr(p, ParDialect::kShardingAttrName, layout.state[j]);
    made[j].elementType = getElementTypeOrSelf(arg.getType());
    // What is gathered: the argument, or for its uses by a cast to the
    // compute type the cast's result (the cast runs on the shard).
    SmallVector<Value> sources;
    bool direct = false;
    for (Operation *user : arg.getUsers()) {
      if (isNarrowingCast(user) && user->getParentOp() == grad.getOperation())
        sources.push_back(user->getResult(0));
      else
        direct = true;
    }
    if (direct)
      sources.insert(sources.begin(), arg);
    for (Value v : sources) {
      // The uses of each phase, by the op of the body that holds them, in
      // program order.
      SmallVector<OpOperand *> uses[2];
      for (OpOperand &use : v.getUses()) {
        Operation *top = body.findAncestorOpInBlock(*use.getOwner());
        if (v == arg && top && isNarrowingCast(top) &&
            llvm::is_contained(sources, top->getResult(0)))
          continue;
        uses[forward.contains(top) ? 0 : 1].push_back(&use);
      }
      for (unsigned phase = 0; phase < 2; ++phase) {
        if (uses[phase].empty())
          continue;
        Operation *first = nullptr;
        for (OpOperand *use : uses[phase]) {
          Operation *top = body.findAncestorOpInBlock(*use->getOwner());
          if (!first || top->isBeforeInBlock(first))
            first = top;
        }
        OpBuilder b(first);
        auto gather = ShardingConstraintOp::create(
            b, v.getLoc(), v.getType(), v, layout.param[j]);
        gather->setAttr(ParDialect::kZeROGatherAttrName,
                        StringAttr::get(ctx, phase ? "backward" : "forward"));
        for (OpOperand *use : uses[phase])
          use->set(gather);
        (phase ? made[j].backward : made[j].forward) += 1;
        made[j].elementType = getElementTypeOrSelf(v.getType());
      }
    }
  }
  return made;
}

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

void mlir::par::printOptimizerStateReport(
    llvm::raw_ostream &os, func::FuncOp step, func::FuncOp fn,
    ArrayRef<unsigned> params, const OptimizerStateLayout &layout,
    StringRef optimizer, unsigned stateKinds, const ZeROOptions &options,
    ArrayRef<ParameterGathers> gathers) {
  unsigned K = stateKinds;
  int64_t zero = options.stage;
  os << "par-optimizer: @" << step.getName() << " " << optimizer
     << " zero=" << zero;
  if (!layout.axes.empty()) {
    os << " over [";
    llvm::interleaveComma(layout.axes, os,
                          [&](StringRef a) { os << "\"" << a << "\"";  });
    os << "]";
  }
  os << "\n";
  int64_t stateBytes = 0, stateBytes0 = 0, paramBytes = 0, gradBytes = 0;
  double reduceBytes = 0, gatherBytes = 0, forwardBytes = 0,
         backwardBytes = 0;
  for (auto [j, p] : llvm::enumerate(params)) {
    auto type = cast<RankedTensorType>(fn.getArgumentTypes()[p]);
    int64_t eb = type.getElementTypeBitWidth() / 8;
    int64_t local0 = localElements(type, layout.param[j], layout.mesh) * eb;
    int64_t local = localElements(type, layout.state[j], layout.mesh) * eb;
    stateBytes0 += K * local0;
    stateBytes += K * local;
    // Between steps a rank keeps its parameters in their stored layout; the
    // reduced gradient (zero>=1: reduce-scattered) lives in its state's.
    paramBytes += localElements(type, layout.stored(j), layout.mesh) * eb;
    gradBytes += local;
    if (zero == 0)
      continue;
    os << "  #" << p << " " << type << " ";
    printDims(os, layout.param[j]);
    os << ": state ";
    printDims(os, layout.state[j]);
    os << ", " << K * local << " bytes per rank (zero=0: " << K * local0
       << ")";
    if (layout.isParameterSharded(j) && j < gathers.size())
      os << ", parameter too; gathered " << gathers[j].forward << "+"
         << gathers[j].backward << " (forward+backward) in "
         << gathers[j].elementType;
    os << "\n";
    if (local0 != local) {
      double n = static_cast<double>(local0) / local;
      reduceBytes += (n - 1) / n * local0;
      gatherBytes += (n - 1) / n * local0;
      if (layout.isParameterSharded(j) && j < gathers.size()) {
        // The gathers move the gathered type's bytes (16-bit under mixed
        // precision).
        double g = (n - 1) / n * local0 *
                   gathers[j].elementType.getIntOrFloatBitWidth() / 8 / eb;
        forwardBytes += gathers[j].forward * g;
        backwardBytes += gathers[j].backward * g;
      }
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
  if (layout.param.empty() ||
      llvm::any_of(layout.param, [](ShardingAttr s) { return !s; }))
    os << " (unannotated parameters counted as replicated)";
  os << "\n";
  if (zero == 0)
    return;
  if (zero != 3 && gatherBytes > 0)
    os << llvm::formatv(
        "  zero-sharded gradients per step and rank (ring): reduce_scatter "
        "{0} + all_gather {1} = {2} bytes, the all_reduce's 2(n-1)/n*S\n",
        static_cast<int64_t>(reduceBytes), static_cast<int64_t>(gatherBytes),
        static_cast<int64_t>(reduceBytes + gatherBytes));
  if (zero == 3 && gatherBytes > 0)
    os << llvm::formatv(
        "  zero=3 per gradient call and rank (ring): reduce_scatter {0} + "
        "all_gather forward {1} + backward {2} = {3} bytes, {4:F2}x "
        "zero=1's {5}\n",
        static_cast<int64_t>(reduceBytes), static_cast<int64_t>(forwardBytes),
        static_cast<int64_t>(backwardBytes),
        static_cast<int64_t>(reduceBytes + forwardBytes + backwardBytes),
        (reduceBytes + forwardBytes + backwardBytes) /
            (reduceBytes + gatherBytes),
        static_cast<int64_t>(reduceBytes + gatherBytes));
  // The ZeRO paper's model state: parameters, gradients and optimizer state
  // a rank keeps.
  int64_t total = paramBytes + gradBytes + stateBytes;
  os << llvm::formatv("  model state per rank: parameters {0} + gradients "
                      "{1} + optimizer state {2} = {3} bytes\n",
                      paramBytes, gradBytes, stateBytes, total);
}
