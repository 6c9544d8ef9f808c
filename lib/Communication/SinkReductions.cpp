//===- SinkReductions.cpp - par-sink-reductions ---------------------------===//
//
// Partial values flow through linear ops. On the partitioned program a sum
// `par.all_reduce` is moved past the ops that are linear in its result, so
// that partial values are added, scaled, cast, reshaped and transposed
// before they are reduced, and the reduction happens where a non-linear
// op, a function result or a sharding needs it:
//
//   add(all_reduce(a), all_reduce(b))      -> all_reduce(add(a, b))
//   truncf(all_reduce(a)) : f32 -> bf16    -> all_reduce(truncf(a)) : bf16
//   all_slice(all_reduce(a)) over B <= A   -> reduce_scatter(a) over B
//
// The choice is driven by bytes (ring formulas, docs/Formulas.md): a step
// is taken only if it does not increase the bytes sent, and only if a gain
// (a merge of reductions, fewer bytes) lies at or after it, so reductions
// do not drift later for nothing. A value is treated as linear in the
// partial operands when it is built from them by add/sub/neg, products and
// quotients with values identical on every device of the reduced axes
// (uniform), casts and selects on uniform conditions; linalg ops are
// classified by their bodies (a reduction into a zero init is linear).
//
// Across calls: a call result that the callee returns as an all_reduce
// (e.g. a micro-batch's gradient) is reduced in the caller instead, when a
// gain waits there (the sum of the micro-batches' gradients: one reduction
// per step instead of m). The call then targets a private clone of the
// callee returning the partial value; its result sharding says so. A
// mixed-precision gradient returned as a 16-bit round trip of its f32 sum
// (the 16-bit parameter's gradient widened for the f32 master weight) is
// returned as the round trip of the partial value, still reduced in f32.
//
// The math changes by float reassociation only (and, for casts, by the
// rounding of partial values instead of their sum: Megatron's behaviour
// for 16-bit tensor-parallel reductions).
//
//===----------------------------------------------------------------------===//

#include "par/Communication/Passes.h"
#include "par/Dialect/Par/Analysis/ReshardPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/StringMap.h"

#define DEBUG_TYPE "par-sink-reductions"

namespace mlir::par {
#define GEN_PASS_DEF_SINKREDUCTIONS
#include "par/Communication/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

using AxisMask = uint64_t;
constexpr AxisMask kAllAxes = ~AxisMask(0);

/// Mesh axis names as bits (axes of different meshes with one name share a
/// bit: conservative, a value is uniform over the name on every mesh).
class AxisBits {
public:
  /// False once more than 64 names were seen (the pass then stops).
  bool ok() const { return names.size() <= 64; }
  AxisMask of(StringRef name) {
    auto it = names.try_emplace(name, names.size()).first;
    return it->second < 64 ? AxisMask(1) << it->second : 0;
  }
  AxisMask of(ArrayAttr axes) {
    AxisMask m = 0;
    for (StringAttr a : axes.getAsRange<StringAttr>())
      m |= of(a.getValue());
    return m;
  }
  /// Axes a value with this sharding may differ over.
  AxisMask varying(ShardingAttr s) {
    AxisMask m = 0;
    if (!s)
      return m;
    for (int64_t d = 0; d < s.getRank(); ++d)
      for (StringRef a : s.getDimAxes(d))
        m |= of(a);
    for (StringRef a : s.getPartialAxisNames())
      m |= of(a);
    return m;
  }

private:
  llvm::StringMap<unsigned> names;
};

/// The mesh axes over which a value is the same on every device of a group
/// (a bit set): function arguments and call results by their shardings (no
/// sharding: replicated), collectives by their axes, other ops as the
/// intersection of what they read.
class Uniformity {
public:
  Uniformity(AxisBits &bits, SymbolTableCollection &symbols)
      : bits(bits), symbols(symbols) {}

