//===- par-compile.cpp - A model in, a runnable artifact out --------------===//
//
// par-compile MODEL.mlir -o OUT [--options="KEY=VALUE ..."] [--no-reference]
//             [--keep-temps]
//
// Parses the model, runs par's pipeline (lib/Pipelines: the same phases
// `par-opt --par-compile-pipeline` runs) and builds the artifact directory
// par-run executes: the SPMD program and the unsharded reference, each a
// shared object plus a manifest. --options takes the pipeline's options
// (`par-compile --help-options` lists them), e.g.
//   --options="optimizer=adamw lr=0.003 micro-batches=4 stages=2 schedule=1f1b"
//
//===----------------------------------------------------------------------===//

#include "par/InitAll.h"
#include "par/Pipelines/Artifact.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("MODEL.mlir"),
                                      cl::Required);
static cl::opt<std::string> outputDir("o", cl::desc("Artifact directory"),
                                      cl::value_desc("OUT"), cl::Required);
static cl::opt<std::string>
    pipelineOptions("options", cl::desc("The pipeline's options (KEY=VALUE "
                                        "...; see --help-options)"),
                    cl::init(""));
static cl::opt<bool> helpOptions("help-options",
                                 cl::desc("List the pipeline's options"));
static cl::opt<bool> noReference("no-reference",
                                 cl::desc("Do not build the unsharded "
                                          "reference"));
static cl::opt<std::string>
    target("target",
           cl::desc("cpu (default), or cuda[:CHIP] (CHIP sm_NN, default "
                    "sm_90): the sharded program as CUDA kernels, cuBLAS "
                    "matmuls and NCCL collectives (the same as --options "
                    "target=...)"),
           cl::value_desc("TARGET"), cl::init(""));
static cl::opt<std::string>
    cudaToolkit("cuda-toolkit",
                cl::desc("CUDA toolkit for the cuda target (libdevice, "
                         "ptxas, fatbinary, libcuda's stub)"),
                cl::value_desc("DIR"), cl::init("/usr/local/cuda"));
static cl::opt<bool> keepTemps("keep-temps",
                               cl::desc("Keep the LLVM dialect, LLVM IR and "
                                        "object files"));

static int fail(const std::string &message) {
  llvm::errs() << "par-compile: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --help-options needs no model: answer it before the required options.
  for (int i = 1; i < argc; ++i)
    if (StringRef(argv[i]) == "--help-options") {
      mlir::par::CompileOptions().printHelp(2, 44);
      return 0;
    }
  cl::ParseCommandLineOptions(argc, argv, "par-compile: a model in, a "
                                          "runnable artifact out\n");
  std::unique_ptr<mlir::par::CompileOptions> options =
      mlir::par::CompileOptions::createFromString(pipelineOptions);
  if (!options)
    return fail("bad --options '" + pipelineOptions + "'");
  if (!target.empty())
    options->target = target;
  bool cuda = false;
  {
    mlir::par::GPUTargetOptions gpu;
    std::string why;
    if (!mlir::par::parseTarget(options->target, cuda, gpu, why))
      return fail(why);
  }
  // Top-k selects with loops over single elements on the host.
  if (cuda && options->compress == "topk")
    return fail("compress=topk has no cuda lowering (its radix select "
                "updates tensors element by element in host loops); use "
                "compress=int8 or compress=sign with --target cuda");

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  mlir::par::registerAllParDialects(registry);
  mlir::par::registerSharedObjectTranslations(registry);
  MLIRContext context(registry);

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFile, &error);
  if (!input)
    return fail("cannot open model '" + inputFile + "'");
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> model = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!model)
    return fail("cannot parse model '" + inputFile + "'");

  mlir::par::ArtifactOptions artifact;
  artifact.outputDir = outputDir;
  artifact.reference = !noReference;
  artifact.link.keepTemps = keepTemps;
  // The runtime sits in lib/ next to this tool's bin/ (build tree layout).
  std::string self = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&fail));
  llvm::SmallString<256> libDir(llvm::sys::path::parent_path(
      llvm::sys::path::parent_path(self)));
  llvm::sys::path::append(libDir, "lib");
  llvm::SmallString<256> runtime(libDir);
  llvm::sys::path::append(runtime, "libpar_runtime.so");
  if (!llvm::sys::fs::exists(runtime))
    return fail("cannot find libpar_runtime.so in " + libDir.str().str());
  artifact.link.runtimeLibDir = libDir.str().str();
  if (cuda) {
    llvm::SmallString<256> gpuLib(libDir);
    llvm::sys::path::append(gpuLib, "libpar_runtime_gpu.so");
    if (!llvm::sys::fs::exists(gpuLib))
      return fail("the cuda target needs libpar_runtime_gpu.so, which par "
                  "builds only when it finds the CUDA toolkit; none in " +
                  libDir.str().str());
    for (const char *tool : {"bin/ptxas", "bin/fatbinary",
                             "nvvm/libdevice/libdevice.10.bc",
                             "lib64/stubs/libcuda.so"}) {
      llvm::SmallString<256> path(cudaToolkit.getValue());
      llvm::sys::path::append(path, tool);
      if (!llvm::sys::fs::exists(path))
        return fail("the cuda target needs the CUDA toolkit: no " +
                    path.str().str() + " (set --cuda-toolkit)");
    }
    artifact.cudaToolkit = cudaToolkit;
  }
  if (failed(mlir::par::buildArtifact(*model, *options, artifact, error)))
    return fail(error);
  llvm::outs() << "par-compile: wrote " << outputDir << "\n";
  return 0;
}
