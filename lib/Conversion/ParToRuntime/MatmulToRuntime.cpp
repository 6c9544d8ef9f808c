//===- MatmulToRuntime.cpp - par-matmul-to-runtime ------------------------===//
//
// The BLAS path: buffer-level f32/f64 matmuls call the runtime, which hands
// them to OpenBLAS (CPU) or cuBLAS (CUDA). Everything else about the op is
// already known statically, so the call takes only scalars. Mixed-precision
// contractions (f16/bf16 inputs, widened in the body, an f32 accumulator)
// call par_rt_k_batch_matmul_mixed: the runtime widens the inputs exactly
// and runs the f32 GEMM, the same products and f32 sums as the loop.
//
//===----------------------------------------------------------------------===//

#include "par/Conversion/ParToRuntime/Passes.h"
#include "par/Conversion/ParToRuntime/RuntimeABI.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "par-matmul-to-runtime"

namespace mlir::par {
#define GEN_PASS_DEF_MATMULTORUNTIME
#include "par/Conversion/ParToRuntime/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

bool isContiguousStatic(Value v, int64_t rank = 2) {
  auto t = dyn_cast<MemRefType>(v.getType());
  return t && t.hasStaticShape() && t.getLayout().isIdentity() &&
         (rank < 0 || t.getRank() == rank);
}

/// A generic contraction that is a batch of GEMMs: c[batch.., m, n] +=
/// a[batch.., m|k, k|m] * b[batch.., k|n, n|k], every operand contiguous,
/// the batch loops leading in the same order everywhere. A and B are the
/// generic's inputs 0 and 1, or 1 and 0 when `swapped`: par-autodiff builds
/// input gradients as `ins(W, dY)`, where the output's row dim m indexes the
/// second input. The body is acc + x * y with arith.mulf and arith.addf,
/// both commutative, so which input plays A does not change the result.
struct BatchGemm {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool transA = false, transB = false;
  bool swapped = false;
  /// Some input is 16-bit (widened to the accumulator's f32 in the body).
  bool mixed = false;
};

bool isHalf(Type t) { return t.isF16() || t.isBF16(); }

/// `v` is block argument `arg`, or its extf to the accumulator's type.
bool isArgOrWidened(Value v, BlockArgument arg) {
  if (v == arg)
    return true;
  auto ext = v.getDefiningOp<arith::ExtFOp>();
  return ext && ext.getIn() == arg;
}

std::optional<BatchGemm> matchBatchGemm(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op.getNumReductionLoops() != 1)
    return std::nullopt;
  for (Value v : op->getOperands())
    if (!isContiguousStatic(v, /*rank=*/-1))
      return std::nullopt;
  Type elt = cast<MemRefType>(op->getOperand(2).getType()).getElementType();
  if (!elt.isF32() && !elt.isF64())
    return std::nullopt;
  // Inputs of the accumulator's type, or 16-bit ones widened to f32.
  bool mixed = false;
  for (Value v : op.getDpsInputs()) {
    Type t = cast<MemRefType>(v.getType()).getElementType();
    if (t == elt)
      continue;
    if (!isHalf(t) || !elt.isF32())
      return std::nullopt;
    mixed = true;
  }
  // Body: yield acc + a * b (a and b possibly widened first).
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  size_t widened = llvm::count_if(body->without_terminator(), [](Operation &o) {
    return isa<arith::ExtFOp>(o);
  });
  if (!add || body->getOperations().size() != 3 + widened)
    return std::nullopt;
  Value acc = body->getArgument(2);
  Value prod = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  auto mul = prod.getDefiningOp<arith::MulFOp>();
  if (!mul || (add.getLhs() != acc && add.getRhs() != acc))
    return std::nullopt;
  BlockArgument x = body->getArgument(0), y = body->getArgument(1);
  if (!((isArgOrWidened(mul.getLhs(), x) && isArgOrWidened(mul.getRhs(), y)) ||
        (isArgOrWidened(mul.getLhs(), y) && isArgOrWidened(mul.getRhs(), x))))
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto dims = [](AffineMap m) {
    SmallVector<int64_t> d;
    for (AffineExpr e : m.getResults()) {
      auto de = dyn_cast<AffineDimExpr>(e);
      if (!de)
        return SmallVector<int64_t>{};
      d.push_back(de.getPosition());
    }
    return d;
  };
  SmallVector<int64_t> a = dims(maps[0]), b = dims(maps[1]), c = dims(maps[2]);
  if (a.size() < 2 || a.size() != b.size() || a.size() != c.size())
    return std::nullopt;
  size_t nb = a.size() - 2;
  for (size_t i = 0; i < nb; ++i)
    if (a[i] != b[i] || a[i] != c[i])
      return std::nullopt;
  int64_t m = c[nb], n = c[nb + 1];
  int64_t k = -1;
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  for (int64_t l = 0; l < (int64_t)iters.size(); ++l)
    if (iters[l] == utils::IteratorType::reduction)
      k = l;
  // Exactly the loops batch.., m, n, k, the output indexing each parallel
  // one once: no loop that only an input reads (a hidden reduction), no
  // repeated dim (a diagonal).
  if ((int64_t)op.getNumLoops() != (int64_t)nb + 3 ||
      llvm::is_contained(c, k) ||
      llvm::SmallDenseSet<int64_t>(c.begin(), c.end()).size() != c.size())
    return std::nullopt;
  BatchGemm g;
  g.mixed = mixed;
  // A is the input that carries m; when only input 1 does, the inputs swap
  // roles (valid because the body commutes, checked above).
  auto carries = [&](ArrayRef<int64_t> d, int64_t dim) {
    return d[nb] == dim || d[nb + 1] == dim;
  };
  if (!carries(a, m) && carries(b, m)) {
    std::swap(a, b);
    g.swapped = true;
  }
  if (a[nb] == m && a[nb + 1] == k)
    g.transA = false;
  else if (a[nb] == k && a[nb + 1] == m)
    g.transA = true;
  else
    return std::nullopt;
  if (b[nb] == k && b[nb + 1] == n)
    g.transB = false;
  else if (b[nb] == n && b[nb + 1] == k)
    g.transB = true;
  else
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  for (size_t i = 0; i < nb; ++i)
    g.batch *= ranges[a[i]];
  g.M = ranges[m];
  g.N = ranges[n];
  g.K = ranges[k];
  return g;
}

