//===- Recompute.cpp - par-recompute --------------------------------------===//
//
// Activation recomputation on par-autodiff's gradient functions.
//
// par-autodiff appends the backward to a copy of the forward, and the
// backward's adjoints read forward values directly: every forward value the
// backward reads is saved, alive from the forward until its last backward
// use. This pass trades arithmetic for that memory, as Megatron's and
// PyTorch's activation checkpointing do, but on the IR:
//
//  * ForwardGraph: the forward half of a gradient function (its ops up to
//    the one computing the returned loss), each op's inputs (operands and
//    values its regions read from above), and which values are activations
//    (depend on a data argument: recomputing what only depends on
//    parameters and constants would save nothing).
//  * findStructure: attention cores and layers, from the dataflow alone, so
//    that a generated GPT and a flat program imported from PyTorch are
//    treated alike (no names, no layer markers in the IR).
//  * The policy picks the forward ops whose values are not saved.
//  * Recomputer: every backward use of such a value reads a clone of its
//    forward computation instead, placed right before the first backward op
//    that needs it, starting from saved values passed through
//    par.recompute_barrier. Without the barrier, CSE would see the clone
//    and the forward op as one computation and fold them back, and the
//    forward value would stay alive after all.
//
// The clones are the forward's ops on the forward's values, so losses and
// gradients are bit for bit those without recomputation; the barrier's
// sharding rule is the identity, so the clones partition as the forward
// does.
//
//===----------------------------------------------------------------------===//

#include "par/Training/Passes.h"
#include "par/Dialect/Par/Analysis/OpCost.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

#define DEBUG_TYPE "par-recompute"

namespace mlir::par {
#define GEN_PASS_DEF_RECOMPUTE
#include "par/Training/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

//===----------------------------------------------------------------------===//
// The forward of a gradient function
//===----------------------------------------------------------------------===//

class ForwardGraph {
public:
  /// `isParam[i]`: argument i is a parameter (the forward function's
  /// par.param; the gradient function's arguments are the same).
  ForwardGraph(func::FuncOp grad, ArrayRef<bool> isParam);

  /// The op computing the returned loss, the last of the forward (null when
  /// the loss is an argument: no forward).
  Operation *getLossOp() const { return lossOp; }
  ArrayRef<Operation *> getOps() const { return ops; }
  bool contains(Operation *op) const { return position.count(op); }
  unsigned positionOf(Operation *op) const { return position.lookup(op); }
  ArrayRef<Value> inputsOf(Operation *op) const {
    return inputs.find(op)->second;
  }
  /// The forward ops that read `v`.
  ArrayRef<Operation *> readersOf(Value v) const {
    auto it = readers.find(v);
    return it == readers.end() ? ArrayRef<Operation *>() : it->second;
  }
  bool isActivation(Value v) const { return activations.contains(v); }
  /// The forward op defining `v`, or null (an argument, a backward value).
  Operation *forwardDef(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && contains(def) ? def : nullptr;
  }