  AxisMask get(Value v) {
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    AxisMask m = compute(v);
    memo[v] = m;
    return m;
  }
  void forget(Operation *op) {
    for (Value r : op->getResults())
      memo.erase(r);
  }

private:
  AxisMask compute(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      Block *block = arg.getOwner();
      auto fn = dyn_cast_or_null<FunctionOpInterface>(block->getParentOp());
      if (!fn || block != &fn.getFunctionBody().front())
        return 0;
      return kAllAxes & ~bits.varying(fn.getArgAttrOfType<ShardingAttr>(
                            arg.getArgNumber(), ParDialect::kShardingAttrName));
    }
    Operation *op = v.getDefiningOp();
    if (isa<AllReduceOp, AllGatherOp, BroadcastOp>(op))
      return get(op->getOperand(0)) |
             bits.of(op->getAttrOfType<ArrayAttr>("axes"));
    if (isa<ReduceScatterOp, AllToAllOp, AllSliceOp>(op))
      return get(op->getOperand(0)) &
             ~bits.of(op->getAttrOfType<ArrayAttr>("axes"));
    if (isa<ParDialect>(op->getDialect()))
      return 0;
    if (auto call = dyn_cast<CallOpInterface>(op)) {
      auto callee = dyn_cast_or_null<FunctionOpInterface>(
          call.resolveCallableInTable(&symbols));
      if (!callee)
        return 0;
      return kAllAxes &
             ~bits.varying(callee.getResultAttrOfType<ShardingAttr>(
                 cast<OpResult>(v).getResultNumber(),
                 ParDialect::kShardingAttrName));
    }
    // Regions other than linalg bodies may hide collectives (loops).
    if (op->getNumRegions() && !isa<linalg::LinalgOp>(op))
      return 0;
    AxisMask m = kAllAxes;
    for (Value operand : op->getOperands())
      m &= get(operand);
    if (op->getNumRegions()) {
      bool clean = true;
      op->walk([&](Operation *inner) {
        clean &= !isa<ParDialect>(inner->getDialect());
      });
      if (!clean)
        return 0;
      llvm::SetVector<Value> above;
      getUsedValuesDefinedAbove(op->getRegions(), above);
      for (Value a : above)
        m &= get(a);
    }
    return m;
  }

  AxisBits &bits;
  SymbolTableCollection &symbols;
  DenseMap<Value, AxisMask> memo;
};

/// How a value depends on the partial values: not at all and zero, not at
/// all (uniform), linearly, or otherwise.
enum class Lin { Zero, Const, Linear, None };

/// The class of `op`'s result from its operands' classes (scalar ops, or
/// the same ops on tensors); a narrowing cast of a partial value is linear
/// only if `narrowing`.
Lin combine(Operation *op, ArrayRef<Lin> in, bool narrowing) {
  if (llvm::is_contained(in, Lin::None))
    return Lin::None;
  bool linear = llvm::is_contained(in, Lin::Linear);
  bool allZero = llvm::all_of(in, [](Lin l) { return l == Lin::Zero; });
  auto linOrZero = [](Lin l) { return l == Lin::Linear || l == Lin::Zero; };
  if (isa<arith::AddFOp, arith::SubFOp>(op)) {
    if (!linear)
      return allZero ? Lin::Zero : Lin::Const;
    return llvm::all_of(in, linOrZero) ? Lin::Linear : Lin::None;
  }
  if (isa<arith::MulFOp>(op)) {
    if (llvm::is_contained(in, Lin::Zero))
      return Lin::Zero;
    if (!linear)
      return Lin::Const;
    return in[0] == Lin::Linear && in[1] == Lin::Linear ? Lin::None
                                                        : Lin::Linear;
  }
  if (isa<arith::DivFOp>(op)) {
    if (!linear)
      return in[0] == Lin::Zero ? Lin::Zero : Lin::Const;
    return in[1] == Lin::Const ? Lin::Linear : Lin::None;
  }
  if (isa<arith::NegFOp, arith::ExtFOp>(op))
    return in[0];
  if (isa<arith::TruncFOp>(op))
    return in[0] == Lin::Linear && !narrowing ? Lin::None : in[0];
  if (isa<arith::SelectOp>(op)) {
    if (!linear)
      return Lin::Const;
    return in[0] == Lin::Const && linOrZero(in[1]) && linOrZero(in[2])
               ? Lin::Linear
               : Lin::None;
  }
  // Anything else is linear in nothing.
  return linear ? Lin::None : Lin::Const;
}

