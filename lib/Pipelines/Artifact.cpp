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

LogicalResult writeModule(ModuleOp module, const std::string &path,
                          std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = "cannot write '" + path + "': " + ec.message();
    return failure();
  }
  // With the final newline, as par-opt prints a module.
  module.print(os);
  os << "\n";
  return success();
}

/// One program of the artifact: the back half on a copy of the front
/// half's result (the partitioned program written in between), then the
/// shared object.
LogicalResult buildProgram(ModuleOp front, StringRef stem,
                           const ProgramOptions &program,
                           const CompileOptions &options,
                           const ArtifactOptions &artifact,
                           std::string &error) {
  OwningOpRef<ModuleOp> module(cast<ModuleOp>(front->clone()));
  std::string base = artifact.outputDir + "/" + stem.str();
  SharedObjectOptions link = artifact.link;
  if (program.target.isCuda()) {
    link.extraLibs.push_back({link.runtimeLibDir, "par_runtime_gpu"});
    // libpar_runtime_gpu.so needs libcuda.so.1: the stub satisfies the
    // link; the driver is found at run time (no rpath to the stub).
    link.linkOnlyLibs.push_back(
        {program.target.gpu.toolkit + "/lib64/stubs", "cuda"});
  }
  PassManager spmd(module->getContext()), lower(module->getContext());
  buildBackendPipeline(spmd, lower, options, program);
  if (failed(spmd.run(*module))) {
    error = (program.reference ? "building the reference" : "partitioning") +
            std::string(" failed");
    return failure();
  }
  if (!program.reference &&
      failed(writeModule(*module, base + ".mlir", error)))
    return failure();
  if (failed(lower.run(*module))) {
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
                                       const TargetSpec &target,
                                       const ArtifactOptions &artifact,
                                       std::string &error) {
  if (std::error_code ec =
          llvm::sys::fs::create_directories(artifact.outputDir)) {
    error = "cannot create '" + artifact.outputDir + "': " + ec.message();
    return failure();
  }
  PassManager front(model.getContext());
  buildFrontendPipeline(front, options);
  if (failed(front.run(model))) {
    error = "building the train step or the pipeline schedule failed";
    return failure();
  }
  // The sharded program is the one par-compile-pipeline builds from the
  // same options; the reference differs in what its ProgramOptions say.
  ProgramOptions sharded = getProgramOptions(options, target);
  sharded.reference = false;
  sharded.manifest = artifact.outputDir + "/sharded.json";
  if (failed(buildProgram(model, "sharded", sharded, options, artifact,
                          error)))
    return failure();
  if (!artifact.reference)
    return success();
  ProgramOptions reference;
  reference.reference = true;
  reference.manifest = artifact.outputDir + "/reference.json";
  return buildProgram(model, "reference", reference, options, artifact,
                      error);
}
