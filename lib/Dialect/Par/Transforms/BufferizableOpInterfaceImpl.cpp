//===- BufferizableOpInterfaceImpl.cpp - Bufferizing par collectives ------===//
//
// par's collectives are bufferizable: one-shot-bufferize turns each tensor
// collective into its buffer form (par.buffer_*), reading the input's
// buffer (made contiguous if needed) and writing a fresh, contiguous output
// buffer. Nothing here knows the runtime: Conversion/ParToRuntime turns the
// buffer forms into calls of the runtime's kernel ABI, so bufferization
// only bufferizes and each target lowers the same ops its own way.
// A ZeRO-3 gather's `par.zero_gather` tag is kept on its buffer form.
// par.recompute_barrier bufferizes to its operand's buffer (an alias).
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/BufferizableOpInterfaceImpl.h"
#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::par;
using namespace mlir::bufferization;

namespace {

/// A buffer for `tensor` with the identity layout (copied if needed).
FailureOr<Value> getContiguousBuffer(RewriterBase &rewriter, Location loc,
                                     Value tensor,
                                     const BufferizationOptions &options,
                                     BufferizationState &state) {
  FailureOr<Value> buffer = getBuffer(rewriter, tensor, options, state);
  if (failed(buffer))
    return failure();
  auto type = cast<MemRefType>(buffer->getType());
  if (type.getLayout().isIdentity())
    return buffer;
  auto contiguous = MemRefType::get(type.getShape(), type.getElementType(),
                                    MemRefLayoutAttrInterface(),
                                    type.getMemorySpace());
  Value copy = memref::AllocOp::create(rewriter, loc, contiguous);
  memref::CopyOp::create(rewriter, loc, *buffer, copy);
  return copy;
}

/// A fresh contiguous buffer of a tensor type.
Value allocFor(RewriterBase &rewriter, Location loc, RankedTensorType type) {
  return memref::AllocOp::create(
      rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()));
}

LogicalResult checkStatic(Operation *op, RankedTensorType type) {
  if (!type.hasStaticShape())
    return op->emitOpError("needs static shapes to bufferize (the runtime's "
                           "kernels take contiguous, static buffers)");
  return success();
}

/// Reads the input, writes a fresh output: the buffer form is built by
/// ConcreteModel::build(rewriter, op, in, out).
template <typename ConcreteModel, typename OpTy>
struct CollectiveModel
    : public BufferizableOpInterface::ExternalModel<ConcreteModel, OpTy> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    Location loc = op->getLoc();
    if (failed(checkStatic(
            op, cast<RankedTensorType>(op->getOperand(0).getType()))))
      return failure();
    FailureOr<Value> in =
        getContiguousBuffer(rewriter, loc, op->getOperand(0), options, state);
    if (failed(in))
      return failure();
    if (op->getNumResults() == 0) {
      ConcreteModel::build(rewriter, cast<OpTy>(op), *in, Value());
      rewriter.eraseOp(op);
      return success();
    }
    auto outType = cast<RankedTensorType>(op->getResult(0).getType());
    if (failed(checkStatic(op, outType)))
      return failure();
    Value out = allocFor(rewriter, loc, outType);
    ConcreteModel::build(rewriter, cast<OpTy>(op), *in, out);
    replaceOpWithBufferizedValues(rewriter, op, out);
    return success();
  }
};

struct AllReduceModel : CollectiveModel<AllReduceModel, AllReduceOp> {
  static void build(RewriterBase &b, AllReduceOp op, Value in, Value out) {
    BufferAllReduceOp::create(b, op.getLoc(), in, out, op.getMeshAttr(),
                              op.getAxes(), op.getKindAttr());
  }
};

struct AllGatherModel : CollectiveModel<AllGatherModel, AllGatherOp> {
  static void build(RewriterBase &b, AllGatherOp op, Value in, Value out) {
    auto gather = BufferAllGatherOp::create(b, op.getLoc(), in, out,
                                            op.getMeshAttr(), op.getAxes(),
                                            op.getDimAttr());
    // ZeRO-3's parameter gathers stay marked: par-zero-prefetch starts
    // them ahead of their use.
    if (Attribute phase = op->getAttr(ParDialect::kZeROGatherAttrName))
      gather->setAttr(ParDialect::kZeROGatherAttrName, phase);
  }
};

struct ReduceScatterModel
    : CollectiveModel<ReduceScatterModel, ReduceScatterOp> {
  static void build(RewriterBase &b, ReduceScatterOp op, Value in,
                    Value out) {
    BufferReduceScatterOp::create(b, op.getLoc(), in, out, op.getMeshAttr(),
                                  op.getAxes(), op.getDimAttr(),
                                  op.getKindAttr());
  }
};

