//===- FuseReductions.cpp - par-fuse-reductions ---------------------------===//
//
// Tiles each chain of generics that holds a reduction (LayerNorm, softmax,
// cross-entropy and their backwards) along the rows the reductions keep,
// and fuses the chain's producers into the tile loop: one scf.forall per
// chain, whose body computes a block of rows from the chain's inputs to its
// result. See docs/RationaleCPUKernels.md.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "par-fuse-reductions"

namespace mlir::par {
#define GEN_PASS_DEF_FUSEREDUCTIONS
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// Generics this pass may tile or fuse: on tensors, not contractions (those
/// keep the BLAS path whole), not already inside a tile loop.
bool isFusable(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureTensorSemantics())
    return false;
  // A GEMM (rows and columns each carried by one input only) stays whole
  // for BLAS; a dot along rows (softmax's backward sum(p * dp)) is a
  // reduction like any other.
  if (linalg::isaContractionOpInterface(generic)) {
    FailureOr<linalg::ContractionDimensions> dims =
        linalg::inferContractionDims(generic);
    if (failed(dims) || (!dims->m.empty() && !dims->n.empty()))
      return false;
  }
  return !op->getParentOfType<scf::ForallOp>();
}

bool hasReduction(linalg::GenericOp op) {
  return op.getNumReductionLoops() > 0;
}

/// A chain to tile: its root, the producers to fuse (with, per producer,
/// the loop dims tiled in it) and the root's tile sizes.
struct Group {
  linalg::GenericOp root;
  llvm::DenseMap<Operation *, llvm::SmallDenseSet<unsigned>> tiled;
  SmallVector<int64_t> tileSizes;
};

/// The loop dims of `op` that become tiled when the operand read through
/// `map` (one of op's operand maps) is tiled in the tensor dims `dims`; or
/// nullopt if some tiled tensor dim is not a plain loop dim.
std::optional<llvm::SmallDenseSet<unsigned>>
loopDimsOf(AffineMap map, const llvm::SmallDenseSet<unsigned> &dims) {
  llvm::SmallDenseSet<unsigned> loops;
  for (unsigned d : dims) {
    auto e = dyn_cast<AffineDimExpr>(map.getResult(d));
    if (!e)
      return std::nullopt;
    loops.insert(e.getPosition());
  }
  return loops;
}

/// Grows `g` from its root: an input's producer joins if it is a fusable
/// generic in the same block whose tile is disjoint across the loop's
/// iterations (the consumer reads it through every tiled loop dim, each as a
/// plain result dim), so that fusion computes each of its elements once.
void collect(Group &g, const llvm::SmallDenseSet<unsigned> &rootTiled) {
  SmallVector<std::pair<linalg::GenericOp, llvm::SmallDenseSet<unsigned>>>
      work{{g.root, rootTiled}};
  while (!work.empty()) {
    auto [consumer, loops] = work.pop_back_val();
    for (OpOperand *operand : consumer.getDpsInputOperands()) {
      Operation *def = operand->get().getDefiningOp();
      if (!isFusable(def) || def->getBlock() != g.root->getBlock() ||
          def == g.root.getOperation())
        continue;
      AffineMap map = consumer.getMatchingIndexingMap(operand);
      if (!map.isProjectedPermutation())
        continue;
      // The tensor dims of the operand that carry tiled loops.
      llvm::SmallDenseSet<unsigned> tensorDims;
      unsigned seen = 0;
      for (auto [r, e] : llvm::enumerate(map.getResults()))
        if (loops.contains(cast<AffineDimExpr>(e).getPosition())) {
          tensorDims.insert(r);
          ++seen;
        }
      if (seen != loops.size())
        continue; // some tile would be recomputed per iteration
      auto producer = cast<linalg::GenericOp>(def);
      unsigned resultNo = cast<OpResult>(operand->get()).getResultNumber();
      AffineMap outMap =
          producer.getIndexingMapMatchingResult(producer->getResult(resultNo));
      std::optional<llvm::SmallDenseSet<unsigned>> producerLoops =
          loopDimsOf(outMap, tensorDims);
      if (!producerLoops)
        continue;
      // A producer's reduction loops cannot be tiled: the tile would be a
      // partial sum.
      bool onReduction = false;
      for (unsigned l : *producerLoops)
        onReduction |= producer.getIteratorTypesArray()[l] !=
                       utils::IteratorType::parallel;
      if (onReduction)
        continue;
      auto it = g.tiled.find(def);
      if (it != g.tiled.end()) {
        if (it->second != *producerLoops)
          g.tiled.erase(it); // reached with two tilings: do not fuse
        continue;
      }
      g.tiled[def] = *producerLoops;
      work.push_back({producer, *producerLoops});
    }
  }
}

