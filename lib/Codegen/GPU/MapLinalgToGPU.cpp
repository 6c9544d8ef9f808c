//===- MapLinalgToGPU.cpp - par-gpu-map-linalg ----------------------------===//
//
// Every structured op left on buffers becomes one gpu.launch (see
// Passes.td). The kernel is written directly from the op: its loop ranges,
// indexing maps and body; there is no intermediate scf.parallel, so the
// mapping (one thread per point, or one block per reduced point) is decided
// here from the op's iterator types and its body's combiners.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

#define DEBUG_TYPE "par-gpu-map-linalg"

namespace mlir::par {
#define GEN_PASS_DEF_MAPLINALGTOGPU
#include "par/Codegen/GPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// How one output of a reduction folds: `yield combine(acc, x)` where x
/// does not depend on any output's value.
struct Combiner {
  Operation *op = nullptr;
  unsigned accOperand = 0; // which operand of `op` is the accumulator
  gpu::AllReduceOperation kind = gpu::AllReduceOperation::ADD;
};

std::optional<gpu::AllReduceOperation> reductionKind(Operation *op) {
  using K = gpu::AllReduceOperation;
  return llvm::TypeSwitch<Operation *, std::optional<K>>(op)
      .Case<arith::AddFOp, arith::AddIOp>([](auto) { return K::ADD; })
      .Case<arith::MulFOp, arith::MulIOp>([](auto) { return K::MUL; })
      .Case<arith::MaximumFOp>([](auto) { return K::MAXIMUMF; })
      .Case<arith::MinimumFOp>([](auto) { return K::MINIMUMF; })
      .Case<arith::MaxNumFOp>([](auto) { return K::MAXNUMF; })
      .Case<arith::MinNumFOp>([](auto) { return K::MINNUMF; })
      .Case<arith::MaxSIOp>([](auto) { return K::MAXSI; })
      .Case<arith::MinSIOp>([](auto) { return K::MINSI; })
      .Case<arith::MaxUIOp>([](auto) { return K::MAXUI; })
      .Case<arith::MinUIOp>([](auto) { return K::MINUI; })
      .Case<arith::AndIOp>([](auto) { return K::AND; })
      .Case<arith::OrIOp>([](auto) { return K::OR; })
      .Case<arith::XOrIOp>([](auto) { return K::XOR; })
      .Default([](Operation *) { return std::nullopt; });
}

/// The neutral element of `kind` in `type`.
TypedAttr identity(gpu::AllReduceOperation kind, Type type) {
  using K = gpu::AllReduceOperation;
  if (auto ft = dyn_cast<FloatType>(type)) {
    const llvm::fltSemantics &sem = ft.getFloatSemantics();
    switch (kind) {
    case K::ADD: return FloatAttr::get(ft, llvm::APFloat::getZero(sem));
    case K::MUL: return FloatAttr::get(ft, llvm::APFloat::getOne(sem));
    case K::MAXIMUMF:
    case K::MAXNUMF:
      return FloatAttr::get(ft, llvm::APFloat::getInf(sem, /*Neg=*/true));
    case K::MINIMUMF:
    case K::MINNUMF:
      return FloatAttr::get(ft, llvm::APFloat::getInf(sem, /*Neg=*/false));
    default: return {};
    }
  }
  auto it = dyn_cast<IntegerType>(type);
  if (!it)
    return {};
  unsigned w = it.getWidth();
  switch (kind) {
  case K::ADD:
  case K::OR:
  case K::XOR:
  case K::MAXUI: return IntegerAttr::get(it, llvm::APInt::getZero(w));
  case K::MUL: return IntegerAttr::get(it, llvm::APInt(w, 1));
  case K::AND:
  case K::MINUI: return IntegerAttr::get(it, llvm::APInt::getAllOnes(w));
  case K::MAXSI: return IntegerAttr::get(it, llvm::APInt::getSignedMinValue(w));
  case K::MINSI: return IntegerAttr::get(it, llvm::APInt::getSignedMaxValue(w));
  default: return {};
  }
}

/// Every output is `combine(acc, x)` with x independent of all outputs'
/// values, and nothing else in the body reads an output: the reduction can
/// be split among threads. Empty when it cannot.
SmallVector<Combiner> findCombiners(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  unsigned numIn = op.getNumDpsInputs();
  llvm::SmallPtrSet<Value, 4> outArgs;
  for (unsigned k = 0; k < op.getNumDpsInits(); ++k)
    outArgs.insert(body.getArgument(numIn + k));
  SmallVector<Combiner> combiners;
  llvm::SmallPtrSet<Operation *, 4> combinerOps;
  for (auto [k, v] : llvm::enumerate(yield.getOperands())) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body || def->getNumOperands() != 2 ||
        !def->hasOneUse())
      return {};
    std::optional<gpu::AllReduceOperation> kind = reductionKind(def);
    if (!kind)
      return {};
    Value acc = body.getArgument(numIn + k);
    unsigned accOperand;
    if (def->getOperand(0) == acc)
      accOperand = 0;
    else if (def->getOperand(1) == acc)
      accOperand = 1;
    else
      return {};
    if (outArgs.contains(def->getOperand(1 - accOperand)))
      return {};
    if (!identity(*kind, acc.getType()))
      return {};
    combiners.push_back({def, accOperand, *kind});
    combinerOps.insert(def);
  }
  // No other op reads an output's value (directly: everything it computes
  // from one would have to reach the yield through a combiner's x).
  for (Operation &inner : body.without_terminator()) {
    if (combinerOps.contains(&inner))
      continue;
    for (Value operand : inner.getOperands())
      if (outArgs.contains(operand))
        return {};
    if (!isMemoryEffectFree(&inner) && !isa<memref::LoadOp>(inner))
      return {};
  }
  return combiners;
}

