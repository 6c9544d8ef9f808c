//===- BufferizableOpInterfaceImpl.cpp - Bufferizing par collectives ------===//
//
// par's collectives are bufferizable: one-shot-bufferize turns each into a
// fresh, contiguous output buffer and one call into the runtime's kernel ABI
// (par_rt_k_*, see include/par/Runtime/par_runtime.h). The call takes only
// scalars (buffer addresses, block counts, codes), so the same generated code
// runs over MPI on host memory today and over NCCL on device memory once the
// GPU path exists: the runtime, not the compiler, owns the transport.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Transforms/RuntimeABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::par;
using namespace mlir::bufferization;

//===----------------------------------------------------------------------===//
// ABI helpers
//===----------------------------------------------------------------------===//

FailureOr<int32_t> mlir::par::getRuntimeDType(Type t) {
  if (t.isF32())
    return 0;
  if (t.isF64())
    return 1;
  if (t.isF16())
    return 2;
  if (t.isBF16())
    return 3;
  if (t.isInteger(32))
    return 4;
  if (t.isInteger(64))
    return 5;
  if (t.isInteger(8))
    return 6;
  if (t.isInteger(1))
    return 7;
  return failure();
}

FailureOr<int64_t> mlir::par::getAxesCode(MeshOp mesh, ArrayAttr axes) {
  if (axes.size() > 8)
    return failure();
  int64_t code = 0;
  for (auto [k, a] : llvm::enumerate(axes.getAsRange<StringAttr>())) {
    int64_t idx = mesh.getAxisIndex(a.getValue());
    if (idx < 0 || idx > 254)
      return failure();
    code |= (idx + 1) << (8 * k);
  }
  return code;
}

int64_t mlir::par::getCoordsCode(ArrayRef<int64_t> coords) {
  int64_t code = 0;
  for (auto [k, c] : llvm::enumerate(coords))
    code |= (c & 0xffff) << (16 * k);
  return code;
}

int64_t mlir::par::getGroupIndex(MeshOp mesh, ArrayAttr axes,
                                 ArrayRef<int64_t> coords) {
  int64_t index = 0;
  for (auto [a, c] : llvm::zip(axes.getAsRange<StringAttr>(), coords))
    index = index * mesh.getAxisSize(a.getValue()) + c;
  return index;
}

void mlir::par::emitRuntimeCall(OpBuilder &b, Location loc, Operation *from,
                                StringRef name, ValueRange args) {
  auto module = from->getParentOfType<ModuleOp>();
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn) {
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointToStart(module.getBody());
    fn = func::FuncOp::create(
        mb, loc, name, mb.getFunctionType(TypeRange(args), TypeRange()));
    fn.setPrivate();
  }
  func::CallOp::create(b, loc, fn, args);
}

Value mlir::par::emitBufferAddress(OpBuilder &b, Location loc, Value memref) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}

//===----------------------------------------------------------------------===//
// Bufferization models
//===----------------------------------------------------------------------===//

