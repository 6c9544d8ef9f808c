//===- SharedObject.cpp - LLVM dialect to a loadable shared object --------===//
//
// See SharedObject.h. This replaces the mlir-translate | opt -O3 | llc -O3
// -mcpu=native | c++ -shared chain the first par-compile ran as separate
// processes: the same steps, in process, with the host's TargetMachine also
// driving the optimiser's cost model, on several threads (one LLVMContext
// per part, as LLVM's parallel code generation does).
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

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/IPO/AlwaysInliner.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <cstdlib>
#include <memory>

using namespace mlir;
using namespace mlir::par;

namespace {

/// The host's target: its triple, CPU and features (-mcpu=native), read
/// once on the calling thread; each worker builds its own TargetMachine.
struct HostTarget {
  const llvm::Target *target = nullptr;
  llvm::Triple triple;
  std::string cpu;
  std::string features;
};

LogicalResult lookupHost(HostTarget &host, std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  host.triple = llvm::Triple(llvm::sys::getProcessTriple());
  host.target = llvm::TargetRegistry::lookupTarget(host.triple, error);
  if (!host.target)
    return failure();
  host.cpu = llvm::sys::getHostCPUName().str();
  for (const auto &f : llvm::sys::getHostCPUFeatures())
    host.features += (f.second ? "+" : "-") + f.first().str() + ",";
  return success();
}

/// Position-independent code for a shared object, -O3 code generation.
std::unique_ptr<llvm::TargetMachine> createTargetMachine(const HostTarget &host,
                                                         unsigned optLevel) {
  return std::unique_ptr<llvm::TargetMachine>(host.target->createTargetMachine(
      host.triple, host.cpu, host.features, llvm::TargetOptions(),
      llvm::Reloc::PIC_, std::nullopt,
      optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
      : optLevel == 2 ? llvm::CodeGenOptLevel::Default
      : optLevel == 1 ? llvm::CodeGenOptLevel::Less
                      : llvm::CodeGenOptLevel::None));
}

/// Runs on `module` the module pipeline `build` makes with a PassBuilder
/// for `tm` (analyses registered and cross-registered).
void runModulePipeline(
    llvm::Module &module, llvm::TargetMachine &tm,
    llvm::PipelineTuningOptions tuning,
    llvm::function_ref<llvm::ModulePassManager(llvm::PassBuilder &)> build) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  build(pb).run(module, mam);
}

/// The module pipeline of `opt -O<level>`, vectorisers on.
void optimize(llvm::Module &module, llvm::TargetMachine &tm,
              const SharedObjectOptions &options) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopUnrolling = options.unrollLoops;
  llvm::OptimizationLevel level = options.optLevel >= 3
                                      ? llvm::OptimizationLevel::O3
                                  : options.optLevel == 2
                                      ? llvm::OptimizationLevel::O2
                                  : options.optLevel == 1
                                      ? llvm::OptimizationLevel::O1
                                      : llvm::OptimizationLevel::O0;
  runModulePipeline(module, tm, tuning, [&](llvm::PassBuilder &pb) {
    return pb.buildPerModuleDefaultPipeline(level);
  });
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

struct Partition {
  llvm::SmallPtrSet<const llvm::GlobalValue *, 16> members;
  bool host = false;
  uint64_t size = 0; // instructions
};

/// Splits `module`'s definitions into parts: every global variable and
/// every optnone function (host code) in part 0; each other function (a
/// kernel) with its OpenMP bodies ("<kernel>..omp_par") in one of up to
/// kMaxCodegenParts - 1 others, biggest first onto the smallest part.
/// Local symbols become hidden globals, so the parts link together.
std::vector<Partition> partition(llvm::Module &module) {
  for (llvm::GlobalValue &gv : module.global_values()) {
    if (gv.isDeclaration())
      continue;
    if (gv.hasLocalLinkage()) {
      gv.setLinkage(llvm::GlobalValue::ExternalLinkage);
      gv.setVisibility(llvm::GlobalValue::HiddenVisibility);
    }
    if (!gv.hasName())
      gv.setName("__par_anon");
  }
  std::vector<Partition> parts(1);
  parts[0].host = true;
  for (llvm::GlobalVariable &gv : module.globals())
    if (!gv.isDeclaration())
      parts[0].members.insert(&gv);
  // Kernels with the functions named after them.
  llvm::MapVector<llvm::Function *, SmallVector<llvm::Function *>> clusters;
  for (llvm::Function &f : module) {
    if (f.isDeclaration())
      continue;
    if (f.hasOptNone()) {
      parts[0].members.insert(&f);
      continue;
    }
    llvm::Function *root = &f;
    size_t dots = f.getName().find("..");
    if (dots != StringRef::npos)
      if (llvm::Function *owner = module.getFunction(f.getName().take_front(dots));
          owner && !owner->isDeclaration() && !owner->hasOptNone())
        root = owner;
    clusters[root].push_back(&f);
  }
  struct Cluster {
    SmallVector<llvm::Function *> functions;
    uint64_t size = 0;
  };
  std::vector<Cluster> sorted;
  for (auto &[root, functions] : clusters) {
    Cluster c{functions, 0};
    for (llvm::Function *f : functions)
      c.size += f->getInstructionCount();
    sorted.push_back(std::move(c));
  }
  llvm::stable_sort(sorted, [](const Cluster &a, const Cluster &b) {
    return a.size > b.size;
  });
  unsigned kernelParts = std::min<size_t>(kMaxCodegenParts - 1, sorted.size());
  parts.resize(1 + kernelParts);
  for (Cluster &c : sorted) {
    Partition *smallest = &parts[1];
    for (unsigned k = 2; k <= kernelParts; ++k)
      if (parts[k].size < smallest->size)
        smallest = &parts[k];
    for (llvm::Function *f : c.functions)
      smallest->members.insert(f);
    smallest->size += c.size;
  }
  return parts;
}

