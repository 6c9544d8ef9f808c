//===- ReshardPlan.cpp - How one sharding becomes another -----------------===//
//
// See ReshardPlan.h.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Analysis/ReshardPlan.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::par;

//===----------------------------------------------------------------------===//
// Sizes and costs
//===----------------------------------------------------------------------===//

int64_t mlir::par::axesProduct(MeshOp mesh, ArrayRef<StringRef> axes) {
  int64_t n = 1;
  for (StringRef a : axes)
    n *= std::max<int64_t>(1, mesh.getAxisSize(a));
  return n;
}

double mlir::par::tensorBytes(RankedTensorType type) {
  Type elt = type.getElementType();
  double width = 8;
  if (elt.isIntOrFloat())
    width = std::max<unsigned>(8, elt.getIntOrFloatBitWidth());
  else if (auto c = dyn_cast<ComplexType>(elt))
    width = 2 * std::max<unsigned>(8, c.getElementType().getIntOrFloatBitWidth());
  double bytes = width / 8;
  for (int64_t d : type.getShape())
    bytes *= ShapedType::isDynamic(d) ? 1 : d;
  return bytes;
}

SmallVector<int64_t> mlir::par::approxLocalShape(RankedTensorType type,
                                                 ShardingAttr sharding,
                                                 MeshOp mesh) {
  SmallVector<int64_t> shape(type.getShape());
  if (!sharding || sharding.getRank() != type.getRank())
    return shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (ShapedType::isDynamic(shape[d]))
      continue;
    shape[d] = std::max<int64_t>(
        1, shape[d] / axesProduct(mesh, sharding.getDimAxes(d)));
  }
  return shape;
}

double mlir::par::localBytes(RankedTensorType type, ShardingAttr s, MeshOp mesh) {
  return tensorBytes(RankedTensorType::get(approxLocalShape(type, s, mesh),
                                           type.getElementType()));
}

double mlir::par::reshardCost(ArrayRef<ReshardStep> steps, ShardingAttr from,
                              RankedTensorType type, MeshOp mesh) {
  double cost = 0;
  ShardingAttr cur = from;
  for (const ReshardStep &s : steps) {
    double n = axesProduct(mesh, s.axes);
    switch (s.kind) {
    case ReshardStep::Kind::AllReduce:
      cost += 2 * (n - 1) / n * localBytes(type, cur, mesh);
      break;
    case ReshardStep::Kind::ReduceScatter:
    case ReshardStep::Kind::AllToAll:
      cost += (n - 1) / n * localBytes(type, cur, mesh);
      break;
    case ReshardStep::Kind::AllGather:
      cost += (n - 1) / n * localBytes(type, s.after, mesh);
      break;
    case ReshardStep::Kind::AllSlice:
    case ReshardStep::Kind::MakePartial:
      break;
    }
    cur = s.after;
  }
  return cost;
}

double mlir::par::collectiveBytes(Operation *op) {
  auto bytesOf = [](Value v) {
    return tensorBytes(cast<RankedTensorType>(v.getType()));
  };
  auto ring = [](int64_t n) { return n <= 0 ? 0.0 : double(n - 1) / n; };
  if (auto o = dyn_cast<AllReduceOp>(op))
    return 2 * ring(o.getGroupSize()) * bytesOf(o.getInput());
  if (auto o = dyn_cast<BucketAllReduceOp>(op)) {
    double bytes = 0;
    for (Value in : o.getInputs())
      bytes += bytesOf(in);
    return 2 * ring(o.getGroupSize()) * bytes;
  }
  if (auto o = dyn_cast<AllGatherOp>(op))
    return ring(o.getGroupSize()) * bytesOf(o.getResult());
  if (auto o = dyn_cast<ReduceScatterOp>(op))
    return ring(o.getGroupSize()) * bytesOf(o.getInput());
  if (auto o = dyn_cast<AllToAllOp>(op))
    return ring(o.getGroupSize()) * bytesOf(o.getInput());
  if (auto o = dyn_cast<BroadcastOp>(op))
    return o.getGroupSize() > 1 ? bytesOf(o.getInput()) : 0;
  if (auto o = dyn_cast<SendOp>(op))
    return bytesOf(o.getInput());
  return 0;
}