/// The largest divisor of `n` that is at most `limit` (at least 1).
int64_t divisorAtMost(int64_t n, int64_t limit) {
  for (int64_t d = std::min(n, std::max<int64_t>(limit, 1)); d > 1; --d)
    if (n % d == 0)
      return d;
  return 1;
}

/// The root's tiling: every parallel loop but the innermost loop (kept
/// whole: the rows' extent, which the reductions run along); the innermost
/// tiled loop in blocks of rows so that one tile's slice of the root is
/// about `tileElements`, the others by 1. Empty if nothing would be tiled
/// or a loop is not static.
SmallVector<int64_t> rootTiling(linalg::GenericOp root, int64_t tileElements,
                                llvm::SmallDenseSet<unsigned> &tiled) {
  SmallVector<int64_t> ranges = root.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return {};
  SmallVector<utils::IteratorType> iters = root.getIteratorTypesArray();
  unsigned n = ranges.size();
  SmallVector<int64_t> sizes(n, 0);
  int64_t inner = 1;
  int last = -1;
  for (unsigned d = 0; d < n; ++d) {
    bool tile = iters[d] == utils::IteratorType::parallel && d + 1 < n;
    if (tile) {
      sizes[d] = 1;
      tiled.insert(d);
      last = d;
    } else {
      inner *= ranges[d];
    }
  }
  if (last < 0)
    return {};
  sizes[last] = divisorAtMost(ranges[last], tileElements / inner);
  // A loop of one iteration is no loop.
  int64_t trips = 1;
  for (unsigned d = 0; d < n; ++d)
    if (sizes[d])
      trips *= ranges[d] / sizes[d];
  if (trips <= 1)
    return {};
  return sizes;
}

