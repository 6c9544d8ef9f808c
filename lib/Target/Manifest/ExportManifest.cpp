//===- ExportManifest.cpp - par-export-manifest ---------------------------===//
//
// The interface between a compiled program and its driver: per entry point,
// the mesh and each tensor's element type, global/local shape and sharding,
// its train-step metadata (feedback, micro-batches, loss scaling, gradient
// compression), its inputs' roles (the loss scale, error-feedback
// buffers, the frontend's tokens and targets) and names (par.name,
// par.aliases: the PyTorch names par-run loads and saves weights by),
// spelled by par/Manifest/Schema.h (which the runtime's reader shares)
// and stamped with its version.
//
//===----------------------------------------------------------------------===//

#include "par/Target/Manifest/Passes.h"
#include "par/Manifest/Schema.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <charconv>

#define DEBUG_TYPE "par-export-manifest"

namespace mlir::par {
#define GEN_PASS_DEF_EXPORTMANIFEST
#include "par/Target/Manifest/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;
namespace schema = ::par::manifest;
namespace key = ::par::manifest::key;

namespace {

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

llvm::json::Array shapeOf(ArrayRef<int64_t> shape) {
  llvm::json::Array a;
  for (int64_t d : shape)
    a.push_back(d);
  return a;
}

/// The schema's spelling of a partial reduction kind.
const char *partialKindName(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::Sum:
    return schema::partial_kind::kSum;
  case ReductionKind::Max:
    return schema::partial_kind::kMax;
  case ReductionKind::Min:
    return schema::partial_kind::kMin;
  case ReductionKind::Avg:
    return schema::partial_kind::kAvg;
  }
  llvm_unreachable("unknown reduction kind");
}

/// The schema's spelling of an initialiser: "zeros", "ones" or
/// "uniform:<scale>" with the shortest decimal that reads back as the scale.
std::string initString(InitAttr init) {
  switch (init.getKind()) {
  case InitKind::Zeros:
    return schema::init::kZeros;
  case InitKind::Ones:
    return schema::init::kOnes;
  case InitKind::Uniform:
  case InitKind::Fill:
    break;
  }
  char buf[64];
  std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), init.getScaleValue());
  return (init.getKind() == InitKind::Fill ? schema::init::kFillPrefix
                                           : schema::init::kUniformPrefix) +
         std::string(buf, r.ptr);
}

/// One function's manifest entry; remembers the mesh its shardings name.
struct FunctionWriter {
  FunctionOpInterface fn;
  MeshOp mesh;
  bool ok = true;

  llvm::json::Value sharding(ShardingAttr s, RankedTensorType lt) {
    llvm::json::Array dims, partial;
    if (s) {
      if (!mesh)
        mesh = lookupMesh(fn, s.getMesh(), /*emitErrors=*/false);
      for (int64_t d = 0; d < s.getRank(); ++d) {
        llvm::json::Array axes;
        for (StringRef a : s.getDimAxes(d))
          axes.push_back(a.str());
        dims.push_back(std::move(axes));
      }
      for (StringRef a : s.getPartialAxisNames())
        partial.push_back(a.str());
    } else {
      for (int64_t d = 0; d < lt.getRank(); ++d)
        dims.push_back(llvm::json::Array());
    }
    return llvm::json::Object{
        {key::kDims, std::move(dims)},
        {key::kPartial, std::move(partial)},
        {key::kPartialKind,
         partialKindName(s ? s.getPartialKind() : ReductionKind::Sum)}};
  }

  llvm::json::Value tensor(Type local, ShardingAttr s, TypeAttr global,
                           StringRef what, unsigned i) {
    auto lt = dyn_cast<RankedTensorType>(local);
    if (!lt || !lt.hasStaticShape()) {
      fn.emitOpError() << what << " #" << i
                       << " must be a statically shaped tensor to be "
                          "exported, got "
                       << local;
      ok = false;
      return nullptr;
    }
    auto gt = global ? cast<RankedTensorType>(global.getValue()) : lt;
    return llvm::json::Object{{key::kDtype, typeName(lt.getElementType())},
                              {key::kGlobalShape, shapeOf(gt.getShape())},
                              {key::kLocalShape, shapeOf(lt.getShape())},
                              {key::kSharding, sharding(s, lt)}};
  }

