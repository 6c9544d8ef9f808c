//===- CollectivesToRuntime.cpp - par-collectives-to-runtime --------------===//
//
// Buffer-form collectives (par.buffer_*) become calls into the runtime's
// kernel ABI (par_rt_k_*, include/par/Runtime/par_kernel_abi.h). The calls take
// only scalars — buffer addresses, block counts, dtype/axes/coordinate
// codes — so the same generated code runs over MPI on host memory and over
// NCCL on device memory: the runtime, not the compiler, owns the transport.
// The block counts are the kernels' view of a collective along `dim`: a
// row-major buffer is A blocks (dims before `dim`) of B contiguous elements.
//
//===----------------------------------------------------------------------===//

#include "par/Conversion/ParToRuntime/CollectivesToRuntime.h"
#include "par/Conversion/ParToRuntime/Passes.h"
#include "par/Conversion/ParToRuntime/RuntimeABI.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "par-collectives-to-runtime"

namespace mlir::par {
#define GEN_PASS_DEF_COLLECTIVESTORUNTIME
#include "par/Conversion/ParToRuntime/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

int64_t product(ArrayRef<int64_t> shape) {
  int64_t p = 1;
  for (int64_t s : shape)
    p *= s;
  return p;
}

Value i64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}
Value i32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 32);
}

/// A row-major buffer seen along `dim`: A blocks (the dims before it) of B
/// contiguous elements (the dims from it on).
void appendBlocks(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                  int64_t dim, SmallVectorImpl<Value> &args) {
  args.push_back(i64(b, loc, product(shape.take_front(dim))));
  args.push_back(i64(b, loc, product(shape.drop_front(dim))));
}

/// What every kernel call needs: the mesh, the dtype code, the axes code.
/// Emits an error on `op` when the runtime cannot take it.
struct KernelInfo {
  MeshOp mesh;
  int32_t dtype = 0;
  int64_t axes = 0;
};
FailureOr<KernelInfo> getKernelInfo(Operation *op, MemRefType type,
                                    FlatSymbolRefAttr meshSym,
                                    ArrayAttr axesAttr, bool emit) {
  MeshOp mesh = lookupMesh(op, meshSym, emit);
  if (!mesh)
    return failure();
  FailureOr<int32_t> dtype = getRuntimeDType(type.getElementType());
  if (failed(dtype)) {
    if (emit)
      op->emitOpError() << "element type " << type.getElementType()
                        << " is not supported by the runtime";
    return failure();
  }
  FailureOr<int64_t> axes = getAxesCode(mesh, axesAttr);
  if (failed(axes)) {
    if (emit)
      op->emitOpError("uses more than 8 mesh axes");
    return failure();
  }
  return KernelInfo{mesh, *dtype, *axes};
}

/// The memref operand whose element type the kernel moves.
template <typename OpTy>
MemRefType dataType(OpTy op) {
  return cast<MemRefType>(op->getOperand(0).getType());
}

/// Shared driver: checks the op, then ConcretePattern::args() builds the
/// kernel's scalar arguments (after the input/output addresses).
template <typename ConcretePattern, typename OpTy>
struct KernelPattern : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    FailureOr<KernelInfo> info = getKernelInfo(
        op, dataType(op), op.getMeshAttr(), op.getAxes(), /*emit=*/false);
    if (failed(info))
      return rewriter.notifyMatchFailure(op, "not a runtime kernel call");
    Location loc = op.getLoc();
    SmallVector<Value> args;
    for (Value buffer : op->getOperands())
      args.push_back(emitBufferAddress(rewriter, loc, buffer));
    ConcretePattern::appendArgs(rewriter, loc, op, *info, args);
    // A started collective returns its request handle.
    func::CallOp call = emitRuntimeCall(rewriter, loc, op,
                                        ConcretePattern::kKernel, args,
                                        op->getResultTypes());
    rewriter.replaceOp(op, call.getResults());
    return success();
  }
};

struct AllReducePattern
    : KernelPattern<AllReducePattern, BufferAllReduceOp> {
  using KernelPattern::KernelPattern;
  static constexpr const char *kKernel = "par_rt_k_all_reduce";
  static void appendArgs(OpBuilder &b, Location loc, BufferAllReduceOp op,
                         KernelInfo info, SmallVectorImpl<Value> &args) {
    args.append({i64(b, loc, product(op.getInput().getType().getShape())),
                 i32(b, loc, info.dtype), i32(b, loc, (int64_t)op.getKind()),
                 i64(b, loc, info.axes)});
  }
};

struct AllGatherPattern
    : KernelPattern<AllGatherPattern, BufferAllGatherOp> {
  using KernelPattern::KernelPattern;
  static constexpr const char *kKernel = "par_rt_k_all_gather";
  static void appendArgs(OpBuilder &b, Location loc, BufferAllGatherOp op,
                         KernelInfo info, SmallVectorImpl<Value> &args) {
    appendBlocks(b, loc, op.getInput().getType().getShape(), op.getDim(),
                 args);
    args.append({i32(b, loc, info.dtype), i64(b, loc, info.axes)});
  }
};

