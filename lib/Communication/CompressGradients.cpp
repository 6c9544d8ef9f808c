//===- CompressGradients.cpp - par-compress-gradients ---------------------===//
//
// Gradient compression as a rewrite of the partitioned program. The train
// step (and each pipeline stage update) reduces its gradients over the
// data-parallel axes with sum all_reduces (par-sink-reductions brings them
// there); this pass replaces them, bucket by bucket, with a compressed
// exchange written in ordinary tensor ops and par collectives, so that the
// comm report, the runtime's counters and the trace see the real bytes.
//
// A bucket is a run of such all_reduces in program order (same mesh and
// axes, at most `bucket-bytes`), closed as soon as an op uses a member's
// result: the exchange sits at the last member, so every member's input
// dominates it and every use of a member follows it. Its members are
// flattened into one f32 vector x of N elements (padded with zeros to P, a
// multiple of n * chunk, for the two-phase methods; n devices in a group).
// A bucket's members also vary over the same other mesh axes (`Variation`:
// a gradient replicated over "tp" never shares a bucket with a tp-sharded
// one), since every decompressed value depends on the whole bucket (its
// chunk scales, top-k's threshold): replicas of a parameter must see the
// same bucket to stay replicas. A gradient whose variation is not known is
// a bucket alone.
//
//
//   int8, sign (two phases, 1-bit Adam's compressed all-reduce):
//     e1 = x + ef1                 codes c1, scales s1 = C(e1)
//     ef1' = e1 - D(c1, s1)
//     all_to_all c1, s1            device i receives every device's part i
//     o = sum_r D(c1_r, s1_r)      its owned M = P / n elements, r in order
//     e2 = o + ef2                 c2, s2 = C(e2); ef2' = e2 - D(c2, s2)
//     all_gather c2, s2            every device: D(c2, s2) of every part
//   topk (one compression point):
//     e1 = x + ef1                 the k largest |e1| (ties: lowest index)
//     ef1' = e1 with those k set to 0
//     all_gather values, indices   scatter-added, rank by rank
//
// Codes: int8 q = roundeven(e / s) clamped to [-127, 127] with s = max|e| /
// 127 per chunk (a chunk of zeros has s = 0 and q = 0); sign bit 1 for
// e >= 0, 8 per byte, element 8b + j in bit j of byte b, with s = mean|e|
// per chunk. Non-finite values reach the scale (max/mean propagate NaN and
// inf), so decompressed values are non-finite too and an all-finite check
// after the exchange still sees an overflow; top-k orders by the bit
// pattern of |e|, where NaN and inf come first.
//
// Error-feedback buffers are new state: arguments appended to the function
// (`par.error_feedback`, zeros at first, `[R, L]` with one row of L per
// device: R the product of the non-pipeline mesh axes) and results fed back
// to them (a train step's `par.feedback` pairs; a stage update's results
// placed so that result P + k feeds state argument 2P + k). Under loss
// scaling the unscaled gradients are compressed (x / scale, the result
// times the scale: the scale is a power of two) and a skipped step keeps
// the buffers. The function records what it sends as `par.compression`.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Analysis/ReshardPlan.h"
#include "par/Communication/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <functional>

#define DEBUG_TYPE "par-compress-gradients"

namespace mlir::par {
#define GEN_PASS_DEF_COMPRESSGRADIENTS
#include "par/Communication/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

using utils::IteratorType;

/// Tensor building blocks (static shapes, f32 unless said).
struct Builder {
  OpBuilder &b;
  Location loc;