/// The index values of a flat id over `sizes` (row-major).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value flat,
                               ArrayRef<Value> sizes) {
  SmallVector<Value> idx(sizes.size());
  Value rest = flat;
  for (int i = (int)sizes.size() - 1; i >= 0; --i) {
    if (i == 0) {
      idx[i] = rest;
      break;
    }
    idx[i] = arith::RemUIOp::create(b, loc, rest, sizes[i]);
    rest = arith::DivUIOp::create(b, loc, rest, sizes[i]);
  }
  return idx;
}

Value product(OpBuilder &b, Location loc, ArrayRef<Value> sizes) {
  Value p = arith::ConstantIndexOp::create(b, loc, 1);
  for (Value s : sizes)
    p = arith::MulIOp::create(b, loc, p, s);
  return p;
}

/// Indices of `operand`'s element at loop point `ivs`.
SmallVector<Value> operandIndices(OpBuilder &b, Location loc,
                                  linalg::GenericOp op, OpOperand *operand,
                                  ArrayRef<Value> ivs) {
  AffineMap map = op.getMatchingIndexingMap(operand);
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      indices.push_back(ivs[d.getPosition()]);
      continue;
    }
    indices.push_back(affine::AffineApplyOp::create(
        b, loc, AffineMap::get(map.getNumDims(), 0, e), ivs));
  }
  return indices;
}

/// Values of the body's input arguments at `ivs` (scalars as they are).
SmallVector<Value> loadInputs(OpBuilder &b, Location loc, linalg::GenericOp op,
                              ArrayRef<Value> ivs) {
  SmallVector<Value> values;
  for (OpOperand *in : op.getDpsInputOperands()) {
    if (!isa<MemRefType>(in->get().getType())) {
      values.push_back(in->get());
      continue;
    }
    values.push_back(memref::LoadOp::create(
        b, loc, in->get(), operandIndices(b, loc, op, in, ivs)));
  }
  return values;
}

/// Clones the body's ops (except `skip`) with block arguments mapped to
/// `args` and linalg.index to `ivs`; returns the mapping.
void cloneBody(OpBuilder &b, linalg::GenericOp op, ValueRange args,
               ArrayRef<Value> ivs, IRMapping &map,
               const llvm::SmallPtrSetImpl<Operation *> &skip) {
  Block &body = op.getRegion().front();
  for (auto [arg, v] : llvm::zip(body.getArguments(), args))
    if (v)
      map.map(arg, v);
  for (Operation &inner : body.without_terminator()) {
    if (skip.contains(&inner))
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
}

/// A gpu.launch with a 1-D grid and block; the builder is left at the start
/// of its body, before the terminator.
gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, Value grid,
                           Value block) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto launch = gpu::LaunchOp::create(b, loc, grid, one, one, block, one, one);
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  return launch;
}

