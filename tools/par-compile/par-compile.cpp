//===- par-compile.cpp - A model in, a runnable artifact out --------------===//
//
// par-compile MODEL.mlir -o OUT [--options="KEY=VALUE ..."] [--no-reference]
//             [--keep-temps] [-j N] [--cache DIR | --no-cache]
// par-compile --cache-clean [--cache DIR]
//
// Parses the model, runs par's pipeline (lib/Pipelines: the same phases
// `par-opt --par-compile-pipeline` runs) and builds the artifact directory
// par-run executes: the SPMD program and the unsharded reference, each a
// shared object plus a manifest. --options takes the pipeline's options
// (`par-compile --help-options` lists them), e.g.
//   --options="optimizer=adamw lr=0.003 micro-batches=4 stages=2 schedule=1f1b"
// LLVM optimises and generates the kernels on -j threads; the artifact is
// kept in a compile cache (lib/Pipelines/CompileCache.h) and copied from it
// when the same model is compiled again with the same options by the same
// par.
//
//===----------------------------------------------------------------------===//

#include "par/InitAll.h"
#include "par/Pipelines/Artifact.h"
#include "par/Pipelines/CompileCache.h"

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
#include "llvm/TargetParser/Host.h"
#include "llvm/Config/llvm-config.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("MODEL.mlir"));
static cl::opt<std::string> outputDir("o", cl::desc("Artifact directory"),
                                      cl::value_desc("OUT"));
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

static cl::opt<unsigned>
    jobs("j",
         cl::desc("Threads that optimise and generate code (default: the "
                  "cores available); the artifact is the same at any count"),
         cl::value_desc("N"), cl::init(0));
static cl::opt<std::string>
    cacheDir("cache",
             cl::desc("Compile cache directory (default: $PAR_COMPILE_CACHE, "
                      "else ~/.cache/par/compile)"),
             cl::value_desc("DIR"), cl::init(""));
static cl::opt<bool> noCache("no-cache",
                             cl::desc("Neither read nor write the compile "
                                      "cache"));
static cl::opt<bool> cacheClean("cache-clean",
                                cl::desc("Empty the compile cache and exit"));
static cl::opt<std::string>
    cacheLimit("cache-limit",
               cl::desc("Bound on the compile cache's size, least recently "
                        "used entries go first (default 10GiB)"),
               cl::value_desc("SIZE"), cl::init("10GiB"));
static cl::opt<unsigned>
    llvmOptLevel("llvm-opt-level",
                 cl::desc("LLVM optimisation level, 0-3 (measurement)"),
                 cl::init(mlir::par::SharedObjectOptions{}.optLevel),
                 cl::Hidden);
static cl::opt<bool>
    llvmUnroll("llvm-unroll", cl::desc("LLVM loop unrolling (measurement)"),
               cl::init(mlir::par::SharedObjectOptions{}.unrollLoops),
               cl::Hidden);

static int fail(const std::string &message) {
  llvm::errs() << "par-compile: error: " << message << "\n";
  return 1;
}

static const char kOverview[] = "par-compile: a model in, a runnable "
                                "artifact out\n";

/// --help shows par-compile's options and the pipeline's, not the hundreds
/// LLVM registers (--help-hidden lists those too).
static void hideOtherOptions() {
  static cl::OptionCategory category("par-compile options");
  for (cl::Option *option :
       std::initializer_list<cl::Option *>{
           &inputFile, &outputDir, &pipelineOptions, &helpOptions,
           &noReference, &target, &cudaToolkit, &keepTemps, &jobs,
           &cacheDir, &noCache, &cacheClean, &cacheLimit, &llvmOptLevel,
           &llvmUnroll})
    option->addCategory(category);
  for (auto &[name, option] : cl::getRegisteredOptions()) {
    bool ours = llvm::is_contained(option->Categories, &category) ||
                name.starts_with("help") || name == "version";
    if (!ours && option->getOptionHiddenFlag() == cl::NotHidden)
      option->setHiddenFlag(cl::Hidden);
  }
}