  RankedTensorType type(ArrayRef<int64_t> shape, Type elt) const {
    return RankedTensorType::get(shape, elt);
  }
  Value cst(Type t, double v) const {
    if (isa<FloatType>(t))
      return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
    if (t.isIndex())
      return arith::ConstantIndexOp::create(b, loc, (int64_t)v);
    return arith::ConstantOp::create(b, loc, t,
                                     b.getIntegerAttr(t, (int64_t)v));
  }
  Value empty(ArrayRef<int64_t> shape, Type elt) const {
    return tensor::EmptyOp::create(b, loc, shape, elt);
  }
  Value filled(ArrayRef<int64_t> shape, Type elt, double v) const {
    return linalg::FillOp::create(b, loc, cst(elt, v), empty(shape, elt))
        .getResult(0);
  }
  /// A linalg.generic: maps for ins then outs, body gets the block
  /// arguments and returns the yielded values.
  ValueRange generic(
      TypeRange results, ValueRange ins, ValueRange outs,
      ArrayRef<AffineMap> maps, ArrayRef<IteratorType> iters,
      function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>
          body) const {
    return linalg::GenericOp::create(
               b, loc, results, ins, outs, maps, iters,
               [&](OpBuilder &nb, Location l, ValueRange a) {
                 linalg::YieldOp::create(nb, l, body(nb, l, a));
               })
        .getResults();
  }
  /// An elementwise generic over same-shaped operands (scalars, rank 0,
  /// broadcast) producing one tensor of `elt`.
  Value map(ValueRange ins, Type elt,
            function_ref<Value(OpBuilder &, Location, ValueRange)> fn) const {
    RankedTensorType shapeOf;
    for (Value v : ins)
      if (cast<RankedTensorType>(v.getType()).getRank() > 0)
        shapeOf = cast<RankedTensorType>(v.getType());
    if (!shapeOf)
      shapeOf = cast<RankedTensorType>(ins.front().getType());
    int64_t r = shapeOf.getRank();
    SmallVector<AffineMap> maps;
    for (Value v : ins)
      maps.push_back(cast<RankedTensorType>(v.getType()).getRank() == 0
                         ? AffineMap::get(r, 0, {}, b.getContext())
                         : b.getMultiDimIdentityMap(r));
    maps.push_back(b.getMultiDimIdentityMap(r));
    return generic({type(shapeOf.getShape(), elt)}, ins,
                   {empty(shapeOf.getShape(), elt)}, maps,
                   SmallVector<IteratorType>(r, IteratorType::parallel),
                   [&](OpBuilder &nb, Location l, ValueRange a) {
                     return SmallVector<Value>{fn(nb, l, a.drop_back())};
                   })[0];
  }
  /// `v` as `shape` (same element count), through its 1-D form.
  Value reshape(Value v, ArrayRef<int64_t> shape) const {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getShape() == shape)
      return v;
    int64_t n = t.getNumElements();
    auto flatType = type({n}, t.getElementType());
    Value flat = v;
    if (t.getRank() == 0)
      flat = tensor::ExpandShapeOp::create(b, loc, flatType, v,
                                           ArrayRef<ReassociationIndices>{});
    else if (t.getRank() > 1)
      flat = tensor::CollapseShapeOp::create(
          b, loc, flatType, v,
          ArrayRef<ReassociationIndices>{llvm::to_vector(
              llvm::seq<int64_t>(0, t.getRank()))});
    auto outType = type(shape, t.getElementType());
    if (shape.size() == 1)
      return flat;
    if (shape.empty())
      return tensor::CollapseShapeOp::create(b, loc, outType, flat,
                                             ArrayRef<ReassociationIndices>{});
    return tensor::ExpandShapeOp::create(
        b, loc, outType, flat,
        ArrayRef<ReassociationIndices>{
            llvm::to_vector(llvm::seq<int64_t>(0, shape.size()))});
  }
  Value slice(Value v, int64_t offset, int64_t size) const {
    return tensor::ExtractSliceOp::create(
        b, loc, v, ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(size)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  }
  Value insert(Value src, Value dst, int64_t offset) const {
    int64_t size = cast<RankedTensorType>(src.getType()).getNumElements();
    return tensor::InsertSliceOp::create(
        b, loc, src, dst, ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(size)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  }
  AffineExpr d(unsigned i) const { return b.getAffineDimExpr(i); }
  AffineMap m(unsigned dims, ArrayRef<AffineExpr> results) const {
    return AffineMap::get(dims, 0, results, b.getContext());
  }
};

/// One compressed exchange's plan: the members and the flat layout.
struct Bucket {
  FlatSymbolRefAttr mesh;
  ArrayAttr axes;
  /// The mesh axes other than `axes` its members may differ over (sorted).
  SmallVector<StringRef> varying;
  SmallVector<AllReduceOp> members;
  int64_t elements = 0;
  double bytes = 0;
};

/// The mesh axes over which values of a function body may differ between
/// devices, sorted names; none where that is not known. Arguments and call
/// results by their shardings (split dims and partial axes; no sharding:
/// replicated), collectives by their axes (an all_reduce, all_gather or
/// broadcast makes its value the same over them; a reduce_scatter,
/// all_to_all or all_slice splits it over them), other ops as the union of
/// what they read; another par op, and an op with regions that hold a par
/// op or a call, is unknown. Computed in one walk of the entry block.
class Variation {
public:
  using Axes = std::optional<SmallVector<StringRef>>;

  explicit Variation(FunctionOpInterface fn) {
    Block &body = fn.getFunctionBody().front();
    for (BlockArgument arg : body.getArguments())
      of[arg] = sharded(
          fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                            ParDialect::kShardingAttrName));
    SymbolTableCollection symbols;
    for (Operation &op : body)
      visit(op, symbols);
  }

  /// `v`'s axes (none for a value not in the entry block).
  Axes get(Value v) const {
    auto it = of.find(v);
    return it == of.end() ? Axes() : it->second;
  }

private:
  DenseMap<Value, Axes> of;

  static Axes sharded(ShardingAttr s) {
    SmallVector<StringRef> axes;
    if (s) {
      for (int64_t d = 0; d < s.getRank(); ++d)
        llvm::append_range(axes, s.getDimAxes(d));
      llvm::append_range(axes, s.getPartialAxisNames());
    }
    return normalized(std::move(axes));
  }
  static SmallVector<StringRef> normalized(SmallVector<StringRef> axes) {
    llvm::sort(axes);
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    return axes;
  }
  static SmallVector<StringRef> names(ArrayAttr axes) {
    return llvm::to_vector(axes.getAsValueRange<StringAttr>());
  }
  /// The union of what `values` vary over (none if one is unknown).
  Axes unite(ValueRange values) const {
    SmallVector<StringRef> axes;
    for (Value v : values) {
      Axes a = get(v);
      if (!a)
        return std::nullopt;
      llvm::append_range(axes, *a);
    }
    return normalized(std::move(axes));
  }
  void set(Operation &op, const Axes &axes) {
    for (Value r : op.getResults())
      of[r] = axes;
  }

  void visit(Operation &op, SymbolTableCollection &symbols) {
    if (isa<AllReduceOp, AllGatherOp, BroadcastOp, ReduceScatterOp,
            AllToAllOp, AllSliceOp>(op)) {
      Axes in = get(op.getOperand(0));
      auto axes = op.getAttrOfType<ArrayAttr>("axes");
      if (!in || !axes)
        return set(op, std::nullopt);
      SmallVector<StringRef> out;
      if (isa<AllReduceOp, AllGatherOp, BroadcastOp>(op)) {
        for (StringRef a : *in)
          if (!llvm::is_contained(names(axes), a))
            out.push_back(a);
      } else {
        out = *in;
        llvm::append_range(out, names(axes));
      }
      return set(op, normalized(std::move(out)));
    }
    if (isa<ParDialect>(op.getDialect()))
      return set(op, std::nullopt);
    if (auto call = dyn_cast<CallOpInterface>(op)) {
      auto callee = dyn_cast_or_null<FunctionOpInterface>(
          call.resolveCallableInTable(&symbols));
      if (!callee)
        return set(op, std::nullopt);
      for (OpResult r : op.getResults())
        of[r] = sharded(callee.getResultAttrOfType<ShardingAttr>(
            r.getResultNumber(), ParDialect::kShardingAttrName));
      return;
    }
    Axes axes = unite(op.getOperands());
    if (axes && op.getNumRegions()) {
      bool clean = true;
      op.walk([&](Operation *inner) {
        clean &= inner == &op || (!isa<ParDialect>(inner->getDialect()) &&
                                  !isa<CallOpInterface>(inner));
      });
      llvm::SetVector<Value> above;
      getUsedValuesDefinedAbove(op.getRegions(), above);
      Axes inner = unite(above.getArrayRef());
      if (!clean || !inner)
        axes = std::nullopt;
      else
        axes = unite(ValueRange(op.getOperands()), *inner);
    }
    set(op, axes);
  }
  Axes unite(ValueRange values, ArrayRef<StringRef> more) const {
    Axes axes = unite(values);
    if (!axes)
      return axes;
    llvm::append_range(*axes, more);
    return normalized(std::move(*axes));
  }
};

/// What the rewrite of one function (a train step or a stage update)
/// carries from bucket to bucket: its loss scale, the rows of its
/// error-feedback buffers, the warm-up counter, the state arguments added so
/// far with their next values, and the bytes sent.
struct FunctionRewrite {
  FunctionOpInterface fn;
  bool isStep;
  /// The buckets' mesh.
  FlatSymbolRefAttr mesh;
  /// Loss scaling: the scale argument, `par.loss_scale_results` and the
  /// all-finite flag result (null without).
  Value scale;
  DenseI64ArrayAttr lsResults;
  Value finite;
  /// The rows of the error-feedback buffers: every non-pipeline mesh axis.
  SmallVector<StringRef> rowAxes;
  int64_t rows = 1;
  /// Warm-up: the step counter argument, and whether this step is still
  /// uncompressed.
  Value counter, inWarmup;
  /// The state arguments added (the buffers, then the counter) and their
  /// next values, in the same order.
  SmallVector<Value> oldBuffers, newResults;
  /// Bytes per step of the compressed exchanges and of the fp32 ring
  /// all-reduces they replace.
  double sent = 0, uncompressed = 0;
};

struct CompressGradientsPass
    : public mlir::par::impl::CompressGradientsBase<CompressGradientsPass> {
  using CompressGradientsBase::CompressGradientsBase;

  void runOnOperation() override;

private:
  SmallVector<StringRef> dataParallel;
  StringRef pipelineAxis;
  int64_t compressedCount = 0;

  LogicalResult checkOptions();
  /// The function's buckets, in program order.
  SmallVector<Bucket> collect(FunctionOpInterface fn);
  bool isGradientReduction(AllReduceOp ar, FunctionOpInterface fn);
  /// Compresses every bucket of `fn` (a train step when `isStep`, else a
  /// stage update) and adds its state.
  LogicalResult rewrite(FunctionOpInterface fn, bool isStep);

  // The steps of rewrite, in order.
  /// The mesh, the loss scale and the buffers' rows.
  LogicalResult prepare(FunctionRewrite &fr, ArrayRef<Bucket> buckets);
  /// warmup > 0: the step counter argument and the warm-up flag.
  LogicalResult addWarmupCounter(FunctionRewrite &fr);
  /// One bucket: flattened, exchanged, its members replaced by their slices
  /// of the sum and erased.
  LogicalResult rewriteBucket(FunctionRewrite &fr, Bucket &bucket);
  /// A new error-feedback buffer argument `[1, length]` (null on failure).
  Value addBuffer(FunctionRewrite &fr, int64_t length);
  /// The members as one f32 vector of P elements (zero-padded when
  /// `padded`), unscaled under loss scaling.
  Value flatten(FunctionRewrite &fr, Builder &t, const Bucket &bucket,
                int64_t P, bool padded);
  /// The exchange of `x`, compressed, or during warm-up an `scf.if` of it
  /// and the plain all-reduce: the sum, then the buffers' next values.
  SmallVector<Value> exchangeBucket(FunctionRewrite &fr, Builder &t,
                                    const Bucket &bucket, int64_t n, Value x,
                                    ArrayRef<Value> flatBuffers, double &bytes);
  SmallVector<Value> compressedExchange(OpBuilder &b, Location loc,
                                        const Bucket &bucket, int64_t n,
                                        Value x, ArrayRef<Value> flatBuffers,
                                        double &bytes);
  /// Before the return: the buffers kept on a step the loss scale skips,
  /// the counter's next value.
  void emitNextState(FunctionRewrite &fr);
  /// The next state as results fed back to their arguments (the step's
  /// `par.feedback`, the stage update's positions).
  LogicalResult feedBack(FunctionRewrite &fr);
};

/// `v` as printf's %g writes it (1.5, 0.001).
static std::string formatDouble(double v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%g", v);
  return s;
}

LogicalResult CompressGradientsPass::checkOptions() {
  ModuleOp module = getOperation();
  if (method != "int8" && method != "sign" && method != "topk")
    return module.emitError()
           << "par-compress-gradients: unknown method '" << method
           << "' (option method, par-compile's compress: int8, sign or "
              "topk)";
  if (method == "topk" && !(ratio > 0 && ratio < 1))
    return module.emitError()
           << "par-compress-gradients: ratio="
           << formatDouble(ratio)
           << " is outside (0, 1) (option ratio, par-compile's "
              "compress-ratio: the fraction of each bucket's elements top-k "
              "sends)";
  if (method != "topk" && chunk <= 0)
    return module.emitError()
           << "par-compress-gradients: chunk=" << (int64_t)chunk
           << " must be positive (option chunk, par-compile's "
              "compress-chunk: elements per scale)";
  if (method == "sign" && chunk % 8 != 0)
    return module.emitError()
           << "par-compress-gradients: chunk=" << (int64_t)chunk
           << " must be a multiple of 8 for method=sign (8 signs per byte)";
  if (minElements < 0 || bucketBytes < 0)
    return module.emitError() << "par-compress-gradients: min-elements and "
                                 "bucket-bytes must not be negative";
  return success();
}

/// Whether `v` reaches result 0 (a train step's loss) through its users
/// (each op visited once).
static bool reachesLoss(Value v, Operation *ret,
                        DenseSet<Operation *> &visited) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (user == ret) {
      if (use.getOperandNumber() == 0)
        return true;
      continue;
    }
    if (!visited.insert(user).second)
      continue;
    for (Value r : user->getResults())
      if (reachesLoss(r, ret, visited))
        return true;
  }
  return false;
}