  /// Ops that read `v`, directly or not (not including its definition).
  DenseSet<Operation *> dependents(Value v) const;
  /// Ops `v` depends on, its definition included.
  DenseSet<Operation *> dependencies(Value v) const;
  /// Whether `v` is computed from `from` (directly or not).
  bool dependsOn(Value v, Value from) const {
    return llvm::any_of(dependencies(v), [&](Operation *op) {
      return llvm::is_contained(inputsOf(op), from);
    });
  }

private:
  Operation *lossOp = nullptr;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> position;
  DenseMap<Operation *, SmallVector<Value>> inputs;
  DenseMap<Value, SmallVector<Operation *>> readers;
  DenseSet<Value> activations;
};

ForwardGraph::ForwardGraph(func::FuncOp grad, ArrayRef<bool> isParam) {
  Block &body = grad.getBody().front();
  Value loss = body.getTerminator()->getOperand(0);
  lossOp = loss.getDefiningOp();
  if (!lossOp)
    return;
  for (BlockArgument arg : body.getArguments())
    if (!isParam[arg.getArgNumber()])
      activations.insert(arg);
  for (Operation &op : body) {
    position[&op] = ops.size();
    ops.push_back(&op);
    SmallVector<Value> &in = inputs[&op];
    in.append(op.operand_begin(), op.operand_end());
    SetVector<Value> captured;
    getUsedValuesDefinedAbove(op.getRegions(), captured);
    in.append(captured.begin(), captured.end());
    bool active = false;
    for (Value v : in) {
      readers[v].push_back(&op);
      active |= activations.contains(v);
    }
    if (active)
      activations.insert(op.result_begin(), op.result_end());
    if (&op == lossOp)
      break;
  }
}

DenseSet<Operation *> ForwardGraph::dependents(Value v) const {
  DenseSet<Operation *> seen;
  SmallVector<Value> work{v};
  while (!work.empty())
    for (Operation *user : readersOf(work.pop_back_val()))
      if (seen.insert(user).second)
        work.append(user->result_begin(), user->result_end());
  return seen;
}

DenseSet<Operation *> ForwardGraph::dependencies(Value v) const {
  DenseSet<Operation *> seen;
  SmallVector<Value> work{v};
  while (!work.empty())
    if (Operation *def = forwardDef(work.pop_back_val()))
      if (seen.insert(def).second)
        llvm::append_range(work, inputsOf(def));
  return seen;
}

//===----------------------------------------------------------------------===//
// Structure: attention cores and layers
//===----------------------------------------------------------------------===//

/// From an activation x activation contraction (QK^T) to the next one that
/// consumes it (the attention-weighted sum), with what lies between.
struct AttentionCore {
  Operation *context;                // the attention-weighted sum
  SmallVector<Operation *> interior; // QK^T up to the sum, sum excluded
};

/// A transformer block: the ops from its input (a residual stream value)
/// to its output (the next block's input, or the last residual sum).
struct Layer {
  Value input, output;
  DenseSet<Operation *> ops; // input's definition excluded, output's not
};

struct Structure {
  SmallVector<AttentionCore> cores;
  SmallVector<Layer> layers;
  SmallVector<int64_t> coreLayer; // per core: its layer's index (or -1)
};

bool isContraction(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && linalg::isaContractionOpInterface(generic);
}

bool isActivationContraction(Operation *op, const ForwardGraph &graph) {
  return isContraction(op) && llvm::all_of(op->getOperands().take_front(2),
                                           [&](Value v) {
                                             return graph.isActivation(v);
                                           });
}

/// The attention core ending at `context`, if an activation x activation
/// contraction feeds it without another contraction in between.
std::optional<AttentionCore> findCore(Operation *context,
                                      const ForwardGraph &graph) {
  // Everything `context` reads back to the nearest contractions.
  DenseSet<Operation *> upstream;
  SmallVector<Operation *> scores;
  SmallVector<Value> work(context->getOperands().take_front(2));
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = graph.forwardDef(v);
    if (!def || !graph.isActivation(v) || !upstream.insert(def).second)
      continue;
    if (isContraction(def)) {
      if (isActivationContraction(def, graph))
        scores.push_back(def);
      continue;
    }
    llvm::append_range(work, graph.inputsOf(def));
  }
  if (scores.empty())
    return std::nullopt;
  // Of those, the ones on a path from the scores to the context.
  SetVector<Operation *> interior(scores.begin(), scores.end());
  for (unsigned i = 0; i < interior.size(); ++i)
    for (Value r : interior[i]->getResults())
      for (Operation *user : graph.readersOf(r))
        if (upstream.contains(user))
          interior.insert(user);
  AttentionCore core{context, interior.takeVector()};
  llvm::sort(core.interior, [&](Operation *a, Operation *b) {
    return graph.positionOf(a) < graph.positionOf(b);
  });
  return core;
}