//===----------------------------------------------------------------------===//
// Reshard planning
//===----------------------------------------------------------------------===//

namespace {
/// A mutable sharding used while planning.
struct WorkSharding {
  SmallVector<AxisList> dims;
  AxisList partial;
  ReductionKind kind = ReductionKind::Sum;

  static WorkSharding from(ShardingAttr s, int64_t rank) {
    WorkSharding w;
    w.dims.resize(rank);
    if (!s)
      return w;
    for (int64_t d = 0; d < rank && d < s.getRank(); ++d)
      w.dims[d] = s.getDimAxes(d);
    w.partial = s.getPartialAxisNames();
    w.kind = s.getPartialKind();
    return w;
  }
  ShardingAttr toAttr(MLIRContext *ctx, FlatSymbolRefAttr mesh) const {
    return ShardingAttr::get(ctx, mesh, dims, partial, kind);
  }
};

} // namespace

bool mlir::par::isAxesPrefix(ArrayRef<StringRef> a, ArrayRef<StringRef> b) {
  return a.size() <= b.size() && llvm::equal(a, b.take_front(a.size()));
}

size_t mlir::par::commonAxesPrefix(ArrayRef<StringRef> a,
                                  ArrayRef<StringRef> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  return n;
}

bool mlir::par::isPrefixSharding(ShardingAttr a, ShardingAttr b) {
  if (!a)
    return true;
  if (!b || a.getRank() != b.getRank())
    return false;
  for (int64_t d = 0; d < a.getRank(); ++d)
    if (!isAxesPrefix(a.getDimAxes(d), b.getDimAxes(d)))
      return false;
  return true;
}