/// Sum all_reduces that can merge: same mesh and set of axes.
struct Key {
  FlatSymbolRefAttr mesh;
  AxisMask axes = 0;
  ArrayAttr axesAttr;
  bool operator==(const Key &o) const {
    return mesh == o.mesh && axes == o.axes;
  }
};

struct SinkReductionsPass
    : public mlir::par::impl::SinkReductionsBase<SinkReductionsPass> {
  using SinkReductionsBase::SinkReductionsBase;
  // Copies (pass cloning) start with fresh state.
  SinkReductionsPass(const SinkReductionsPass &other)
      : SinkReductionsBase(other) {}
  void runOnOperation() override;

private:
  /// The key of `v` if it is a sum all_reduce's result, else none.
  std::optional<Key> keyOf(Value v) {
    auto ar = v.getDefiningOp<AllReduceOp>();
    if (!ar || ar.getKind() != ReductionKind::Sum ||
        !isa<FloatType>(ar.getType().getElementType()))
      return std::nullopt;
    return Key{ar.getMeshAttr(), bits.of(ar.getAxes()), ar.getAxes()};
  }
  /// The op all uses of `v` are in, or null.
  static Operation *soleUser(Value v) {
    Operation *user = nullptr;
    for (Operation *u : v.getUsers()) {
      if (user && u != user)
        return nullptr;
      user = u;
    }
    return user;
  }
  /// Bytes one device sends to all_reduce a value of `type` over `key`.
  double bytes(Type type, const Key &key, Operation *from) {
    auto t = dyn_cast<RankedTensorType>(type);
    MeshOp mesh = lookupMesh(from, key.mesh, /*emitErrors=*/false);
    if (!t || !mesh)
      return 0;
    SmallVector<StringRef> axes(key.axesAttr.getAsValueRange<StringAttr>());
    int64_t n = axesProduct(mesh, axes);
    return n <= 1 ? 0 : 2.0 * double(n - 1) / double(n) * tensorBytes(t);
  }
  /// Whether reductions over `key` may move through narrowing casts: not
  /// over data-parallel axes unless `narrow-data-parallel` (grad-reduce=f32
  /// keeps master-weight gradients reduced in f32).
  bool narrowOK(const Key &key) const {
    return allowNarrowing || narrowDataParallel ||
           (key.axes & dataParallel) == 0;
  }
  /// Set while checking a chain that ends as wide as its reduction.
  bool allowNarrowing = false;
  /// The class of `v` given the values treated as partial.
  Lin classOf(Value v, const DenseSet<Value> &partial, const Key &key) {
    if (partial.contains(v))
      return Lin::Linear;
    if (isNeutralValue(v, ReductionKind::Sum))
      return Lin::Zero;
    return (uniform->get(v) & key.axes) == key.axes ? Lin::Const : Lin::None;
  }
  /// Whether `op`'s single result is a partial value over `key` when the
  /// operands in `partial` are, the others being what they are.
  bool isLinearIn(Operation *op, const DenseSet<Value> &partial,
                  const Key &key);
  /// True if `v` is, or becomes by sinking through reshapes, an all_reduce
  /// over `key` (or a call result that can be one) used by one op only.
  bool isPartialSource(Value v, const Key &key, int depth);
  /// The other operands of `user` that are partial sources over `key`.
  DenseSet<Value> partialOperands(Operation *user, Value v, const Key &key,
                                  bool direct);
  /// True if treating `v` as partial over `key` leads to fewer bytes or
  /// fewer reductions at or after its user.
  bool gainAhead(Value v, const Key &key, int depth);
  /// One step for `ar`: the reduction that replaces it, or null if it
  /// stays.
  AllReduceOp sinkOnce(AllReduceOp ar);
  /// Steps until nothing moves; true if anything did.
  bool sinkAll();
  /// Erases `op` (keeping the analyses and the sweep's list right).
  void erase(Operation *op) {
    uniform->forget(op);
    erased.insert(op);
    op->erase();
  }
  /// Records a new op (its address may be an erased one's).
  void created(Operation *op) { erased.erase(op); }
  /// The results of `call` worth returning partial, by callee result index.
  SmallVector<unsigned> partialCallResults(CallOpInterface call);
  /// The pipeline's hand-off: a stage's backward returns its parameters'
  /// gradients unreduced, the update reduces their micro-batch sum.
  void acrossStages();
  bool forcedIntoStep(func::CallOp call, unsigned i);
  /// Makes `fn` return result `i` (a returned all_reduce) unreduced.
  void returnPartial(func::FuncOp fn, unsigned i);
  /// `s` (null: replicated) of a value of `type`, partial over `key`.
  ShardingAttr partialSharding(ShardingAttr s, Type type, const Key &key);
  /// The sum all_reduce `ret` returns as operand `i` (directly, or through a
  /// 16-bit round trip), used by nothing else; null if there is none.
  AllReduceOp returnedAllReduce(func::ReturnOp ret, unsigned i);
  /// The sum all_reduce `v` is computed from by single-use ops linear in
  /// it, the reduction no wider than `wide`; null if none.
  AllReduceOp chainToReduction(Value v, Type wide, int depth);
  /// Key of callee result `i` if the callee returns it as a sum all_reduce
  /// used by the return only.
  std::optional<Key> returnedReduction(func::FuncOp callee, unsigned i);
  func::FuncOp partialClone(func::FuncOp callee, ArrayRef<unsigned> results);

  AxisBits bits;
  AxisMask dataParallel = 0;
  SymbolTableCollection symbols;
  std::unique_ptr<Uniformity> uniform;
  /// Call results that may be treated as partial (the interprocedural step).
  DenseMap<Value, Key> callPartials;
  DenseSet<Operation *> erased;
  std::map<std::pair<Operation *, SmallVector<unsigned>>, func::FuncOp> clones;
};