/// A fill after generalization: all loops parallel, one scalar input, the
/// body yields it. Returns the scalar.
Value fillValue(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 0)
    return {};
  Value in = op.getDpsInputOperand(0)->get();
  if (isa<ShapedType>(in.getType()))
    return {};
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (body.getOperations().size() != 1 || yield.getNumOperands() != 1 ||
      yield.getOperand(0) != body.getArgument(0))
    return {};
  return in;
}

/// The fill that initializes a reduction's (single) output right before
/// it: the ops between them have no memory effects. Its value then seeds
/// the reduction inside the kernel and the fill disappears (the reduction
/// writes every element of the output).
linalg::GenericOp foldableFill(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumReductionLoops() == 0)
    return {};
  Value out = op.getDpsInitOperand(0)->get();
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    auto fill = dyn_cast<linalg::GenericOp>(prev);
    if (fill && fillValue(fill))
      return fill.getDpsInitOperand(0)->get() == out ? fill
                                                     : linalg::GenericOp();
    if (!isMemoryEffectFree(prev))
      return {};
  }
  return {};
}

struct Mapper {
  int64_t blockSize;

  /// One thread per point of the parallel loops; reduction loops (if any)
  /// run in order inside the thread, the outputs carried as loop values.
  LogicalResult threadPerPoint(linalg::GenericOp op, ArrayRef<Value> sizes,
                               ArrayRef<Value> inits) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
    SmallVector<unsigned> par, red;
    for (unsigned i = 0; i < iters.size(); ++i)
      (iters[i] == utils::IteratorType::parallel ? par : red).push_back(i);
    SmallVector<Value> parSizes, redSizes;
    for (unsigned i : par)
      parSizes.push_back(sizes[i]);
    for (unsigned i : red)
      redSizes.push_back(sizes[i]);
    Value points = product(b, loc, parSizes);
    Value block = arith::ConstantIndexOp::create(b, loc, blockSize);
    Value blockM1 = arith::ConstantIndexOp::create(b, loc, blockSize - 1);
    Value grid = arith::DivUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, points, blockM1), block);
    // An empty iteration space launches nothing.
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value nonEmpty = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                           points, zero);
    auto guard = scf::IfOp::create(b, loc, nonEmpty, /*withElse=*/false);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    gpu::LaunchOp launch = createLaunch(b, loc, grid, block);
    Value gid = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                              launch.getBlockSize().x),
        launch.getThreadIds().x);
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          gid, points);
    auto body = scf::IfOp::create(b, loc, inRange, /*withElse=*/false);
    b.setInsertionPointToStart(&body.getThenRegion().front());
    SmallVector<Value> parIdx = delinearize(b, loc, gid, parSizes);
    SmallVector<Value> ivs(iters.size());
    for (auto [i, v] : llvm::zip(par, parIdx))
      ivs[i] = v;
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    for (unsigned i : red)
      ivs[i] = c0;
    Block &opBody = op.getRegion().front();
    unsigned numIn = op.getNumDpsInputs();
    // Output values at this point (loaded only where the body reads them).
    SmallVector<Value> outs;
    SmallVector<SmallVector<Value>> outIdx;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      outIdx.push_back(operandIndices(b, loc, op, &init, ivs));
      bool read = !red.empty() ||
                  !opBody.getArgument(init.getOperandNumber()).use_empty();
      unsigned k = outs.size();
      if (!inits.empty() && inits[k])
        outs.push_back(inits[k]); // the folded fill's value
      else
        outs.push_back(read ? memref::LoadOp::create(b, loc, init.get(),
                                                     outIdx.back())
                                  .getResult()
                            : Value());
    }
    auto yield = cast<linalg::YieldOp>(opBody.getTerminator());
    llvm::SmallPtrSet<Operation *, 1> none;
    SmallVector<Value> results;
    if (red.empty()) {
      SmallVector<Value> args = loadInputs(b, loc, op, ivs);
      args.append(outs);
      IRMapping map;
      cloneBody(b, op, args, ivs, map, none);
      for (Value v : yield.getOperands())
        results.push_back(map.lookupOrDefault(v));
    } else {
      Value redPoints = product(b, loc, redSizes);
      Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
      auto loop = scf::ForOp::create(b, loc, c0, redPoints, c1, outs);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> redIdx =
          delinearize(b, loc, loop.getInductionVar(), redSizes);
      SmallVector<Value> inner = ivs;
      for (auto [i, v] : llvm::zip(red, redIdx))
        inner[i] = v;
      SmallVector<Value> args = loadInputs(b, loc, op, inner);
      args.append(loop.getRegionIterArgs().begin(),
                  loop.getRegionIterArgs().end());
      IRMapping map;
      cloneBody(b, op, args, inner, map, none);
      SmallVector<Value> next;
      for (Value v : yield.getOperands())
        next.push_back(map.lookupOrDefault(v));
      scf::YieldOp::create(b, loc, next);
      b.setInsertionPointAfter(loop);
      results.assign(loop.getResults().begin(), loop.getResults().end());
    }
    (void)numIn;
    for (auto [k, init] : llvm::enumerate(op.getDpsInitsMutable()))
      memref::StoreOp::create(b, loc, results[k], init.get(), outIdx[k]);
    op.erase();
    return success();
  }

  /// One block per point of the parallel loops: the threads split the
  /// reduction space, fold their shares with the combiners, and one
  /// gpu.all_reduce per output gives the block's total.
  LogicalResult blockPerPoint(linalg::GenericOp op, ArrayRef<Value> sizes,
                              ArrayRef<Combiner> combiners,
                              int64_t threads, ArrayRef<Value> inits) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
    SmallVector<unsigned> par, red;
    for (unsigned i = 0; i < iters.size(); ++i)
      (iters[i] == utils::IteratorType::parallel ? par : red).push_back(i);
    SmallVector<Value> parSizes, redSizes;
    for (unsigned i : par)
      parSizes.push_back(sizes[i]);
    for (unsigned i : red)
      redSizes.push_back(sizes[i]);
    Value points = product(b, loc, parSizes);
    Value redPoints = product(b, loc, redSizes);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value nonEmpty = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt,
                                           points, zero);
    auto guard = scf::IfOp::create(b, loc, nonEmpty, /*withElse=*/false);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    Value block = arith::ConstantIndexOp::create(b, loc, threads);
    gpu::LaunchOp launch = createLaunch(b, loc, points, block);
    Value tid = launch.getThreadIds().x;
    SmallVector<Value> parIdx =
        delinearize(b, loc, launch.getBlockIds().x, parSizes);
    SmallVector<Value> ivs(iters.size());
    for (auto [i, v] : llvm::zip(par, parIdx))
      ivs[i] = v;
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    for (unsigned i : red)
      ivs[i] = c0;
    Block &opBody = op.getRegion().front();
    unsigned numIn = op.getNumDpsInputs();
    SmallVector<Value> partials;
    for (const Combiner &c : combiners) {
      Type t = c.op->getResult(0).getType();
      partials.push_back(
          arith::ConstantOp::create(b, loc, identity(c.kind, t)));
    }
    auto loop = scf::ForOp::create(b, loc, tid, redPoints,
                                   launch.getBlockSize().x, partials);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(loop.getBody());
      SmallVector<Value> redIdx =
          delinearize(b, loc, loop.getInductionVar(), redSizes);
      SmallVector<Value> inner = ivs;
      for (auto [i, v] : llvm::zip(red, redIdx))
        inner[i] = v;
      SmallVector<Value> args = loadInputs(b, loc, op, inner);
      args.resize(opBody.getNumArguments()); // outputs are never read
      llvm::SmallPtrSet<Operation *, 4> skip;
      for (const Combiner &c : combiners)
        skip.insert(c.op);
      IRMapping map;
      cloneBody(b, op, args, inner, map, skip);
      SmallVector<Value> next;
      for (auto [k, c] : llvm::enumerate(combiners)) {
        IRMapping m = map;
        m.map(c.op->getOperand(c.accOperand), loop.getRegionIterArgs()[k]);
        next.push_back(b.clone(*c.op, m)->getResult(0));
      }
      scf::YieldOp::create(b, loc, next);
    }
    // The block's totals, then the first thread folds them into the
    // outputs.
    SmallVector<Value> totals;
    for (auto [k, c] : llvm::enumerate(combiners))
      totals.push_back(blockReduce(b, loc, loop.getResult(k), c.kind));
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                        c0);
    auto store = scf::IfOp::create(b, loc, first, /*withElse=*/false);
    b.setInsertionPointToStart(&store.getThenRegion().front());
    for (auto [k, init] : llvm::enumerate(op.getDpsInitsMutable())) {
      const Combiner &c = combiners[k];
      SmallVector<Value> idx = operandIndices(b, loc, op, &init, ivs);
      Value acc = !inits.empty() && inits[k]
                      ? inits[k]
                      : memref::LoadOp::create(b, loc, init.get(), idx)
                            .getResult();
      IRMapping m;
      m.map(c.op->getOperand(c.accOperand), acc);
      m.map(c.op->getOperand(1 - c.accOperand), totals[k]);
      Value folded = b.clone(*c.op, m)->getResult(0);
      memref::StoreOp::create(b, loc, folded, init.get(), idx);
    }
    (void)numIn;
    op.erase();
    return success();
  }

  /// gpu.all_reduce of `v` over the block. Shuffles move 32 bits: narrower
  /// values are widened for the exchange (exactly, for every combiner used
  /// here) and narrowed back.
  Value blockReduce(OpBuilder &b, Location loc, Value v,
                    gpu::AllReduceOperation kind) {
    using K = gpu::AllReduceOperation;
    Type t = v.getType();
    MLIRContext *ctx = b.getContext();
    auto attr = gpu::AllReduceOperationAttr::get(ctx, kind);
    if (t.isF32() || t.isInteger(32))
      return gpu::AllReduceOp::create(b, loc, v, attr, /*uniform=*/true);
    if (t.isF16() || t.isBF16()) {
      Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
      Value r = gpu::AllReduceOp::create(b, loc, wide, attr, true);
      return arith::TruncFOp::create(b, loc, t, r);
    }
    auto it = cast<IntegerType>(t);
    bool isSigned = kind == K::MAXSI || kind == K::MINSI;
    Type i32 = b.getI32Type();
    Value wide = isSigned ? arith::ExtSIOp::create(b, loc, i32, v).getResult()
                          : arith::ExtUIOp::create(b, loc, i32, v).getResult();
    // AND over widened unsigned values: the high bits are zero everywhere,
    // which AND keeps zero; truncation drops them.
    Value r = gpu::AllReduceOp::create(b, loc, wide, attr, true);
    return arith::TruncIOp::create(b, loc, it, r);
  }

  static bool blockReducible(Type t) {
    if (t.isF32() || t.isF16() || t.isBF16())
      return true;
    auto it = dyn_cast<IntegerType>(t);
    return it && it.getWidth() <= 32;
  }

  /// `inits`: per output, the value a folded fill wrote (or null: read the
  /// buffer).
  LogicalResult map(linalg::GenericOp op, ArrayRef<Value> inits) {
    if (!op.hasPureBufferSemantics())
      return op.emitError("par-gpu-map-linalg: expected a linalg op on "
                          "buffers (run after bufferization)");
    OpBuilder b(op);
    SmallVector<Range> ranges =
        cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, op.getLoc());
    SmallVector<Value> sizes;
    for (Range &r : ranges) {
      if (!isConstantIntValue(r.offset, 0) || !isConstantIntValue(r.stride, 1))
        return op.emitError("par-gpu-map-linalg: loop ranges with offsets "
                            "or strides are not supported");
      sizes.push_back(getValueOrCreateConstantIndexOp(b, op.getLoc(), r.size));
    }
    for (Operation &inner : op.getRegion().front().without_terminator())
      if (!isMemoryEffectFree(&inner) && !isa<memref::LoadOp>(inner))
        return inner.emitError("par-gpu-map-linalg: no GPU lowering for '")
               << inner.getName() << "' in a linalg body (it has side effects)";
    bool hasReduction = op.getNumReductionLoops() > 0;
    if (!hasReduction)
      return threadPerPoint(op, sizes, {});
    // The reduction space's static size decides between a block per point
    // and a thread per point: a block needs a warp's worth of work.
    int64_t redStatic = 1;
    for (auto [size, it] : llvm::zip(op.getStaticLoopRanges(),
                                     op.getIteratorTypesArray()))
      if (it == utils::IteratorType::reduction)
        redStatic = ShapedType::isDynamic(size) || ShapedType::isDynamic(redStatic)
                        ? ShapedType::kDynamic
                        : redStatic * size;
    SmallVector<Combiner> combiners = findCombiners(op);
    bool reducible =
        !combiners.empty() &&
        llvm::all_of(combiners, [](const Combiner &c) {
          return blockReducible(c.op->getResult(0).getType());
        });
    if (reducible && (ShapedType::isDynamic(redStatic) || redStatic >= 32)) {
      int64_t threads = blockSize;
      if (!ShapedType::isDynamic(redStatic))
        threads = std::min<int64_t>(
            blockSize, std::max<int64_t>(32, llvm::PowerOf2Ceil(redStatic)));
      return blockPerPoint(op, sizes, combiners, threads, inits);
    }
    return threadPerPoint(op, sizes, inits);
  }
};

