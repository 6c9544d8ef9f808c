//===- Artifact.cpp - A model in, a runnable artifact out -----------------===//
//
// See Artifact.h.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelines/Artifact.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::par;

namespace {

LogicalResult runPasses(ModuleOp module,
                        function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  build(pm);
  return pm.run(module);
}

LogicalResult writeModule(ModuleOp module, const std::string &path,
                          std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = "cannot write '" + path + "': " + ec.message();
    return failure();
  }
  module.print(os);
  return success();
}

/// One program of the artifact: the back half on a copy of the front
/// half's result, then the shared object.
LogicalResult buildProgram(ModuleOp front, StringRef stem, bool reference,
                           bool report, const CompileOptions &options,
                           const ArtifactOptions &artifact,
                           std::string &error) {
  OwningOpRef<ModuleOp> module(cast<ModuleOp>(front->clone()));
  std::string base = artifact.outputDir + "/" + stem.str();
  // The back half's options as given (grad-reduce, bucket-bytes), with
  // what differs between the two programs.
  BackendOptions backend = getBackendOptions(options);
  backend.reference = reference;
  backend.report = report;
  backend.manifest = base + ".json";
  bool cuda = false;
  GPUTargetOptions gpu;
  if (!parseTarget(options.target, cuda, gpu, error))
    return failure();
  gpu.toolkit = artifact.cudaToolkit;
  cuda = cuda && !reference;
  if (!cuda)
    backend.target = "cpu";
  SharedObjectOptions link = artifact.link;
  if (cuda) {
    link.extraLibs.push_back({link.runtimeLibDir, "par_runtime_gpu"});
    // libpar_runtime_gpu.so needs libcuda.so.1: the stub satisfies the
    // link; the driver is found at run time (no rpath to the stub).
    link.linkOnlyLibs.push_back({artifact.cudaToolkit + "/lib64/stubs",
                                 "cuda"});
  }
  if (failed(runPasses(*module, [&](OpPassManager &pm) {
        buildSPMDPhase(pm, backend);
      }))) {
    error = (reference ? "building the reference" : "partitioning") +
            std::string(" failed");
    return failure();
  }
  if (!reference && failed(writeModule(*module, base + ".mlir", error)))
    return failure();
  if (failed(runPasses(*module, [&](OpPassManager &pm) {
        buildExportPhase(pm, backend);
        if (cuda)
          buildLowerGPUPipeline(pm, gpu);
        else {
          CPUKernelOptions kernels = getCPUKernelOptions(options);
          kernels.report = kernels.report && !reference;
          buildLowerCPUPipeline(pm, kernels);
        }
      }))) {
    error = "lowering '" + stem.str() + "' failed";
    return failure();
  }
  if (artifact.link.keepTemps &&
      failed(writeModule(*module, base + ".llvm.mlir", error)))
    return failure();
  return buildSharedObject(*module, base + ".so", link, error);
}

} // namespace

std::vector<std::string> mlir::par::artifactFiles(bool reference) {
  std::vector<std::string> files = {"sharded.mlir", "sharded.json",
                                    "sharded.so"};
  if (reference) {
    files.push_back("reference.json");
    files.push_back("reference.so");
  }
  return files;
}

LogicalResult mlir::par::buildArtifact(ModuleOp model,
                                       const CompileOptions &options,
                                       const ArtifactOptions &artifact,
                                       std::string &error) {
  if (std::error_code ec =
          llvm::sys::fs::create_directories(artifact.outputDir)) {
    error = "cannot create '" + artifact.outputDir + "': " + ec.message();
    return failure();
  }
  if (failed(runPasses(model, [&](OpPassManager &pm) {
        buildFrontendPipeline(pm, options);
      }))) {
    error = "building the train step or the pipeline schedule failed";
    return failure();
  }
  if (failed(buildProgram(model, "sharded", /*reference=*/false,
                          options.commReport, options, artifact, error)))
    return failure();
  if (artifact.reference &&
      failed(buildProgram(model, "reference", /*reference=*/true,
                          /*report=*/false, options, artifact, error)))
    return failure();
  return success();
}
