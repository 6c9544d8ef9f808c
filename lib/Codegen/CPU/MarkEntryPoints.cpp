//===- MarkEntryPoints.cpp - par-mark-entry-points ------------------------===//

#include "par/Codegen/CPU/Passes.h"

#define DEBUG_TYPE "par-mark-entry-points"

namespace mlir::par {
#define GEN_PASS_DEF_MARKENTRYPOINTS
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct MarkEntryPointsPass
    : public mlir::par::impl::MarkEntryPointsBase<MarkEntryPointsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    auto sharding = StringAttr::get(ctx, ParDialect::kShardingAttrName);
    auto global = StringAttr::get(ctx, ParDialect::kGlobalTypeAttrName);
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isPublic() && !fn.isExternal())
        fn->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
      // The layout is in the manifest by now; below tensor level these
      // attributes would describe memrefs and LLVM arguments.
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        fn.removeArgAttr(i, sharding);
        fn.removeArgAttr(i, global);
        fn.removeArgAttr(i, ParDialect::kInitAttrName);
        fn.removeArgAttr(i, ParDialect::kParamAttrName);
        fn.removeArgAttr(i, ParDialect::kLossScaleAttrName);
        fn.removeArgAttr(i, ParDialect::kErrorFeedbackAttrName);
        fn.removeArgAttr(i, ParDialect::kCompressionStepAttrName);
        fn.removeArgAttr(i, ParDialect::kNameAttrName);
        fn.removeArgAttr(i, ParDialect::kAliasesAttrName);
        fn.removeArgAttr(i, ParDialect::kSliceAttrName);
        fn.removeArgAttr(i, ParDialect::kDataAttrName);
        fn.removeArgAttr(i, ParDialect::kVocabAttrName);
      }
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        fn.removeResultAttr(i, sharding);
        fn.removeResultAttr(i, global);
      }
      fn->removeAttr(ParDialect::kFeedbackAttrName);
    }
  }
};
} // namespace