bool SinkReductionsPass::isLinearIn(Operation *op,
                                    const DenseSet<Value> &partial,
                                    const Key &key) {
  if (op->getNumResults() != 1 ||
      !isa<RankedTensorType>(op->getResult(0).getType()))
    return false;
  auto classes = [&](ValueRange values) {
    SmallVector<Lin> c;
    for (Value v : values)
      c.push_back(classOf(v, partial, key));
    return c;
  };
  // Elementwise arith on tensors.
  if (op->getDialect() == op->getContext()->getLoadedDialect("arith") &&
      op->getNumRegions() == 0)
    return combine(op, classes(op->getOperands()), narrowOK(key)) == Lin::Linear;
  // Data movement: linear in the moved tensor, given uniform indices.
  if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::CastOp,
          tensor::ExtractSliceOp>(op)) {
    SmallVector<Lin> c = classes(op->getOperands());
    return c[0] == Lin::Linear &&
           llvm::all_of(ArrayRef(c).drop_front(),
                        [](Lin l) { return l == Lin::Const || l == Lin::Zero; });
  }
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureTensorSemantics() ||
      op->getNumRegions() != 1)
    return false;
  Block *body = linalgOp.getBlock();
  DenseMap<Value, Lin> lin;
  for (OpOperand &operand : op->getOpOperands())
    if (operand.getOperandNumber() < body->getNumArguments())
      lin[body->getArgument(operand.getOperandNumber())] =
          classOf(operand.get(), partial, key);
  auto get = [&](Value v) {
    auto it = lin.find(v);
    if (it != lin.end())
      return it->second;
    // Defined above the body.
    return (uniform->get(v) & key.axes) == key.axes ? Lin::Const : Lin::None;
  };
  for (Operation &inner : body->without_terminator()) {
    if (inner.getNumRegions() || inner.getNumResults() != 1)
      return false;
    Lin c;
    if (matchPattern(inner.getResult(0), m_AnyZeroFloat()))
      c = Lin::Zero;
    else if (isa<linalg::IndexOp, arith::ConstantOp>(inner))
      c = Lin::Const;
    else {
      SmallVector<Lin> in;
      for (Value v : inner.getOperands())
        in.push_back(get(v));
      c = combine(&inner, in, narrowOK(key));
    }
    lin[inner.getResult(0)] = c;
  }
  Operation *yield = body->getTerminator();
  return yield->getNumOperands() == 1 &&
         get(yield->getOperand(0)) == Lin::Linear;
}