namespace {

int64_t product(ArrayRef<int64_t> shape) {
  int64_t p = 1;
  for (int64_t s : shape)
    p *= s;
  return p;
}

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

/// Common checks; returns the mesh, dtype code and axes code.
struct KernelInfo {
  MeshOp mesh;
  int32_t dtype;
  int64_t axes;
};
FailureOr<KernelInfo> getKernelInfo(Operation *op, ShapedType type,
                                    FlatSymbolRefAttr meshSym,
                                    ArrayAttr axesAttr) {
  if (!type.hasStaticShape())
    return op->emitOpError("needs static shapes to lower to the runtime");
  MeshOp mesh = lookupMesh(op, meshSym);
  if (!mesh)
    return failure();
  FailureOr<int32_t> dtype = getRuntimeDType(type.getElementType());
  if (failed(dtype))
    return op->emitOpError() << "element type " << type.getElementType()
                             << " is not supported by the runtime";
  FailureOr<int64_t> axes = getAxesCode(mesh, axesAttr);
  if (failed(axes))
    return op->emitOpError("uses more than 8 mesh axes");
  return KernelInfo{mesh, *dtype, *axes};
}

/// Shared implementation: reads the input, writes a fresh output.
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
    auto concrete = cast<OpTy>(op);
    Location loc = op->getLoc();
    auto inType = cast<RankedTensorType>(op->getOperand(0).getType());
    FailureOr<KernelInfo> info = getKernelInfo(
        op, inType, concrete.getMeshAttr(), concrete.getAxes());
    if (failed(info))
      return failure();
    FailureOr<Value> in =
        getContiguousBuffer(rewriter, loc, op->getOperand(0), options, state);
    if (failed(in))
      return failure();
    Value out;
    if (op->getNumResults() == 1) {
      auto outType = cast<RankedTensorType>(op->getResult(0).getType());
      out = memref::AllocOp::create(
          rewriter, loc,
          MemRefType::get(outType.getShape(), outType.getElementType()));
    }
    static_cast<const ConcreteModel *>(this)->emitCall(
        rewriter, loc, concrete, *info, emitBufferAddress(rewriter, loc, *in),
        out ? emitBufferAddress(rewriter, loc, out) : Value(), inType);
    if (out)
      replaceOpWithBufferizedValues(rewriter, op, out);
    else
      rewriter.eraseOp(op);
    return success();
  }
};

Value i64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}
Value i32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 32);
}

struct AllReduceModel : CollectiveModel<AllReduceModel, AllReduceOp> {
  void emitCall(OpBuilder &b, Location loc, AllReduceOp op, KernelInfo info,
                Value in, Value out, RankedTensorType inType) const {
    emitRuntimeCall(b, loc, op, "par_rt_k_all_reduce",
                    {in, out, i64(b, loc, product(inType.getShape())),
                     i32(b, loc, info.dtype),
                     i32(b, loc, (int64_t)op.getKind()),
                     i64(b, loc, info.axes)});
  }
};

struct AllGatherModel : CollectiveModel<AllGatherModel, AllGatherOp> {
  void emitCall(OpBuilder &b, Location loc, AllGatherOp op, KernelInfo info,
                Value in, Value out, RankedTensorType inType) const {
    ArrayRef<int64_t> s = inType.getShape();
    int64_t d = op.getDim();
    emitRuntimeCall(b, loc, op, "par_rt_k_all_gather",
                    {in, out, i64(b, loc, product(s.take_front(d))),
                     i64(b, loc, product(s.drop_front(d))),
                     i32(b, loc, info.dtype), i64(b, loc, info.axes)});
  }
};

struct ReduceScatterModel
    : CollectiveModel<ReduceScatterModel, ReduceScatterOp> {
  void emitCall(OpBuilder &b, Location loc, ReduceScatterOp op,
                KernelInfo info, Value in, Value out,
                RankedTensorType inType) const {
    ArrayRef<int64_t> o = op.getResult().getType().getShape();
    int64_t d = op.getDim();
    emitRuntimeCall(b, loc, op, "par_rt_k_reduce_scatter",
                    {in, out, i64(b, loc, product(o.take_front(d))),
                     i64(b, loc, product(o.drop_front(d))),
                     i32(b, loc, info.dtype),
                     i32(b, loc, (int64_t)op.getKind()),
                     i64(b, loc, info.axes)});
  }
};