/// par_rt_k_all_gather_start: the blocking form's arguments, and the
/// request handle back.
struct AllGatherStartPattern
    : KernelPattern<AllGatherStartPattern, BufferAllGatherStartOp> {
  using KernelPattern::KernelPattern;
  static constexpr const char *kKernel = "par_rt_k_all_gather_start";
  static void appendArgs(OpBuilder &b, Location loc, BufferAllGatherStartOp op,
                         KernelInfo info, SmallVectorImpl<Value> &args) {
    appendBlocks(b, loc, op.getInput().getType().getShape(), op.getDim(),
                 args);
    args.append({i32(b, loc, info.dtype), i64(b, loc, info.axes)});
  }
};

struct ReduceScatterPattern
    : KernelPattern<ReduceScatterPattern, BufferReduceScatterOp> {
  using KernelPattern::KernelPattern;
  static constexpr const char *kKernel = "par_rt_k_reduce_scatter";
  static void appendArgs(OpBuilder &b, Location loc, BufferReduceScatterOp op,
                         KernelInfo info, SmallVectorImpl<Value> &args) {
    appendBlocks(b, loc, op.getOutput().getType().getShape(), op.getDim(),
                 args);
    args.append({i32(b, loc, info.dtype), i32(b, loc, (int64_t)op.getKind()),
                 i64(b, loc, info.axes)});
  }
};

struct AllToAllPattern : KernelPattern<AllToAllPattern, BufferAllToAllOp> {
  using KernelPattern::KernelPattern;
  static constexpr const char *kKernel = "par_rt_k_all_to_all";
  static void appendArgs(OpBuilder &b, Location loc, BufferAllToAllOp op,
                         KernelInfo info, SmallVectorImpl<Value> &args) {
    ArrayRef<int64_t> i = op.getInput().getType().getShape();
    ArrayRef<int64_t> o = op.getOutput().getType().getShape();
    int64_t n = 1;
    for (StringAttr a : op.getAxes().getAsRange<StringAttr>())
      n *= info.mesh.getAxisSize(a.getValue());
    int64_t s = op.getSplitDim(), c = op.getConcatDim();
    args.append({i64(b, loc, product(i.take_front(s))),
                 i64(b, loc, product(i.drop_front(s)) / n),
                 i64(b, loc, product(o.take_front(c))),
                 i64(b, loc, product(o.drop_front(c)) / n),
                 i32(b, loc, info.dtype), i64(b, loc, info.axes)});
  }
};

struct AllSlicePattern : KernelPattern<AllSlicePattern, BufferAllSliceOp> {
  using KernelPattern::KernelPattern;
  static constexpr const char *kKernel = "par_rt_k_all_slice";
  static void appendArgs(OpBuilder &b, Location loc, BufferAllSliceOp op,
                         KernelInfo info, SmallVectorImpl<Value> &args) {
    appendBlocks(b, loc, op.getOutput().getType().getShape(), op.getDim(),
                 args);
    args.append({i32(b, loc, info.dtype), i64(b, loc, info.axes)});
  }
};

struct BroadcastPattern
    : KernelPattern<BroadcastPattern, BufferBroadcastOp> {
  using KernelPattern::KernelPattern;
  static constexpr const char *kKernel = "par_rt_k_broadcast";
  static void appendArgs(OpBuilder &b, Location loc, BufferBroadcastOp op,
                         KernelInfo info, SmallVectorImpl<Value> &args) {
    args.append(
        {i64(b, loc, product(op.getInput().getType().getShape())),
         i32(b, loc, info.dtype),
         i64(b, loc, getGroupIndex(info.mesh, op.getAxes(), op.getRoot())),
         i64(b, loc, info.axes)});
  }
};

/// send/recv: one buffer, then count, dtype, axes, peer and tag.
template <typename ConcretePattern, typename OpTy>
struct PeerPattern : KernelPattern<ConcretePattern, OpTy> {
  using KernelPattern<ConcretePattern, OpTy>::KernelPattern;
  static void appendArgs(OpBuilder &b, Location loc, OpTy op,
                         KernelInfo info, SmallVectorImpl<Value> &args) {
    args.append({i64(b, loc, product(dataType(op).getShape())),
                 i32(b, loc, info.dtype), i64(b, loc, info.axes),
                 i64(b, loc, getCoordsCode(ConcretePattern::peer(op))),
                 i64(b, loc, op.getTag())});
  }
};

struct SendPattern : PeerPattern<SendPattern, BufferSendOp> {
  using PeerPattern::PeerPattern;
  static constexpr const char *kKernel = "par_rt_k_send";
  static ArrayRef<int64_t> peer(BufferSendOp op) { return op.getDest(); }
};

struct RecvPattern : PeerPattern<RecvPattern, BufferRecvOp> {
  using PeerPattern::PeerPattern;
  static constexpr const char *kKernel = "par_rt_k_recv";
  static ArrayRef<int64_t> peer(BufferRecvOp op) { return op.getSource(); }
};