bool CompressGradientsPass::isGradientReduction(AllReduceOp ar,
                                                FunctionOpInterface fn) {
  if (ar.getKind() != ReductionKind::Sum)
    return false;
  auto type = dyn_cast<RankedTensorType>(ar.getType());
  if (!type || !type.hasStaticShape() ||
      !isa<FloatType>(type.getElementType()) ||
      type.getNumElements() < std::max<int64_t>(minElements, 1))
    return false;
  if (ar.getAxes().empty() || ar.getGroupSize() <= 1)
    return false;
  for (StringRef a : ar.getAxes().getAsValueRange<StringAttr>())
    if (!llvm::is_contained(dataParallel, a))
      return false;
  Operation *ret = fn.getFunctionBody().front().getTerminator();
  DenseSet<Operation *> visited;
  if (fn->hasAttr(ParDialect::kFeedbackAttrName) &&
      reachesLoss(ar.getResult(), ret, visited))
    return false;
  return true;
}

SmallVector<Bucket> CompressGradientsPass::collect(FunctionOpInterface fn) {
  // Several buckets are open at once, one per mesh, axes and variation;
  // each closes when an op uses one of its members (its exchange sits at
  // its last member), when the next member would exceed bucket-bytes, or at
  // the end. A gradient of unknown variation is a bucket alone.
  Variation variation(fn);
  SmallVector<Bucket> buckets, open;
  DenseMap<Value, unsigned> openResults; // member result -> index in open
  auto close = [&](unsigned i) {
    for (AllReduceOp ar : open[i].members)
      openResults.erase(ar.getResult());
    buckets.push_back(std::move(open[i]));
    open.erase(open.begin() + i);
    for (auto &entry : openResults)
      if (entry.second > i)
        --entry.second;
  };
  for (Operation &op : fn.getFunctionBody().front()) {
    // A use of a member closes its bucket.
    SmallVector<unsigned> used;
    op.walk([&](Operation *inner) {
      for (Value v : inner->getOperands()) {
        auto it = openResults.find(v);
        if (it != openResults.end() && !llvm::is_contained(used, it->second))
          used.push_back(it->second);
      }
    });
    llvm::sort(used, std::greater<unsigned>());
    for (unsigned i : used)
      close(i);
    auto ar = dyn_cast<AllReduceOp>(op);
    if (!ar || !isGradientReduction(ar, fn))
      continue;
    auto type = cast<RankedTensorType>(ar.getType());
    double bytes = 4.0 * type.getNumElements();
    // What the member may differ over besides the reduced axes (an axis of
    // size 1 has no replicas).
    Variation::Axes axes = variation.get(ar.getInput());
    SmallVector<StringRef> varying;
    MeshOp mesh = lookupMesh(fn, ar.getMeshAttr());
    auto trivial = [&](StringRef a) {
      if (!mesh)
        return false;
      for (auto [name, size] :
           llvm::zip(mesh.getAxisNames().getAsValueRange<StringAttr>(),
                     mesh.getAxisSizes()))
        if (name == a)
          return size == 1;
      return false;
    };
    if (axes)
      for (StringRef a : *axes)
        if (!llvm::is_contained(ar.getAxes().getAsValueRange<StringAttr>(),
                                a) &&
            !trivial(a))
          varying.push_back(a);
    bool alone = !axes || bucketBytes == 0;
    unsigned i = open.size();
    if (!alone)
      for (auto [j, o] : llvm::enumerate(open))
        if (o.mesh == ar.getMeshAttr() && o.axes == ar.getAxes() &&
            o.varying == varying)
          i = j;
    if (i < open.size() && bucketBytes > 0 &&
        open[i].bytes + bytes > bucketBytes) {
      close(i);
      i = open.size();
    }
    if (i == open.size()) {
      open.emplace_back();
      open.back().mesh = ar.getMeshAttr();
      open.back().axes = ar.getAxes();
      open.back().varying = varying;
    }
    Bucket &bucket = open[i];
    bucket.members.push_back(ar);
    bucket.elements += type.getNumElements();
    bucket.bytes += bytes;
    openResults[ar.getResult()] = i;
    if (alone)
      close(i);
  }
  while (!open.empty())
    close(0);
  // In the order of their exchanges (their last members).
  DenseMap<Operation *, unsigned> position;
  for (auto [k, op] : llvm::enumerate(fn.getFunctionBody().front()))
    position[&op] = k;
  llvm::stable_sort(buckets, [&](const Bucket &a, const Bucket &b) {
    return position[a.members.back()] < position[b.members.back()];
  });
  return buckets;
}