  llvm::json::Array inputs() {
    llvm::json::Array inputs;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      inputs.push_back(tensor(
          fn.getArgumentTypes()[i],
          fn.getArgAttrOfType<ShardingAttr>(i, ParDialect::kShardingAttrName),
          fn.getArgAttrOfType<TypeAttr>(i, ParDialect::kGlobalTypeAttrName),
          "argument", i));
      if (auto init =
              fn.getArgAttrOfType<InitAttr>(i, ParDialect::kInitAttrName))
        if (auto *o = inputs.back().getAsObject())
          (*o)[key::kInit] = initString(init);
      bool lossScale = bool(fn.getArgAttr(i, ParDialect::kLossScaleAttrName));
      bool errorFeedback =
          bool(fn.getArgAttr(i, ParDialect::kErrorFeedbackAttrName));
      if (lossScale && errorFeedback) {
        fn.emitOpError() << "argument #" << i << " is both the loss scale ("
                         << ParDialect::kLossScaleAttrName
                         << ") and an error-feedback buffer ("
                         << ParDialect::kErrorFeedbackAttrName
                         << "); an input has one role";
        ok = false;
      }
      if (lossScale || errorFeedback)
        if (auto *o = inputs.back().getAsObject())
          (*o)[key::kRole] =
              lossScale ? key::kRoleLossScale : key::kRoleErrorFeedback;
      if (fn.getArgAttr(i, ParDialect::kCompressionStepAttrName))
        if (auto *o = inputs.back().getAsObject())
          (*o)[key::kRole] = key::kRoleCompressionStep;
      if (auto *o = inputs.back().getAsObject())
        addFrontendKeys(i, *o);
    }
    return inputs;
  }

  /// The frontend's names and data roles (par.name, par.aliases, par.slice,
  /// par.data, par.vocab; the dialect verified their kinds) as "name",
  /// "aliases", "slice",
  /// "role" ("tokens" or "targets") and "vocab".
  void addFrontendKeys(unsigned i, llvm::json::Object &o) {
    if (auto n = fn.getArgAttrOfType<StringAttr>(i, ParDialect::kNameAttrName))
      o[key::kTensorName] = n.getValue().str();
    if (auto a =
            fn.getArgAttrOfType<ArrayAttr>(i, ParDialect::kAliasesAttrName)) {
      llvm::json::Array names;
      for (auto s : a.getAsRange<StringAttr>())
        names.push_back(s.getValue().str());
      o[key::kAliases] = std::move(names);
    }
    if (auto s = fn.getArgAttrOfType<DictionaryAttr>(
            i, ParDialect::kSliceAttrName)) {
      llvm::json::Object slice{
          {key::kSliceOf, s.getAs<StringAttr>("of").getValue().str()},
          {key::kSliceDim, s.getAs<IntegerAttr>("dim").getInt()},
          {key::kSliceOffset, s.getAs<IntegerAttr>("offset").getInt()}};
      if (auto extent = s.getAs<IntegerAttr>("extent"))
        slice[key::kSliceExtent] = extent.getInt();
      o[key::kSlice] = std::move(slice);
    }
    auto data = fn.getArgAttrOfType<StringAttr>(i, ParDialect::kDataAttrName);
    if (!data)
      return;
    if (o.get(key::kRole)) {
      fn.emitOpError() << "argument #" << i << " has the data role '"
                       << data.getValue()
                       << "' and another role; an input has one role";
      ok = false;
      return;
    }
    o[key::kRole] = data.getValue() == "tokens" ? key::kRoleTokens
                                                : key::kRoleTargets;
    if (auto v = fn.getArgAttrOfType<IntegerAttr>(i, ParDialect::kVocabAttrName))
      o[key::kVocab] = v.getInt();
  }

  /// par.compression's {method, compressed_bytes, uncompressed_bytes}
  /// (par-compress-gradients), as the manifest's "compression" entry.
  void addCompression(llvm::json::Object &entry) {
    Attribute attr = fn->getAttr(ParDialect::kCompressionAttrName);
    if (!attr)
      return;
    auto d = dyn_cast<DictionaryAttr>(attr);
    auto method = d ? d.getAs<StringAttr>("method") : StringAttr();
    auto compressed = d ? d.getAs<FloatAttr>("compressed_bytes") : FloatAttr();
    auto uncompressed =
        d ? d.getAs<FloatAttr>("uncompressed_bytes") : FloatAttr();
    if (!method || method.getValue().empty() || !compressed ||
        !uncompressed || compressed.getValueAsDouble() < 0 ||
        uncompressed.getValueAsDouble() < 0) {
      fn.emitOpError() << "has a malformed '"
                       << ParDialect::kCompressionAttrName
                       << "' (expected {method = \"int8\"|\"sign\"|\"topk\", "
                          "compressed_bytes, uncompressed_bytes: non-negative "
                          "floats}), got "
                       << attr;
      ok = false;
      return;
    }
    entry[key::kCompression] = llvm::json::Object{
        {key::kCompressionMethod, method.getValue().str()},
        {key::kCompressedBytes, compressed.getValueAsDouble()},
        {key::kUncompressedBytes, uncompressed.getValueAsDouble()}};
  }

  llvm::json::Array outputs() {
    llvm::json::Array outputs;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      outputs.push_back(tensor(
          fn.getResultTypes()[i],
          fn.getResultAttrOfType<ShardingAttr>(i,
                                               ParDialect::kShardingAttrName),
          fn.getResultAttrOfType<TypeAttr>(i, ParDialect::kGlobalTypeAttrName),
          "result", i));
    return outputs;
  }

  /// The mesh of the function's shardings; a sharded function may have only
  /// replicated interface tensors: then the module's only mesh, if there is
  /// exactly one.
  llvm::json::Value meshEntry(ModuleOp module) {
    if (!mesh) {
      SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
      if (meshes.size() == 1)
        mesh = meshes.front();
    }
    if (!mesh)
      return nullptr;
    llvm::json::Array axes;
    for (auto [n, size] :
         llvm::zip(mesh.getAxisNames().getAsRange<StringAttr>(),
                   mesh.getAxisSizes()))
      axes.push_back(llvm::json::Object{{key::kName, n.getValue().str()},
                                        {key::kSize, size}});
    return llvm::json::Object{{key::kName, mesh.getSymName().str()},
                              {key::kAxes, std::move(axes)}};
  }

  /// Train-step and pipeline-stage metadata.
  void addTrainMetadata(llvm::json::Object &entry) {
    // (result, argument) pairs: fed back after a step, or donated.
    for (auto [attr, k] :
         {std::pair{ParDialect::kFeedbackAttrName, key::kFeedback},
          std::pair{ParDialect::kDonatedAttrName, key::kDonated}})
      if (auto flat = fn->getAttrOfType<DenseI64ArrayAttr>(attr)) {
        llvm::json::Array pairs;
        for (size_t i = 0; i + 1 < flat.size(); i += 2)
          pairs.push_back(llvm::json::Array{flat[i], flat[i + 1]});
        entry[k] = std::move(pairs);
      }
    if (auto m =
            fn->getAttrOfType<IntegerAttr>(ParDialect::kMicroBatchesAttrName))
      entry[key::kMicroBatches] = m.getInt();
    if (auto k = fn->getAttrOfType<IntegerAttr>(ParDialect::kStageAttrName))
      entry[key::kStage] = k.getInt();
    if (auto t =
            fn->getAttrOfType<TypeAttr>(ParDialect::kMixedPrecisionAttrName))
      entry[key::kComputeType] =
          isa<BFloat16Type>(t.getValue()) ? "bf16" : "f16";
    if (auto ls = fn->getAttrOfType<DenseI64ArrayAttr>(
            ParDialect::kLossScaleResultsAttrName))
    {
      llvm::json::Object o{{key::kLossScaleScale, ls[0]},
                           {key::kLossScaleFinite, ls[1]}};
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (auto p = fn.getArgAttrOfType<LossScaleAttr>(
                i, ParDialect::kLossScaleAttrName))
          o[key::kLossScaleMin] = p.getMinValue();
      entry[key::kLossScale] = std::move(o);
    }
    if (auto idx = fn->getAttrOfType<DenseI64ArrayAttr>(
            ParDialect::kStageArgsAttrName))
      entry[key::kStageArgs] = llvm::json::Array(idx.asArrayRef());
    addCompression(entry);
    // The functions this one is linked to, by role.
    llvm::json::Object roles;
    for (auto [link, role] : {std::pair<StringRef, const char *>{
                                  ParDialect::kGradAttrName, key::kRoleGrad},
                              {ParDialect::kStepAttrName, key::kRoleStep},
                              {ParDialect::kUpdateAttrName, key::kRoleUpdate},
                              {ParDialect::kLogitsAttrName, key::kRoleLogits}})
      if (auto sym = fn->getAttrOfType<FlatSymbolRefAttr>(link))
        roles[role] = sym.getValue().str();
    if (!roles.empty())
      entry[key::kRoles] = std::move(roles);
  }

  llvm::json::Object entry(ModuleOp module) {
    llvm::json::Array in = inputs(), out = outputs();
    llvm::json::Object entry{{key::kName, fn.getName().str()},
                             {key::kMesh, meshEntry(module)},
                             {key::kInputs, std::move(in)},
                             {key::kOutputs, std::move(out)}};
    addTrainMetadata(entry);
    return entry;
  }
};