/// Answers --help-options and --help (neither needs a model); true if one
/// was asked.
static bool printHelpIfAsked(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    StringRef arg(argv[i]);
    if (arg == "--help-options") {
      mlir::par::CompileOptions().printHelp(2, 44);
      return true;
    }
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      cl::ParseCommandLineOptions(1, argv, kOverview);
      cl::PrintHelpMessage(/*Hidden=*/false, /*Categorized=*/true);
      llvm::outs() << "\nThe pipeline's options (--options=\"KEY=VALUE "
                      "...\"):\n";
      mlir::par::CompileOptions().printHelp(2, 44);
      return true;
    }
  }
  return false;
}

/// Where the runtime libraries are: lib/ next to this tool's bin/ (build
/// tree layout).
static std::string runtimeLibDir(const std::string &self) {
  llvm::SmallString<256> libDir(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)));
  llvm::sys::path::append(libDir, "lib");
  return libDir.str().str();
}

static std::string joinPath(StringRef dir, StringRef file) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, file);
  return path.str().str();
}

/// What the cuda target needs on this machine: the GPU host library and
/// the toolkit's tools. Failure with `error` naming what is missing.
static LogicalResult checkCudaTools(const std::string &libDir,
                                    StringRef toolkit, std::string &error) {
  if (!llvm::sys::fs::exists(joinPath(libDir, "libpar_runtime_gpu.so"))) {
    error = "the cuda target needs libpar_runtime_gpu.so, which par builds "
            "only when it finds the CUDA toolkit; none in " +
            libDir;
    return failure();
  }
  for (const char *tool : {"bin/ptxas", "bin/fatbinary",
                           "nvvm/libdevice/libdevice.10.bc",
                           "lib64/stubs/libcuda.so"}) {
    std::string path = joinPath(toolkit, tool);
    if (!llvm::sys::fs::exists(path)) {
      error = "the cuda target needs the CUDA toolkit: no " + path +
              " (set --cuda-toolkit)";
      return failure();
    }
  }
  return success();
}

/// The compile cache's key: the model, every option, the host CPU and par
/// itself (this executable, in which every pass is linked, the runtime the
/// artifact links, and the LLVM it was built with).
static std::string cacheKey(const std::string &modelText,
                            const mlir::par::CompileOptions &options,
                            const mlir::par::TargetSpec &spec,
                            const mlir::par::ArtifactOptions &artifact,
                            const std::string &self) {
  std::string optionText;
  llvm::raw_string_ostream os(optionText);
  options.print(os);
  std::string host = llvm::sys::getHostCPUName().str();
  for (const auto &f : llvm::sys::getHostCPUFeatures())
    host += (f.second ? "+" : "-") + f.first().str() + ",";
  const std::string &libDir = artifact.link.runtimeLibDir;
  std::vector<std::string> parts = {
      "par-compile-cache-1", modelText, optionText, host,
      LLVM_VERSION_STRING, mlir::par::CompileCache::hashFile(self),
      mlir::par::CompileCache::hashFile(
          joinPath(libDir, "libpar_runtime.so")),
      libDir, artifact.reference ? "reference" : "no-reference",
      std::to_string(artifact.link.optLevel) +
          (artifact.link.unrollLoops ? "unroll" : "no-unroll")};
  if (spec.isCuda()) {
    parts.push_back(mlir::par::CompileCache::hashFile(
        joinPath(libDir, "libpar_runtime_gpu.so")));
    parts.push_back(spec.gpu.toolkit);
  }
  return mlir::par::CompileCache::key(parts);
}

