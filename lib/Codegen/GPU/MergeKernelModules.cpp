//===- MergeKernelModules.cpp - par-gpu-merge-kernel-modules --------------===//
//
// One gpu.module for all kernels, each distinct kernel once (see
// Passes.td).
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/GPU/Passes.h"
#include "par/Codegen/KernelKey.h"

#include "mlir/IR/SymbolTable.h"

#define DEBUG_TYPE "par-gpu-merge-kernel-modules"

namespace mlir::par {
#define GEN_PASS_DEF_MERGEKERNELMODULES
#include "par/Codegen/GPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

struct MergeKernelModulesPass
    : public mlir::par::impl::MergeKernelModulesBase<MergeKernelModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> kernels(module.getOps<gpu::GPUModuleOp>());
    if (kernels.size() < 2)
      return;
    OpBuilder b(kernels.front());
    auto merged = gpu::GPUModuleOp::create(b, kernels.front().getLoc(),
                                           "par_kernels");
    if (ArrayAttr targets = kernels.front().getTargetsAttr())
      merged.setTargetsAttr(targets);
    SymbolTable table(module); // uniques "par_kernels" if it was taken
    table.insert(merged);
    Block &body = merged.getBodyRegion().front();
    // module name -> its kernels' new symbol
    llvm::StringMap<llvm::StringMap<StringAttr>> renamed;
    // A kernel's structural key -> the merged module's copy of it: the
    // layers' identical kernels are compiled (and held in the fatbin) once.
    llvm::StringMap<StringAttr> distinct;
    for (gpu::GPUModuleOp kernel : kernels) {
      StringRef from = kernel.getName();
      for (Operation &op :
           llvm::make_early_inc_range(kernel.getBodyRegion().front())) {
        auto fn = dyn_cast<gpu::GPUFuncOp>(op);
        if (!fn) {
          kernel.emitError("par-gpu-merge-kernel-modules: a kernel module "
                           "holds '")
              << op.getName() << "', not only kernels";
          return signalPassFailure();
        }
        // The first function takes the module's (unique) name, others get
        // a suffix.
        std::string name = from.str();
        if (renamed[from].size())
          name += "_" + fn.getName().str();
        StringAttr newName = StringAttr::get(&getContext(), name);
        auto [it, fresh] = distinct.try_emplace(kernelKey(fn), newName);
        renamed[from][fn.getName()] = it->second;
        if (!fresh) {
          fn.erase();
          continue;
        }
        fn->moveBefore(&body, body.end());
        fn.setName(newName);
      }
      kernel.erase();
    }
    StringAttr mergedName = merged.getNameAttr();
    WalkResult walk = module.walk([&](gpu::LaunchFuncOp launch) {
      auto it = renamed.find(launch.getKernelModuleName());
      if (it == renamed.end())
        return WalkResult::advance();
      StringAttr fn = it->second.lookup(launch.getKernelName());
      if (!fn) {
        launch.emitError("par-gpu-merge-kernel-modules: unknown kernel");
        return WalkResult::interrupt();
      }
      launch.setKernelAttr(SymbolRefAttr::get(
          mergedName, {FlatSymbolRefAttr::get(fn)}));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