bool SinkReductionsPass::isPartialSource(Value v, const Key &key, int depth) {
  if (!soleUser(v))
    return false;
  if (std::optional<Key> k = keyOf(v))
    return *k == key;
  auto it = callPartials.find(v);
  if (it != callPartials.end())
    return it->second == key;
  Operation *def = v.getDefiningOp();
  if (depth > 16 || !def ||
      !isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::CastOp,
           linalg::TransposeOp>(def))
    return false;
  return isPartialSource(def->getOperand(0), key, depth + 1);
}

DenseSet<Value> SinkReductionsPass::partialOperands(Operation *user, Value v,
                                                    const Key &key,
                                                    bool direct) {
  DenseSet<Value> partial;
  partial.insert(v);
  for (Value w : user->getOperands()) {
    if (w == v || soleUser(w) != user)
      continue;
    if (direct ? keyOf(w) == key : isPartialSource(w, key, 0))
      partial.insert(w);
  }
  return partial;
}

bool SinkReductionsPass::gainAhead(Value v, const Key &key, int depth) {
  Operation *user = soleUser(v);
  if (!user || depth > 64)
    return false;
  if (auto slice = dyn_cast<AllSliceOp>(user))
    return slice.getMesh() == key.mesh.getValue() &&
           (bits.of(slice.getAxes()) & ~key.axes) == 0;
  DenseSet<Value> partial = partialOperands(user, v, key, /*direct=*/false);
  if (!isLinearIn(user, partial, key))
    return false;
  double before = 0;
  for (Value w : partial)
    before += bytes(w.getType(), key, user);
  double after = bytes(user->getResult(0).getType(), key, user);
  if (after > before)
    return false;
  if (partial.size() > 1 || after < before)
    return true;
  return gainAhead(user->getResult(0), key, depth + 1);
}

AllReduceOp SinkReductionsPass::sinkOnce(AllReduceOp ar) {
  std::optional<Key> key = keyOf(ar.getResult());
  Operation *user = soleUser(ar.getResult());
  if (!key || !user || !gainAhead(ar.getResult(), *key, 0))
    return nullptr;
  OpBuilder b(user);
  Location loc = user->getLoc();
  if (auto slice = dyn_cast<AllSliceOp>(user)) {
    // Reduce onto the slice: a reduce_scatter over the slice's axes, then
    // an all_reduce over the rest.
    auto scatter = ReduceScatterOp::create(
        b, loc, slice.getType(), ar.getInput(), ar.getMeshAttr(),
        slice.getAxes(), slice.getDimAttr(), ar.getKindAttr());
    created(scatter);
    Value v = scatter.getResult();
    AxisMask sliced = bits.of(slice.getAxes());
    SmallVector<Attribute> rest;
    for (Attribute a : ar.getAxes())
      if (!(bits.of(cast<StringAttr>(a).getValue()) & sliced))
        rest.push_back(a);
    AllReduceOp next;
    if (!rest.empty()) {
      next = AllReduceOp::create(b, loc, v.getType(), v, ar.getMeshAttr(),
                                 b.getArrayAttr(rest), ar.getKindAttr());
      created(next);
      v = next.getResult();
    }
    slice.getResult().replaceAllUsesWith(v);
    erase(slice);
    erase(ar);
    ++numScattered;
    return next;
  }
  DenseSet<Value> partial =
      partialOperands(user, ar.getResult(), *key, /*direct=*/true);
  if (!isLinearIn(user, partial, *key))
    return nullptr;
  IRMapping map;
  SmallVector<Operation *> reductions;
  for (Value w : partial) {
    auto r = w.getDefiningOp<AllReduceOp>();
    map.map(w, r.getInput());
    reductions.push_back(r);
  }
  Operation *local = b.clone(*user, map);
  created(local);
  Value result = local->getResult(0);
  auto merged = AllReduceOp::create(b, loc, result.getType(), result,
                                    ar.getMeshAttr(), ar.getAxes(),
                                    ar.getKindAttr());
  created(merged);
  user->getResult(0).replaceAllUsesWith(merged.getResult());
  erase(user);
  for (Operation *r : reductions)
    erase(r);
  numSunk += 1;
  numMerged += reductions.size() - 1;
  return merged;
}

