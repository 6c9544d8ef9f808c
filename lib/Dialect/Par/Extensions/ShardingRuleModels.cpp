//===- ShardingRuleModels.cpp - Sharding rules for upstream ops -----------===//
//
// External models of ShardingRuleOpInterface for the upstream ops a model is
// written in. Every rule is derived from what the op already states about
// itself: linalg indexing maps and iterator types, tensor reassociations,
// the Elementwise trait. An op without a model has no rule; propagation does
// not cross it and partitioning rejects it if it is asked to be split.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Extensions/ShardingRuleModels.h"
#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Dialect/Par/Interfaces/ShardingRuleOpInterface.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineExpr.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::par;

namespace {

/// Starts a rule with one (empty) entry per operand and result.
ShardingRule makeEmptyRule(Operation *op) {
  ShardingRule rule;
  for (Value v : op->getOperands()) {
    rule.operandDims.emplace_back();
    rule.operandIsTensor.push_back(isa<RankedTensorType>(v.getType()));
    rule.operandTiedResult.push_back(-1);
  }
  for (Value v : op->getResults()) {
    rule.resultDims.emplace_back();
    rule.resultIsTensor.push_back(isa<RankedTensorType>(v.getType()));
  }
  return rule;
}

/// Rule where all tensor operands and results share one factor per
/// dimension (elementwise ops, splats), with `kind` for every factor.
FailureOr<ShardingRule> makeIdentityRule(Operation *op,
                                         FactorKind kind = FactorKind::Parallel) {
  RankedTensorType ref;
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt)
      continue;
    if (!ref)
      ref = rt;
    else if (rt.getShape() != ref.getShape())
      return failure();
  }
  if (!ref)
    return failure();
  ShardingRule rule = makeEmptyRule(op);
  SmallVector<int64_t> factors;
  for (int64_t size : ref.getShape())
    factors.push_back(rule.addFactor(size, kind));
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (rule.operandIsTensor[i])
      rule.operandDims[i] = factors;
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    if (rule.resultIsTensor[i])
      rule.resultDims[i] = factors;
  return rule;
}

//===----------------------------------------------------------------------===//
// linalg structured ops: from indexing maps and iterator types
//===----------------------------------------------------------------------===//

/// How the value yielded for output `i` combines with the output's old
/// value, if it is a recognised reduction.
std::optional<ReductionKind> getCombiner(linalg::LinalgOp op, int64_t i) {
  Block *body = op.getBlock();
  if (!body)
    return std::nullopt;
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!yield || i >= (int64_t)yield.getNumOperands())
    return std::nullopt;
  Operation *def = yield.getOperand(i).getDefiningOp();
  if (!def || def->getNumOperands() != 2)
    return std::nullopt;
  BlockArgument acc = op.getRegionOutputArgs()[i];
  if (def->getOperand(0) != acc && def->getOperand(1) != acc)
    return std::nullopt;
  if (isa<arith::AddFOp, arith::AddIOp>(def))
    return ReductionKind::Sum;
  if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp, arith::MaxUIOp>(def))
    return ReductionKind::Max;
  if (isa<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp, arith::MinUIOp>(def))
    return ReductionKind::Min;
  return std::nullopt;
}