/// The exchange of one bucket, built at its last member.
struct Exchange {
  Builder &t;
  StringRef method;
  int64_t n;     // devices in the group
  int64_t chunk; // int8, sign
  double ratio;  // topk
  FlatSymbolRefAttr mesh;
  ArrayAttr axes;
  double bytes = 0; // what the created collectives send (ring formulas)

  OpBuilder &b() { return t.b; }
  Type f32() { return t.b.getF32Type(); }

  Value allToAll(Value v) { // [n, L] -> rows from every device
    auto ty = cast<RankedTensorType>(v.getType());
    int64_t L = ty.getDimSize(1);
    auto op = AllToAllOp::create(b(), t.loc,
                                 t.type({1, n * L}, ty.getElementType()), v,
                                 mesh, axes, b().getI64IntegerAttr(0),
                                 b().getI64IntegerAttr(1));
    bytes += collectiveBytes(op);
    return t.reshape(op.getResult(), {n, L});
  }
  Value allGather(Value v) { // [L] -> [n * L]
    auto ty = cast<RankedTensorType>(v.getType());
    auto op = AllGatherOp::create(
        b(), t.loc, t.type({n * ty.getDimSize(0)}, ty.getElementType()), v,
        mesh, axes, b().getI64IntegerAttr(0));
    bytes += collectiveBytes(op);
    return op.getResult();
  }

