//===- PipelineStash.cpp - par-pipeline-stash -----------------------------===//
//
// A stage's backward (`f_s<k>_grad`: the stage's forward, then the adjoints
// in one body) split in two at the forward's output: the forward with the
// values its adjoints read (the residuals), which the F action runs and
// whose residuals the executor keeps for the micro-batch's B, and the
// adjoints alone (B without the forward it would recompute). Megatron's
// pipeline: B costs the backward only (about 2 F), not F + 2 F. Runs on the
// propagated program (every value has its sharding), so a residual has one
// layout on both sides (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"

#define DEBUG_TYPE "par-pipeline-stash"

namespace mlir::par {
#define GEN_PASS_DEF_PIPELINESTASH
#include "par/Pipelining/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// The values `op` uses that are defined outside it: its operands and what
/// its regions read from above.
static SmallVector<Value> usedValues(Operation *op) {
  llvm::SetVector<Value> out;
  for (Value v : op->getOperands())
    out.insert(v);
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    for (Value v : inner->getOperands())
      if (!op->isAncestor(v.getParentRegion()->getParentOp()))
        out.insert(v);
  });
  return out.takeVector();
}

/// The sharding propagation gave `v` (null if none), with its partial
/// axes dropped: a residual crosses the function boundary reduced.
static Attribute boundarySharding(func::FuncOp fn, Value v) {
  Attribute s;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    s = fn.getArgAttr(arg.getArgNumber(), ParDialect::kShardingAttrName);
  } else {
    Operation *d = v.getDefiningOp();
    auto list = d->getAttrOfType<ArrayAttr>(ParDialect::kShardingAttrName);
    unsigned r = cast<OpResult>(v).getResultNumber();
    if (list && r < list.size() && !isa<UnitAttr>(list[r]))
      s = list[r];
  }
  auto sh = dyn_cast_or_null<ShardingAttr>(s);
  if (!sh || sh.getPartialAxes().empty())
    return s;
  return ShardingAttr::get(sh.getContext(), sh.getMesh(), sh.getDims(),
                           ArrayAttr::get(sh.getContext(), {}),
                           sh.getPartialKind());
}

/// One stage backward's split.
struct StageSplit {
  func::FuncOp grad, fwd;
  Block *body;
  func::ReturnOp ret;
  unsigned numFwdArgs = 0;
  bool hasDy = false;
  Value out; // the stage's output y (the last stage's: its loss)
  /// Block arguments only the forward of a stage's input is not among:
  /// the parameters (a value computed from them and constants alone is
  /// recomputed in B rather than kept for every micro-batch in flight).
  llvm::SmallBitVector paramArg;
  DenseSet<Operation *> forward;  // the cone of `out`
  DenseSet<Operation *> cheap;    // recomputed wherever used
  DenseSet<Operation *> backward; // what the gradients need
  llvm::SetVector<Value> residuals;
  /// What the backward part computes (default: the results after the
  /// first).
  SmallVector<Value> roots;

  bool isCheapValue(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return arg.getOwner() == body && paramArg.test(arg.getArgNumber());
    Operation *d = v.getDefiningOp();
    return d && d->getBlock() == body && cheap.contains(d);
  }

  /// Constants, empties, and side-effect-free ops of those and of
  /// parameters (weight casts and transposes of mixed precision).
  void findCheap() {
    for (Operation &op : body->without_terminator()) {
      if (matchPattern(&op, m_Constant()) || isa<tensor::EmptyOp>(op)) {
        cheap.insert(&op);
        continue;
      }
      if (!isMemoryEffectFree(&op) || op.getNumResults() == 0)
        continue;
      if (llvm::all_of(usedValues(&op),
                       [&](Value v) { return isCheapValue(v); }))
        cheap.insert(&op);
    }
  }

  /// The top-level op of the body that defines `v` (null: an argument).
  Operation *topDef(Value v) {
    Operation *d = v.getDefiningOp();
    return d && d->getBlock() == body ? d : nullptr;
  }