template <typename OpTy>
struct LinalgRuleModel
    : public ShardingRuleOpInterface::ExternalModel<LinalgRuleModel<OpTy>,
                                                    OpTy> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    auto linalgOp = cast<linalg::LinalgOp>(op);
    if (!linalgOp.hasPureTensorSemantics())
      return failure();
    ShardingRule rule = makeEmptyRule(op);
    SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
    SmallVector<utils::IteratorType> iters =
        linalgOp.getIteratorTypesArray();
    for (auto [size, it] : llvm::zip(ranges, iters))
      rule.addFactor(size, it == utils::IteratorType::reduction
                               ? FactorKind::Reduction
                               : FactorKind::Parallel);
    // A loop read through linalg.index must see global indices: never split.
    if (Block *body = linalgOp.getBlock())
      body->walk([&](linalg::IndexOp index) {
        if (index.getDim() < rule.factorKinds.size())
          rule.factorKinds[index.getDim()] = FactorKind::Blocked;
      });
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      AffineMap map = linalgOp.getMatchingIndexingMap(&operand);
      if (!rule.operandIsTensor[i])
        continue;
      for (AffineExpr e : map.getResults()) {
        if (auto d = dyn_cast<AffineDimExpr>(e))
          rule.operandDims[i].push_back(d.getPosition());
        else if (isa<AffineConstantExpr>(e))
          rule.operandDims[i].push_back(ShardingRule::kNoFactor);
        else
          return failure(); // Not a projected permutation (convolutions).
      }
    }
    // Results mirror their inits.
    for (OpOperand &init : linalgOp.getDpsInitsMutable()) {
      int64_t r = init.getOperandNumber() - linalgOp.getNumDpsInputs();
      rule.resultDims[r] = rule.operandDims[init.getOperandNumber()];
      rule.operandTiedResult[init.getOperandNumber()] = r;
    }
    // The reduction's combiner decides what a split reduction leaves
    // behind; an unknown combiner blocks the reduction loops.
    if (llvm::is_contained(rule.factorKinds, FactorKind::Reduction)) {
      std::optional<ReductionKind> kind;
      bool ok = linalgOp.getNumDpsInits() > 0;
      for (int64_t i = 0; i < linalgOp.getNumDpsInits() && ok; ++i) {
        std::optional<ReductionKind> k = getCombiner(linalgOp, i);
        if (!k || (kind && *kind != *k))
          ok = false;
        kind = k;
      }
      if (ok)
        rule.reductionKind = *kind;
      else
        for (FactorKind &k : rule.factorKinds)
          if (k == FactorKind::Reduction)
            k = FactorKind::Blocked;
    }
    return rule;
  }
};

template <typename... OpTypes>
void attachLinalgModels(MLIRContext *ctx) {
  (OpTypes::template attachInterface<LinalgRuleModel<OpTypes>>(*ctx), ...);
}

struct SoftmaxRuleModel
    : public ShardingRuleOpInterface::ExternalModel<SoftmaxRuleModel,
                                                    linalg::SoftmaxOp> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    auto softmax = cast<linalg::SoftmaxOp>(op);
    FailureOr<ShardingRule> rule = makeIdentityRule(op);
    if (failed(rule))
      return failure();
    // The normalisation reads the whole softmax dimension.
    rule->factorKinds[softmax.getDimension()] = FactorKind::Blocked;
    rule->operandTiedResult[1] = 0;
    return rule;
  }
};

//===----------------------------------------------------------------------===//
// arith / math
//===----------------------------------------------------------------------===//

/// arith.constant of a tensor: a splat is the same on every device whatever
/// its shape; other constants (dense or dense_resource, as torch-mlir
/// writes a module's buffers) are materialised whole and then sliced.
FailureOr<ShardingRule> getConstantRule(arith::ConstantOp cst) {
  auto elements = dyn_cast<ElementsAttr>(cst.getValue());
  if (!elements || !isa<RankedTensorType>(cst.getType()))
    return failure();
  auto dense = dyn_cast<DenseElementsAttr>(elements);
  return makeIdentityRule(cst, dense && dense.isSplat() ? FactorKind::Parallel
                                                        : FactorKind::Blocked);
}

template <typename OpTy>
struct ElementwiseRuleModel
    : public ShardingRuleOpInterface::ExternalModel<ElementwiseRuleModel<OpTy>,
                                                    OpTy> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    if (auto cst = dyn_cast<arith::ConstantOp>(op))
      return getConstantRule(cst);
    if (!op->hasTrait<OpTrait::Elementwise>())
      return failure();
    return makeIdentityRule(op);
  }
};

template <typename... OpTypes>
void attachElementwiseModels(MLIRContext *ctx) {
  (OpTypes::template attachInterface<ElementwiseRuleModel<OpTypes>>(*ctx),
   ...);
}

//===----------------------------------------------------------------------===//
// tensor
//===----------------------------------------------------------------------===//

template <typename OpTy>
struct ShapeOnlyRuleModel
    : public ShardingRuleOpInterface::ExternalModel<ShapeOnlyRuleModel<OpTy>,
                                                    OpTy> {
  // tensor.empty / tensor.splat: a fresh tensor, any dim may be split.
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    return makeIdentityRule(op);
  }
};

