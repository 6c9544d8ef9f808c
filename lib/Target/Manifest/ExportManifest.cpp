//===- ExportManifest.cpp - par-export-manifest ---------------------------===//
//
// The interface between a compiled program and its driver: per entry point,
// the mesh and each tensor's element type, global/local shape and sharding.
//
//===----------------------------------------------------------------------===//

#include "par/Target/Manifest/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#define DEBUG_TYPE "par-export-manifest"

namespace mlir::par {
#define GEN_PASS_DEF_EXPORTMANIFEST
#include "par/Target/Manifest/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

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
      MeshOp mesh;
      auto tensorEntry = [&](Type local, ShardingAttr s, TypeAttr global,
                             StringRef what, unsigned i) -> llvm::json::Value {
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
            {"dtype", typeName(lt.getElementType())},
            {"global_shape", shapeOf(gt.getShape())},
            {"local_shape", shapeOf(lt.getShape())},
            {"sharding",
             llvm::json::Object{
                 {"dims", std::move(dims)},
                 {"partial", std::move(partial)},
                 {"partial_kind",
                  s ? stringifyReductionKind(s.getPartialKind()).str()
                    : std::string("sum")}}}};
      };
      llvm::json::Array inputs, outputs;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        inputs.push_back(tensorEntry(
            fn.getArgumentTypes()[i],
            fn.getArgAttrOfType<ShardingAttr>(i, ParDialect::kShardingAttrName),
            fn.getArgAttrOfType<TypeAttr>(i, ParDialect::kGlobalTypeAttrName),
            "argument", i));
        if (auto init = fn.getArgAttrOfType<StringAttr>(
                i, ParDialect::kInitAttrName))
          if (auto *o = inputs.back().getAsObject())
            (*o)["init"] = init.getValue().str();
      }
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        outputs.push_back(tensorEntry(
            fn.getResultTypes()[i],
            fn.getResultAttrOfType<ShardingAttr>(i,
                                                 ParDialect::kShardingAttrName),
            fn.getResultAttrOfType<TypeAttr>(i,
                                             ParDialect::kGlobalTypeAttrName),
            "result", i));
      llvm::json::Value meshJson = nullptr;
      if (!mesh) {
        // A sharded function may have only replicated interface tensors:
        // take the module's only mesh, if there is exactly one.
        SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
        if (meshes.size() == 1)
          mesh = meshes.front();
      }
      if (mesh) {
        llvm::json::Array axes;
        for (auto [n, size] : llvm::zip(
                 mesh.getAxisNames().getAsRange<StringAttr>(),
                 mesh.getAxisSizes()))
          axes.push_back(
              llvm::json::Object{{"name", n.getValue().str()}, {"size", size}});
        meshJson = llvm::json::Object{{"name", mesh.getSymName().str()},
                                      {"axes", std::move(axes)}};
      }
      llvm::json::Object entry{{"name", fn.getName().str()},
                               {"mesh", std::move(meshJson)},
                               {"inputs", std::move(inputs)},
                               {"outputs", std::move(outputs)}};
      if (auto fb = fn->getAttrOfType<DenseI64ArrayAttr>(
              ParDialect::kFeedbackAttrName)) {
        llvm::json::Array pairs;
        for (size_t i = 0; i + 1 < fb.size(); i += 2)
          pairs.push_back(llvm::json::Array{fb[i], fb[i + 1]});
        entry["feedback"] = std::move(pairs);
      }
      if (auto m = fn->getAttrOfType<IntegerAttr>(
              ParDialect::kMicroBatchesAttrName))
        entry["micro_batches"] = m.getInt();
      if (auto k = fn->getAttrOfType<IntegerAttr>(ParDialect::kStageAttrName))
        entry["stage"] = k.getInt();
      if (auto idx = fn->getAttrOfType<DenseI64ArrayAttr>(
              ParDialect::kStageArgsAttrName))
        entry["stage_args"] = llvm::json::Array(idx.asArrayRef());
      functions.push_back(std::move(entry));
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
    llvm::json::Object top{{"functions", std::move(functions)}};
    // The pipeline (par-pipeline-split, par-pipeline-schedule): strings and
    // integers as they are, the per-rank programs as an array of strings.
    if (auto pipe = module->getAttrOfType<DictionaryAttr>(
            ParDialect::kPipelineAttrName)) {
      llvm::json::Object p;
      for (NamedAttribute a : pipe) {
        if (auto i = dyn_cast<IntegerAttr>(a.getValue()))
          p[a.getName().getValue()] = i.getInt();
        else if (auto str = dyn_cast<StringAttr>(a.getValue()))
          p[a.getName().getValue()] = str.getValue().str();
        else if (auto list = dyn_cast<ArrayAttr>(a.getValue())) {
          llvm::json::Array items;
          for (Attribute e : list)
            if (auto str = dyn_cast<StringAttr>(e))
              items.push_back(str.getValue().str());
          p[a.getName().getValue()] = std::move(items);
        }
      }
      top["pipeline"] = std::move(p);
    }
    *os << llvm::formatv("{0:2}", llvm::json::Value(std::move(top))) << "\n";
    if (file)
      file->keep();
    markAllAnalysesPreserved();
  }
};
} // namespace