  void findForward() {
    SmallVector<Operation *> work;
    if (Operation *d = topDef(out))
      work.push_back(d);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!forward.insert(op).second)
        continue;
      for (Value v : usedValues(op))
        if (Operation *d = topDef(v))
          work.push_back(d);
    }
  }

  /// The ops the gradients (results 1..) need: backward ops, and the cheap
  /// forward ops they read (recomputed); forward values they read are the
  /// residuals.
  void findBackward() {
    SmallVector<Operation *> work;
    auto reach = [&](Value v) {
      Operation *d = topDef(v);
      if (!d)
        return;
      if (forward.contains(d) && !cheap.contains(d)) {
        residuals.insert(v);
        return;
      }
      work.push_back(d);
    };
    if (roots.empty())
      roots.assign(ret.getOperands().begin() + 1, ret.getOperands().end());
    for (Value v : roots)
      reach(v);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!backward.insert(op).second)
        continue;
      for (Value v : usedValues(op))
        reach(v);
    }
  }

  /// The values findBackward found crossing, in program order (the
  /// functions' residual arguments and results follow it).
  SmallVector<Value> crossingInOrder() {
    SmallVector<Value> out = residuals.takeVector();
    DenseMap<Operation *, unsigned> order;
    for (auto [i, op] : llvm::enumerate(*body))
      order[&op] = i;
    llvm::stable_sort(out, [&](Value a, Value b) {
      unsigned oa = order.lookup(a.getDefiningOp()),
               ob = order.lookup(b.getDefiningOp());
      if (oa != ob)
        return oa < ob;
      return cast<OpResult>(a).getResultNumber() <
             cast<OpResult>(b).getResultNumber();
    });
    return out;
  }
};