bool SinkReductionsPass::sinkAll() {
  bool any = false;
  // Sweeps until nothing moves: one reduction's step can enable another's
  // (a chain reaching an add that another reduction waits at).
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<AllReduceOp> list;
    getOperation().walk([&](AllReduceOp ar) { list.push_back(ar); });
    erased.clear();
    for (size_t i = 0; i < list.size(); ++i) {
      if (erased.contains(list[i].getOperation()))
        continue;
      while (AllReduceOp next = sinkOnce(list[i])) {
        changed = any = true;
        list[i] = next;
      }
    }
  }
  return any;
}

AllReduceOp SinkReductionsPass::chainToReduction(Value v, Type wide,
                                                 int depth) {
  if (auto ar = v.getDefiningOp<AllReduceOp>()) {
    std::optional<Key> key = keyOf(ar.getResult());
    auto elt = cast<RankedTensorType>(ar.getType()).getElementType();
    // The reduction may not end up narrower than it is.
    if (!key || !soleUser(ar.getResult()) ||
        elt.getIntOrFloatBitWidth() > wide.getIntOrFloatBitWidth())
      return nullptr;
    return ar;
  }
  Operation *def = v.getDefiningOp();
  if (!def || depth > 8 || def->getNumResults() != 1)
    return nullptr;
  for (Value w : def->getOperands()) {
    if (soleUser(w) != def || !isa<RankedTensorType>(w.getType()))
      continue;
    AllReduceOp ar = chainToReduction(w, wide, depth + 1);
    if (!ar)
      continue;
    // `def` must be linear in the reduced chain value; a narrowing cast on
    // the way is fine, the chain ends as wide as the reduction.
    DenseSet<Value> partial;
    partial.insert(w);
    allowNarrowing = true;
    bool linear = isLinearIn(def, partial, *keyOf(ar.getResult()));
    allowNarrowing = false;
    if (linear)
      return ar;
  }
  return nullptr;
}

AllReduceOp SinkReductionsPass::returnedAllReduce(func::ReturnOp ret,
                                                  unsigned i) {
  Value v = ret.getOperand(i);
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !isa<FloatType>(type.getElementType()) ||
      soleUser(v) != ret || llvm::count(ret.getOperands(), v) != 1)
    return nullptr;
  // Directly, or through ops linear in the reduced value: a mixed-precision
  // gradient is its f32 sum rounded as the 16-bit parameter's gradient and
  // accumulated in f32 for the master weight; the rounding then applies to
  // each device's part and the reduction stays f32 (Megatron rounds each
  // micro-batch's gradient before its f32 accumulation and reduction).
  return chainToReduction(v, type.getElementType(), 0);
}

std::optional<Key> SinkReductionsPass::returnedReduction(func::FuncOp callee,
                                                         unsigned i) {
  if (!callee || callee.isExternal())
    return std::nullopt;
  std::optional<Key> key;
  bool ok = true;
  callee.walk([&](func::ReturnOp ret) {
    AllReduceOp ar = returnedAllReduce(ret, i);
    std::optional<Key> k = ar ? keyOf(ar.getResult()) : std::nullopt;
    ok &= k && (!key || *key == *k);
    if (k)
      key = k;
  });
  if (!ok)
    return std::nullopt;
  return key;
}