struct AllToAllModel : CollectiveModel<AllToAllModel, AllToAllOp> {
  void emitCall(OpBuilder &b, Location loc, AllToAllOp op, KernelInfo info,
                Value in, Value out, RankedTensorType inType) const {
    ArrayRef<int64_t> i = inType.getShape();
    ArrayRef<int64_t> o = op.getResult().getType().getShape();
    int64_t n = op.getGroupSize();
    int64_t s = op.getSplitDim(), c = op.getConcatDim();
    int64_t A = product(i.take_front(s));
    int64_t B = product(i.drop_front(s)) / n;
    int64_t C = product(o.take_front(c));
    int64_t D = product(o.drop_front(c)) / n;
    emitRuntimeCall(b, loc, op, "par_rt_k_all_to_all",
                    {in, out, i64(b, loc, A), i64(b, loc, B), i64(b, loc, C),
                     i64(b, loc, D), i32(b, loc, info.dtype),
                     i64(b, loc, info.axes)});
  }
};

struct AllSliceModel : CollectiveModel<AllSliceModel, AllSliceOp> {
  void emitCall(OpBuilder &b, Location loc, AllSliceOp op, KernelInfo info,
                Value in, Value out, RankedTensorType inType) const {
    ArrayRef<int64_t> o = op.getResult().getType().getShape();
    int64_t d = op.getDim();
    emitRuntimeCall(b, loc, op, "par_rt_k_all_slice",
                    {in, out, i64(b, loc, product(o.take_front(d))),
                     i64(b, loc, product(o.drop_front(d))),
                     i32(b, loc, info.dtype), i64(b, loc, info.axes)});
  }
};

struct BroadcastModel : CollectiveModel<BroadcastModel, BroadcastOp> {
  void emitCall(OpBuilder &b, Location loc, BroadcastOp op, KernelInfo info,
                Value in, Value out, RankedTensorType inType) const {
    emitRuntimeCall(
        b, loc, op, "par_rt_k_broadcast",
        {in, out, i64(b, loc, product(inType.getShape())),
         i32(b, loc, info.dtype),
         i64(b, loc, getGroupIndex(info.mesh, op.getAxes(), op.getRoot())),
         i64(b, loc, info.axes)});
  }
};

struct SendModel : CollectiveModel<SendModel, SendOp> {
  void emitCall(OpBuilder &b, Location loc, SendOp op, KernelInfo info,
                Value in, Value, RankedTensorType inType) const {
    emitRuntimeCall(b, loc, op, "par_rt_k_send",
                    {in, i64(b, loc, product(inType.getShape())),
                     i32(b, loc, info.dtype), i64(b, loc, info.axes),
                     i64(b, loc, getCoordsCode(op.getDest())),
                     i64(b, loc, op.getTag())});
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
    Location loc = op->getLoc();
    auto type = recv.getResult().getType();
    FailureOr<KernelInfo> info =
        getKernelInfo(op, type, recv.getMeshAttr(), recv.getAxes());
    if (failed(info))
      return failure();
    Value out = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()));
    emitRuntimeCall(rewriter, loc, op, "par_rt_k_recv",
                    {emitBufferAddress(rewriter, loc, out),
                     i64(rewriter, loc, product(type.getShape())),
                     i32(rewriter, loc, info->dtype),
                     i64(rewriter, loc, info->axes),
                     i64(rewriter, loc, getCoordsCode(recv.getSource())),
                     i64(rewriter, loc, recv.getTag())});
    replaceOpWithBufferizedValues(rewriter, op, out);
    return success();
  }
};

} // namespace

void mlir::par::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, ParDialect *) {
    ctx->loadDialect<memref::MemRefDialect, arith::ArithDialect,
                     func::FuncDialect>();
    AllReduceOp::attachInterface<AllReduceModel>(*ctx);
    AllGatherOp::attachInterface<AllGatherModel>(*ctx);
    ReduceScatterOp::attachInterface<ReduceScatterModel>(*ctx);
    AllToAllOp::attachInterface<AllToAllModel>(*ctx);
    AllSliceOp::attachInterface<AllSliceModel>(*ctx);
    BroadcastOp::attachInterface<BroadcastModel>(*ctx);
    SendOp::attachInterface<SendModel>(*ctx);
    RecvOp::attachInterface<RecvModel>(*ctx);
  });
}