/// The pipeline (par-pipeline-split, par-pipeline-schedule): the split
/// function, the stage table by role, the schedule's shape and each rank's
/// actions as objects.
llvm::json::Object pipelineEntry(PipelineAttr pipe) {
  auto name = [](FlatSymbolRefAttr sym) { return sym.getValue().str(); };
  llvm::json::Object p{{key::kPipelineFunc, name(pipe.getFunc())}};
  if (pipe.getStep())
    p[key::kPipelineStep] = name(pipe.getStep());
  if (pipe.getLogits())
    p[key::kPipelineLogits] = name(pipe.getLogits());
  llvm::json::Array stages;
  for (StageAttr st : pipe.getStages()) {
    llvm::json::Object e{{key::kStageForward, name(st.getForward())}};
    for (auto [role, sym] :
         {std::pair<const char *, FlatSymbolRefAttr>{key::kStageBackward,
                                                     st.getBackward()},
          {key::kStageInputGrad, st.getInputGrad()},
          {key::kStageWeightGrad, st.getWeightGrad()},
          {key::kStageUpdate, st.getUpdate()},
          {key::kStageStashForward, st.getStashForward()},
          {key::kStageStashBackward, st.getStashBackward()},
          {key::kStageStashInputGrad, st.getStashInputGrad()},
          {key::kStageStashWeightGrad, st.getStashWeightGrad()}})
      if (sym)
        e[role] = name(sym);
    stages.push_back(std::move(e));
  }
  p[key::kPipelineStages] = std::move(stages);
  if (!pipe.isScheduled())
    return p;
  ::par::pipeline::PipelineShape shape = pipe.getShape();
  p[key::kPipelineSchedule] = pipe.getSchedule().str();
  p[key::kPipelineAxis] = pipe.getAxis().str();
  p[key::kPipelineBackward] = shape.splitBackward ? "split" : "full";
  p[key::kPipelineP] = shape.p;
  p[key::kPipelineM] = shape.m;
  p[key::kPipelineV] = shape.v;
  llvm::json::Array programs;
  for (ProgramAttr prog : pipe.getPrograms()) {
    llvm::json::Array actions;
    for (const ::par::pipeline::Action &a : prog.getActions()) {
      llvm::json::Object o{
          {key::kActionOp, schema::kActionOps[static_cast<int>(a.op)]},
          {key::kActionMb, a.mb},
          {key::kActionStage, a.stage}};
      if (!a.isCompute())
        o[key::kActionPeer] = a.peer;
      actions.push_back(std::move(o));
    }
    programs.push_back(std::move(actions));
  }
  p[key::kPipelinePrograms] = std::move(programs);
  return p;
}

struct ExportManifestPass
    : public mlir::par::impl::ExportManifestBase<ExportManifestPass> {
  using ExportManifestBase::ExportManifestBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::json::Array functions;
    bool ok = true;
    module.walk([&](FunctionOpInterface fn) {
      if (fn.isExternal() || !fn.isPublic())
        return;
      FunctionWriter writer{fn};
      functions.push_back(writer.entry(module));
      ok &= writer.ok;
    });
    if (!ok)
      return signalPassFailure();

    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file;
    llvm::raw_ostream *os = &llvm::outs();
    if (outputFile != "-") {
      file = openOutputFile(outputFile, &error);
      if (!file) {
        module.emitError() << "cannot open manifest file '" << outputFile
                           << "': " << error;
        return signalPassFailure();
      }
      os = &file->os();
    }
    llvm::json::Object top{{key::kVersion, schema::kVersion},
                           {key::kTarget, std::string(target)},
                           {key::kFunctions, std::move(functions)}};
    if (auto pipe =
            module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName))
      top[key::kPipeline] = pipelineEntry(pipe);
    *os << llvm::formatv("{0:2}", llvm::json::Value(std::move(top))) << "\n";
    if (file)
      file->keep();
    markAllAnalysesPreserved();
  }
};
} // namespace