/// The members of a bucket as the kernels take them: a stack array of
/// (in, out, count) i64 triples, allocated once at the function's entry
/// (so that a bucket in a loop does not grow the stack) and filled here.
/// Returns its address.
Value emitMembers(PatternRewriter &rewriter, Location loc, Operation *op,
                  ValueRange ins, ValueRange outs) {
  auto type = MemRefType::get({int64_t(3 * ins.size())},
                              rewriter.getI64Type());
  Value members;
  {
    OpBuilder::InsertionGuard guard(rewriter);
    auto fn = op->getParentOfType<FunctionOpInterface>();
    rewriter.setInsertionPointToStart(&fn.getFunctionBody().front());
    members = memref::AllocaOp::create(rewriter, loc, type);
  }
  auto store = [&](Value v, int64_t at) {
    memref::StoreOp::create(rewriter, loc, v, members,
                            ValueRange{arith::ConstantIndexOp::create(
                                rewriter, loc, at)});
  };
  for (auto [i, pair] : llvm::enumerate(llvm::zip(ins, outs))) {
    auto [in, out] = pair;
    store(emitBufferAddress(rewriter, loc, in), 3 * i);
    store(emitBufferAddress(rewriter, loc, out), 3 * i + 1);
    store(i64(rewriter, loc,
              product(cast<MemRefType>(in.getType()).getShape())),
          3 * i + 2);
  }
  return emitBufferAddress(rewriter, loc, members);
}

/// A bucket, blocking (par_rt_k_bucket_all_reduce) or started
/// (par_rt_k_all_reduce_start, which returns the request handle): members,
/// their number, dtype, reduction, axes.
template <typename OpTy>
struct BucketPattern : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    FailureOr<KernelInfo> info = getKernelInfo(
        op, dataType(op), op.getMeshAttr(), op.getAxes(), /*emit=*/false);
    if (failed(info) || !op->template getParentOfType<FunctionOpInterface>())
      return rewriter.notifyMatchFailure(op, "not a runtime kernel call");
    Location loc = op.getLoc();
    SmallVector<Value> args{
        emitMembers(rewriter, loc, op, op.getInputs(), op.getOutputs()),
        i64(rewriter, loc, op.getInputs().size()),
        i32(rewriter, loc, info->dtype),
        i32(rewriter, loc, (int64_t)op.getKind()),
        i64(rewriter, loc, info->axes)};
    constexpr bool started = std::is_same_v<OpTy, BufferAllReduceStartOp>;
    func::CallOp call = emitRuntimeCall(
        rewriter, loc, op,
        started ? "par_rt_k_all_reduce_start" : "par_rt_k_bucket_all_reduce",
        args,
        started ? TypeRange(rewriter.getI64Type()) : TypeRange());
    rewriter.replaceOp(op, call.getResults());
    return success();
  }
};

/// The wait needs only the request: par_rt_k_wait(request).
struct WaitPattern : public OpRewritePattern<BufferWaitOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BufferWaitOp op,
                                PatternRewriter &rewriter) const override {
    emitRuntimeCall(rewriter, op.getLoc(), op, "par_rt_k_wait",
                    ValueRange{op.getRequest()});
    rewriter.eraseOp(op);
    return success();
  }
};

/// Emits the reason for every buffer collective the runtime cannot take.
template <typename... OpTys>
bool checkAll(ModuleOp module) {
  bool ok = true;
  module.walk([&](Operation *op) {
    (
        [&] {
          if (auto c = dyn_cast<OpTys>(op))
            ok &= succeeded(getKernelInfo(op, dataType(c), c.getMeshAttr(),
                                          c.getAxes(), /*emit=*/true));
        }(),
        ...);
  });
  return ok;
}

struct CollectivesToRuntimePass
    : public mlir::par::impl::CollectivesToRuntimeBase<
          CollectivesToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!checkAll<BufferAllReduceOp, BufferBucketAllReduceOp,
                  BufferAllReduceStartOp, BufferAllGatherOp,
                  BufferAllGatherStartOp,
                  BufferReduceScatterOp, BufferAllToAllOp, BufferAllSliceOp,
                  BufferBroadcastOp, BufferSendOp, BufferRecvOp>(module))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateCollectivesToRuntimePatterns(patterns);
    // Only these rewrites: no folding or constant hoisting of the rest.
    GreedyRewriteConfig config;
    config.enableFolding(false)
        .enableConstantCSE(false)
        .setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(module, std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace

void mlir::par::populateCollectivesToRuntimePatterns(
    RewritePatternSet &patterns) {
  patterns.add<AllReducePattern, AllGatherPattern, AllGatherStartPattern,
               ReduceScatterPattern,
               AllToAllPattern, AllSlicePattern, BroadcastPattern, SendPattern,
               RecvPattern, BucketPattern<BufferBucketAllReduceOp>,
               BucketPattern<BufferAllReduceStartOp>, WaitPattern>(
      patterns.getContext());
}