/// Builds the artifact, through the compile cache when `cached`.
static int compile(ModuleOp model, const std::string &modelText,
                   const mlir::par::CompileOptions &options,
                   const mlir::par::TargetSpec &spec,
                   const mlir::par::ArtifactOptions &artifact,
                   mlir::par::CompileCache &cache, bool cached,
                   const std::string &self) {
  std::string key;
  if (cached) {
    key = cacheKey(modelText, options, spec, artifact, self);
    std::string warning;
    if (cache.fetch(key, outputDir, warning)) {
      llvm::outs() << "par-compile: wrote " << outputDir
                   << " (from the compile cache)\n";
      return 0;
    }
    if (!warning.empty())
      llvm::errs() << "par-compile: warning: " << warning << "\n";
  }
  std::string error;
  if (failed(mlir::par::buildArtifact(model, options, spec, artifact, error)))
    return fail(error);
  if (cached) {
    std::string warning;
    cache.store(key, outputDir, mlir::par::artifactFiles(artifact.reference),
                warning);
    if (!warning.empty())
      llvm::errs() << "par-compile: warning: " << warning
                   << " (the artifact is not cached)\n";
  }
  llvm::outs() << "par-compile: wrote " << outputDir << "\n";
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  hideOtherOptions();
  if (printHelpIfAsked(argc, argv))
    return 0;
  cl::ParseCommandLineOptions(argc, argv, kOverview);
  uint64_t limit;
  if (!mlir::par::parseByteSize(cacheLimit, limit))
    return fail("bad --cache-limit '" + cacheLimit + "' (expected bytes, "
                "or a size such as 512MiB or 10GiB)");
  std::string cachePath = cacheDir.empty()
                              ? mlir::par::CompileCache::defaultDir()
                              : cacheDir.getValue();
  mlir::par::CompileCache cache(cachePath, limit);
  if (cacheClean) {
    std::string error;
    if (failed(cache.clean(error)))
      return fail(error);
    llvm::outs() << "par-compile: emptied the compile cache " << cachePath
                 << "\n";
    return 0;
  }
  if (inputFile.empty())
    return fail("no model (par-compile MODEL.mlir -o OUT)");
  if (outputDir.empty())
    return fail("no artifact directory (-o OUT)");
  std::unique_ptr<mlir::par::CompileOptions> options =
      mlir::par::CompileOptions::createFromString(pipelineOptions);
  if (!options)
    return fail("bad --options '" + pipelineOptions + "'");
  if (!target.empty())
    options->target.name = target;
  // The same checks as par-compile-pipeline's (lib/Pipelines).
  std::string error;
  FailureOr<mlir::par::TargetSpec> spec =
      mlir::par::checkCompileOptions(*options, error);
  if (failed(spec))
    return fail(error);
  spec->gpu.toolkit = cudaToolkit;

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  mlir::par::registerAllParDialects(registry);
  mlir::par::registerSharedObjectTranslations(registry);
  MLIRContext context(registry);
  // A compiler driver's errors name the location, not the whole op: a
  // stage function printed after "see current operation" is thousands of
  // lines (par-opt keeps mlir-opt's default for pass developers).
  context.printOpOnDiagnostic(false);

  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFile, &error);
  if (!input)
    return fail("cannot open model '" + inputFile + "'");
  std::string modelText = input->getBuffer().str();
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
  artifact.link.threads = jobs;
  artifact.link.optLevel = std::min(3u, llvmOptLevel.getValue());
  artifact.link.unrollLoops = llvmUnroll;
  std::string self = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&fail));
  artifact.link.runtimeLibDir = runtimeLibDir(self);
  if (!llvm::sys::fs::exists(
          joinPath(artifact.link.runtimeLibDir, "libpar_runtime.so")))
    return fail("cannot find libpar_runtime.so in " +
                artifact.link.runtimeLibDir);
  if (spec->isCuda() &&
      failed(checkCudaTools(artifact.link.runtimeLibDir, cudaToolkit, error)))
    return fail(error);

  // The cache: off when asked, and for compiles whose output is more than
  // the artifact (reports printed, the memory limit's warnings, temporaries
  // kept), which it cannot replay.
  bool cached = !noCache && !cachePath.empty() && !keepTemps &&
                !options->report && !options->commReport &&
                options->memoryLimit.empty();
  return compile(*model, modelText, *options, *spec, artifact, cache, cached,
                 self);
}