/// Maps a reassociation between a "wide" (more dims) and a "narrow" shape:
/// within each group, the first non-unit wide dim shares its factor with
/// the narrow dim (splitting the narrow dim into n blocks splits that major
/// dim into n blocks when n divides it); other non-unit wide dims are
/// blocked; unit dims have no factor.
void mapReassociation(ShardingRule &rule, ArrayRef<int64_t> wide,
                      ArrayRef<int64_t> narrow,
                      ArrayRef<ReassociationIndices> groups,
                      SmallVector<int64_t> &wideDims,
                      SmallVector<int64_t> &narrowDims) {
  wideDims.assign(wide.size(), ShardingRule::kNoFactor);
  narrowDims.assign(narrow.size(), ShardingRule::kNoFactor);
  for (auto [g, group] : llvm::enumerate(groups)) {
    bool majorSeen = false;
    for (int64_t d : group) {
      if (wide[d] == 1)
        continue;
      if (!majorSeen) {
        majorSeen = true;
        int64_t f = rule.addFactor(wide[d], FactorKind::Parallel);
        wideDims[d] = f;
        narrowDims[g] = f;
      } else {
        wideDims[d] = rule.addFactor(wide[d], FactorKind::Blocked);
      }
    }
  }
}

struct ExpandShapeRuleModel
    : public ShardingRuleOpInterface::ExternalModel<ExpandShapeRuleModel,
                                                    tensor::ExpandShapeOp> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    auto expand = cast<tensor::ExpandShapeOp>(op);
    ShardingRule rule = makeEmptyRule(op);
    SmallVector<int64_t> wideDims, narrowDims;
    mapReassociation(rule, expand.getResultType().getShape(),
                     expand.getSrcType().getShape(),
                     expand.getReassociationIndices(), wideDims, narrowDims);
    rule.operandDims[0] = narrowDims;
    rule.resultDims[0] = wideDims;
    return rule;
  }
};

struct CollapseShapeRuleModel
    : public ShardingRuleOpInterface::ExternalModel<CollapseShapeRuleModel,
                                                    tensor::CollapseShapeOp> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    auto collapse = cast<tensor::CollapseShapeOp>(op);
    ShardingRule rule = makeEmptyRule(op);
    SmallVector<int64_t> wideDims, narrowDims;
    mapReassociation(rule, collapse.getSrcType().getShape(),
                     collapse.getResultType().getShape(),
                     collapse.getReassociationIndices(), wideDims, narrowDims);
    rule.operandDims[0] = wideDims;
    rule.resultDims[0] = narrowDims;
    return rule;
  }
};

/// True if dim `d` of a slice covers the whole tensor dim of size `full`.
bool isFullDim(OffsetSizeAndStrideOpInterface op, int64_t d, int64_t full) {
  return op.isDynamicOffset(d) == false && op.getStaticOffset(d) == 0 &&
         !op.isDynamicSize(d) && op.getStaticSize(d) == full &&
         !op.isDynamicStride(d) && op.getStaticStride(d) == 1;
}

struct ExtractSliceRuleModel
    : public ShardingRuleOpInterface::ExternalModel<ExtractSliceRuleModel,
                                                    tensor::ExtractSliceOp> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    ShardingRule rule = makeEmptyRule(op);
    ArrayRef<int64_t> src = slice.getSourceType().getShape();
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    rule.operandDims[0].assign(src.size(), ShardingRule::kNoFactor);
    for (int64_t d = 0, r = 0; d < (int64_t)src.size(); ++d) {
      bool full = isFullDim(slice, d, src[d]);
      int64_t f = rule.addFactor(src[d], full ? FactorKind::Parallel
                                              : FactorKind::Blocked);
      rule.operandDims[0][d] = f;
      if (dropped.test(d))
        continue;
      // A touched dim keeps its own factor on the result, blocked too.
      rule.resultDims[0].push_back(
          full ? f
               : rule.addFactor(slice.getResultType().getDimSize(r),
                                FactorKind::Blocked));
      ++r;
    }
    for (int64_t i = 1; i < (int64_t)op->getNumOperands(); ++i)
      rule.operandIsTensor[i] = false;
    return rule;
  }
};