/// One part, on a worker thread: its own context, read from bitcode,
/// optimised, verified, emitted to `object`.
LogicalResult compilePart(StringRef bitcode, bool hostCode,
                          const HostTarget &host,
                          const SharedObjectOptions &options,
                          StringRef object, StringRef ll,
                          std::string &error) {
  llvm::LLVMContext context;
  llvm::Expected<std::unique_ptr<llvm::Module>> part = llvm::parseBitcodeFile(
      llvm::MemoryBufferRef(bitcode, "part"), context);
  if (!part) {
    error = "cannot read a part back: " + llvm::toString(part.takeError());
    return failure();
  }
  std::unique_ptr<llvm::TargetMachine> tm =
      createTargetMachine(host, hostCode ? 0 : options.optLevel);
  if (!tm) {
    error = "cannot create a target machine for " + host.triple.str();
    return failure();
  }
  if (!hostCode)
    optimize(**part, *tm, options);
  std::string verifier;
  llvm::raw_string_ostream vos(verifier);
  if (llvm::verifyModule(**part, &vos)) {
    error = "the optimised LLVM IR does not verify: " + verifier;
    return failure();
  }
  if (!ll.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(ll, ec, llvm::sys::fs::OF_Text);
    if (!ec)
      (*part)->print(os, nullptr);
  }
  return emitObject(**part, *tm, object, error);
}

LogicalResult link(ArrayRef<std::string> objects, StringRef path,
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
                                   path.str()};
  args.insert(args.end(), objects.begin(), objects.end());
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
  HostTarget host;
  if (failed(lookupHost(host, error)))
    return failure();
  std::unique_ptr<llvm::TargetMachine> tm =
      createTargetMachine(host, options.optLevel);
  if (!tm) {
    error = "cannot create a target machine for " + host.triple.str();
    return failure();
  }
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

  // Entry points into their C interfaces (par-emit-packed-entry marks them
  // alwaysinline), across the whole module before it is split.
  runModulePipeline(*llvmModule, *tm, {}, [](llvm::PassBuilder &) {
    llvm::ModulePassManager mpm;
    mpm.addPass(llvm::AlwaysInlinerPass(/*InsertLifetime=*/false));
    return mpm;
  });

  // The parts: a fixed split (the objects are the same whatever the thread
  // count). Host code (optnone: the entry points with their calls) in part
  // 0, generated without optimisation; kernels (par-outline-kernels, with
  // their OpenMP bodies) spread over the others by size, optimised.
  std::vector<llvm::SmallString<0>> bitcode;
  std::vector<bool> hostPart;
  for (Partition &part : partition(*llvmModule)) {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> m = llvm::CloneModule(
        *llvmModule, map, [&](const llvm::GlobalValue *gv) {
          return part.members.contains(gv);
        });
    llvm::SmallString<0> buffer;
    llvm::raw_svector_ostream os(buffer);
    llvm::WriteBitcodeToFile(*m, os);
    bitcode.push_back(std::move(buffer));
    hostPart.push_back(part.host);
  }
  llvmModule.reset();

  std::string stem = path.str();
  if (StringRef(stem).ends_with(".so"))
    stem.resize(stem.size() - 3);
  std::vector<std::string> objects, errors(bitcode.size());
  std::vector<char> partFailed(bitcode.size(), 0);
  for (size_t k = 0; k < bitcode.size(); ++k)
    objects.push_back(stem + "." + std::to_string(k) + ".o");
  {
    llvm::DefaultThreadPool pool(
        llvm::heavyweight_hardware_concurrency(options.threads));
    for (size_t k = 0; k < bitcode.size(); ++k)
      pool.async([&, k] {
        std::string ll = options.keepTemps
                             ? stem + "." + std::to_string(k) + ".ll"
                             : std::string();
        partFailed[k] = mlir::failed(compilePart(bitcode[k], hostPart[k],
                                                 host, options,
                                             objects[k], ll, errors[k]));
      });
    pool.wait();
  }
  LogicalResult result = success();
  for (size_t k = 0; k < bitcode.size() && succeeded(result); ++k)
    if (partFailed[k]) {
      error = errors[k];
      result = failure();
    }
  if (succeeded(result))
    result = link(objects, path, options, error);
  if (!options.keepTemps)
    for (const std::string &object : objects)
      llvm::sys::fs::remove(object);
  return result;
}
