//===- ModelProfile.cpp - One pass over a model for the planner -----------===//

#include "par/Planning/ModelProfile.h"

#include "par/Dialect/Par/Analysis/OpCost.h"
#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Dialect/Par/Transforms/ShardingPropagation.h"
#include "par/Pipelines/Pipelines.h"
#include "par/Training/Passes.h"
#include "par/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <map>
#include <numeric>
#include <set>

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::planning;

double ModelProfile::gemmFlopsPerSample() const {
  double f = 0;
  for (const KernelCost &k : kernels)
    if (k.gemm && k.perSample)
      f += k.flops;
  return f;
}

namespace {

ShardingAttr shardingOfValue(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!fn || arg.getOwner() != &fn.getBody().front())
      return {};
    return fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                             ParDialect::kShardingAttrName);
  }
  Operation *def = v.getDefiningOp();
  auto arr = def->getAttrOfType<ArrayAttr>(ParDialect::kShardingAttrName);
  unsigned idx = cast<OpResult>(v).getResultNumber();
  if (!arr || idx >= arr.size())
    return {};
  return dyn_cast<ShardingAttr>(arr[idx]);
}

bool mentions(ShardingAttr s, StringRef axis) {
  if (!s || axis.empty())
    return false;
  for (int64_t d = 0; d < s.getRank(); ++d)
    for (StringRef a : s.getDimAxes(d))
      if (a == axis)
        return true;
  for (StringRef a : s.getPartialAxisNames())
    if (a == axis)
      return true;
  return false;
}

/// Records the tp-split dims' sizes of `v` into `divisor` (gcd).
void noteSplitDims(Value v, StringRef axis, int64_t &divisor) {
  ShardingAttr s = shardingOfValue(v);
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!s || !type || s.getRank() != type.getRank())
    return;
  for (int64_t d = 0; d < s.getRank(); ++d)
    for (StringRef a : s.getDimAxes(d))
      if (a == axis && !ShapedType::isDynamic(type.getDimSize(d)))
        divisor = std::gcd(divisor, type.getDimSize(d));
}

func::FuncOp findModel(ModuleOp module, const std::string &entry,
                       std::string &error) {
  if (!entry.empty()) {
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || fn.isExternal())
      error = "no function @" + entry + " with a body in the model";
    return fn;
  }
  func::FuncOp best;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    bool hasParam = false;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      hasParam |= bool(fn.getArgAttr(i, ParDialect::kParamAttrName));
    if (!hasParam)
      continue;
    auto results = fn.getFunctionType().getResults();
    bool scalarLoss = results.size() == 1 &&
                      isa<RankedTensorType>(results[0]) &&
                      cast<RankedTensorType>(results[0]).getRank() == 0;
    if (scalarLoss)
      return fn;
    if (!best)
      best = fn;
  }
  if (!best)
    error = "no model function in the module: a function taking par.param "
            "arguments (name one with --entry)";
  return best;
}

/// Collectives over `tpAxis` in `fn` of the partitioned copy.
void collectTP(func::FuncOp fn, StringRef tpAxis, double localSamples,
               std::vector<TPCollective> &out) {
  fn.walk([&](Operation *op) {
    if (!isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp>(op))
      return;
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    bool tp = false;
    for (StringAttr a : axes.getAsRange<StringAttr>())
      tp |= a.getValue() == tpAxis;
    if (!tp)
      return;
    Type full = isa<AllGatherOp>(op) ? op->getResult(0).getType()
                                     : op->getOperand(0).getType();
    TPCollective c;
    c.kind = op->getName().stripDialect().str();
    c.fullBytes = getTensorBytes(full) / localSamples;
    out.push_back(c);
  });
}

/// par-spmd on a copy of `module`: the tensor-parallel collectives of
/// `function` into `out`, of `grad` (if any) into `gradOut`.
bool partitionCopy(ModuleOp module, const std::string &function,
                   const std::string &grad, StringRef tpAxis,
                   double localSamples, bool sp,
                   std::vector<TPCollective> &out,
                   std::vector<TPCollective> &gradOut, std::string &error) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  SPMDPipelineOptions options;
  options.communication.sequenceParallel = sp;
  options.communication.bucketBytes = 0;
  buildSPMDPipeline(pm, options.communication);
  std::string diag;
  {
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && diag.empty())
        diag = d.str();
      return success();
    });
    if (failed(pm.run(*copy))) {
      error = std::string("partitioning the model") +
              (sp ? " with sequence parallelism" : "") + " failed" +
              (diag.empty() ? "" : ": " + diag);
      return false;
    }
  }
  if (auto fn = copy->lookupSymbol<func::FuncOp>(function))
    collectTP(fn, tpAxis, localSamples, out);
  if (!grad.empty())
    if (auto fn = copy->lookupSymbol<func::FuncOp>(grad))
      collectTP(fn, tpAxis, localSamples, gradOut);
  return true;
}