  /// Per-chunk scales of `e` ([J, C]): max|e| / 127 (int8) or mean|e|.
  Value scales(Value e) {
    auto ty = cast<RankedTensorType>(e.getType());
    int64_t J = ty.getDimSize(0), C = ty.getDimSize(1);
    bool isInt8 = method == "int8";
    Value acc = t.generic(
        {t.type({J}, f32())}, {e}, {t.filled({J}, f32(), 0)},
        {t.m(2, {t.d(0), t.d(1)}), t.m(2, {t.d(0)})},
        {IteratorType::parallel, IteratorType::reduction},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value mag = math::AbsFOp::create(nb, l, a[0]);
          Value r = isInt8 ? (Value)arith::MaximumFOp::create(nb, l, a[1], mag)
                           : (Value)arith::AddFOp::create(nb, l, a[1], mag);
          return SmallVector<Value>{r};
        })[0];
    double div = isInt8 ? 127.0 : (double)C;
    return t.map({acc}, f32(), [&](OpBuilder &nb, Location l, ValueRange a) {
      return arith::DivFOp::create(
          nb, l, a[0],
          arith::ConstantOp::create(nb, l, nb.getF32Type(),
                                    nb.getF32FloatAttr(div)));
    });
  }

  /// Codes of `e` ([J, C]) with scales `s` ([J]): int8 [J, C], or sign
  /// bits [J, C / 8] i8.
  Value encode(Value e, Value s) {
    auto ty = cast<RankedTensorType>(e.getType());
    int64_t J = ty.getDimSize(0), C = ty.getDimSize(1);
    Type i8 = b().getI8Type();
    if (method == "int8")
      return t.generic(
          {t.type({J, C}, i8)}, {e, s}, {t.empty({J, C}, i8)},
          {t.m(2, {t.d(0), t.d(1)}), t.m(2, {t.d(0)}),
           t.m(2, {t.d(0), t.d(1)})},
          {IteratorType::parallel, IteratorType::parallel},
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Type f = nb.getF32Type();
            auto c = [&](double v) {
              return arith::ConstantOp::create(nb, l, f,
                                               nb.getF32FloatAttr(v));
            };
            Value r = math::RoundEvenOp::create(
                nb, l, arith::DivFOp::create(nb, l, a[0], a[1]));
            r = arith::MinimumFOp::create(
                nb, l, arith::MaximumFOp::create(nb, l, r, c(-127)), c(127));
            // 0/0 (a chunk of zeros) and non-finite values code as 0; the
            // scale carries the non-finite value.
            Value nan = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::UNO,
                                              r, r);
            r = arith::SelectOp::create(nb, l, nan, c(0), r);
            return SmallVector<Value>{
                arith::FPToSIOp::create(nb, l, nb.getI8Type(), r)};
          })[0];
    // sign: byte (j, k) packs elements 8k .. 8k+7 of chunk j.
    Value e3 = t.reshape(e, {J, C / 8, 8});
    return t.generic(
        {t.type({J, C / 8}, i8)}, {e3}, {t.filled({J, C / 8}, i8, 0)},
        {t.m(3, {t.d(0), t.d(1), t.d(2)}), t.m(3, {t.d(0), t.d(1)})},
        {IteratorType::parallel, IteratorType::parallel,
         IteratorType::reduction},
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Type i8t = nb.getI8Type();
          Value bit = linalg::IndexOp::create(nb, l, 2);
          Value sh = arith::IndexCastOp::create(nb, l, i8t, bit);
          Value pos = arith::CmpFOp::create(
              nb, l, arith::CmpFPredicate::OGE, a[0],
              arith::ConstantOp::create(nb, l, nb.getF32Type(),
                                        nb.getF32FloatAttr(0)));
          Value one = arith::ExtUIOp::create(nb, l, i8t, pos);
          Value v = arith::ShLIOp::create(nb, l, one, sh);
          return SmallVector<Value>{arith::OrIOp::create(nb, l, a[1], v)};
        })[0];
  }

  /// The decoded value of code element (chunk j, element c) as an f32
  /// scalar inside a generic body: `code` the code block argument (int8
  /// code, or the sign byte), `bit` the element's bit (sign).
  static Value decodeScalar(OpBuilder &nb, Location l, StringRef method,
                            Value code, Value scale, Value bit) {
    if (method == "int8")
      return arith::MulFOp::create(
          nb, l, arith::SIToFPOp::create(nb, l, nb.getF32Type(), code),
          scale);
    Type i8t = nb.getI8Type();
    Value sh = arith::IndexCastOp::create(nb, l, i8t, bit);
    Value set = arith::AndIOp::create(
        nb, l, arith::ShRUIOp::create(nb, l, code, sh),
        arith::ConstantOp::create(nb, l, i8t, nb.getIntegerAttr(i8t, 1)));
    Value isSet = arith::CmpIOp::create(
        nb, l, arith::CmpIPredicate::ne, set,
        arith::ConstantOp::create(nb, l, i8t, nb.getIntegerAttr(i8t, 0)));
    return arith::SelectOp::create(nb, l, isSet, scale,
                                   arith::NegFOp::create(nb, l, scale));
  }

  /// D(codes, scales) as [J, C] f32.
  Value decode(Value codes, Value s, int64_t J, int64_t C) {
    if (method == "int8")
      return t.generic(
          {t.type({J, C}, f32())}, {codes, s}, {t.empty({J, C}, f32())},
          {t.m(2, {t.d(0), t.d(1)}), t.m(2, {t.d(0)}),
           t.m(2, {t.d(0), t.d(1)})},
          {IteratorType::parallel, IteratorType::parallel},
          [&](OpBuilder &nb, Location l, ValueRange a) {
            return SmallVector<Value>{
                decodeScalar(nb, l, "int8", a[0], a[1], Value())};
          })[0];
    Value out = t.generic(
        {t.type({J, C / 8, 8}, f32())}, {codes, s},
        {t.empty({J, C / 8, 8}, f32())},
        {t.m(3, {t.d(0), t.d(1)}), t.m(3, {t.d(0)}),
         t.m(3, {t.d(0), t.d(1), t.d(2)})},
        SmallVector<IteratorType>(3, IteratorType::parallel),
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value bit = linalg::IndexOp::create(nb, l, 2);
          return SmallVector<Value>{
              decodeScalar(nb, l, "sign", a[0], a[1], bit)};
        })[0];
    return t.reshape(out, {J, C});
  }

  /// sum_r D(codes_r, scales_r): codes [n, J, C or C/8], scales [n, J],
  /// over r = 0 .. n-1 in order; [J * C] f32.
  Value sumDecoded(Value codes, Value s, int64_t J, int64_t C) {
    bool isInt8 = method == "int8";
    SmallVector<int64_t> shape = isInt8 ? SmallVector<int64_t>{J, C}
                                        : SmallVector<int64_t>{J, C / 8, 8};
    unsigned rank = shape.size();
    SmallVector<AffineExpr> codeIdx{t.d(rank)}, outIdx;
    for (unsigned i = 0; i < rank; ++i)
      outIdx.push_back(t.d(i));
    codeIdx.push_back(t.d(0));
    codeIdx.push_back(t.d(1));
    SmallVector<IteratorType> iters(rank, IteratorType::parallel);
    iters.push_back(IteratorType::reduction);
    Value out = t.generic(
        {t.type(shape, f32())}, {codes, s}, {t.filled(shape, f32(), 0)},
        {t.m(rank + 1, codeIdx), t.m(rank + 1, {t.d(rank), t.d(0)}),
         t.m(rank + 1, outIdx)},
        iters,
        [&](OpBuilder &nb, Location l, ValueRange a) {
          Value bit = isInt8 ? Value() : linalg::IndexOp::create(nb, l, 2);
          Value v = decodeScalar(nb, l, method, a[0], a[1], bit);
          return SmallVector<Value>{arith::AddFOp::create(nb, l, a[2], v)};
        })[0];
    return t.reshape(out, {J * C});
  }

  Value add(Value a, Value c) {
    return t.map({a, c}, f32(), [](OpBuilder &nb, Location l, ValueRange v) {
      return arith::AddFOp::create(nb, l, v[0], v[1]);
    });
  }
  Value sub(Value a, Value c) {
    return t.map({a, c}, f32(), [](OpBuilder &nb, Location l, ValueRange v) {
      return arith::SubFOp::create(nb, l, v[0], v[1]);
    });
  }

  /// Compresses e ([L] f32, L a multiple of chunk): its codes and scales
  /// (shaped [J, ·], [J]) and e - D(C(e)).
  std::tuple<Value, Value, Value> compress(Value e) {
    int64_t L = cast<RankedTensorType>(e.getType()).getDimSize(0);
    int64_t J = L / chunk;
    Value e2 = t.reshape(e, {J, chunk});
    Value s = scales(e2);
    Value codes = encode(e2, s);
    Value err = sub(e, t.reshape(decode(codes, s, J, chunk), {L}));
    return {codes, s, err};
  }

  /// The two-phase exchange of x ([P] f32, P = n * M): the decompressed
  /// sum ([P]) and the new buffers (ef1 [P], ef2 [M]; null without
  /// feedback).
  std::tuple<Value, Value, Value> twoPhase(Value x, Value ef1, Value ef2) {
    int64_t P = cast<RankedTensorType>(x.getType()).getDimSize(0);
    int64_t M = P / n, J = M / chunk;
    int64_t codeWidth = method == "int8" ? chunk : chunk / 8;
    Value e = ef1 ? add(x, ef1) : x;
    auto [c1, s1, err1] = compress(e);
    // Device i's part i of every device: rows r of [n, J * width].
    Value c1r = allToAll(t.reshape(c1, {n, J * codeWidth}));
    Value s1r = allToAll(t.reshape(s1, {n, J}));
    Value o = sumDecoded(t.reshape(c1r, {n, J, codeWidth}), s1r, J, chunk);
    Value e2 = ef2 ? add(o, ef2) : o;
    auto [c2, s2, err2] = compress(e2);
    Value cg = allGather(t.reshape(c2, {J * codeWidth}));
    Value sg = allGather(s2);
    Value sum = t.reshape(
        decode(t.reshape(cg, {n * J, codeWidth}), sg, n * J, chunk), {P});
    return {sum, ef1 ? err1 : Value(), ef2 ? err2 : Value()};
  }

  /// count(bits >= c) (or > c when `strict`) as an i64, over the [N] i32
  /// `bits`.
  static Value countBits(OpBuilder &nb, Location l, Value bits, Value c,
                         bool strict) {
    Builder tb{nb, l};
    Type i64 = nb.getI64Type();
    Value n0 = tb.filled({}, i64, 0);
    Value cnt = tb.generic(
        {tb.type({}, i64)}, {bits}, {n0}, {tb.m(1, {tb.d(0)}), tb.m(1, {})},
        {IteratorType::reduction},
        [&](OpBuilder &bb, Location ll, ValueRange a) {
          Value ge = arith::CmpIOp::create(bb, ll,
                                           strict ? arith::CmpIPredicate::sgt
                                                  : arith::CmpIPredicate::sge,
                                           a[0], c);
          Value one = arith::ExtUIOp::create(bb, ll, bb.getI64Type(), ge);
          return SmallVector<Value>{arith::AddIOp::create(bb, ll, a[1], one)};
        })[0];
    return tensor::ExtractOp::create(nb, l, cnt, ValueRange{}).getResult();
  }

  /// Radix select: the largest T with count(bits >= T) >= k (`kv`, i64),
  /// bit by bit from bit 30 (|e| has no sign bit).
  Value radixThreshold(Value bits, Value kv) {
    Type i32 = b().getI32Type(), idx = b().getIndexType();
    auto loop = scf::ForOp::create(
        b(), t.loc, t.cst(idx, 0), t.cst(idx, 31), t.cst(idx, 1),
        ValueRange{t.cst(i32, 0)},
        [&](OpBuilder &nb, Location l, Value iv, ValueRange iter) {
          Value thirty = arith::ConstantIndexOp::create(nb, l, 30);
          Value bitIdx = arith::SubIOp::create(nb, l, thirty, iv);
          Value sh = arith::IndexCastOp::create(nb, l, nb.getI32Type(),
                                                bitIdx);
          Value one = arith::ConstantOp::create(
              nb, l, nb.getI32Type(), nb.getIntegerAttr(nb.getI32Type(), 1));
          Value cand = arith::OrIOp::create(
              nb, l, iter[0], arith::ShLIOp::create(nb, l, one, sh));
          Value cnt = countBits(nb, l, bits, cand, false);
          Value enough = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::sge, cnt, kv);
          scf::YieldOp::create(
              nb, l, ValueRange{arith::SelectOp::create(nb, l, enough, cand,
                                                        iter[0])});
        });
    return loop.getResult(0);
  }

  /// The k values of `e` ([N]) whose `bits` are above T, then the first
  /// `ties` (i64) equal to T, in index order: their values ([k] f32) and
  /// i32 indices ([k]).
  std::pair<Value, Value> pickTopK(Value e, Value bits, Value T, Value ties,
                                   int64_t k, int64_t N) {
    Type i32 = b().getI32Type(), idx = b().getIndexType();
    Value vals0 = t.empty({k}, f32()), idx0 = t.empty({k}, i32);
    auto pick = scf::ForOp::create(
        b(), t.loc, t.cst(idx, 0), t.cst(idx, (double)N), t.cst(idx, 1),
        ValueRange{vals0, idx0, t.cst(idx, 0), ties},
        [&](OpBuilder &nb, Location l, Value iv, ValueRange it) {
          Value bv = tensor::ExtractOp::create(nb, l, bits, ValueRange{iv});
          Value gt = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sgt,
                                           bv, T);
          Value eq = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq,
                                           bv, T);
          Value zero64 = arith::ConstantOp::create(
              nb, l, nb.getI64Type(), nb.getIntegerAttr(nb.getI64Type(), 0));
          Value tieLeft = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::sgt, it[3], zero64);
          Value take = arith::OrIOp::create(
              nb, l, gt, arith::AndIOp::create(nb, l, eq, tieLeft));
          auto ifOp = scf::IfOp::create(
              nb, l, take,
              [&](OpBuilder &tb, Location tl) {
                Value ev = tensor::ExtractOp::create(tb, tl, e, ValueRange{iv});
                Value v = tensor::InsertOp::create(tb, tl, ev, it[0],
                                                   ValueRange{it[2]});
                Value ii = arith::IndexCastOp::create(tb, tl, tb.getI32Type(),
                                                      iv);
                Value w = tensor::InsertOp::create(tb, tl, ii, it[1],
                                                   ValueRange{it[2]});
                Value next = arith::AddIOp::create(
                    tb, tl, it[2], arith::ConstantIndexOp::create(tb, tl, 1));
                Value used = arith::ExtUIOp::create(tb, tl, tb.getI64Type(),
                                                    eq);
                Value left = arith::SubIOp::create(tb, tl, it[3], used);
                scf::YieldOp::create(tb, tl, ValueRange{v, w, next, left});
              },
              [&](OpBuilder &tb, Location tl) {
                scf::YieldOp::create(tb, tl,
                                     ValueRange{it[0], it[1], it[2], it[3]});
              });
          scf::YieldOp::create(nb, l, ifOp.getResults());
        });
    return {pick.getResult(0), pick.getResult(1)};
  }

  /// `e` with the k elements at `ids` set to 0: what was sent is gone from
  /// the buffer.
  Value clearSent(Value e, Value ids, int64_t k) {
    Type idx = b().getIndexType();
    auto clear = scf::ForOp::create(
        b(), t.loc, t.cst(idx, 0), t.cst(idx, (double)k), t.cst(idx, 1),
        ValueRange{e}, [&](OpBuilder &nb, Location l, Value iv, ValueRange it) {
          Value i = tensor::ExtractOp::create(nb, l, ids, ValueRange{iv});
          Value at = arith::IndexCastOp::create(nb, l, nb.getIndexType(), i);
          Value z = arith::ConstantOp::create(nb, l, nb.getF32Type(),
                                              nb.getF32FloatAttr(0));
          scf::YieldOp::create(nb, l,
                               ValueRange{tensor::InsertOp::create(
                                   nb, l, z, it[0], ValueRange{at})});
        });
    return clear.getResult(0);
  }

  /// The [N] f32 sum of every device's values (`allVals`, [count]) added at
  /// their indices (`allIds`), rank by rank.
  Value scatterAdd(Value allVals, Value allIds, int64_t count, int64_t N) {
    Type idx = b().getIndexType();
    auto scatter = scf::ForOp::create(
        b(), t.loc, t.cst(idx, 0), t.cst(idx, (double)count), t.cst(idx, 1),
        ValueRange{t.filled({N}, f32(), 0)},
        [&](OpBuilder &nb, Location l, Value iv, ValueRange it) {
          Value i = tensor::ExtractOp::create(nb, l, allIds, ValueRange{iv});
          Value at = arith::IndexCastOp::create(nb, l, nb.getIndexType(), i);
          Value v = tensor::ExtractOp::create(nb, l, allVals, ValueRange{iv});
          Value old = tensor::ExtractOp::create(nb, l, it[0], ValueRange{at});
          Value sum = arith::AddFOp::create(nb, l, old, v);
          scf::YieldOp::create(
              nb, l,
              ValueRange{tensor::InsertOp::create(nb, l, sum, it[0],
                                                  ValueRange{at})});
        });
    return scatter.getResult(0);
  }

  /// The top-k exchange of x ([N] f32): the sum ([N]) and the new ef1.
  std::pair<Value, Value> topK(Value x, Value ef1) {
    int64_t N = cast<RankedTensorType>(x.getType()).getDimSize(0);
    int64_t k = std::min<int64_t>(
        N, std::max<int64_t>(1, (int64_t)std::ceil(ratio * N)));
    Type i32 = b().getI32Type(), i64 = b().getI64Type();
    Value e = ef1 ? add(x, ef1) : x;
    // |e| as its bit pattern: ordered like the magnitudes, NaN and inf
    // above every finite value.
    Value bits = t.map({e}, i32, [](OpBuilder &nb, Location l, ValueRange a) {
      Type it = nb.getI32Type();
      Value raw = arith::BitcastOp::create(nb, l, it, a[0]);
      return arith::AndIOp::create(
          nb, l, raw,
          arith::ConstantOp::create(nb, l, it,
                                    nb.getIntegerAttr(it, 0x7fffffff)));
    });
    Value kv = t.cst(i64, (double)k);
    Value T = radixThreshold(bits, kv);
    // Everything above T, then the first elements equal to T, in index
    // order, until k.
    Value above = countBits(b(), t.loc, bits, T, true);
    Value ties = arith::SubIOp::create(b(), t.loc, kv, above);
    auto [vals, ids] = pickTopK(e, bits, T, ties, k, N);
    Value err = ef1 ? clearSent(e, ids, k) : Value();
    Value allVals = allGather(vals), allIds = allGather(ids);
    return {scatterAdd(allVals, allIds, n * k, N), err};
  }
};