func::FuncOp SinkReductionsPass::partialClone(func::FuncOp callee,
                                              ArrayRef<unsigned> results) {
  auto cacheKey = std::make_pair(callee.getOperation(),
                                 SmallVector<unsigned>(results));
  auto it = clones.find(cacheKey);
  if (it != clones.end())
    return it->second;
  MLIRContext *ctx = &getContext();
  func::FuncOp clone = callee.clone();
  clone.setName((callee.getName() + "_partial").str());
  clone.setPrivate();
  for (StringRef link :
       {ParDialect::kGradAttrName, ParDialect::kStepAttrName,
        ParDialect::kUpdateAttrName, ParDialect::kLogitsAttrName})
    clone->removeAttr(link);
  SymbolTable table(getOperation());
  table.insert(clone, std::next(Block::iterator(callee)));
  for (unsigned i : results)
    returnPartial(clone, i);
  symbols.invalidateSymbolTable(getOperation());
  clones[cacheKey] = clone;
  return clone;
}

void SinkReductionsPass::returnPartial(func::FuncOp fn, unsigned i) {
  std::optional<Key> key;
  fn.walk([&](func::ReturnOp ret) {
    AllReduceOp ar = returnedAllReduce(ret, i);
    key = keyOf(ar.getResult());
    ar.getResult().replaceAllUsesWith(ar.getInput());
    erase(ar);
  });
  fn.setResultAttr(i, ParDialect::kShardingAttrName,
                   partialSharding(fn.getResultAttrOfType<ShardingAttr>(
                                       i, ParDialect::kShardingAttrName),
                                   fn.getResultTypes()[i], *key));
}

ShardingAttr SinkReductionsPass::partialSharding(ShardingAttr s, Type type,
                                                 const Key &key) {
  int64_t rank = cast<RankedTensorType>(type).getRank();
  SmallVector<SmallVector<StringRef>> dims(rank);
  if (s)
    for (int64_t d = 0; d < rank; ++d)
      dims[d] = s.getDimAxes(d);
  SmallVector<StringRef> partial(key.axesAttr.getAsValueRange<StringAttr>());
  return ShardingAttr::get(&getContext(), key.mesh, dims, partial);
}

void SinkReductionsPass::acrossStages() {
  ModuleOp module = getOperation();
  auto pipeline =
      module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName);
  if (!pipeline)
    return;
  auto lookup = [&](FlatSymbolRefAttr sym) -> func::FuncOp {
    if (!sym)
      return nullptr;
    return dyn_cast_or_null<func::FuncOp>(
        symbols.lookupNearestSymbolFrom(module, sym));
  };
  for (StageAttr stage : pipeline.getStages()) {
    func::FuncOp update = lookup(stage.getUpdate());
    auto params = update ? update->getAttrOfType<DenseI64ArrayAttr>(
                               ParDialect::kStageArgsAttrName)
                         : nullptr;
    SmallVector<func::FuncOp> producers;
    // The stage's backward, its split at the residuals (what B runs when
    // par-pipeline-stash made it) and ZB-H1's weight half.
    for (FlatSymbolRefAttr sym :
         {stage.getBackward(), stage.getStashBackward(), stage.getWeightGrad(),
          stage.getStashWeightGrad()})
      if (func::FuncOp fn = lookup(sym))
        if (!llvm::is_contained(producers, fn)) // stage 0: BW is B's
          producers.push_back(fn);
    if (!params || update.isExternal() || producers.empty())
      continue;
    // The executor sums each parameter's gradient (producer result 1 + j)
    // over the micro-batches and passes the sum as update argument P + j.
    int64_t P = params.size();
    for (int64_t j = 0; j < P; ++j) {
      std::optional<Key> key;
      bool ok = update.getNumArguments() > unsigned(P + j);
      for (func::FuncOp fn : producers) {
        std::optional<Key> k;
        if (fn.getNumResults() > unsigned(1 + j))
          k = returnedReduction(fn, 1 + j);
        ok &= k && (!key || *key == *k);
        key = k;
      }
      if (!ok)
        continue;
      for (func::FuncOp fn : producers)
        returnPartial(fn, 1 + j);
      BlockArgument g = update.getArgument(P + j);
      OpBuilder b = OpBuilder::atBlockBegin(&update.front());
      auto ar = AllReduceOp::create(
          b, update.getLoc(), g.getType(), g, key->mesh, key->axesAttr,
          ReductionKindAttr::get(b.getContext(), ReductionKind::Sum));
      created(ar);
      g.replaceAllUsesExcept(ar.getResult(), ar);
      update.setArgAttr(P + j, ParDialect::kShardingAttrName,
                        partialSharding(update.getArgAttrOfType<ShardingAttr>(
                                            P + j, ParDialect::kShardingAttrName),
                                        g.getType(), *key));
      ++numAcrossStages;
    }
  }
}