/// Strips unary casts (mixed precision's extf/truncf) off a body value.
Value skipCasts(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<arith::ExtFOp, arith::TruncFOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// For `x + f(x)` (an elementwise sum of two activations, one depending on
/// the other): x, the residual stream's value entering the segment.
Value getResidualInput(Operation *op, const ForwardGraph &graph) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInputs() != 2 ||
      generic.getNumDpsInits() != 1 || generic->getNumResults() != 1 ||
      generic.getNumReductionLoops() != 0 ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Block *body = generic.getBody();
  auto add = skipCasts(body->getTerminator()->getOperand(0))
                 .getDefiningOp<arith::AddFOp>();
  if (!add)
    return {};
  Value a = skipCasts(add.getLhs()), b = skipCasts(add.getRhs());
  if (!((a == body->getArgument(0) && b == body->getArgument(1)) ||
        (a == body->getArgument(1) && b == body->getArgument(0))))
    return {};
  Value x = generic.getDpsInputs()[0], y = generic.getDpsInputs()[1];
  if (!graph.isActivation(x) || !graph.isActivation(y))
    return {};
  if (graph.dependsOn(y, x))
    return x;
  if (graph.dependsOn(x, y))
    return y;
  return {};
}

/// Whether `next` is `prev`, or computed from it without a contraction
/// (post-LN blocks normalise the sum before the next segment).
bool continuesStream(Value prev, Value next, const ForwardGraph &graph) {
  DenseSet<Operation *> seen;
  SmallVector<Value> work{next};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (v == prev)
      return true;
    Operation *def = graph.forwardDef(v);
    if (def && !isContraction(def) && seen.insert(def).second)
      llvm::append_range(work, graph.inputsOf(def));
  }
  return false;
}

/// The residual stream: the longest chain of residual sums, each segment's
/// input continuing the previous segment's sum. Returns (input, sum) per
/// segment.
SmallVector<std::pair<Value, Value>>
findResidualSegments(const ForwardGraph &graph) {
  SmallVector<SmallVector<std::pair<Value, Value>>> chains;
  for (Operation *op : graph.getOps()) {
    Value input = getResidualInput(op, graph);
    if (!input)
      continue;
    std::pair<Value, Value> segment{input, op->getResult(0)};
    auto chain = llvm::find_if(chains, [&](auto &c) {
      return continuesStream(c.back().second, input, graph);
    });
    if (chain == chains.end())
      chains.push_back({segment});
    else
      chain->push_back(segment);
  }
  SmallVector<std::pair<Value, Value>> longest;
  for (auto &c : chains)
    if (c.size() > longest.size())
      longest = c;
  return longest;
}

/// Layers: a new one starts at each residual segment holding an attention
/// core (a pre-LN block is an attention and an MLP segment); without
/// attention, at every segment.
SmallVector<Layer> findLayers(const ForwardGraph &graph,
                              ArrayRef<AttentionCore> cores) {
  SmallVector<std::pair<Value, Value>> segments = findResidualSegments(graph);
  SmallVector<bool> attention;
  for (auto [input, sum] : segments) {
    DenseSet<Operation *> before = graph.dependencies(sum);
    DenseSet<Operation *> after = graph.dependents(input);
    attention.push_back(llvm::any_of(cores, [&](const AttentionCore &core) {
      return before.contains(core.context) && after.contains(core.context);
    }));
  }
  bool anyAttention = llvm::is_contained(attention, true);
  // Segments before the first attention segment (none in a GPT) are layers
  // of their own.
  SmallVector<unsigned> starts;
  bool seenAttention = false;
  for (unsigned i = 0; i < segments.size(); ++i) {
    seenAttention |= attention[i];
    if (!anyAttention || attention[i] || !seenAttention)
      starts.push_back(i);
  }
  SmallVector<Layer> layers;
  for (auto [k, start] : llvm::enumerate(starts)) {
    Layer layer;
    layer.input = segments[start].first;
    layer.output = k + 1 < starts.size() ? segments[starts[k + 1]].first
                                         : segments.back().second;
    DenseSet<Operation *> after = graph.dependents(layer.input);
    for (Operation *op : graph.dependencies(layer.output))
      if (after.contains(op))
        layer.ops.insert(op);
    layers.push_back(std::move(layer));
  }
  return layers;
}