struct PipelineStashPass
    : public mlir::par::impl::PipelineStashBase<PipelineStashPass> {
  using PipelineStashBase::PipelineStashBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pipe =
        module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName);
    if (!pipe)
      return; // nothing pipelined
    SymbolTable symbols(module);
    SmallVector<StageAttr> stages;
    bool changed = false;
    for (auto [k, st] : llvm::enumerate(pipe.getStages())) {
      if (!st.getBackward() || st.getStashForward()) {
        stages.push_back(st);
        continue;
      }
      StageSplit s;
      FailureOr<std::pair<func::FuncOp, func::FuncOp>> made =
          split(symbols, st, k, s);
      if (failed(made))
        return signalPassFailure();
      // ZB-H1's halves (the stage has input_grad/weight_grad): the
      // backward split again, into the input gradient BI (stages > 0)
      // and the weight gradients BW on what BI kept.
      FlatSymbolRefAttr bi, bw;
      if (st.getWeightGrad()) {
        FailureOr<std::pair<func::FuncOp, func::FuncOp>> halves =
            splitHalves(symbols, s, made->second, k);
        if (failed(halves))
          return signalPassFailure();
        if (halves->first)
          bi = FlatSymbolRefAttr::get(halves->first);
        bw = FlatSymbolRefAttr::get(halves->second);
      }
      stages.push_back(StageAttr::get(
          st.getContext(), st.getForward(), st.getLoss(), st.getInputLoss(),
          st.getWeightLoss(), st.getBackward(), st.getInputGrad(),
          st.getWeightGrad(), st.getUpdate(),
          FlatSymbolRefAttr::get(made->first),
          FlatSymbolRefAttr::get(made->second), bi, bw));
      changed = true;
    }
    if (changed)
      module->setAttr(ParDialect::kPipelineAttrName,
                      pipe.withStages(stages));
  }

  FailureOr<std::pair<func::FuncOp, func::FuncOp>>
  split(SymbolTable &symbols, StageAttr st, int64_t k, StageSplit &s) {
    s.grad = symbols.lookup<func::FuncOp>(st.getBackward().getValue());
    s.fwd = symbols.lookup<func::FuncOp>(st.getForward().getValue());
    auto loss = symbols.lookup<func::FuncOp>(st.getLoss().getValue());
    if (!s.grad || !s.fwd || !loss || s.grad.isExternal())
      return emitError(getOperation().getLoc())
             << "par-pipeline-stash: stage " << k
             << "'s functions are not in the module";
    s.body = &s.grad.getBody().front();
    s.ret = cast<func::ReturnOp>(s.body->getTerminator());
    s.numFwdArgs = s.fwd.getNumArguments();
    unsigned n = s.grad.getNumArguments();
    s.hasDy = n == s.numFwdArgs + 1;
    if (n != s.numFwdArgs + (s.hasDy ? 1 : 0) || s.ret.getNumOperands() < 1)
      return s.grad.emitError()
             << "par-pipeline-stash: stage " << k << "'s backward has " << n
             << " arguments, its forward " << s.numFwdArgs
             << " (expected the forward's and the output gradient)";
    // The stage's output: the last stage's loss, another's y of the
    // scalar sum(y * dy) its backward differentiates.
    Value scalar = s.ret.getOperand(0);
    if (!s.hasDy) {
      s.out = scalar;
    } else {
      Value dy = s.body->getArgument(n - 1);
      auto dot = scalar.getDefiningOp<linalg::GenericOp>();
      if (dot)
        for (Value in : dot.getDpsInputs())
          if (in != dy && in.getType() == dy.getType())
            s.out = in;
      if (!s.out)
        return s.grad.emitError()
               << "par-pipeline-stash: stage " << k
               << "'s backward does not return sum(y * dy) first";
    }
    // The parameters: the differentiated arguments of the stage's scalar
    // but its input x (stages after the first: the forward's last).
    s.paramArg.resize(n);
    for (unsigned i = 0; i < s.numFwdArgs; ++i)
      if (loss.getArgAttr(i, ParDialect::kParamAttrName))
        s.paramArg.set(i);
    if (k > 0 && s.numFwdArgs > 0)
      s.paramArg.reset(s.numFwdArgs - 1);
    s.findCheap();
    s.findForward();
    s.findBackward();
    SmallVector<Value> residuals = s.crossingInOrder();
    func::FuncOp fwdRes = buildForward(s, residuals, symbols);
    func::FuncOp bwd = buildBackward(s, residuals, symbols, fwdRes);
    if (report) {
      int64_t bytes = 0;
      for (Value r : residuals)
        if (auto t = dyn_cast<RankedTensorType>(r.getType()))
          bytes += t.getNumElements() *
                   ((t.getElementTypeBitWidth() + 7) / 8);
      llvm::outs() << "par-pipeline-stash: stage " << k << ": @"
                   << fwdRes.getSymName() << " keeps " << residuals.size()
                   << " residuals (" << bytes
                   << " bytes, global) for @" << bwd.getSymName() << "\n";
    }
    return std::make_pair(fwdRes, bwd);
  }

  /// ZB-H1's halves of `bwd` ((args..., [x], r..., [dy]) -> (0, grads...,
  /// dx)): BI, `_bwd_input` (bwd's arguments) -> (0, dx, saved...), the
  /// ops dx depends on (the output gradient carried back through the
  /// stage), and BW, `_bwd_weight(args..., [x], r..., saved..., [dy]) ->
  /// (0, grads...)`, the ops the weight gradients need beyond those
  /// (each weight's contraction of its input with the output gradient BI
  /// saved). BI + BW is B. Stage 0 has no dx: BW is bwd, there is no BI.
  FailureOr<std::pair<func::FuncOp, func::FuncOp>>
  splitHalves(SymbolTable &symbols, StageSplit &first, func::FuncOp bwd,
              int64_t k) {
    if (k == 0)
      return std::make_pair(func::FuncOp(), bwd);
    StageSplit s;
    s.grad = bwd;
    s.fwd = first.fwd;
    s.body = &bwd.getBody().front();
    s.ret = cast<func::ReturnOp>(s.body->getTerminator());
    unsigned n = bwd.getNumArguments(), nr = s.ret.getNumOperands();
    unsigned prefix = n - (first.hasDy ? 1 : 0); // args, x, residuals
    if (nr < 2)
      return bwd.emitError() << "par-pipeline-stash: stage " << k
                             << "'s backward returns no input gradient";
    s.paramArg.resize(n);
    for (unsigned i = 0; i < first.numFwdArgs; ++i)
      if (first.paramArg.test(i))
        s.paramArg.set(i);
    s.out = s.ret.getOperand(nr - 1); // dx
    s.roots.assign(s.ret.getOperands().begin() + 1,
                   s.ret.getOperands().begin() + (nr - 1));
    s.findCheap();
    s.findForward();
    s.findBackward();
    SmallVector<Value> saved = s.crossingInOrder();
    Location loc = bwd.getLoc();
    Type scalarType = s.ret.getOperand(0).getType();
    auto zeroOf = [&](OpBuilder &nb) -> Value {
      return arith::ConstantOp::create(
          nb, loc, cast<TypedAttr>(nb.getZeroAttr(scalarType)));
    };

    // BI: the cone of dx, returning what BW reads of it.
    OpBuilder b(bwd);
    b.setInsertionPointAfter(bwd);
    SmallVector<Type> biResults = {scalarType, s.out.getType()};
    for (Value v : saved)
      biResults.push_back(v.getType());
    auto bi = func::FuncOp::create(
        b, loc, (bwd.getSymName() + "_input").str(),
        b.getFunctionType(bwd.getArgumentTypes(), biResults));
    copyFunctionAttrs(bwd, bi);
    for (unsigned i = 0; i < n; ++i)
      bi.setArgAttrs(i, bwd.getArgAttrDict(i));
    bi.setResultAttrs(0, bwd.getResultAttrDict(0));
    bi.setResultAttrs(1, bwd.getResultAttrDict(nr - 1));
    for (auto [j, v] : llvm::enumerate(saved))
      if (Attribute sh = boundarySharding(bwd, v))
        bi.setResultAttr(2 + j, ParDialect::kShardingAttrName, sh);
    {
      Block *entry = bi.addEntryBlock();
      OpBuilder nb = OpBuilder::atBlockBegin(entry);
      IRMapping map;
      for (unsigned i = 0; i < n; ++i)
        map.map(s.body->getArgument(i), entry->getArgument(i));
      for (Operation &op : s.body->without_terminator())
        if (s.forward.contains(&op))
          nb.clone(op, map);
      SmallVector<Value> outs = {zeroOf(nb), map.lookupOrDefault(s.out)};
      for (Value v : saved)
        outs.push_back(map.lookup(v));
      func::ReturnOp::create(nb, loc, outs);
      symbols.insert(bi);
    }

    // BW: the weight gradients on the residuals and what BI saved.
    b.setInsertionPointAfter(bi);
    SmallVector<Type> bwArgs;
    for (unsigned i = 0; i < prefix; ++i)
      bwArgs.push_back(bwd.getArgumentTypes()[i]);
    for (Value v : saved)
      bwArgs.push_back(v.getType());
    if (first.hasDy)
      bwArgs.push_back(bwd.getArgumentTypes().back());
    SmallVector<Type> bwResults = {scalarType};
    for (Value v : s.roots)
      bwResults.push_back(v.getType());
    auto bw = func::FuncOp::create(b, loc,
                                   (bwd.getSymName() + "_weight").str(),
                                   b.getFunctionType(bwArgs, bwResults));
    copyFunctionAttrs(bwd, bw);
    for (unsigned i = 0; i < prefix; ++i)
      bw.setArgAttrs(i, bwd.getArgAttrDict(i));
    for (auto [j, v] : llvm::enumerate(saved))
      if (Attribute sh = boundarySharding(bwd, v))
        bw.setArgAttr(prefix + j, ParDialect::kShardingAttrName, sh);
    if (first.hasDy)
      bw.setArgAttrs(prefix + saved.size(), bwd.getArgAttrDict(n - 1));
    for (unsigned i = 0; i + 1 < nr; ++i)
      bw.setResultAttrs(i, bwd.getResultAttrDict(i));
    {
      Block *entry = bw.addEntryBlock();
      OpBuilder nb = OpBuilder::atBlockBegin(entry);
      IRMapping map;
      for (unsigned i = 0; i < prefix; ++i)
        map.map(s.body->getArgument(i), entry->getArgument(i));
      for (auto [j, v] : llvm::enumerate(saved))
        map.map(v, entry->getArgument(prefix + j));
      if (first.hasDy)
        map.map(s.body->getArgument(n - 1),
                entry->getArgument(prefix + saved.size()));
      for (Operation &op : s.body->without_terminator())
        if (s.backward.contains(&op))
          nb.clone(op, map);
      SmallVector<Value> outs = {zeroOf(nb)};
      for (Value v : s.roots)
        outs.push_back(map.lookupOrDefault(v));
      func::ReturnOp::create(nb, loc, outs);
      symbols.insert(bw);
    }
    if (report)
      llvm::outs() << "par-pipeline-stash: stage " << k << ": @"
                   << bi.getSymName() << " (BI) keeps " << saved.size()
                   << " values for @" << bw.getSymName() << " (BW)\n";
    return std::make_pair(bi, bw);
  }

  /// Copies `from`'s function attributes but its name, type and argument
  /// and result attributes onto `to`.
  static void copyFunctionAttrs(func::FuncOp from, func::FuncOp to) {
    for (NamedAttribute a : from->getAttrs()) {
      StringRef name = a.getName().getValue();
      if (name == SymbolTable::getSymbolAttrName() ||
          name == from.getFunctionTypeAttrName() ||
          name == from.getArgAttrsAttrName() ||
          name == from.getResAttrsAttrName() ||
          name == SymbolTable::getVisibilityAttrName())
        continue;
      to->setAttr(a.getName(), a.getValue());
    }
  }

  /// `@f_s<k>_fwd_res(args..., [x]) -> (y, residuals...)`: the forward cone.
  func::FuncOp buildForward(StageSplit &s, ArrayRef<Value> residuals,
                            SymbolTable &symbols) {
    OpBuilder b(s.grad);
    b.setInsertionPointAfter(s.grad);
    SmallVector<Type> args, results = {s.out.getType()};
    for (unsigned i = 0; i < s.numFwdArgs; ++i)
      args.push_back(s.body->getArgument(i).getType());
    for (Value r : residuals)
      results.push_back(r.getType());
    auto fn = func::FuncOp::create(
        b, s.grad.getLoc(), (s.fwd.getSymName() + "_res").str(),
        b.getFunctionType(args, results));
    copyFunctionAttrs(s.fwd, fn);
    for (unsigned i = 0; i < s.numFwdArgs; ++i)
      fn.setArgAttrs(i, s.grad.getArgAttrDict(i));
    fn.setResultAttrs(0, s.fwd.getResultAttrDict(0));
    for (auto [j, r] : llvm::enumerate(residuals))
      if (Attribute sh = boundarySharding(s.grad, r))
        fn.setResultAttr(1 + j, ParDialect::kShardingAttrName, sh);
    Block *entry = fn.addEntryBlock();
    OpBuilder nb = OpBuilder::atBlockBegin(entry);
    IRMapping map;
    for (unsigned i = 0; i < s.numFwdArgs; ++i)
      map.map(s.body->getArgument(i), entry->getArgument(i));
    for (Operation &op : s.body->without_terminator())
      if (s.forward.contains(&op))
        nb.clone(op, map);
    SmallVector<Value> outs = {map.lookup(s.out)};
    for (Value r : residuals)
      outs.push_back(map.lookup(r));
    func::ReturnOp::create(nb, s.grad.getLoc(), outs);
    symbols.insert(fn);
    return fn;
  }

  /// `@f_s<k>_bwd(args..., [x], residuals..., [dy]) -> (0, grads..., [dx])`:
  /// what the gradients need, reading the residuals.
  func::FuncOp buildBackward(StageSplit &s, ArrayRef<Value> residuals,
                             SymbolTable &symbols, func::FuncOp after) {
    OpBuilder b(s.grad);
    b.setInsertionPointAfter(after);
    SmallVector<Type> args;
    for (unsigned i = 0; i < s.numFwdArgs; ++i)
      args.push_back(s.body->getArgument(i).getType());
    for (Value r : residuals)
      args.push_back(r.getType());
    if (s.hasDy)
      args.push_back(s.body->getArguments().back().getType());
    auto fn = func::FuncOp::create(
        b, s.grad.getLoc(),
        (s.grad.getSymName().drop_back(StringRef("_grad").size()) + "_bwd")
            .str(),
        b.getFunctionType(args, s.grad.getResultTypes()));
    if (!s.grad.getSymName().ends_with("_grad"))
      fn.setSymName((s.grad.getSymName() + "_bwd").str());
    copyFunctionAttrs(s.grad, fn);
    unsigned nRes = residuals.size();
    for (unsigned i = 0; i < s.numFwdArgs; ++i)
      fn.setArgAttrs(i, s.grad.getArgAttrDict(i));
    for (auto [j, r] : llvm::enumerate(residuals))
      if (Attribute sh = boundarySharding(s.grad, r))
        fn.setArgAttr(s.numFwdArgs + j, ParDialect::kShardingAttrName, sh);
    if (s.hasDy)
      fn.setArgAttrs(s.numFwdArgs + nRes,
                     s.grad.getArgAttrDict(s.numFwdArgs));
    for (unsigned i = 0; i < s.grad.getNumResults(); ++i)
      fn.setResultAttrs(i, s.grad.getResultAttrDict(i));
    Block *entry = fn.addEntryBlock();
    OpBuilder nb = OpBuilder::atBlockBegin(entry);
    IRMapping map;
    for (unsigned i = 0; i < s.numFwdArgs; ++i)
      map.map(s.body->getArgument(i), entry->getArgument(i));
    for (auto [j, r] : llvm::enumerate(residuals))
      map.map(r, entry->getArgument(s.numFwdArgs + j));
    if (s.hasDy)
      map.map(s.body->getArguments().back(),
              entry->getArgument(s.numFwdArgs + nRes));
    for (Operation &op : s.body->without_terminator())
      if (s.backward.contains(&op))
        nb.clone(op, map);
    // Result 0 (the scalar the backward differentiates, which B's caller
    // does not read): a zero of its type.
    Type scalarType = s.ret.getOperand(0).getType();
    auto zero = arith::ConstantOp::create(
        nb, s.grad.getLoc(), cast<TypedAttr>(nb.getZeroAttr(scalarType)));
    SmallVector<Value> outs = {zero};
    for (Value v : s.ret.getOperands().drop_front())
      outs.push_back(map.lookupOrDefault(v));
    func::ReturnOp::create(nb, s.grad.getLoc(), outs);
    symbols.insert(fn);
    return fn;
  }
};

} // namespace
