//===- DonateBuffers.cpp - par-donate-buffers -----------------------------===//
//
// A train step returns its parameters and optimizer state, and the runner
// feeds them back: with separate result buffers it holds every parameter
// and state tensor twice (and a stage update's temporaries a third time).
// Donating the arguments lets the program write the new values over the
// old ones, as DDP's optimizers and JAX's donate_argnums do.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"

#define DEBUG_TYPE "par-donate-buffers"

namespace mlir::par {
#define GEN_PASS_DEF_DONATEBUFFERS
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The (result, argument) pairs a function's runner feeds back: the train
/// step's `par.feedback` (a result feeding two arguments donates to the
/// first), or a stage update's positions.
SmallVector<std::pair<int64_t, int64_t>> candidatePairs(func::FuncOp fn,
                                                        bool isStageUpdate) {
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  int64_t results = fn.getNumResults(), args = fn.getNumArguments();
  if (isStageUpdate) {
    auto stageArgs =
        fn->getAttrOfType<DenseI64ArrayAttr>(ParDialect::kStageArgsAttrName);
    int64_t P = stageArgs ? (int64_t)stageArgs.size() : 0;
    for (int64_t j = 0; j < P && j < results && j < args; ++j)
      pairs.push_back({j, j});
    for (int64_t k = 0; 2 * P + k < args && P + k < results; ++k)
      pairs.push_back({P + k, 2 * P + k});
  } else if (auto fb = fn->getAttrOfType<DenseI64ArrayAttr>(
                 ParDialect::kFeedbackAttrName)) {
    for (size_t i = 0; i + 1 < fb.size(); i += 2)
      pairs.push_back({fb[i], fb[i + 1]});
  }
  // Same type on both sides, each result and argument once.
  SmallVector<std::pair<int64_t, int64_t>> kept;
  llvm::SmallDenseSet<int64_t> seenResults, seenArgs;
  for (auto [r, a] : pairs) {
    if (r < 0 || r >= results || a < 0 || a >= args ||
        fn.getResultTypes()[r] != fn.getArgumentTypes()[a] ||
        !isa<RankedTensorType>(fn.getArgumentTypes()[a]))
      continue;
    if (seenResults.contains(r) || seenArgs.contains(a))
      continue;
    seenResults.insert(r);
    seenArgs.insert(a);
    kept.push_back({r, a});
  }
  return kept;
}

/// Makes the generic computing `v` write it into `arg` when it can: `v`
/// is the generic's result, its init is written through the identity map
/// and not read by the body. One-shot bufferization then computes it in
/// place when nothing reads the argument afterwards (and copies it
/// otherwise: always correct).
bool writeInto(Value v, BlockArgument arg) {
  auto result = dyn_cast<OpResult>(v);
  if (!result)
    return false;
  auto generic = dyn_cast<linalg::GenericOp>(result.getOwner());
  if (!generic)
    return false;
  OpOperand *init = generic.getDpsInitOperand(result.getResultNumber());
  if (init->get() == arg)
    return true;
  if (generic.payloadUsesValueFromOperand(init) ||
      !generic.getMatchingIndexingMap(init).isIdentity() ||
      init->get().getType() != arg.getType())
    return false;
  init->set(arg);
  return true;
}

struct DonateBuffersPass
    : public mlir::par::impl::DonateBuffersBase<DonateBuffersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::SmallDenseSet<StringRef> updates;
    if (auto pipe =
            module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName))
      for (StageAttr stage : pipe.getStages())
        if (stage.getUpdate())
          updates.insert(stage.getUpdate().getValue());
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() || fn.getBody().getBlocks().size() != 1)
        continue;
      // Pairs chosen before (the manifest's, on a second run just before
      // bufferization: elementwise fusion gives generics fresh inits).
      SmallVector<std::pair<int64_t, int64_t>> pairs;
      if (auto done =
              fn->getAttrOfType<DenseI64ArrayAttr>(ParDialect::kDonatedAttrName)) {
        for (size_t i = 0; i + 1 < done.size(); i += 2)
          pairs.push_back({done[i], done[i + 1]});
      } else {
        bool isUpdate = updates.contains(fn.getSymName());
        if (!isUpdate && !fn->hasAttr(ParDialect::kFeedbackAttrName))
          continue;
        pairs = candidatePairs(fn, isUpdate);
      }
      if (pairs.empty())
        continue;
      auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
      SmallVector<int64_t> flat;
      for (auto [r, a] : pairs) {
        writeInto(ret.getOperand(r), fn.getArgument(a));
        flat.push_back(r);
        flat.push_back(a);
      }
      fn->setAttr(ParDialect::kDonatedAttrName,
                  DenseI64ArrayAttr::get(fn.getContext(), flat));
    }
  }
};

} // namespace