/// With `step-gradients`: result i >= 1 of a train step's call (a
/// gradient; result 0 is the loss) is reduced in the step, gain or not.
bool SinkReductionsPass::forcedIntoStep(func::CallOp call, unsigned i) {
  auto fn = call->getParentOfType<FunctionOpInterface>();
  return stepGradients && i >= 1 && fn &&
         fn->hasAttr(ParDialect::kFeedbackAttrName);
}

void SinkReductionsPass::runOnOperation() {
  ModuleOp module = getOperation();
  uniform = std::make_unique<Uniformity>(bits, symbols);
  module.walk([&](MeshOp mesh) {
    for (StringAttr a : mesh.getAxisNames().getAsRange<StringAttr>())
      (void)bits.of(a.getValue());
  });
  // More axis names than bits: leave the program as it is.
  if (!bits.ok())
    return;
  for (auto fn : module.getOps<FunctionOpInterface>())
    for (StringRef a : getDataParallelAxes(fn))
      dataParallel |= bits.of(a);
  sinkAll();
  if (!acrossCalls)
    return;
  acrossStages();

  // Call results the callee returns reduced, and which of them gain from
  // being reduced in the caller.
  SmallVector<func::CallOp> calls;
  module.walk([&](func::CallOp call) { calls.push_back(call); });
  auto calleeOf = [&](func::CallOp call) {
    return dyn_cast_or_null<func::FuncOp>(
        symbols.lookupNearestSymbolFrom(call, call.getCalleeAttr()));
  };
  for (func::CallOp call : calls)
    for (unsigned i = 0; i < call.getNumResults(); ++i)
      if (std::optional<Key> k = returnedReduction(calleeOf(call), i))
        callPartials[call.getResult(i)] = *k;
  SmallVector<std::pair<func::CallOp, SmallVector<unsigned>>> plans;
  for (func::CallOp call : calls) {
    SmallVector<unsigned> chosen;
    for (unsigned i = 0; i < call.getNumResults(); ++i) {
      auto it = callPartials.find(call.getResult(i));
      if (it != callPartials.end() &&
          (forcedIntoStep(call, i) ||
           gainAhead(call.getResult(i), it->second, 0)))
        chosen.push_back(i);
    }
    if (!chosen.empty())
      plans.emplace_back(call, std::move(chosen));
  }
  DenseMap<Value, Key> keys = std::move(callPartials);
  callPartials.clear();
  for (auto &[call, results] : plans) {
    func::FuncOp clone = partialClone(calleeOf(call), results);
    call.setCalleeAttr(FlatSymbolRefAttr::get(clone.getSymNameAttr()));
    uniform->forget(call);
    OpBuilder b(call->getContext());
    b.setInsertionPointAfter(call);
    for (unsigned i : results) {
      const Key &key = keys.find(call.getResult(i))->second;
      Value partial = call.getResult(i);
      auto ar = AllReduceOp::create(
          b, call.getLoc(), partial.getType(), partial, key.mesh,
          key.axesAttr, ReductionKindAttr::get(b.getContext(),
                                               ReductionKind::Sum));
      partial.replaceAllUsesExcept(ar.getResult(), ar);
      ++numAcrossCalls;
    }
  }
  // New reductions (in callers and stage updates) may sink further.
  sinkAll();
}

} // namespace
