//===- GradientReducePrecision.cpp - par-gradient-reduce-precision --------===//
//
// In a mixed-precision program the gradients of the f32 master weights are
// reduced over the data-parallel axes in f32 (Megatron's
// accumulate-allreduce-grads-in-fp32). With this pass they are reduced in
// the compute type instead, as PyTorch DDP's fp16/bf16 compression hooks
// do: each device rounds its partial gradient to 16 bits, the all_reduce
// moves half the bytes (the runtime sums in f32 and rounds once, the same
// on every rank), and the sum is widened back. Runs on the partitioned
// program. The gradient functions are the ones a forward links by
// `par.grad` whose forward has `par.mixed_precision`; the data-parallel
// axes are those splitting dim 0 of the forward's data arguments (not
// parameters, not the loss scale); the reductions rewritten are the f32 sum
// all_reduces of rank >= 1 over data-parallel axes only (scalars such as
// the loss stay f32), in the gradient function, the train step (which
// reduces accumulated micro-batch gradients after par-sink-reductions) and
// the functions the step calls.
//
//===----------------------------------------------------------------------===//

#include "par/Communication/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "par-gradient-reduce-precision"

namespace mlir::par {
#define GEN_PASS_DEF_GRADIENTREDUCEPRECISION
#include "par/Communication/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

struct GradientReducePrecisionPass
    : public mlir::par::impl::GradientReducePrecisionBase<
          GradientReducePrecisionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto fwd : module.getOps<FunctionOpInterface>()) {
      auto compute = fwd->getAttrOfType<TypeAttr>(
          ParDialect::kMixedPrecisionAttrName);
      FunctionOpInterface grad =
          getLinkedFunction(fwd, ParDialect::kGradAttrName);
      if (!compute || !grad)
        continue;
      // A train step also links its gradient; only forwards name data axes.
      llvm::StringSet<> dpAxes;
      for (StringRef a : getDataParallelAxes(fwd))
        dpAxes.insert(a);
      if (dpAxes.empty())
        continue;
      // The gradient function, the train step (where par-sink-reductions
      // reduces micro-batch gradients once per step) and what the step
      // calls (the gradient's partial clones).
      SetVector<Operation *> fns;
      fns.insert(grad);
      // A pipeline stage's backward split at its residuals
      // (par-pipeline-stash): the B action's gradients.
      if (auto pipe = module->getAttrOfType<PipelineAttr>(
              ParDialect::kPipelineAttrName))
        for (StageAttr st : pipe.getStages())
          if (st.getBackward() &&
              st.getBackward().getValue() ==
                  cast<SymbolOpInterface>(grad.getOperation()).getName() &&
              st.getStashBackward())
            for (FlatSymbolRefAttr sym :
                 {st.getStashBackward(), st.getStashWeightGrad()})
              if (sym)
                if (Operation *fn = module.lookupSymbol(sym))
                  fns.insert(fn);
      // A pipeline stage's update (it reduces the micro-batch sums).
      if (FunctionOpInterface update =
              getLinkedFunction(fwd, ParDialect::kUpdateAttrName))
        fns.insert(update);
      if (FunctionOpInterface step =
              getLinkedFunction(fwd, ParDialect::kStepAttrName)) {
        fns.insert(step);
        step->walk([&](CallOpInterface call) {
          if (Operation *callee = call.resolveCallable())
            fns.insert(callee);
        });
      }
      SmallVector<AllReduceOp> narrowed;
      for (Operation *fn : fns)
        fn->walk([&](AllReduceOp op) {
          auto t = cast<RankedTensorType>(op.getType());
          if (op.getKind() != ReductionKind::Sum || t.getRank() == 0 ||
              !t.getElementType().isF32())
            return;
          if (llvm::all_of(op.getAxes().getAsValueRange<StringAttr>(),
                           [&](StringRef a) { return dpAxes.contains(a); }))
            narrowed.push_back(op);
        });
      for (AllReduceOp op : narrowed) {
        OpBuilder b(op);
        Location loc = op.getLoc();
        Value narrow = createFloatCast(b, loc, op.getInput(), compute.getValue());
        Value reduced = AllReduceOp::create(
            b, loc, narrow.getType(), narrow, op.getMeshAttr(), op.getAxes(),
            op.getKindAttr());
        Value wide =
            createFloatCast(b, loc, reduced, op.getType().getElementType());
        op.getResult().replaceAllUsesWith(wide);
        op->erase();
        ++numRewritten;
      }
    }
  }
};

} // namespace
