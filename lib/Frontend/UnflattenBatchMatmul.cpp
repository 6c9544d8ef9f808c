//===- UnflattenBatchMatmul.cpp - par-unflatten-batch-matmul --------------===//
//
// torch-mlir's 4-d matmul (attention's q @ k^T and p @ v over [batch,
// heads]) is collapse_shape → linalg.batch_matmul → expand_shape: the batch
// and head dimensions merged into one. Under dp × tp that merged dimension
// is split over two axes, which is no block split of the merged index, so
// the partitioner gathered q, k and v over tp. The pass writes it back as a
// linalg.generic over the unmerged dimensions (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <set>

#define DEBUG_TYPE "par-unflatten-batch-matmul"

namespace mlir::par {
#define GEN_PASS_DEF_UNFLATTENBATCHMATMUL
#include "par/Frontend/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The reassociation `[[0..k-1], [k], [k+1]]` of a rank-(k+2) tensor into
/// rank 3: k leading batch dimensions merged, the matrix dims kept.
static bool isLeadingMerge(ArrayRef<ReassociationIndices> groups,
                           int64_t &numBatch) {
  if (groups.size() != 3 || groups[1].size() != 1 || groups[2].size() != 1)
    return false;
  numBatch = groups[0].size();
  for (auto [i, d] : llvm::enumerate(groups[0]))
    if (d != (int64_t)i)
      return false;
  return numBatch >= 1 && groups[1][0] == numBatch &&
         groups[2][0] == numBatch + 1;
}

/// The finest batch shape each of `shapes` (their leading batch dims) is a
/// merge of consecutive dims of: the union of their prefix products, which
/// must form a divisibility chain. Empty when there is none.
static SmallVector<int64_t> commonBatch(ArrayRef<SmallVector<int64_t>> shapes) {
  std::set<int64_t> cuts;
  int64_t total = -1;
  for (const SmallVector<int64_t> &sh : shapes) {
    int64_t p = 1;
    for (int64_t d : sh) {
      p *= d;
      cuts.insert(p);
    }
    if (total >= 0 && p != total)
      return {};
    total = p;
  }
  SmallVector<int64_t> out;
  int64_t prev = 1;
  for (int64_t c : cuts) {
    if (c == 1)
      continue;
    if (c % prev)
      return {};
    out.push_back(c / prev);
    prev = c;
  }
  return out;
}

/// The reassociation from `common` (+ 2 matrix dims) to `batch` (+ 2).
static std::optional<SmallVector<ReassociationIndices>>
groupsFor(ArrayRef<int64_t> common, ArrayRef<int64_t> batch) {
  SmallVector<ReassociationIndices> groups;
  int64_t c = 0, n = common.size();
  for (int64_t d : batch) {
    ReassociationIndices g;
    int64_t p = 1;
    while (c < n && (p < d || g.empty())) {
      p *= common[c];
      g.push_back(c++);
    }
    // Size-1 dims of `common` (none: cuts skip 1) or a mismatch.
    if (p != d)
      return std::nullopt;
    groups.push_back(g);
  }
  if (c != n)
    return std::nullopt;
  groups.push_back({n});
  groups.push_back({n + 1});
  return groups;
}

static LogicalResult rewrite(linalg::BatchMatmulOp mm) {
  if (!mm.hasPureTensorSemantics() || !mm->getResult(0).hasOneUse())
    return failure();
  // The default indexing maps only (no transposed or broadcast operands).
  if (mm.hasUserDefinedMaps())
    return failure();
  auto ca = mm.getDpsInputs()[0].getDefiningOp<tensor::CollapseShapeOp>();
  auto cb = mm.getDpsInputs()[1].getDefiningOp<tensor::CollapseShapeOp>();
  auto ex = dyn_cast<tensor::ExpandShapeOp>(*mm->getResult(0).user_begin());
  if (!ca || !cb || !ex)
    return failure();
  int64_t ka, kb, ke;
  if (!isLeadingMerge(ca.getReassociationIndices(), ka) ||
      !isLeadingMerge(cb.getReassociationIndices(), kb) ||
      !isLeadingMerge(ex.getReassociationIndices(), ke))
    return failure();
  auto ta = cast<RankedTensorType>(ca.getSrc().getType());
  auto tb = cast<RankedTensorType>(cb.getSrc().getType());
  auto tr = cast<RankedTensorType>(ex.getResult().getType());
  if (!ta.hasStaticShape() || !tb.hasStaticShape() || !tr.hasStaticShape())
    return failure();
  auto lead = [](RankedTensorType t, int64_t k) {
    return SmallVector<int64_t>(t.getShape().take_front(k));
  };
  SmallVector<int64_t> ba = lead(ta, ka), bb = lead(tb, kb), be = lead(tr, ke);
  SmallVector<int64_t> common = commonBatch({ba, bb, be});
  if (common.size() < 2)
    return failure(); // One batch dim: nothing merged to keep apart.
  auto ga = groupsFor(common, ba), gb = groupsFor(common, bb),
       ge = groupsFor(common, be);
  if (!ga || !gb || !ge)
    return failure();
  // The accumulator: a fill of a constant (torch's zeros), re-made on the
  // unmerged shape.
  auto fill = mm.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill)
    return failure();
  Value fillValue = fill.getInputs()[0];
  Type elt = tr.getElementType();
  if (fillValue.getType() != elt || !isa<FloatType>(elt))
    return failure();