struct InsertSliceRuleModel
    : public ShardingRuleOpInterface::ExternalModel<InsertSliceRuleModel,
                                                    tensor::InsertSliceOp> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    auto insert = cast<tensor::InsertSliceOp>(op);
    ShardingRule rule = makeEmptyRule(op);
    ArrayRef<int64_t> dest = insert.getDestType().getShape();
    ArrayRef<int64_t> src = insert.getSourceType().getShape();
    if (src.size() != dest.size())
      return failure(); // Rank-changing inserts are not supported.
    for (int64_t d = 0; d < (int64_t)dest.size(); ++d) {
      bool full = isFullDim(insert, d, dest[d]);
      int64_t f = rule.addFactor(dest[d], full ? FactorKind::Parallel
                                               : FactorKind::Blocked);
      rule.operandDims[1].push_back(f);
      rule.resultDims[0].push_back(f);
      rule.operandDims[0].push_back(
          full ? f : rule.addFactor(src[d], FactorKind::Blocked));
    }
    rule.operandTiedResult[1] = 0;
    return rule;
  }
};

struct ConcatRuleModel
    : public ShardingRuleOpInterface::ExternalModel<ConcatRuleModel,
                                                    tensor::ConcatOp> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    auto concat = cast<tensor::ConcatOp>(op);
    ShardingRule rule = makeEmptyRule(op);
    ArrayRef<int64_t> shape = concat.getResultType().getShape();
    int64_t cdim = concat.getDim();
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
      if (d == cdim) {
        for (auto [i, v] : llvm::enumerate(op->getOperands()))
          rule.operandDims[i].push_back(rule.addFactor(
              cast<RankedTensorType>(v.getType()).getDimSize(d),
              FactorKind::Blocked));
        rule.resultDims[0].push_back(
            rule.addFactor(shape[d], FactorKind::Blocked));
        continue;
      }
      int64_t f = rule.addFactor(shape[d], FactorKind::Parallel);
      for (auto &dims : rule.operandDims)
        dims.push_back(f);
      rule.resultDims[0].push_back(f);
    }
    return rule;
  }
};

} // namespace

/// par's scalar loss-scaling ops: rank-0 in and out, no factors (every
/// operand replicated, so a partial loss is reduced before it); and
/// par.recompute_barrier, whose operand and result share every factor.
template <typename OpTy>
struct IdentityRuleModel
    : public ShardingRuleOpInterface::ExternalModel<IdentityRuleModel<OpTy>,
                                                    OpTy> {
  FailureOr<ShardingRule> getShardingRule(Operation *op) const {
    return makeIdentityRule(op);
  }
};

void mlir::par::registerShardingRuleModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, ParDialect *) {
    ScaleLossOp::attachInterface<IdentityRuleModel<ScaleLossOp>>(*ctx);
    UpdateLossScaleOp::attachInterface<IdentityRuleModel<UpdateLossScaleOp>>(
        *ctx);
    // The barrier forwards its operand: the identity rule, as a scalar's.
    RecomputeBarrierOp::attachInterface<IdentityRuleModel<RecomputeBarrierOp>>(
        *ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, linalg::LinalgDialect *) {
    attachLinalgModels<
#define GET_OP_LIST
#include "mlir/Dialect/Linalg/IR/LinalgStructuredOps.cpp.inc"
        >(ctx);
    linalg::SoftmaxOp::attachInterface<SoftmaxRuleModel>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    attachElementwiseModels<
#define GET_OP_LIST
#include "mlir/Dialect/Arith/IR/ArithOps.cpp.inc"
        >(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    attachElementwiseModels<
#define GET_OP_LIST
#include "mlir/Dialect/Math/IR/MathOps.cpp.inc"
        >(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, tensor::TensorDialect *) {
    tensor::EmptyOp::attachInterface<ShapeOnlyRuleModel<tensor::EmptyOp>>(*ctx);
    tensor::SplatOp::attachInterface<ShapeOnlyRuleModel<tensor::SplatOp>>(*ctx);
    tensor::ExpandShapeOp::attachInterface<ExpandShapeRuleModel>(*ctx);
    tensor::CollapseShapeOp::attachInterface<CollapseShapeRuleModel>(*ctx);
    tensor::ExtractSliceOp::attachInterface<ExtractSliceRuleModel>(*ctx);
    tensor::InsertSliceOp::attachInterface<InsertSliceRuleModel>(*ctx);
    tensor::ConcatOp::attachInterface<ConcatRuleModel>(*ctx);
  });
}