LogicalResult CompressGradientsPass::prepare(FunctionRewrite &fr,
                                             ArrayRef<Bucket> buckets) {
  FunctionOpInterface fn = fr.fn;
  Operation *ret = fn.getFunctionBody().front().getTerminator();
  fr.mesh = buckets.front().mesh;
  // Loss scaling: the scale argument, and the all-finite flag result.
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (fn.getArgAttr(i, ParDialect::kLossScaleAttrName))
      fr.scale = fn.getArgument(i);
  fr.lsResults = fn->getAttrOfType<DenseI64ArrayAttr>(
      ParDialect::kLossScaleResultsAttrName);
  if (fr.scale && fr.lsResults && fr.lsResults.size() == 2 &&
      fr.lsResults[1] < (int64_t)ret->getNumOperands())
    fr.finite = ret->getOperand(fr.lsResults[1]);

  // The rows of the error-feedback buffers: every non-pipeline axis.
  MeshOp meshOp = lookupMesh(fn, fr.mesh);
  if (!meshOp)
    return failure();
  for (auto [name, size] :
       llvm::zip(meshOp.getAxisNames().getAsValueRange<StringAttr>(),
                 meshOp.getAxisSizes()))
    if (name != pipelineAxis) {
      fr.rowAxes.push_back(name);
      fr.rows *= size;
    }
  return success();
}

