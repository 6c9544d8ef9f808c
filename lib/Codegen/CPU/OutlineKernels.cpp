//===- OutlineKernels.cpp - par-outline-kernels ---------------------------===//
//
// Kernels as functions, each distinct one once (see Passes.td). The step
// of an L-layer model holds L copies of every layer's kernels; outlined and
// keyed by their printed form (par/Codegen/KernelKey.h) they are one
// function each, so LLVM's work grows with the distinct kernels, not with
// the depth. docs/RationaleCPUKernels.md, "Compile time".
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"
#include "par/Codegen/KernelKey.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#define DEBUG_TYPE "par-outline-kernels"

namespace mlir::par {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The profiler's hooks (par_kernel_abi.h) declared in `module` once.
std::pair<func::FuncOp, func::FuncOp> profileHooks(ModuleOp module,
                                                   OpBuilder &b) {
  MLIRContext *ctx = module.getContext();
  auto declare = [&](StringRef name, FunctionType type) {
    if (auto fn = module.lookupSymbol<func::FuncOp>(name))
      return fn;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto fn = func::FuncOp::create(b, module.getLoc(), name, type);
    fn.setPrivate();
    return fn;
  };
  Type i64 = IntegerType::get(ctx, 64);
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  return {declare("par_rt_k_profile_begin", FunctionType::get(ctx, {}, {i64})),
          declare("par_rt_k_profile_end",
                  FunctionType::get(ctx, {ptr, i64}, {}))};
}

/// Brackets kernel `fn`'s body with the profiler's hooks: its start time
/// taken on entry, its name and time given back before the return.
void addProfileHooks(func::FuncOp fn, func::FuncOp begin, func::FuncOp end) {
  Block &body = fn.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  Location loc = fn.getLoc();
  Value start = func::CallOp::create(b, loc, begin).getResult(0);
  b.setInsertionPoint(body.getTerminator());
  std::string name = (fn.getName() + "_name").str();
  std::string text = fn.getName().str() + '\0';
  Value ptr = LLVM::createGlobalString(loc, b, name, text,
                                       LLVM::Linkage::Internal);
  func::CallOp::create(b, loc, end, ValueRange{ptr, start});
}

bool isKernel(Operation *op) {
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return linalgOp.hasPureBufferSemantics();
  return isa<scf::ForallOp>(op);
}

/// A value the kernel reads that is cloned into it rather than passed: a
/// constant (so loop bounds and splats stay static in the kernel).
bool isClonedConstant(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->getNumOperands() == 0 && def->getNumRegions() == 0 &&
         def->hasTrait<OpTrait::ConstantLike>();
}

struct Kernel {
  func::FuncOp fn;
  int64_t ops = 0;   // ops in its body
  int64_t calls = 0; // call sites
};

struct OutlineKernelsPass
    : public mlir::par::impl::OutlineKernelsBase<OutlineKernelsPass> {
  using OutlineKernelsBase::OutlineKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // The outermost kernels of every function with a body.
    SmallVector<Operation *> roots;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() || fn->hasAttr(ParDialect::kKernelAttrName))
        continue;
      fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (!isKernel(op))
          return WalkResult::advance();
        if (op->getNumResults() == 0)
          roots.push_back(op);
        return WalkResult::skip();
      });
    }
    SymbolTable symbols(module);
    llvm::StringMap<unsigned> byKey; // key -> index in `kernels`
    std::vector<Kernel> kernels;
    OpBuilder moduleBuilder = OpBuilder::atBlockEnd(module.getBody());
    for (Operation *op : roots) {
      // What the kernel reads from outside: its operands and the values
      // its regions capture, in order of first use.
      llvm::SetVector<Value> reads;
      for (Value v : op->getOperands())
        reads.insert(v);
      llvm::SetVector<Value> captured;
      getUsedValuesDefinedAbove(op->getRegions(), captured);
      reads.insert(captured.begin(), captured.end());
      SmallVector<Value> args;
      SmallVector<Value> constants;
      for (Value v : reads)
        (isClonedConstant(v) ? constants : args).push_back(v);

      auto type = FunctionType::get(ctx, ValueRange(args).getTypes(), {});
      auto fn = func::FuncOp::create(moduleBuilder, op->getLoc(), "kernel",
                                     type);
      fn.setPrivate();
      fn->setAttr(ParDialect::kKernelAttrName, UnitAttr::get(ctx));
      fn.setNoInline(true);
      Block *body = fn.addEntryBlock();
      OpBuilder b = OpBuilder::atBlockBegin(body);
      IRMapping map;
      for (auto [outer, arg] : llvm::zip(args, body->getArguments()))
        map.map(outer, arg);
      for (Value c : constants)
        map.map(c, b.clone(*c.getDefiningOp())->getResult(
                       cast<OpResult>(c).getResultNumber()));
      b.clone(*op, map);
      func::ReturnOp::create(b, op->getLoc());

      std::string key = kernelKey(fn);
      auto [it, fresh] = byKey.try_emplace(key, kernels.size());
      if (fresh) {
        std::string name = "par_kernel_" + std::to_string(kernels.size()) +
                           "_" + op->getName().stripDialect().str();
        for (char &c : name)
          if (!llvm::isAlnum(c))
            c = '_';
        fn.setName(name);
        symbols.insert(fn); // uniques the name if a user's function has it
        Kernel k{fn, 0, 0};
        fn.walk([&](Operation *) { ++k.ops; });
        kernels.push_back(k);
        if (profile) {
          auto [begin, end] = profileHooks(module, moduleBuilder);
          addProfileHooks(fn, begin, end);
        }
      } else {
        fn.erase();
      }
      Kernel &kernel = kernels[it->second];
      ++kernel.calls;
      OpBuilder call(op);
      func::CallOp::create(call, op->getLoc(), kernel.fn, args);
      op->erase();
    }
    if (!report)
      return;
    int64_t total = 0;
    for (const Kernel &k : kernels)
      total += k.calls;
    llvm::outs() << "par-outline-kernels: kernels: " << total << " total, "
                 << kernels.size() << " distinct\n";
    SmallVector<const Kernel *> biggest;
    for (const Kernel &k : kernels)
      biggest.push_back(&k);
    llvm::stable_sort(biggest, [](const Kernel *a, const Kernel *b) {
      return a->ops > b->ops;
    });
    for (const Kernel *k : ArrayRef(biggest).take_front(5))
      llvm::outs() << "  " << func::FuncOp(k->fn).getName() << ": " << k->ops << " ops, "
                   << k->calls << " call" << (k->calls == 1 ? "" : "s")
                   << "\n";
  }
};

} // namespace
