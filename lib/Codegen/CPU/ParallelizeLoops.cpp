//===- ParallelizeLoops.cpp - par-parallelize-loops -----------------------===//
//
// Lowers the linalg ops left on buffers to loops (what
// convert-linalg-to-loops does) and picks which loops a rank's threads
// share: the outer parallel loops of an op with enough work, and the
// fused chains' scf.forall loops (par-fuse-reductions), become scf.parallel
// (then OpenMP, convert-scf-to-openmp); everything else, and every loop
// nested in a parallel one, stays sequential. Only parallel dimensions are
// ever split across threads, never a reduction, so results are the same
// bits at any thread count. See docs/RationaleCPUKernels.md, "Threads".
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

#define DEBUG_TYPE "par-parallelize-loops"

namespace mlir::par {
#define GEN_PASS_DEF_PARALLELIZELOOPS
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

bool insideParallel(Operation *op) {
  return op->getParentOfType<scf::ParallelOp>() ||
         op->getParentOfType<scf::ForallOp>();
}

/// Static iteration count of all loops of `op` (-1 if dynamic).
int64_t volume(linalg::LinalgOp op) {
  int64_t v = 1;
  for (int64_t r : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(r))
      return -1;
    v *= r;
  }
  return v;
}

/// The op's loops start with a parallel one (so the parallel loop nest is
/// outermost and one parallel region covers the whole op).
bool leadingParallel(linalg::LinalgOp op) {
  auto iters = op.getIteratorTypesArray();
  return !iters.empty() && iters.front() == utils::IteratorType::parallel;
}

struct ParallelizeLoopsPass
    : public mlir::par::impl::ParallelizeLoopsBase<ParallelizeLoopsPass> {
  using ParallelizeLoopsBase::ParallelizeLoopsBase;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // The fused chains first: a forall with work to share becomes
    // scf.parallel (unless nested in another parallel loop), else nested
    // scf.for.
    SmallVector<scf::ForallOp> foralls;
    getOperation().walk([&](scf::ForallOp op) { foralls.push_back(op); });
    for (scf::ForallOp op : foralls) {
      int64_t work = 0;
      op.walk([&](linalg::LinalgOp inner) {
        int64_t v = volume(inner);
        work += v < 0 ? minIterations : v;
      });
      std::optional<llvm::APInt> trips = op.getStaticTripCount();
      int64_t iterations = trips ? trips->getSExtValue() : 0;
      // A body with stack buffers keeps the alloca scope OpenMP's
      // conversion wraps it in, which the later lowering of its loops
      // cannot have: such a loop stays sequential.
      bool allocas = op.walk([](memref::AllocaOp) {
                         return WalkResult::interrupt();
                       }).wasInterrupted();
      bool parallel = threads && trips && iterations > 1 &&
                      work * iterations >= minIterations &&
                      !insideParallel(op) && !allocas;
      rewriter.setInsertionPoint(op);
      if (failed(parallel ? scf::forallToParallelLoop(rewriter, op)
                          : scf::forallToForLoop(rewriter, op))) {
        op.emitError("par-parallelize-loops: cannot lower this scf.forall");
        return signalPassFailure();
      }
    }
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics())
        ops.push_back(op);
    });
    for (linalg::LinalgOp op : ops) {
      rewriter.setInsertionPoint(op);
      int64_t v = volume(op);
      bool parallel = threads && v >= minIterations && leadingParallel(op) &&
                      !insideParallel(op);
      FailureOr<linalg::LinalgLoops> loops =
          parallel ? linalg::linalgOpToParallelLoops(rewriter, op)
                   : linalg::linalgOpToLoops(rewriter, op);
      if (failed(loops)) {
        op->emitError("par-parallelize-loops: cannot lower this op to loops");
        return signalPassFailure();
      }
      rewriter.eraseOp(op);
    }
  }
};

} // namespace