/// The range of the loop an embedding gradient's one-hot accumulation
/// spends on the table's rows, or 0: a parallel loop r of a generic whose
/// `linalg.index r` is compared for equality and which no input's indexing
/// map uses (par-one-hot-to-scatter's match, on tensors). par's CPU
/// lowering turns it into a scatter-add, r times fewer iterations.
int64_t oneHotRows(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInits() != 1)
    return 0;
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iters = generic.getIteratorTypesArray();
  for (auto index : generic.getBody()->getOps<linalg::IndexOp>()) {
    unsigned r = index.getDim();
    if (r >= iters.size() || iters[r] != utils::IteratorType::parallel ||
        ShapedType::isDynamic(ranges[r]) || !index->hasOneUse())
      continue;
    auto cmp = dyn_cast<arith::CmpIOp>(*index->getUsers().begin());
    if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
      continue;
    bool inputUsesR = false;
    for (OpOperand *in : generic.getDpsInputOperands())
      inputUsesR |= generic.getMatchingIndexingMap(in).isFunctionOfDim(r);
    if (!inputUsesR)
      return ranges[r];
  }
  return 0;
}

/// The kernels of `fn` (propagated) into `out`; `divisor` collects the
/// tp-split dimensions, `sizes` the per-sample result sizes. False if a
/// tensor has a dynamic shape.
bool collectKernels(func::FuncOp fn, const ModelProfile &p, int64_t &divisor,
                    std::map<int64_t, int64_t> &sizes,
                    std::vector<KernelCost> &out) {
  const double batch = static_cast<double>(p.batch);
  bool failedShape = false;
  fn.walk([&](Operation *op) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if ((!linalgOp && !isa<linalg::SoftmaxOp>(op)) ||
        isa<linalg::FillOp>(op))
      return;
    for (Value v : op->getOperands())
      if (auto t = dyn_cast<RankedTensorType>(v.getType());
          t && !t.hasStaticShape())
        failedShape = true;
    KernelCost k;
    k.name = op->getName().getStringRef().str();
    k.gemm = linalgOp && linalgOp.getNumReductionLoops() > 0 &&
             linalg::isaContractionOpInterface(linalgOp);
    double flops = getOpFlops(op);
    double bytes = 0, results = 0;
    bool dp = false, tp = false, batchShaped = false, core = false;
    for (Value v : op->getOperands()) {
      bytes += getTensorBytes(v.getType());
      ShardingAttr s = shardingOfValue(v);
      dp |= mentions(s, p.dpAxis);
      tp |= mentions(s, p.tpAxis);
      if (!p.tpAxis.empty())
        noteSplitDims(v, p.tpAxis, divisor);
    }
    for (Value v : op->getResults()) {
      int64_t b = getTensorBytes(v.getType());
      bytes += b;
      results += b;
      ShardingAttr s = shardingOfValue(v);
      dp |= mentions(s, p.dpAxis);
      tp |= mentions(s, p.tpAxis);
      if (!p.tpAxis.empty())
        noteSplitDims(v, p.tpAxis, divisor);
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (!type)
        continue;
      int seqDims = 0;
      for (int64_t d : type.getShape()) {
        seqDims += p.seq > 1 && d == p.seq;
        batchShaped |= d == p.batch || d == p.batch * p.seq;
      }
      core |= seqDims >= 2;
    }
    if (int64_t rows = oneHotRows(op); rows > 1) {
      // Priced as the scatter-add par's CPU lowering makes of it: each
      // input element read once, its row of the output read and written.
      k.name = "scatter (one-hot)";
      flops /= static_cast<double>(rows);
      double inputs = 0, largest = 0;
      for (OpOperand *in :
           cast<linalg::GenericOp>(op).getDpsInputOperands()) {
        double b = getTensorBytes(in->get().getType());
        inputs += b;
        largest = std::max(largest, b);
      }
      bytes = inputs + 2 * largest;
    }
    k.perSample = dp || (p.batch > 1 && batchShaped) || p.batch == 1;
    double scale = k.perSample ? batch : 1.0;
    k.flops = flops / scale;
    k.bytes = bytes / scale;
    k.resultBytes = results / scale;
    k.tpSplit = tp;
    k.attentionCore = core;
    if (k.perSample && !core && op->getNumResults() == 1 &&
        isa<RankedTensorType>(op->getResult(0).getType())) {
      int64_t n = cast<RankedTensorType>(op->getResult(0).getType())
                      .getNumElements();
      ++sizes[n];
    }
    out.push_back(k);
  });
  return !failedShape;
}

