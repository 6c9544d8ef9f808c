//===- EmitPackedEntry.cpp - par-emit-packed-entry ------------------------===//
//
// One C signature for every entry point: `void par_packed_<name>(void **argv)`
// forwards argv[i] to `_mlir_ciface_<name>` (result pointer first when the
// function returns something, then one memref descriptor pointer per
// argument). Built directly in the LLVM dialect after lowering, which it
// finishes: kernel functions (par.kernel) become internal and no_inline,
// par's meshes go.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"

#define DEBUG_TYPE "par-emit-packed-entry"

namespace mlir::par {
#define GEN_PASS_DEF_EMITPACKEDENTRY
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct EmitPackedEntryPass
    : public mlir::par::impl::EmitPackedEntryBase<EmitPackedEntryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    SmallVector<LLVM::LLVMFuncOp> cifaces;
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
      if (fn.getName().starts_with("_mlir_ciface_") && !fn.isExternal())
        cifaces.push_back(fn);
    for (LLVM::LLVMFuncOp ciface : cifaces) {
      StringRef name = ciface.getName().drop_front(strlen("_mlir_ciface_"));
      LLVM::LLVMFunctionType type = ciface.getFunctionType();
      if (!isa<LLVM::LLVMVoidType>(type.getReturnType()) ||
          !llvm::all_of(type.getParams(),
                        [](Type t) { return isa<LLVM::LLVMPointerType>(t); })) {
        ciface.emitError() << "entry point '" << name
                           << "' has non-tensor arguments or results; "
                              "par_packed_ needs descriptors only";
        return signalPassFailure();
      }
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPointToEnd(module.getBody());
      Location loc = ciface.getLoc();
      auto packed = LLVM::LLVMFuncOp::create(
          b, loc, ("par_packed_" + name).str(),
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
      Block *entry = packed.addEntryBlock(b);
      b.setInsertionPointToStart(entry);
      Value argv = entry->getArgument(0);
      SmallVector<Value> args;
      for (unsigned i = 0; i < type.getNumParams(); ++i) {
        Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, argv,
                                         ArrayRef<LLVM::GEPArg>{(int32_t)i});
        args.push_back(LLVM::LoadOp::create(b, loc, ptr, slot));
      }
      LLVM::CallOp::create(b, loc, ciface, args);
      LLVM::ReturnOp::create(b, loc, ValueRange());
    }
    // par-outline-kernels' functions stay out of line (identical kernels
    // are one function, compiled once) and local to the module. The
    // functions that call them (the entry points: allocations, descriptors
    // and calls, as long as the model is deep) are not optimised: that
    // would cost compile time linear in the depth for no measurable gain.
    // Each entry point is inlined into its C interface (and into the
    // entry points that call it): a call passing hundreds of exploded
    // memref descriptors is what LLVM's instruction selection takes
    // quadratic time over (docs/RationaleCPUKernels.md, "Compile time").
    bool outlined = false;
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
      if (fn->removeAttr(ParDialect::kKernelAttrName)) {
        fn.setNoInline(true);
        fn.setLinkage(LLVM::Linkage::Internal);
        fn->removeAttr("sym_visibility");
        outlined = true;
      }
    if (outlined) {
      llvm::DenseSet<StringRef> entries;
      for (LLVM::LLVMFuncOp ciface : cifaces)
        entries.insert(ciface.getName().drop_front(strlen("_mlir_ciface_")));
      for (auto fn : module.getOps<LLVM::LLVMFuncOp>()) {
        if (fn.isExternal() || fn.getNoInline())
          continue;
        if (entries.contains(fn.getName())) {
          fn.setAlwaysInline(true);
          fn.setLinkage(LLVM::Linkage::Internal);
          continue;
        }
        fn.setNoInline(true);
        fn.setOptimizeNone(true);
      }
    }
    // Collectives are runtime calls by now: meshes have no users left, and
    // the module must be pure LLVM dialect for translation.
    for (MeshOp mesh : llvm::make_early_inc_range(module.getOps<MeshOp>()))
      mesh.erase();
  }
};
} // namespace