Structure findStructure(const ForwardGraph &graph) {
  Structure s;
  for (Operation *op : graph.getOps())
    if (isActivationContraction(op, graph))
      if (std::optional<AttentionCore> core = findCore(op, graph))
        s.cores.push_back(std::move(*core));
  s.layers = findLayers(graph, s.cores);
  for (const AttentionCore &core : s.cores) {
    auto layer = llvm::find_if(
        s.layers, [&](const Layer &l) { return l.ops.contains(core.context); });
    s.coreLayer.push_back(layer == s.layers.end() ? -1
                                                  : layer - s.layers.begin());
  }
  return s;
}

//===----------------------------------------------------------------------===//
// The policy
//===----------------------------------------------------------------------===//

/// The layers option: indices and inclusive ranges; empty: every layer.
struct LayerSelection {
  SmallVector<std::pair<int64_t, int64_t>> ranges;

  /// Parses "N" and "A-B" entries; failure names the bad entry in `error`.
  static FailureOr<LayerSelection> parse(ArrayRef<std::string> entries,
                                         std::string &error) {
    LayerSelection sel;
    for (StringRef entry : entries) {
      auto [lo, hi] = entry.trim().split('-');
      int64_t a, b;
      if (lo.trim().getAsInteger(10, a) || a < 0 ||
          (hi.empty() ? (b = a, false) : hi.trim().getAsInteger(10, b)) ||
          b < a) {
        error = ("bad recompute layers entry '" + entry +
                 "' (expected a layer index N or a range A-B, A <= B)")
                    .str();
        return failure();
      }
      sel.ranges.push_back({a, b});
    }
    return sel;
  }
  bool contains(int64_t layer) const {
    return ranges.empty() || llvm::any_of(ranges, [&](auto r) {
             return r.first <= layer && layer <= r.second;
           });
  }
  /// The largest index named (-1: none).
  int64_t maxIndex() const {
    int64_t m = -1;
    for (auto [a, b] : ranges)
      m = std::max(m, b);
    return m;
  }
};

/// The forward ops whose values the backward recomputes instead of reading
/// saved ones. Only activations computed without side effects qualify.
DenseSet<Operation *> chooseRecomputed(const Structure &s,
                                       const ForwardGraph &graph,
                                       StringRef policy,
                                       const LayerSelection &layers) {
  DenseSet<Operation *> chosen;
  auto add = [&](Operation *op) {
    if (op->getNumResults() && graph.isActivation(op->getResult(0)) &&
        isMemoryEffectFree(op))
      chosen.insert(op);
  };
  if (policy == "full") {
    for (auto [i, layer] : llvm::enumerate(s.layers)) {
      if (!layers.contains(i))
        continue;
      // The output stays saved: it is the next layer's input.
      Operation *output = layer.output.getDefiningOp();
      for (Operation *op : layer.ops)
        if (op != output)
          add(op);
    }
    return chosen;
  }
  // selective: the cores' interiors; a core outside every layer is
  // numbered by its position among the cores.
  for (auto [i, core] : llvm::enumerate(s.cores)) {
    int64_t index = s.layers.empty() ? i : s.coreLayer[i];
    if (index >= 0 && layers.contains(index))
      for (Operation *op : core.interior)
        add(op);
  }
  return chosen;
}

//===----------------------------------------------------------------------===//
// The rewrite
//===----------------------------------------------------------------------===//

class Recomputer {
public:
  Recomputer(const ForwardGraph &graph, const DenseSet<Operation *> &chosen)
      : graph(graph), chosen(chosen) {}