/// 0 when `c` was just zero-filled (a linalg.fill of a float zero writing
/// exactly `c`, only ops without memory effects between it and `op`): the
/// fill is erased and the GEMM overwrites C (beta = 0) instead of adding
/// to zeros, one pass over C less. 1 (accumulate) otherwise.
int64_t accumulateOrFoldFill(Operation *op, Value c, bool fold) {
  if (!fold)
    return 1;
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(prev)) {
      if (fill.hasPureBufferSemantics() && fill.getOutputs()[0] == c &&
          matchPattern(fill.getInputs()[0], m_AnyZeroFloat())) {
        fill.erase();
        return 0;
      }
      return 1;
    }
    if (!isMemoryEffectFree(prev))
      return 1;
  }
  return 1;
}

struct MatmulToRuntimePass
    : public mlir::par::impl::MatmulToRuntimeBase<MatmulToRuntimePass> {
  using MatmulToRuntimeBase::MatmulToRuntimeBase;
  void runOnOperation() override {
    SmallVector<linalg::MatmulOp> matmuls;
    getOperation().walk([&](linalg::MatmulOp op) {
      if (!op.hasPureBufferSemantics() || op.hasUserDefinedMaps())
        return;
      if (!llvm::all_of(op->getOperands(),
                        [](Value v) { return isContiguousStatic(v); }))
        return;
      Type elt = cast<MemRefType>(op->getOperand(2).getType()).getElementType();
      if (!elt.isF32() && !elt.isF64())
        return;
      // Inputs of the accumulator's type, or 16-bit ones into f32.
      if (!llvm::all_of(op.getInputs(), [&](Value v) {
            Type t = cast<MemRefType>(v.getType()).getElementType();
            return t == elt || (isHalf(t) && elt.isF32());
          }))
        return;
      matmuls.push_back(op);
    });
    SmallVector<std::pair<linalg::GenericOp, BatchGemm>> gemms;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<BatchGemm> g = matchBatchGemm(op))
        gemms.push_back({op, *g});
    });
    for (auto &[op, g] : gemms) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      auto i64 = [&](int64_t v) {
        return arith::ConstantIntOp::create(b, loc, v, 64).getResult();
      };
      auto i32 = [&](int64_t v) {
        return arith::ConstantIntOp::create(b, loc, v, 32).getResult();
      };
      Type elt = cast<MemRefType>(op->getOperand(2).getType()).getElementType();
      Value lhs = op.getDpsInputOperand(g.swapped ? 1 : 0)->get();
      Value rhs = op.getDpsInputOperand(g.swapped ? 0 : 1)->get();
      auto dtypeOf = [&](Value v) {
        return i32(*getRuntimeDType(cast<MemRefType>(v.getType()).getElementType()));
      };
      int64_t accumulate = accumulateOrFoldFill(op, op->getOperand(2), foldZeroFill);
      if (g.mixed) {
        emitRuntimeCall(b, loc, op, "par_rt_k_batch_matmul_mixed",
                        {emitBufferAddress(b, loc, lhs),
                         emitBufferAddress(b, loc, rhs),
                         emitBufferAddress(b, loc, op->getOperand(2)),
                         i64(g.batch), i64(g.M), i64(g.N), i64(g.K),
                         i32(g.transA), i32(g.transB), dtypeOf(lhs),
                         dtypeOf(rhs), i32(accumulate)});
        op.erase();
        continue;
      }
      emitRuntimeCall(b, loc, op, "par_rt_k_batch_matmul",
                      {emitBufferAddress(b, loc, lhs),
                       emitBufferAddress(b, loc, rhs),
                       emitBufferAddress(b, loc, op->getOperand(2)),
                       i64(g.batch), i64(g.M), i64(g.N), i64(g.K),
                       i32(g.transA), i32(g.transB),
                       i32(*getRuntimeDType(elt)), i32(accumulate)});
      op.erase();
    }
    for (linalg::MatmulOp op : matmuls) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value a = op.getInputs()[0], bm = op.getInputs()[1],
            c = op.getOutputs()[0];
      auto at = cast<MemRefType>(a.getType());
      auto ct = cast<MemRefType>(c.getType());
      int64_t M = ct.getDimSize(0), N = ct.getDimSize(1), K = at.getDimSize(1);
      auto i64 = [&](int64_t v) {
        return arith::ConstantIntOp::create(b, loc, v, 64).getResult();
      };
      auto i32 = [&](int64_t v) {
        return arith::ConstantIntOp::create(b, loc, v, 32).getResult();
      };
      Type ta = at.getElementType(),
           tb = cast<MemRefType>(bm.getType()).getElementType();
      int64_t accumulate = accumulateOrFoldFill(op, c, foldZeroFill);
      if (ta != ct.getElementType() || tb != ct.getElementType()) {
        emitRuntimeCall(b, loc, op, "par_rt_k_batch_matmul_mixed",
                        {emitBufferAddress(b, loc, a),
                         emitBufferAddress(b, loc, bm),
                         emitBufferAddress(b, loc, c), i64(1), i64(M), i64(N),
                         i64(K), i32(0), i32(0), i32(*getRuntimeDType(ta)),
                         i32(*getRuntimeDType(tb)), i32(accumulate)});
        op.erase();
        continue;
      }
      emitRuntimeCall(b, loc, op, "par_rt_k_matmul",
                      {emitBufferAddress(b, loc, a),
                       emitBufferAddress(b, loc, bm),
                       emitBufferAddress(b, loc, c), i64(M), i64(N), i64(K),
                       i32(*getRuntimeDType(at.getElementType())),
                       i32(accumulate)});
      op.erase();
    }
  }
};
} // namespace