struct FuseReductionsPass
    : public mlir::par::impl::FuseReductionsBase<FuseReductionsPass> {
  using FuseReductionsBase::FuseReductionsBase;

  /// The group rooted at `op` (a fusable generic) if its chain (itself
  /// and the producers it may fuse) holds a reduction.
  std::optional<Group> groupAt(linalg::GenericOp op) {
    Group g;
    g.root = op;
    llvm::SmallDenseSet<unsigned> tiled;
    g.tileSizes = rootTiling(op, tileElements, tiled);
    if (g.tileSizes.empty())
      return std::nullopt;
    collect(g, tiled);
    if (g.tiled.empty())
      return std::nullopt;
    bool reduction = hasReduction(op);
    for (auto &entry : g.tiled)
      reduction |= hasReduction(cast<linalg::GenericOp>(entry.first));
    if (!reduction)
      return std::nullopt; // plain elementwise chains are par-fuse-elementwise's
    return g;
  }

  /// Records the ops a fusion erases, so the candidates collected before
  /// it are not touched after.
  struct ErasedListener : public RewriterBase::Listener {
    llvm::DenseSet<Operation *> erased;
    void notifyOperationErased(Operation *op) override { erased.insert(op); }
  };
  ErasedListener listener;

  LogicalResult fuse(Group &g) {
    IRRewriter rewriter(&getContext(), &listener);
    rewriter.setInsertionPoint(g.root);
    // A producer with users outside the chain is computed in the loop
    // once and also returned whole (no recomputation, no second pass).
    llvm::DenseSet<Operation *> members{g.root.getOperation()};
    llvm::DenseSet<Operation *> yielded;
    for (auto &entry : g.tiled)
      members.insert(entry.first);
    auto control = [&](tensor::ExtractSliceOp slice, OpResult producer,
                       bool isDestination)
        -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
      Operation *def = producer.getOwner();
      if (isDestination)
        return isa<linalg::FillOp, tensor::EmptyOp>(def)
                   ? std::optional<
                         scf::SCFTileAndFuseOptions::ControlFnResult>(
                         scf::SCFTileAndFuseOptions::ControlFnResult{})
                   : std::nullopt;
      if (isa<linalg::FillOp>(def))
        return scf::SCFTileAndFuseOptions::ControlFnResult{};
      if (!members.contains(def))
        return std::nullopt;
      bool outside = false;
      // The loop being built (its slices of the producer are users too).
      Operation *loop = slice->getParentOfType<scf::ForallOp>();
      for (Operation *user : producer.getUsers()) {
        if (members.contains(user) || (loop && loop->isAncestor(user)))
          continue;
        // The whole value comes out of the loop, at the root: every other
        // user must come after it.
        Operation *at = g.root->getBlock()->findAncestorOpInBlock(*user);
        if (!at || !g.root->isBeforeInBlock(at))
          return std::nullopt;
        outside = true;
      }
      // Yielded once: a second slice of it recomputes its tile.
      return scf::SCFTileAndFuseOptions::ControlFnResult{
          outside && yielded.insert(def).second};
    };
    scf::SCFTilingOptions tiling;
    tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
    SmallVector<OpFoldResult> sizes;
    for (int64_t s : g.tileSizes)
      sizes.push_back(rewriter.getIndexAttr(s));
    tiling.setTileSizes(sizes);
    scf::SCFTileAndFuseOptions options;
    options.setTilingOptions(tiling);
    options.setFusionControlFn(control);
    FailureOr<scf::SCFTileAndFuseResult> result =
        scf::tileConsumerAndFuseProducersUsingSCF(
            rewriter, cast<TilingInterface>(g.root.getOperation()), options);
    if (failed(result))
      return g.root.emitError("par-fuse-reductions: cannot tile this chain");
    // Users outside the loop read its results; inside, the fused slices
    // already read the tiles.
    Operation *loop = result->loops.front().getOperation();
    for (auto [original, replacement] : result->replacements)
      rewriter.replaceUsesWithIf(original, replacement, [&](OpOperand &use) {
        // Only users after the loop (the chain's originals before it die
        // below, or keep their original operands).
        Operation *at = loop->getBlock()->findAncestorOpInBlock(*use.getOwner());
        return at && loop->isBeforeInBlock(at);
      });
    // The chain's originals are dead now (their users read the loop).
    SmallVector<Operation *> dead{g.root.getOperation()};
    for (Operation *op : result->fusedProducers)
      dead.push_back(op);
    for (auto &entry : g.tiled)
      if (!result->fusedProducers.contains(entry.first))
        dead.push_back(entry.first);
    bool erased = true;
    while (erased) {
      erased = false;
      for (Operation *&op : dead)
        if (op && op->use_empty()) {
          rewriter.eraseOp(op);
          op = nullptr;
          erased = true;
        }
    }
    return success();
  }

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      // The candidates once, last first (fusion makes no new ones: the
      // generics it makes are inside its loops); each a root unless a
      // fusion before it erased it.
      SmallVector<linalg::GenericOp> ops;
      func.walk([&](linalg::GenericOp op) {
        if (isFusable(op))
          ops.push_back(op);
      });
      listener.erased.clear();
      for (linalg::GenericOp op : llvm::reverse(ops)) {
        if (listener.erased.contains(op.getOperation()))
          continue;
        std::optional<Group> g = groupAt(op);
        if (g && failed(fuse(*g)))
          return signalPassFailure();
      }
    }
  }
};

} // namespace