SmallVector<ReshardStep> mlir::par::planReshard(ShardingAttr from,
                                                ShardingAttr to,
                                                int64_t rank) {
  SmallVector<ReshardStep> steps;
  ShardingAttr any = from ? from : to;
  if (!any)
    return steps;
  MLIRContext *ctx = any.getContext();
  FlatSymbolRefAttr mesh = any.getMesh();
  WorkSharding cur = WorkSharding::from(from, rank);
  WorkSharding tgt = WorkSharding::from(to, rank);
  auto emit = [&](ReshardStep::Kind kind, AxisList axes, int64_t dim = -1,
                  int64_t dim2 = -1,
                  ReductionKind red = ReductionKind::Sum) {
    steps.push_back(
        {kind, std::move(axes), dim, dim2, red, cur.toAttr(ctx, mesh)});
  };

  // 1. Partial axes the target does not keep are reduced: into a split dim
  //    the target wants next (reduce_scatter), else in place (all_reduce).
  bool sameKind = cur.kind == tgt.kind || cur.partial.empty() ||
                  tgt.partial.empty();
  AxisList toReduce;
  for (StringRef a : cur.partial)
    if (!sameKind || !llvm::is_contained(tgt.partial, a))
      toReduce.push_back(a);
  if (!toReduce.empty()) {
    ReductionKind red = cur.kind;
    for (int64_t d = 0; d < rank && !toReduce.empty(); ++d) {
      if (!isAxesPrefix(cur.dims[d], tgt.dims[d]))
        continue;
      AxisList run;
      for (size_t i = cur.dims[d].size(); i < tgt.dims[d].size(); ++i) {
        if (!llvm::is_contained(toReduce, tgt.dims[d][i]))
          break;
        run.push_back(tgt.dims[d][i]);
      }
      if (run.empty())
        continue;
      for (StringRef a : run) {
        llvm::erase(toReduce, a);
        llvm::erase(cur.partial, a);
        cur.dims[d].push_back(a);
      }
      emit(ReshardStep::Kind::ReduceScatter, run, d, -1, red);
    }
    if (!toReduce.empty()) {
      for (StringRef a : toReduce)
        llvm::erase(cur.partial, a);
      emit(ReshardStep::Kind::AllReduce, toReduce, -1, -1, red);
    }
    if (cur.partial.empty())
      cur.kind = ReductionKind::Sum;
  }

  // 2. Splits the target does not share are undone: an axis moving to a dim
  //    that wants it next travels by all_to_all, others are gathered.
  for (int64_t d = 0; d < rank; ++d) {
    size_t common = commonAxesPrefix(cur.dims[d], tgt.dims[d]);
    while (cur.dims[d].size() > common) {
      StringRef a = cur.dims[d].back();
      int64_t moveTo = -1;
      for (int64_t d2 = 0; d2 < rank && moveTo < 0; ++d2)
        if (d2 != d && isAxesPrefix(cur.dims[d2], tgt.dims[d2]) &&
            tgt.dims[d2].size() > cur.dims[d2].size() &&
            tgt.dims[d2][cur.dims[d2].size()] == a)
          moveTo = d2;
      if (moveTo >= 0) {
        cur.dims[d].pop_back();
        cur.dims[moveTo].push_back(a);
        emit(ReshardStep::Kind::AllToAll, {a}, d, moveTo);
        continue;
      }
      AxisList gathered(cur.dims[d].begin() + common, cur.dims[d].end());
      cur.dims[d].resize(common);
      emit(ReshardStep::Kind::AllGather, gathered, d);
    }
  }

  // 3. Missing splits are taken locally.
  for (int64_t d = 0; d < rank; ++d) {
    if (cur.dims[d].size() >= tgt.dims[d].size())
      continue;
    AxisList extra(tgt.dims[d].begin() + cur.dims[d].size(),
                   tgt.dims[d].end());
    cur.dims[d] = tgt.dims[d];
    emit(ReshardStep::Kind::AllSlice, extra, d);
  }

  // 4. Partial axes the target has and the source lacks: only a neutral
  //    value (e.g. a zero fill for sum) can be declared partial for free.
  AxisList makePartial;
  for (StringRef a : tgt.partial)
    if (!llvm::is_contained(cur.partial, a))
      makePartial.push_back(a);
  if (!makePartial.empty()) {
    for (StringRef a : makePartial)
      cur.partial.push_back(a);
    cur.kind = tgt.kind;
    emit(ReshardStep::Kind::MakePartial, makePartial, -1, -1, tgt.kind);
  }
  return steps;
}

/// True if `v` holds the identity of `kind` everywhere, so that every device
/// may hold it as a partial value without changing the reduction.
bool mlir::par::isNeutralValue(Value v, ReductionKind kind) {
  Attribute cst;
  Value scalar = v;
  if (auto fill = v.getDefiningOp<linalg::FillOp>())
    scalar = fill.getInputs()[0];
  if (!matchPattern(scalar, m_Constant(&cst)))
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(cst)) {
    if (!dense.isSplat())
      return false;
    cst = dense.getSplatValue<Attribute>();
  }
  if (auto f = dyn_cast<FloatAttr>(cst)) {
    llvm::APFloat x = f.getValue();
    switch (kind) {
    case ReductionKind::Sum:
      return x.isZero();
    case ReductionKind::Max:
      return x.isInfinity() && x.isNegative();
    case ReductionKind::Min:
      return x.isInfinity() && !x.isNegative();
    default:
      return false;
    }
  }
  if (auto i = dyn_cast<IntegerAttr>(cst)) {
    llvm::APInt x = i.getValue();
    switch (kind) {
    case ReductionKind::Sum:
      return x.isZero();
    case ReductionKind::Max:
      return x.isMinSignedValue();
    case ReductionKind::Min:
      return x.isMaxSignedValue();
    default:
      return false;
    }
  }
  return false;
}