Value CompressGradientsPass::addBuffer(FunctionRewrite &fr, int64_t length) {
  MLIRContext *ctx = &getContext();
  FunctionOpInterface fn = fr.fn;
  auto local = RankedTensorType::get({1, length}, Float32Type::get(ctx));
  auto global = RankedTensorType::get({fr.rows, length}, Float32Type::get(ctx));
  SmallVector<SmallVector<StringRef>> dims{fr.rowAxes, {}};
  auto sharding = ShardingAttr::get(ctx, fr.mesh, dims, ArrayRef<StringRef>{});
  unsigned idx = fn.getNumArguments();
  SmallVector<NamedAttribute> attrs{
      NamedAttribute(StringAttr::get(ctx, ParDialect::kShardingAttrName),
                     sharding),
      NamedAttribute(StringAttr::get(ctx, ParDialect::kGlobalTypeAttrName),
                     TypeAttr::get(global)),
      NamedAttribute(StringAttr::get(ctx, ParDialect::kInitAttrName),
                     InitAttr::get(ctx, InitKind::Zeros)),
      NamedAttribute(StringAttr::get(ctx, ParDialect::kErrorFeedbackAttrName),
                     UnitAttr::get(ctx))};
  if (failed(fn.insertArgument(idx, local, DictionaryAttr::get(ctx, attrs),
                               fn.getLoc())))
    return Value();
  Value arg = fn.getArgument(idx);
  fr.oldBuffers.push_back(arg);
  return arg;
}

LogicalResult CompressGradientsPass::addWarmupCounter(FunctionRewrite &fr) {
  MLIRContext *ctx = &getContext();
  FunctionOpInterface fn = fr.fn;
  Location loc = fn.getLoc();
  auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
  unsigned idx = fn.getNumArguments();
  SmallVector<NamedAttribute> attrs{
      NamedAttribute(StringAttr::get(ctx, ParDialect::kShardingAttrName),
                     ShardingAttr::getReplicated(ctx, fr.mesh, 0)),
      NamedAttribute(StringAttr::get(ctx, ParDialect::kGlobalTypeAttrName),
                     TypeAttr::get(scalar)),
      NamedAttribute(StringAttr::get(ctx, ParDialect::kInitAttrName),
                     InitAttr::get(ctx, InitKind::Zeros)),
      NamedAttribute(StringAttr::get(ctx, ParDialect::kCompressionStepAttrName),
                     UnitAttr::get(ctx))};
  if (failed(
          fn.insertArgument(idx, scalar, DictionaryAttr::get(ctx, attrs), loc)))
    return failure();
  fr.counter = fn.getArgument(idx);
  OpBuilder b = OpBuilder::atBlockBegin(&fn.getFunctionBody().front());
  Value c = tensor::ExtractOp::create(b, loc, fr.counter, ValueRange{});
  fr.inWarmup = arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OLT, c,
      arith::ConstantOp::create(b, loc, b.getF32Type(),
                                b.getF32FloatAttr((double)warmup)));
  return success();
}

Value CompressGradientsPass::flatten(FunctionRewrite &fr, Builder &t,
                                     const Bucket &bucket, int64_t P,
                                     bool padded) {
  Type f32 = t.b.getF32Type();
  Value x = padded ? t.filled({P}, f32, 0) : t.empty({P}, f32);
  int64_t offset = 0;
  for (AllReduceOp ar : bucket.members) {
    auto type = cast<RankedTensorType>(ar.getType());
    fr.uncompressed += collectiveBytes(ar);
    Value in = createFloatCast(t.b, t.loc, ar.getInput(), f32);
    x = t.insert(t.reshape(in, {type.getNumElements()}), x, offset);
    offset += type.getNumElements();
  }
  if (fr.scale)
    x = t.map({x, fr.scale}, f32, [](OpBuilder &nb, Location l, ValueRange a) {
      return arith::DivFOp::create(nb, l, a[0], a[1]);
    });
  return x;
}

SmallVector<Value> CompressGradientsPass::compressedExchange(
    OpBuilder &b, Location loc, const Bucket &bucket, int64_t n, Value x,
    ArrayRef<Value> flatBuffers, double &bytes) {
  Builder t{b, loc};
  Exchange ex{t, method, n, chunk, ratio, bucket.mesh, bucket.axes};
  SmallVector<Value> out;
  if (method != "topk") {
    auto [s, e1, e2] = ex.twoPhase(x, errorFeedback ? flatBuffers[0] : Value(),
                                   errorFeedback ? flatBuffers[1] : Value());
    out = {s};
    if (errorFeedback)
      out.append({e1, e2});
  } else {
    auto [s, e1] = ex.topK(x, errorFeedback ? flatBuffers[0] : Value());
    out = {s};
    if (errorFeedback)
      out.push_back(e1);
  }
  bytes = ex.bytes;
  return out;
}

SmallVector<Value> CompressGradientsPass::exchangeBucket(
    FunctionRewrite &fr, Builder &t, const Bucket &bucket, int64_t n, Value x,
    ArrayRef<Value> flatBuffers, double &bytes) {
  if (!fr.inWarmup)
    return compressedExchange(t.b, t.loc, bucket, n, x, flatBuffers, bytes);
  // Warm-up: the plain all-reduce, buffers untouched.
  MLIRContext *ctx = &getContext();
  auto ifOp = scf::IfOp::create(
      t.b, t.loc, fr.inWarmup,
      [&](OpBuilder &tb, Location l) {
        SmallVector<Value> vals{AllReduceOp::create(
            tb, l, x.getType(), x, bucket.mesh, bucket.axes,
            ReductionKindAttr::get(ctx, ReductionKind::Sum))};
        llvm::append_range(vals, flatBuffers);
        scf::YieldOp::create(tb, l, vals);
      },
      [&](OpBuilder &eb, Location l) {
        scf::YieldOp::create(
            eb, l,
            compressedExchange(eb, t.loc, bucket, n, x, flatBuffers, bytes));
      });
  return SmallVector<Value>(ifOp.getResults().begin(), ifOp.getResults().end());
}

LogicalResult CompressGradientsPass::rewriteBucket(FunctionRewrite &fr,
                                                   Bucket &bucket) {
  AllReduceOp last = bucket.members.back();
  OpBuilder b(last);
  Builder t{b, last.getLoc()};
  int64_t n = last.getGroupSize();
  int64_t N = bucket.elements;
  bool twoPhase = method != "topk";
  int64_t unit = n * chunk;
  int64_t P = twoPhase ? (N + unit - 1) / unit * unit : N;
  // The members, flattened and concatenated (zeros after them).
  Value x = flatten(fr, t, bucket, P, twoPhase && P != N);
  // The buffers (flat), then the compressed exchange: its sum and the
  // buffers' next values.
  SmallVector<Value> buffers, flatBuffers;
  if (errorFeedback) {
    SmallVector<int64_t> lengths{P};
    if (twoPhase)
      lengths.push_back(P / n);
    for (int64_t L : lengths) {
      Value arg = addBuffer(fr, L);
      if (!arg)
        return failure();
      buffers.push_back(arg);
    }
    b.setInsertionPoint(last);
    for (auto [arg, L] : llvm::zip(buffers, lengths))
      flatBuffers.push_back(t.reshape(arg, {L}));
  }
  double bytes = 0;
  SmallVector<Value> outs =
      exchangeBucket(fr, t, bucket, n, x, flatBuffers, bytes);
  Value sum = outs[0];
  fr.sent += bytes;
  if (fr.scale)
    sum = t.map({sum, fr.scale}, b.getF32Type(),
                [](OpBuilder &nb, Location l, ValueRange a) {
                  return arith::MulFOp::create(nb, l, a[0], a[1]);
                });
  // Each member's reduced value: its slice, in its shape and type.
  int64_t offset = 0;
  for (AllReduceOp ar : bucket.members) {
    auto type = cast<RankedTensorType>(ar.getType());
    Value v =
        t.reshape(t.slice(sum, offset, type.getNumElements()), type.getShape());
    v = createFloatCast(b, t.loc, v, type.getElementType());
    offset += type.getNumElements();
    ar.getResult().replaceAllUsesWith(v);
  }
  for (auto [buf, upd] :
       llvm::zip(buffers, ArrayRef<Value>(outs).drop_front())) {
    int64_t L = cast<RankedTensorType>(buf.getType()).getDimSize(1);
    fr.newResults.push_back(t.reshape(upd, {1, L}));
  }
  for (AllReduceOp ar : bucket.members)
    ar.erase();
  ++numBuckets;
  numCompressed += bucket.members.size();
  compressedCount += bucket.members.size();
  return success();
}

