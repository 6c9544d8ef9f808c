//===- SharedObject.cpp - LLVM dialect to a loadable shared object --------===//
//
// See SharedObject.h. This replaces the mlir-translate | opt -O3 | llc -O3
// -mcpu=native | c++ -shared chain the first par-compile ran as separate
// processes: the same steps, in process, with the host's TargetMachine also
// driving the optimiser's cost model.
//
//===----------------------------------------------------------------------===//

#include "par/Target/CPU/SharedObject.h"

#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>
#include <memory>

using namespace mlir;
using namespace mlir::par;

namespace {

/// The host's TargetMachine: its triple, CPU and features (-mcpu=native),
/// position-independent code for a shared object, -O3 code generation.
std::unique_ptr<llvm::TargetMachine> hostTargetMachine(std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string features;
  for (const auto &f : llvm::sys::getHostCPUFeatures())
    features += (f.second ? "+" : "-") + f.first().str() + ",";
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features, llvm::TargetOptions(),
      llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    error = "cannot create a target machine for " + triple.str();
  return tm;
}

/// The O3 module pipeline (what `opt -O3` runs), vectorisers on.
void optimize(llvm::Module &module, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
}

LogicalResult emitObject(llvm::Module &module, llvm::TargetMachine &tm,
                         StringRef path, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr,
                             llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  pm.run(module);
  os.flush();
  return success();
}

LogicalResult link(StringRef object, StringRef path,
                   const SharedObjectOptions &options, std::string &error) {
  const char *cxxEnv = getenv("CXX");
  std::string cxxName = cxxEnv && *cxxEnv ? cxxEnv : "c++";
  llvm::ErrorOr<std::string> cxx = llvm::sys::findProgramByName(cxxName);
  if (!cxx) {
    error = "cannot find the C++ driver '" + cxxName + "' to link with";
    return failure();
  }
  // -Bsymbolic: the program's calls to its own functions bind to them,
  // not to a same-named symbol loaded earlier (a function `step` would
  // otherwise call glibc's step()).
  std::vector<std::string> args = {*cxx, "-shared", "-Wl,-Bsymbolic", "-o",
                                   path.str(), object.str()};
  auto addLib = [&](const std::string &dir, const std::string &name) {
    args.push_back("-L" + dir);
    args.push_back("-l" + name);
    args.push_back("-Wl,-rpath," + dir);
  };
  addLib(options.runtimeLibDir, "par_runtime");
  // The OpenMP runtime of the parallel loops (LLVM's libomp: the
  // translation calls __kmpc_*; Debian's libomp-22-dev).
  addLib(PAR_LIBOMP_DIR, "omp");
  for (const auto &[dir, name] : options.extraLibs)
    addLib(dir, name);
  for (const auto &[dir, name] : options.linkOnlyLibs) {
    args.push_back("-L" + dir);
    args.push_back("-l" + name);
  }
  args.push_back("-lm");
  std::vector<StringRef> refs(args.begin(), args.end());
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*cxx, refs, std::nullopt, {}, 0, 0,
                                     &message);
  if (rc != 0) {
    error = "linking '" + path.str() + "' failed (" + cxxName + " exit " +
            std::to_string(rc) + (message.empty() ? "" : ": " + message) +
            ")";
    return failure();
  }
  return success();
}

} // namespace

void mlir::par::registerSharedObjectTranslations(DialectRegistry &registry) {
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  // par-parallelize-loops' parallel loops (omp.parallel/omp.wsloop).
  registerOpenMPDialectTranslation(registry);
  // The cuda target: kernels serialized by gpu-module-to-binary (NVVM to
  // PTX in process, ptxas and fatbinary from the toolkit), and the host
  // module's gpu.binary embedded with its load/launch calls.
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
}

LogicalResult mlir::par::buildSharedObject(ModuleOp module, StringRef path,
                                           const SharedObjectOptions &options,
                                           std::string &error) {
  std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(error);
  if (!tm)
    return failure();
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context);
  if (!llvmModule) {
    error = "cannot translate the module to LLVM IR";
    return failure();
  }
  // The runtime pool's allocation functions return fresh memory, as malloc
  // does: alias analysis (loop vectorisation, promotion of reduction
  // accumulators to registers) needs to know.
  for (const char *name :
       {"_mlir_memref_to_llvm_alloc", "_mlir_memref_to_llvm_aligned_alloc"})
    if (llvm::Function *f = llvmModule->getFunction(name))
      f->addRetAttr(llvm::Attribute::NoAlias);
  llvmModule->setTargetTriple(tm->getTargetTriple());
  llvmModule->setDataLayout(tm->createDataLayout());
  optimize(*llvmModule, *tm);
  if (llvm::verifyModule(*llvmModule, &llvm::errs())) {
    error = "the optimised LLVM IR does not verify";
    return failure();
  }
  std::string stem = path.str();
  if (StringRef(stem).ends_with(".so"))
    stem.resize(stem.size() - 3);
  if (options.keepTemps) {
    std::error_code ec;
    llvm::raw_fd_ostream ll(stem + ".ll", ec, llvm::sys::fs::OF_Text);
    if (!ec)
      llvmModule->print(ll, nullptr);
  }
  std::string object = stem + ".o";
  if (failed(emitObject(*llvmModule, *tm, object, error)) ||
      failed(link(object, path, options, error)))
    return failure();
  if (!options.keepTemps)
    llvm::sys::fs::remove(object);
  return success();
}