/// memref.copy as a linalg.copy (a strided copy is a kernel like any other).
struct CopyToLinalg : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rewriter) const override {
    if (op->getParentOfType<gpu::LaunchOp>())
      return failure();
    linalg::CopyOp::create(rewriter, op.getLoc(), ValueRange{op.getSource()},
                           ValueRange{op.getTarget()});
    rewriter.eraseOp(op);
    return success();
  }
};

struct MapLinalgToGPUPass
    : public mlir::par::impl::MapLinalgToGPUBase<MapLinalgToGPUPass> {
  using MapLinalgToGPUBase::MapLinalgToGPUBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (blockSize < 32 || blockSize > 1024 ||
        !llvm::isPowerOf2_64(blockSize)) {
      module.emitError("par-gpu-map-linalg: block-size must be a power of "
                       "two in [32, 1024], got ")
          << blockSize;
      return signalPassFailure();
    }
    {
      RewritePatternSet patterns(&getContext());
      patterns.add<CopyToLinalg>(&getContext());
      linalg::populateLinalgNamedOpsGeneralizationPatterns(patterns);
      GreedyRewriteConfig config;
      config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
      if (failed(applyPatternsGreedily(module, std::move(patterns), config)))
        return signalPassFailure();
    }
    SmallVector<Operation *> ops;
    module.walk([&](linalg::LinalgOp op) {
      if (!op->getParentOfType<gpu::LaunchOp>())
        ops.push_back(op);
    });
    for (Operation *op : ops)
      if (!isa<linalg::GenericOp>(op)) {
        op->emitError("par-gpu-map-linalg: no GPU lowering for '")
            << op->getName() << "'";
        return signalPassFailure();
      }
    // Fills that only seed a reduction are folded into its kernel.
    llvm::DenseMap<Operation *, Value> seeds;
    llvm::SmallPtrSet<Operation *, 16> folded;
    for (Operation *op : ops)
      if (linalg::GenericOp fill = foldableFill(cast<linalg::GenericOp>(op))) {
        seeds[op] = fillValue(fill);
        folded.insert(fill);
      }
    Mapper mapper{blockSize};
    for (Operation *op : ops) {
      if (folded.contains(op)) {
        op->erase();
        continue;
      }
      SmallVector<Value> inits;
      if (Value seed = seeds.lookup(op))
        inits.push_back(seed);
      if (failed(mapper.map(cast<linalg::GenericOp>(op), inits)))
        return signalPassFailure();
    }
  }
};

} // namespace