void CompressGradientsPass::emitNextState(FunctionRewrite &fr) {
  Operation *ret = fr.fn.getFunctionBody().front().getTerminator();
  OpBuilder b(ret);
  Builder t{b, fr.fn.getLoc()};
  // A step the loss scale skips keeps the buffers.
  if (fr.finite)
    for (auto [i, v] : llvm::enumerate(fr.newResults))
      fr.newResults[i] = t.map(
          {fr.finite, v, fr.oldBuffers[i]}, b.getF32Type(),
          [](OpBuilder &nb, Location l, ValueRange a) {
            Value taken = arith::CmpFOp::create(
                nb, l, arith::CmpFPredicate::OGT, a[0],
                arith::ConstantOp::create(nb, l, nb.getF32Type(),
                                          nb.getF32FloatAttr(0.5)));
            return arith::SelectOp::create(nb, l, taken, a[1], a[2]);
          });
  // The step counter's next value, after the buffers (counted on a skipped
  // step too).
  if (fr.counter) {
    fr.newResults.push_back(
        t.map({fr.counter}, b.getF32Type(),
              [](OpBuilder &nb, Location l, ValueRange a) {
                return arith::AddFOp::create(
                    nb, l, a[0],
                    arith::ConstantOp::create(nb, l, nb.getF32Type(),
                                              nb.getF32FloatAttr(1)));
              }));
    fr.oldBuffers.push_back(fr.counter);
  }
}

LogicalResult CompressGradientsPass::feedBack(FunctionRewrite &fr) {
  MLIRContext *ctx = &getContext();
  FunctionOpInterface fn = fr.fn;
  Operation *ret = fn.getFunctionBody().front().getTerminator();
  bool stageLossScale = !fr.isStep && fr.lsResults && fr.lsResults.size() == 2;
  // Train step: appended, with feedback pairs. Stage update: result P + k
  // feeds state argument 2P + k, so the buffers' results go where the
  // arguments' counterparts are (before the all-finite flag).
  unsigned at = stageLossScale ? fr.lsResults[1] : fn.getNumResults();
  SmallVector<int64_t> feedback;
  if (auto fb = fn->getAttrOfType<DenseI64ArrayAttr>(
          ParDialect::kFeedbackAttrName))
    feedback.assign(fb.asArrayRef().begin(), fb.asArrayRef().end());
  SmallVector<Value> operands(ret->getOperands());
  for (auto [i, v] : llvm::enumerate(fr.newResults)) {
    BlockArgument arg = cast<BlockArgument>(fr.oldBuffers[i]);
    SmallVector<NamedAttribute> attrs;
    for (StringRef name :
         {ParDialect::kShardingAttrName, ParDialect::kGlobalTypeAttrName})
      attrs.push_back(NamedAttribute(StringAttr::get(ctx, name),
                                     fn.getArgAttr(arg.getArgNumber(), name)));
    unsigned r = at + i;
    if (failed(
            fn.insertResult(r, v.getType(), DictionaryAttr::get(ctx, attrs))))
      return failure();
    operands.insert(operands.begin() + r, v);
    if (fr.isStep) {
      feedback.push_back(r);
      feedback.push_back(arg.getArgNumber());
    }
  }
  ret->setOperands(operands);
  if (fr.isStep)
    fn->setAttr(ParDialect::kFeedbackAttrName,
                DenseI64ArrayAttr::get(ctx, feedback));
  if (stageLossScale)
    fn->setAttr(ParDialect::kLossScaleResultsAttrName,
                DenseI64ArrayAttr::get(
                    ctx, {fr.lsResults[0],
                          fr.lsResults[1] + (int64_t)fr.newResults.size()}));
  return success();
}

LogicalResult CompressGradientsPass::rewrite(FunctionOpInterface fn,
                                             bool isStep) {
  SmallVector<Bucket> buckets = collect(fn);
  if (buckets.empty())
    return success();
  FunctionRewrite fr{fn, isStep};
  if (failed(prepare(fr, buckets)))
    return failure();
  // Warm-up: a step counter (state like the buffers, the same on every
  // device) and whether this step is still uncompressed.
  if (warmup > 0 && failed(addWarmupCounter(fr)))
    return failure();
  for (Bucket &bucket : buckets)
    if (failed(rewriteBucket(fr, bucket)))
      return failure();
  // The buffers' next values, as results fed back to their arguments.
  emitNextState(fr);
  if (failed(feedBack(fr)))
    return failure();
  mlir::Builder b(&getContext());
  fn->setAttr(
      ParDialect::kCompressionAttrName,
      b.getDictionaryAttr(
          {b.getNamedAttr("method", b.getStringAttr(method)),
           b.getNamedAttr("compressed_bytes", b.getF64FloatAttr(fr.sent)),
           b.getNamedAttr("uncompressed_bytes",
                          b.getF64FloatAttr(fr.uncompressed))}));
  return success();
}

void CompressGradientsPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions()))
    return signalPassFailure();
  for (auto fn : module.getOps<FunctionOpInterface>())
    for (StringRef a : getDataParallelAxes(fn))
      if (!llvm::is_contained(dataParallel, a))
        dataParallel.push_back(a);
  if (dataParallel.empty()) {
    module.emitError("par-compress-gradients: the program has no "
                     "data-parallel axis (no data argument's dim 0 is split "
                     "over a mesh axis), so there are no gradient "
                     "reductions to compress");
    return signalPassFailure();
  }
  // The train step and the stage updates of a pipeline.
  SmallVector<std::pair<FunctionOpInterface, bool>> targets;
  pipelineAxis = "";
  if (auto pipe =
          module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName)) {
    pipelineAxis = pipe.getAxis() ? pipe.getAxis().getValue() : "pp";
    for (StageAttr stage : pipe.getStages())
      if (auto update = dyn_cast_or_null<FunctionOpInterface>(
              SymbolTable::lookupNearestSymbolFrom(module, stage.getUpdate())))
        targets.push_back({update, false});
  }
  for (auto fn : module.getOps<FunctionOpInterface>())
    if (fn->hasAttr(ParDialect::kFeedbackAttrName) && !fn.isExternal() &&
        !fn->hasAttr(ParDialect::kStageAttrName))
      targets.push_back({fn, true});
  if (targets.empty()) {
    module.emitError("par-compress-gradients: the program has no train step "
                     "(a function with par.feedback: run par-autodiff and "
                     "par-optimizer) and no pipeline stage update");
    return signalPassFailure();
  }
  for (auto [fn, isStep] : targets)
    if (failed(rewrite(fn, isStep)))
      return signalPassFailure();
  if (compressedCount == 0) {
    targets.front().first.emitOpError()
        << "has no data-parallel gradient reduction to compress "
           "(par-compress-gradients method="
        << method
        << "): its gradients are not all-reduced over the data-parallel "
           "axes here (run par-sink-reductions with step-gradients first: "
           "par-compile does unless sink-reductions=false; zero=1 "
           "reduce-scatters them instead)";
    return signalPassFailure();
  }
}

} // namespace
