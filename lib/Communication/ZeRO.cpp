//===- ZeRO.cpp - ZeRO-1: optimizer state over data-parallel axes ---------===//
//
// See ZeRO.h. The layout is decided per parameter from its annotation, the
// mesh and the data-parallel axes; the step only gets annotations, and
// propagation and partitioning make the collectives.
//
//===----------------------------------------------------------------------===//

#include "par/Communication/ZeRO.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::par;

LogicalResult mlir::par::verifyZeROOptions(Operation *op,
                                           const ZeROOptions &options) {
  if (options.stage != 0 && options.stage != 1)
    return op->emitError()
           << "zero must be 0 or 1 (got " << options.stage
           << "): only ZeRO stage 1, the optimizer state sharded over the "
              "data-parallel axes, is implemented";
  if (options.stage == 0 && !options.axes.empty())
    return op->emitError() << "zero-axes is given but zero=0 (set "
                              "zero=1 to shard the optimizer state)";
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
                                   ArrayRef<StringRef> dataParallel) {
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
      << "zero=1: parameter #" << p << " (" << type
      << ") has no dimension that " << n
      << " devices divide: its optimizer state and update "
         "stay unsharded over the data-parallel axes";
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
  if (options.stage == 0)
    return layout;

  if (!layout.mesh) {
    if (!options.axes.empty())
      return fn.emitOpError("zero-axes names mesh axes, but the module has "
                            "no single par.mesh the step is on");
    mlir::emitRemark(fn.getLoc(),
                     "zero=1 has no effect: no mesh (the optimizer state "
                     "stays unsharded)");
    return layout;
  }
  FailureOr<SmallVector<StringRef>> axes =
      findDataParallelAxes(fn, layout.mesh, meshRef, options);
  if (failed(axes))
    return failure();
  layout.axes = std::move(*axes);
  if (layout.axes.empty()) {
    mlir::emitRemark(fn.getLoc(),
                     "zero=1 has no effect: no data argument splits its dim "
                     "0 over a mesh axis and zero-axes is empty (the "
                     "optimizer state stays sharded like its parameter)");
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
             << "zero=1: parameter #" << p << " is on mesh " << ps.getMesh()
             << ", the data-parallel axes on " << meshRef;
    layout.param[j] = ps;
    layout.state[j] = splitStateOver(fn, p, ps, layout.mesh, layout.axes);
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
    if (layout.isZeROSharded(j))
      v = ShardingConstraintOp::create(b, loc, v.getType(), v, layout.param[j]);
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
    StringRef optimizer, unsigned stateKinds, const ZeROOptions &options) {
  unsigned K = stateKinds;
  int64_t zero = options.stage;
  os << "par-optimizer: @" << step.getName() << " " << optimizer
     << " zero=" << zero;
  if (!layout.axes.empty()) {
    os << " over [";
    llvm::interleaveComma(layout.axes, os,
                          [&](StringRef a) { os << "\"" << a << "\""; });
    os << "]";
  }
  os << "\n";
  int64_t stateBytes = 0, stateBytes0 = 0;
  double reduceBytes = 0, gatherBytes = 0;
  for (auto [j, p] : llvm::enumerate(params)) {
    auto type = cast<RankedTensorType>(fn.getArgumentTypes()[p]);
    int64_t eb = type.getElementTypeBitWidth() / 8;
    int64_t local0 = localElements(type, layout.param[j], layout.mesh) * eb;
    int64_t local = localElements(type, layout.state[j], layout.mesh) * eb;
    stateBytes0 += K * local0;
    stateBytes += K * local;
    if (zero == 0)
      continue;
    os << "  #" << p << " " << type << " ";
    printDims(os, layout.param[j]);
    os << ": state ";
    printDims(os, layout.state[j]);
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
  if (layout.param.empty() ||
      llvm::any_of(layout.param, [](ShardingAttr s) { return !s; }))
    os << " (unannotated parameters counted as replicated)";
  os << "\n";
  if (zero != 0 && gatherBytes > 0)
    os << llvm::formatv(
        "  zero-sharded gradients per step and rank (ring): reduce_scatter "
        "{0} + all_gather {1} = {2} bytes, the all_reduce's 2(n-1)/n*S\n",
        static_cast<int64_t>(reduceBytes), static_cast<int64_t>(gatherBytes),
        static_cast<int64_t>(reduceBytes + gatherBytes));
}