/// Runs `build`'s passes on `module`, the first error into `error`.
template <typename Build>
bool runPasses(ModuleOp module, Build build, std::string &error) {
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  build(pm);
  std::string diag;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error && diag.empty())
      diag = d.str();
    return success();
  });
  if (succeeded(pm.run(module)))
    return true;
  error = diag.empty() ? "failed" : diag;
  return false;
}

} // namespace

bool mlir::par::planning::profileModel(ModuleOp module,
                                       const std::string &entry,
                                       ModelProfile &out, std::string &error) {
  func::FuncOp model = findModel(module, entry, error);
  if (!model)
    return false;
  ModelProfile p;
  p.function = model.getName().str();

  // The data arguments give the batch and the sequence; the parameters the
  // element type and the tensor-parallel axis.
  bool sawData = false, sawParam = false;
  for (unsigned i = 0; i < model.getNumArguments(); ++i) {
    auto type = dyn_cast<RankedTensorType>(model.getArgument(i).getType());
    if (!type || !type.hasStaticShape()) {
      error = "argument " + std::to_string(i) + " of @" + p.function +
              " has no static shape (the planner needs static shapes)";
      return false;
    }
    auto sharding = model.getArgAttrOfType<ShardingAttr>(
        i, ParDialect::kShardingAttrName);
    if (model.getArgAttr(i, ParDialect::kParamAttrName)) {
      if (!sawParam) {
        Type elem = type.getElementType();
        llvm::raw_string_ostream os(p.dtype);
        os << elem;
        p.dtypeBytes = std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
        sawParam = true;
      }
      p.params += type.getNumElements();
      ++p.paramTensors;
      if (sharding)
        for (int64_t d = 0; d < sharding.getRank(); ++d)
          for (StringRef a : sharding.getDimAxes(d))
            if (p.tpAxis.empty())
              p.tpAxis = a.str();
      if (!p.tpAxis.empty() && mentions(sharding, p.tpAxis))
        p.tpSplitParams += type.getNumElements();
      continue;
    }
    if (!sawData && type.getRank() >= 1) {
      sawData = true;
      p.batch = type.getDimSize(0);
      p.seq = type.getRank() >= 2 ? type.getDimSize(1) : 1;
      if (sharding && sharding.getRank() >= 1 &&
          !sharding.getDimAxes(0).empty())
        p.dpAxis = sharding.getDimAxes(0).front().str();
    }
  }
  if (!sawParam) {
    error = "@" + p.function + " has no par.param arguments";
    return false;
  }
  if (!sawData || p.batch < 1) {
    error = "@" + p.function + " has no data argument with a batch dimension";
    return false;
  }
  // A parameter axis that is also the data axis is ZeRO-style, not tp.
  if (p.tpAxis == p.dpAxis)
    p.tpAxis.clear();
  auto meshes = module.getOps<MeshOp>();
  if (!meshes.empty()) {
    MeshOp mesh = *meshes.begin();
    if (!p.dpAxis.empty())
      p.meshDP = std::max<int64_t>(1, mesh.getAxisSize(p.dpAxis));
    if (!p.tpAxis.empty())
      p.meshTP = std::max<int64_t>(1, mesh.getAxisSize(p.tpAxis));
  }

  // Sharding propagation on a copy says which kernels tp splits.
  OwningOpRef<ModuleOp> propagated(cast<ModuleOp>(module->clone()));
  {
    std::string diag;
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && diag.empty())
        diag = d.str();
      return success();
    });
    propagateShardings(*propagated);
    if (!diag.empty()) {
      error = "sharding propagation failed: " + diag;
      return false;
    }
  }
  auto fn = propagated->lookupSymbol<func::FuncOp>(p.function);
  int64_t divisor = 0;
  std::map<int64_t, int64_t> perSampleSizes; // residual candidates
  const double batch = static_cast<double>(p.batch);
  if (!collectKernels(fn, p, divisor, perSampleSizes, p.kernels)) {
    error = "@" + p.function + " has tensors of dynamic shape";
    return false;
  }
  // The kernels par runs: elementwise chains fused (par-fuse-elementwise,
  // as both lowerings do), then propagated.
  {
    OwningOpRef<ModuleOp> fused(cast<ModuleOp>(module->clone()));
    std::string fuseError;
    int64_t ignoredDivisor = 0;
    std::map<int64_t, int64_t> ignoredSizes;
    if (runPasses(
            *fused,
            [](PassManager &pm) { pm.addPass(createFuseElementwise()); },
            fuseError)) {
      propagateShardings(*fused);
      auto fusedFn = fused->lookupSymbol<func::FuncOp>(p.function);
      if (!fusedFn || !collectKernels(fusedFn, p, ignoredDivisor,
                                      ignoredSizes, p.fusedKernels))
        p.fusedKernels.clear();
    }
  }
  int64_t softmaxes = 0;
  for (const KernelCost &k : p.kernels)
    softmaxes += k.attentionCore && k.name == "linalg.softmax";
  p.layers = std::max<int64_t>(1, softmaxes);
  // The residual stream: the commonest per-sample result size.
  int64_t bestCount = 0, bestSize = 0;
  for (auto [size, count] : perSampleSizes)
    if (count > bestCount || (count == bestCount && size > bestSize))
      bestCount = count, bestSize = size;
  p.hiddenBytes =
      static_cast<double>(bestSize) * p.dtypeBytes / std::max(1.0, batch);
  p.tpDivisor = p.tpAxis.empty() ? 0 : divisor;
  if (p.tpDivisor == 0)
    p.tpAxis.clear();

  // par-autodiff on a copy: the gradient function par builds (forward and
  // backward), propagated like the forward. Without it (a model autodiff
  // does not take) the backward is priced as twice the forward.
  OwningOpRef<ModuleOp> differentiated(cast<ModuleOp>(module->clone()));
  std::string gradName, autodiffError;
  if (runPasses(
          *differentiated,
          [](PassManager &pm) { pm.addPass(createAutodiff()); },
          autodiffError)) {
    auto m = differentiated->lookupSymbol<func::FuncOp>(p.function);
    if (auto link = m->getAttrOfType<FlatSymbolRefAttr>(
            ParDialect::kGradAttrName))
      gradName = link.getValue().str();
  }
  if (!gradName.empty()) {
    OwningOpRef<ModuleOp> prop(cast<ModuleOp>(differentiated->clone()));
    std::string diag, fuseError;
    // Fused as par fuses the gradient function (after autodiff).
    (void)runPasses(
        *prop, [](PassManager &pm) { pm.addPass(createFuseElementwise()); },
        fuseError);
    {
      ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
        if (d.getSeverity() == DiagnosticSeverity::Error && diag.empty())
          diag = d.str();
        return success();
      });
      propagateShardings(*prop);
    }
    int64_t ignoredDivisor = 0;
    std::map<int64_t, int64_t> ignoredSizes;
    auto gradFn = prop->lookupSymbol<func::FuncOp>(gradName);
    if (diag.empty() && gradFn &&
        collectKernels(gradFn, p, ignoredDivisor, ignoredSizes,
                       p.gradKernels)) {
      p.gradFunction = gradName;
    } else {
      p.gradKernels.clear();
      autodiffError = diag.empty() ? "no static gradient function" : diag;
      gradName.clear();
    }
  }
  if (gradName.empty())
    p.backwardNote = "backward priced as 2 x forward (par-autodiff: " +
                     (autodiffError.empty() ? std::string("no gradient")
                                            : autodiffError) +
                     ")";

  // par-spmd on copies: the tensor-parallel collectives of the forward and
  // of the gradient function.
  if (!p.tpAxis.empty()) {
    double localSamples = batch / static_cast<double>(p.meshDP);
    ModuleOp source = gradName.empty() ? module : *differentiated;
    if (!partitionCopy(source, p.function, gradName, p.tpAxis, localSamples,
                       false, p.tpCollectives, p.gradTPCollectives, error))
      return false;
    std::string spError;
    if (!partitionCopy(source, p.function, gradName, p.tpAxis, localSamples,
                       true, p.spCollectives, p.gradSPCollectives, spError)) {
      // Sequence parallelism not applicable: the same traffic.
      p.spCollectives = p.tpCollectives;
      p.gradSPCollectives = p.gradTPCollectives;
    }
  }
  out = std::move(p);
  return true;
}