  /// Every use by an op after the forward of a value of a chosen op reads
  /// its recomputation instead.
  void run(Block &body);

  unsigned numRecomputed = 0; // ops cloned (inits not counted)
  double extraFlops = 0;      // their FLOPs
  SetVector<Value> released;  // forward values the backward no longer reads

private:
  Value materialize(Value v, Operation *before);
  Value inputFor(Value v, Operation *before);
  Value barrier(Value v, Operation *before);

  const ForwardGraph &graph;
  const DenseSet<Operation *> &chosen;
  DenseMap<Value, Value> recomputed, barriers;
};

void Recomputer::run(Block &body) {
  SmallVector<Operation *> backward;
  for (Operation *op = graph.getLossOp()->getNextNode();
       op && op != body.getTerminator(); op = op->getNextNode())
    backward.push_back(op);
  for (Operation *op : backward) {
    // Nested uses too: an adjoint's region may read a forward value.
    op->walk([&](Operation *user) {
      for (OpOperand &use : user->getOpOperands()) {
        Operation *def = use.get().getDefiningOp();
        if (!def || !chosen.contains(def))
          continue;
        released.insert(use.get());
        use.set(materialize(use.get(), op));
      }
    });
  }
}

Value Recomputer::materialize(Value v, Operation *before) {
  if (Value r = recomputed.lookup(v))
    return r;
  Operation *op = v.getDefiningOp();
  IRMapping map;
  for (Value in : graph.inputsOf(op))
    if (!map.contains(in))
      map.map(in, inputFor(in, before));
  OpBuilder b(before);
  Operation *clone = b.clone(*op, map);
  for (auto [r, c] : llvm::zip(op->getResults(), clone->getResults()))
    recomputed[r] = c;
  ++numRecomputed;
  extraFlops += getOpFlops(op);
  return recomputed.lookup(v);
}

Value Recomputer::inputFor(Value v, Operation *before) {
  Operation *def = v.getDefiningOp();
  if (def && chosen.contains(def))
    return materialize(v, before);
  if (graph.isActivation(v))
    return barrier(v, before);
  // A fresh init per clone (as par-split-constants gives every use its
  // own): the clone writing into the forward's would make bufferization
  // keep the forward's copy alive until the backward.
  OpBuilder b(before);
  if (isa_and_nonnull<tensor::EmptyOp>(def))
    return b.clone(*def)->getResult(0);
  if (auto fill = dyn_cast_or_null<linalg::FillOp>(def)) {
    IRMapping map;
    Value init = fill.getDpsInits()[0];
    if (isa_and_nonnull<tensor::EmptyOp>(init.getDefiningOp()))
      map.map(init, b.clone(*init.getDefiningOp())->getResult(0));
    return b.clone(*fill, map)->getResult(0);
  }
  return v;
}