struct AllToAllModel : CollectiveModel<AllToAllModel, AllToAllOp> {
  static void build(RewriterBase &b, AllToAllOp op, Value in, Value out) {
    BufferAllToAllOp::create(b, op.getLoc(), in, out, op.getMeshAttr(),
                             op.getAxes(), op.getSplitDimAttr(),
                             op.getConcatDimAttr());
  }
};

struct AllSliceModel : CollectiveModel<AllSliceModel, AllSliceOp> {
  static void build(RewriterBase &b, AllSliceOp op, Value in, Value out) {
    BufferAllSliceOp::create(b, op.getLoc(), in, out, op.getMeshAttr(),
                             op.getAxes(), op.getDimAttr());
  }
};

struct BroadcastModel : CollectiveModel<BroadcastModel, BroadcastOp> {
  static void build(RewriterBase &b, BroadcastOp op, Value in, Value out) {
    BufferBroadcastOp::create(b, op.getLoc(), in, out, op.getMeshAttr(),
                              op.getAxes(), op.getRootAttr());
  }
};

struct SendModel : CollectiveModel<SendModel, SendOp> {
  static void build(RewriterBase &b, SendOp op, Value in, Value) {
    BufferSendOp::create(b, op.getLoc(), in, op.getMeshAttr(), op.getAxes(),
                         op.getDestAttr(), op.getTagAttr());
  }
};

/// A bucket reads every input and writes one fresh output per member: the
/// collectives' analysis answers, its own bufferize (which hides the
/// single-operand one).
struct BucketAllReduceModel
    : public CollectiveModel<BucketAllReduceModel, BucketAllReduceOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto bucket = cast<BucketAllReduceOp>(op);
    Location loc = op->getLoc();
    SmallVector<Value> ins, outs;
    for (auto [input, result] :
         llvm::zip(bucket.getInputs(), bucket.getResults())) {
      auto type = cast<RankedTensorType>(input.getType());
      if (failed(checkStatic(op, type)))
        return failure();
      FailureOr<Value> in =
          getContiguousBuffer(rewriter, loc, input, options, state);
      if (failed(in))
        return failure();
      ins.push_back(*in);
      outs.push_back(allocFor(rewriter, loc,
                              cast<RankedTensorType>(result.getType())));
    }
    BufferBucketAllReduceOp::create(rewriter, loc, ins, outs,
                                    bucket.getMeshAttr(), bucket.getAxes(),
                                    bucket.getKindAttr());
    replaceOpWithBufferizedValues(rewriter, op, outs);
    return success();
  }
};

/// recv has no tensor operand: it only writes a fresh buffer.
struct RecvModel
    : public BufferizableOpInterface::ExternalModel<RecvModel, RecvOp> {
  bool bufferizesToAllocation(Operation *, Value) const { return true; }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &,
                          BufferizationState &) const {
    auto recv = cast<RecvOp>(op);
    if (failed(checkStatic(op, recv.getResult().getType())))
      return failure();
    Value out = allocFor(rewriter, op->getLoc(), recv.getResult().getType());
    BufferRecvOp::create(rewriter, op->getLoc(), out, recv.getMeshAttr(),
                         recv.getAxes(), recv.getSourceAttr(),
                         recv.getTagAttr());
    replaceOpWithBufferizedValues(rewriter, op, out);
    return success();
  }
};

/// par.recompute_barrier is an alias of its operand's buffer, as
/// tensor.cast is: it neither reads nor writes, and its result is the
/// operand's buffer. Its work (keeping CSE from merging recomputed ops
/// into the forward) is over once the ops act on buffers.
struct RecomputeBarrierModel
    : public BufferizableOpInterface::ExternalModel<RecomputeBarrierModel,
                                                    RecomputeBarrierOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return false;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &,
                                      const AnalysisState &) const {
    return {{op->getResult(0), BufferRelation::Equivalent}};
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    FailureOr<Value> buffer =
        getBuffer(rewriter, op->getOperand(0), options, state);
    if (failed(buffer))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};

} // namespace

void mlir::par::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, ParDialect *) {
    ctx->loadDialect<memref::MemRefDialect>();
    AllReduceOp::attachInterface<AllReduceModel>(*ctx);
    BucketAllReduceOp::attachInterface<BucketAllReduceModel>(*ctx);
    AllGatherOp::attachInterface<AllGatherModel>(*ctx);
    ReduceScatterOp::attachInterface<ReduceScatterModel>(*ctx);
    AllToAllOp::attachInterface<AllToAllModel>(*ctx);
    AllSliceOp::attachInterface<AllSliceModel>(*ctx);
    BroadcastOp::attachInterface<BroadcastModel>(*ctx);
    SendOp::attachInterface<SendModel>(*ctx);
    RecvOp::attachInterface<RecvModel>(*ctx);
    RecomputeBarrierOp::attachInterface<RecomputeBarrierModel>(*ctx);
  });
}