  OpBuilder b(ex);
  Location loc = mm.getLoc();
  MLIRContext *ctx = mm.getContext();
  DictionaryAttr attrs = mm->getDiscardableAttrDictionary();
  SmallVector<Operation *> made;
  int64_t k = common.size(), n = k + 3; // loops: batch..., m, n, reduction
  // Each operand on the common batch shape.
  auto onCommon = [&](Value src, RankedTensorType t, int64_t kt,
                      ArrayRef<ReassociationIndices> groups) -> Value {
    if (kt == k)
      return src;
    SmallVector<int64_t> shape(common);
    shape.append({t.getDimSize(kt), t.getDimSize(kt + 1)});
    auto op = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(shape, t.getElementType()), src, groups);
    made.push_back(op);
    return op.getResult();
  };
  Value a = onCommon(ca.getSrc(), ta, ka, *ga);
  Value bv = onCommon(cb.getSrc(), tb, kb, *gb);
  SmallVector<int64_t> rshape(common);
  rshape.append({tr.getDimSize(ke), tr.getDimSize(ke + 1)});
  auto rtype = RankedTensorType::get(rshape, elt);

  auto dim = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineExpr> ea, eb, er;
  for (int64_t i = 0; i < k; ++i) {
    ea.push_back(dim(i));
    eb.push_back(dim(i));
    er.push_back(dim(i));
  }
  ea.append({dim(k), dim(k + 2)});
  eb.append({dim(k + 2), dim(k + 1)});
  er.append({dim(k), dim(k + 1)});
  SmallVector<AffineMap> maps = {AffineMap::get(n, 0, ea, ctx),
                                 AffineMap::get(n, 0, eb, ctx),
                                 AffineMap::get(n, 0, er, ctx)};
  SmallVector<utils::IteratorType> iters(n - 1, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  auto empty = tensor::EmptyOp::create(b, loc, rshape, elt);
  auto init = linalg::FillOp::create(b, loc, fillValue, empty.getResult());
  auto gen = linalg::GenericOp::create(
      b, loc, TypeRange{rtype}, ValueRange{a, bv},
      ValueRange{init.getResult(0)}, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value p = arith::MulFOp::create(nb, nloc, args[0], args[1]);
        Value s = arith::AddFOp::create(nb, nloc, args[2], p);
        linalg::YieldOp::create(nb, nloc, ValueRange{s});
      });
  made.append({empty.getOperation(), init.getOperation(), gen.getOperation()});
  Value result = gen.getResult(0);
  if (ke != k) {
    auto back = tensor::CollapseShapeOp::create(b, loc, tr, result, *ge);
    made.push_back(back);
    result = back.getResult();
  }
  for (Operation *o : made)
    o->setDiscardableAttrs(attrs);
  ex.getResult().replaceAllUsesWith(result);
  ex.erase();
  mm.erase();
  for (Operation *o : {ca.getOperation(), cb.getOperation(),
                       fill.getOperation()})
    if (o->use_empty())
      o->erase();
  return success();
}

struct UnflattenBatchMatmulPass
    : public mlir::par::impl::UnflattenBatchMatmulBase<
          UnflattenBatchMatmulPass> {
  void runOnOperation() override {
    SmallVector<linalg::BatchMatmulOp> mms;
    getOperation().walk([&](linalg::BatchMatmulOp op) { mms.push_back(op); });
    for (linalg::BatchMatmulOp op : mms)
      (void)rewrite(op);
  }
};

} // namespace