Value Recomputer::barrier(Value v, Operation *before) {
  Value &b = barriers[v];
  if (!b) {
    OpBuilder builder(before);
    b = RecomputeBarrierOp::create(builder, v.getLoc(), v.getType(), v);
  }
  return b;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct RecomputePass : public mlir::par::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (policy != "none" && policy != "selective" && policy != "full") {
      module.emitError() << "unknown recompute policy '" << policy
                         << "' (expected none, selective or full)";
      return signalPassFailure();
    }
    std::string error;
    FailureOr<LayerSelection> sel = LayerSelection::parse(layers, error);
    if (failed(sel)) {
      module.emitError() << error;
      return signalPassFailure();
    }
    if (policy == "none")
      return;
    int64_t mostLayers = 0;
    for (auto fn : module.getOps<func::FuncOp>()) {
      auto link = fn->getAttrOfType<FlatSymbolRefAttr>(
          ParDialect::kGradAttrName);
      if (!link || fn.isExternal())
        continue;
      auto grad = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(fn, link);
      if (!grad || grad.isExternal() || !grad.getBody().hasOneBlock())
        continue;
      mostLayers = std::max(mostLayers, recompute(fn, grad, *sel));
    }
    if (sel->maxIndex() >= mostLayers) {
      module.emitError() << "recompute layer " << sel->maxIndex()
                         << " does not exist: the gradient functions have "
                         << mostLayers << " layer(s), numbered from 0";
      return signalPassFailure();
    }
  }

  /// Recomputes in `grad` (the gradient of `fn`); returns its layer count.
  int64_t recompute(func::FuncOp fn, func::FuncOp grad,
                    const LayerSelection &sel) {
    // A pipeline stage marks the activations it receives (the arguments
    // after its par.stage_args) par.param too, for their gradients: they
    // are activations, not parameters.
    auto stageArgs =
        fn->getAttrOfType<DenseI64ArrayAttr>(ParDialect::kStageArgsAttrName);
    SmallVector<bool> isParam;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      isParam.push_back(fn.getArgAttr(i, ParDialect::kParamAttrName) &&
                        (!stageArgs || i < stageArgs.size()));
    ForwardGraph graph(grad, isParam);
    if (!graph.getLossOp())
      return 0;
    Structure s = findStructure(graph);
    // Before the rewrite: the FLOPs of the forward and of forward + backward.
    double forwardFlops = 0, gradFlops = 0;
    for (Operation &op : grad.getBody().front()) {
      double f = getOpFlops(&op);
      gradFlops += f;
      if (graph.contains(&op))
        forwardFlops += f;
    }
    DenseSet<Operation *> chosen = chooseRecomputed(s, graph, policy, sel);
    if (chosen.empty())
      grad.emitWarning() << "recompute=" << policy << " found nothing to "
                         << "recompute (" << s.layers.size() << " layers, "
                         << s.cores.size() << " attention cores)";
    Recomputer r(graph, chosen);
    r.run(grad.getBody().front());
    if (report)
      printReport(grad, s, r, forwardFlops, gradFlops);
    return s.layers.empty() && policy == "selective" ? s.cores.size()
                                                      : s.layers.size();
  }

  void printReport(func::FuncOp grad, const Structure &s, const Recomputer &r,
                   double forwardFlops, double gradFlops) {
    llvm::raw_ostream &os = llvm::outs();
    int64_t bytes = 0;
    for (Value v : r.released)
      bytes += getTensorBytes(v.getType());
    os << "par-recompute: @" << grad.getName() << " recompute=" << policy
       << ": " << s.layers.size() << " layers, " << s.cores.size()
       << " attention cores\n";
    for (auto [i, layer] : llvm::enumerate(s.layers)) {
      int64_t cores = llvm::count(s.coreLayer, (int64_t)i);
      os << "  layer " << i << ": " << layer.ops.size() << " ops, "
         << cores << " attention core(s), input " << layer.input.getType()
         << "\n";
    }
    os << "  recomputed: " << r.numRecomputed << " ops; the backward no "
       << "longer reads " << r.released.size() << " forward values ("
       << bytes << " bytes unsharded)\n";
    // A step's model FLOPs count the backward as two forwards (Korthikanti
    // et al.'s 3 forwards a step; full recomputation adds about one).
    // par's own backward counts more: its adjoint generics recompute the
    // forward bodies.
    auto pct = [](double a, double b) { return b > 0 ? 100.0 * a / b : 0.0; };
    os << "  extra forward FLOPs: " << llvm::format("%.4g", r.extraFlops)
       << " = " << llvm::format("%.1f", pct(r.extraFlops, forwardFlops))
       << "% of the forward's " << llvm::format("%.4g", forwardFlops)
       << ": +" << llvm::format("%.1f", pct(r.extraFlops, 3 * forwardFlops))
       << "% of a step (3 forwards), +"
       << llvm::format("%.1f", pct(r.extraFlops, gradFlops))
       << "% of the gradient function's " << llvm::format("%.4g", gradFlops)
       << "\n";
  }
};

} // namespace
