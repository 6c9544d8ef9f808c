//===- ReturnDonated.cpp - par-return-donated -----------------------------===//
//
// par-donate-buffers asks bufferization to compute donated results in their
// arguments' buffers; this pass guarantees it: whatever one-shot
// bufferization made of a donated result, the function returns the
// argument, holding the result's value.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"

#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/BitVector.h"

#include <map>

#define DEBUG_TYPE "par-return-donated"

namespace mlir::par {
#define GEN_PASS_DEF_RETURNDONATED
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The buffer `v` views (through casts, subviews, reshapes).
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// The attribute holding the donated results a function no longer returns
/// (original result index, argument), between the two runs.
constexpr StringLiteral kDropped = ParDialect::kDonatedDroppedAttrName;

/// Whether a call in the module calls `fn` (other references, such as the
/// module's `par.pipeline` naming the stage updates, do not see results).
bool isCalled(func::FuncOp fn) {
  auto module = fn->getParentOfType<ModuleOp>();
  std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(
      fn, module);
  if (!uses)
    return true;
  for (const SymbolTable::SymbolUse &use : *uses)
    if (isa<CallOpInterface>(use.getUser()))
      return true;
  return false;
}

struct ReturnDonatedPass
    : public mlir::par::impl::ReturnDonatedBase<ReturnDonatedPass> {
  using ReturnDonatedBase::ReturnDonatedBase;

  void runOnOperation() override {
    if (restore)
      return restoreResults();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      auto pairs =
          fn->getAttrOfType<DenseI64ArrayAttr>(ParDialect::kDonatedAttrName);
      if (!pairs)
        continue;
      fn->removeAttr(ParDialect::kDonatedAttrName);
      if (fn.isExternal())
        continue;
      auto ret = dyn_cast<func::ReturnOp>(fn.getBody().back().getTerminator());
      if (!ret || fn.getBody().getBlocks().size() != 1) {
        fn.emitError("par-return-donated: a donating function must have one "
                     "block ending in func.return");
        return signalPassFailure();
      }
      OpBuilder b(ret);
      Location loc = ret.getLoc();
      llvm::SmallDenseSet<Value> targets;
      for (size_t i = 0; i + 1 < pairs.size(); i += 2)
        targets.insert(fn.getArgument(pairs[i + 1]));
      // Sources that a pair writes (a donated argument, or a view of one,
      // returned for another result) are copied aside before any write.
      SmallVector<std::pair<Value, BlockArgument>> writes;
      for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
        int64_t r = pairs[i], a = pairs[i + 1];
        Value v = ret.getOperand(r);
        BlockArgument arg = fn.getArgument(a);
        if (v == arg)
          continue;
        if (!isa<MemRefType>(v.getType()) ||
            !isa<MemRefType>(arg.getType())) {
          fn.emitError() << "par-return-donated: result #" << r
                         << " or argument #" << a
                         << " is not a buffer (run after bufferization)";
          return signalPassFailure();
        }
        if (targets.contains(rootOf(v))) {
          auto type = cast<MemRefType>(arg.getType());
          Value aside = memref::AllocOp::create(
              b, loc, MemRefType::get(type.getShape(), type.getElementType()));
          memref::CopyOp::create(b, loc, v, aside);
          v = aside;
        }
        writes.push_back({v, arg});
        ret.setOperand(r, arg);
      }
      for (auto [v, arg] : writes)
        memref::CopyOp::create(b, loc, v, arg);
      // The donated results leave the body until the deallocation passes
      // are done: returned arguments would be retained by every
      // deallocation, whose simplification compares each pair (quadratic
      // in the parameters). A function something calls keeps them.
      if (isCalled(fn))
        continue;
      llvm::BitVector drop(fn.getNumResults());
      SmallVector<int64_t> dropped;
      for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
        drop.set(pairs[i]);
        dropped.push_back(pairs[i]);
        dropped.push_back(pairs[i + 1]);
      }
      SmallVector<Value> kept;
      for (auto [k, v] : llvm::enumerate(ret.getOperands()))
        if (!drop.test(k))
          kept.push_back(v);
      ret->setOperands(kept);
      if (failed(fn.eraseResults(drop))) {
        fn.emitError("par-return-donated: cannot drop the donated results");
        return signalPassFailure();
      }
      fn->setAttr(kDropped, DenseI64ArrayAttr::get(fn.getContext(), dropped));
    }
  }

  /// The donated results back at their positions, returning their
  /// arguments.
  void restoreResults() {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      auto dropped = fn->getAttrOfType<DenseI64ArrayAttr>(kDropped);
      if (!dropped)
        continue;
      fn->removeAttr(kDropped);
      std::map<int64_t, int64_t> argOf; // original result -> argument
      for (size_t i = 0; i + 1 < dropped.size(); i += 2)
        argOf[dropped[i]] = dropped[i + 1];
      auto ret = cast<func::ReturnOp>(fn.getBody().back().getTerminator());
      SmallVector<Value> operands;
      auto old = ret.getOperands();
      size_t next = 0;
      size_t total = old.size() + argOf.size();
      for (size_t k = 0; k < total; ++k)
        operands.push_back(argOf.count(k) ? Value(fn.getArgument(argOf[k]))
                                          : old[next++]);
      // In increasing order: each index is final when inserted.
      for (auto [k, a] : argOf)
        if (failed(fn.insertResult(k, fn.getArgument(a).getType(),
                                   DictionaryAttr()))) {
          fn.emitError("par-return-donated: cannot restore result #")
              << k;
          return signalPassFailure();
        }
      ret->setOperands(operands);
    }
  }
};

} // namespace
