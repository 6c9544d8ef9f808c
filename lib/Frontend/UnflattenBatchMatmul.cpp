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
  return groups[1][0] == numBatch && groups[2][0] == numBatch + 1;
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
      !isLeadingMerge(ex.getReassociationIndices(), ke) || ka != kb ||
      ka != ke || ka < 2)
    return failure();
  auto ta = cast<RankedTensorType>(ca.getSrc().getType());
  auto tb = cast<RankedTensorType>(cb.getSrc().getType());
  auto tr = cast<RankedTensorType>(ex.getResult().getType());
  if (!ta.hasStaticShape() || !tb.hasStaticShape() || !tr.hasStaticShape())
    return failure();
  for (int64_t d = 0; d < ka; ++d)
    if (ta.getDimSize(d) != tb.getDimSize(d) ||
        ta.getDimSize(d) != tr.getDimSize(d))
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
  int64_t k = ka, n = k + 3; // loops: batch..., m, n, reduction
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
  auto empty = tensor::EmptyOp::create(b, loc, tr.getShape(), elt);
  auto init = linalg::FillOp::create(b, loc, fillValue, empty.getResult());
  auto gen = linalg::GenericOp::create(
      b, loc, TypeRange{tr}, ValueRange{ca.getSrc(), cb.getSrc()},
      ValueRange{init.getResult(0)}, maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value p = arith::MulFOp::create(nb, nloc, args[0], args[1]);
        Value s = arith::AddFOp::create(nb, nloc, args[2], p);
        linalg::YieldOp::create(nb, nloc, ValueRange{s});
      });
  for (Operation *o : {empty.getOperation(), init.getOperation(),
                       gen.getOperation()})
    o->setDiscardableAttrs(attrs);
  ex.getResult().replaceAllUsesWith(gen.getResult(0));
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
