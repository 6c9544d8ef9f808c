//===- MemoryPlan.cpp - par-memory-plan -----------------------------------===//
//
// Predicts each entry point's peak memory per device from its bufferized
// body (see Passes.td and docs/RationaleMemory.md): the buffers are the
// program's, so the prediction is a walk, not a model.
//
//===----------------------------------------------------------------------===//

#include "par/Codegen/CPU/Buffers.h"
#include "par/Codegen/CPU/Passes.h"
#include "par/Manifest/Schema.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <array>
#include <map>
#include <set>

#define DEBUG_TYPE "par-memory-plan"

namespace mlir::par {
#define GEN_PASS_DEF_MEMORYPLAN
#include "par/Codegen/CPU/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;
namespace key = ::par::manifest::key;

namespace {

/// What a byte is for.
enum Kind {
  Parameters,
  Gradients,
  OptimizerState,
  Activations,
  Temporaries,
  Communication,
  State, // loss scaling, error feedback
  Data,
  NumKinds
};

constexpr const char *kKindNames[NumKinds] = {
    "parameters",  "gradients",     "optimizer_state", "activations",
    "temporaries", "communication", "state",           "data"};

using Parts = std::array<int64_t, NumKinds>;

/// The manifest's view of one function: the kind of each input and output.
struct Roles {
  SmallVector<Kind> inputs, outputs;
  /// Results written into their arguments' buffers (par.donated): the
  /// runner holds no buffer of their own.
  llvm::DenseSet<int64_t> donated;
};

/// A function's buffers over one call: what its body allocates beyond its
/// arguments.
struct BodyPlan {
  int64_t peak = 0; // the most the body holds at once
  Parts atPeak{};   // what it holds then, by kind
  /// Per result: the bytes of a fresh buffer the caller receives (0 for an
  /// argument or a view of one) and its kind.
  SmallVector<std::pair<int64_t, Kind>> returned;
  /// The allocated types by size, for naming an allocation.
  std::map<int64_t, std::set<std::string>> types;
  /// What a grad function's forward keeps for its backward (the
  /// activations live where the local loss is computed); a caller: the
  /// most of its callees'.
  int64_t savedActivations = 0;
  bool complete = true; // false: a buffer without a static size
};

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Whether `op` is a collective on buffers that writes `v`.
bool isCollectiveOutput(Operation *op, Value v) {
  if (!op->getName().getStringRef().starts_with("par.buffer_"))
    return false;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffectsOnValue(v, list);
  return llvm::any_of(list, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Write>(e.getEffect());
  });
}

/// The buffers a collective on buffers reads and writes, in order (for a
/// bucket: member k's input and output); empty for other ops.
std::pair<SmallVector<Value>, SmallVector<Value>> collectiveOperands(
    Operation *op) {
  std::pair<SmallVector<Value>, SmallVector<Value>> io;
  if (!op->getName().getStringRef().starts_with("par.buffer_"))
    return io;
  for (Value v : op->getOperands())
    if (isa<BaseMemRefType>(v.getType()))
      (isCollectiveOutput(op, v) ? io.second : io.first).push_back(v);
  return io;
}

/// Where a result's value is computed: its buffer, or, when a collective
/// writes that buffer, what the collective reads for it (the local
/// gradient before its data-parallel reduction, the local loss).
Value computedFrom(Value root) {
  for (Operation *user : root.getUsers()) {
    auto [ins, outs] = collectiveOperands(user);
    for (auto [k, out] : llvm::enumerate(outs))
      if (traceView(out) == root && k < ins.size())
        return traceView(ins[k]);
  }
  return root;
}

/// Walks function bodies in program order, as one straight line: a loop's
/// body counts once (its iterations free what they allocate), a call
/// holds its callee's peak on top of the caller's live buffers.
class Planner {
public:
  Planner(ModuleOp module, const llvm::StringMap<Roles> &roles,
          const llvm::StringSet<> &gradFunctions)
      : module(module), roles(roles), gradFunctions(gradFunctions) {}

  const BodyPlan &plan(func::FuncOp fn);

private:
  struct Buffer {
    int64_t bytes;
    Kind kind;
  };
  struct Frame {
    func::FuncOp fn;
    llvm::DenseMap<Value, Buffer> live;
    llvm::DenseMap<Value, Kind> resultKind; // root of a result -> its kind
    Value boundary; // the loss's allocation: the forward ends there
    int64_t total = 0;
    BodyPlan out;
  };

  void walk(Frame &f, Block &block);
  void allocate(Frame &f, Value root, int64_t bytes);
  void call(Frame &f, func::CallOp call);
  void free(Frame &f, Value buffer);
  void record(Frame &f, int64_t extra, const Parts &extraParts);
  Parts partsOf(const Frame &f) const;

  ModuleOp module;
  const llvm::StringMap<Roles> &roles;
  const llvm::StringSet<> &gradFunctions;
  llvm::DenseMap<Operation *, BodyPlan> done;
};

Parts Planner::partsOf(const Frame &f) const {
  Parts p{};
  for (auto &[v, b] : f.live)
    p[b.kind] += b.bytes;
  return p;
}

void Planner::record(Frame &f, int64_t extra, const Parts &extraParts) {
  if (f.total + extra <= f.out.peak)
    return;
  f.out.peak = f.total + extra;
  f.out.atPeak = partsOf(f);
  for (int k = 0; k < NumKinds; ++k)
    f.out.atPeak[k] += extraParts[k];
}

void Planner::allocate(Frame &f, Value root, int64_t bytes) {
  Kind kind = Temporaries;
  if (auto it = f.resultKind.find(root); it != f.resultKind.end())
    kind = it->second;
  else if (llvm::any_of(root.getUsers(), [&](Operation *u) {
             return isCollectiveOutput(u, root);
           }))
    kind = Communication;
  f.live[root] = {bytes, kind};
  f.total += bytes;
  f.out.types[bytes].insert(typeName(root.getType()));
  record(f, 0, {});
  // The forward ends at the loss: what it keeps for the backward is live.
  if (root == f.boundary) {
    int64_t saved = 0;
    for (auto &[v, b] : f.live)
      if (b.kind == Temporaries && v != root) {
        b.kind = Activations;
        saved += b.bytes;
      }
    f.out.savedActivations = std::max(f.out.savedActivations, saved);
  }
}

void Planner::free(Frame &f, Value buffer) {
  auto it = f.live.find(traceView(buffer));
  if (it == f.live.end())
    return; // an argument's, or freed already
  f.total -= it->second.bytes;
  f.live.erase(it);
}

void Planner::call(Frame &f, func::CallOp op) {
  auto callee = module.lookupSymbol<func::FuncOp>(op.getCallee());
  if (!callee || callee.isExternal())
    return;
  const BodyPlan &inner = plan(callee);
  f.out.complete &= inner.complete;
  f.out.savedActivations =
      std::max(f.out.savedActivations, inner.savedActivations);
  for (auto &[bytes, names] : inner.types)
    f.out.types[bytes].insert(names.begin(), names.end());
  record(f, inner.peak, inner.atPeak);
  // What it returns fresh is now the caller's.
  for (auto [r, ret] : llvm::zip(op.getResults(), inner.returned)) {
    if (ret.first <= 0)
      continue;
    f.live[r] = {ret.first, ret.second};
    f.total += ret.first;
  }
  record(f, 0, {});
}

/// What the lowering asks the allocator for (finalize-memref-to-llvm
/// use-aligned-alloc, lib/Pipelines/Pipelines.cpp): the bytes rounded up to
/// the alignment, the op's or else the element size's power of two, at
/// least 16.
static int64_t allocatedBytes(memref::AllocOp alloc, int64_t bytes) {
  uint64_t align = 16;
  if (std::optional<uint64_t> a = alloc.getAlignment()) {
    align = *a;
  } else {
    Type elt = alloc.getType().getElementType();
    uint64_t eltBytes =
        elt.isIntOrFloat() ? (elt.getIntOrFloatBitWidth() + 7) / 8 : 8;
    align = std::max<uint64_t>(16, llvm::PowerOf2Ceil(eltBytes));
  }
  return int64_t(llvm::alignTo(uint64_t(bytes), align));
}

void Planner::walk(Frame &f, Block &block) {
  for (Operation &op : block) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      int64_t bytes = staticBytes(alloc.getType());
      if (bytes < 0) {
        f.out.complete = false;
        continue;
      }
      allocate(f, alloc.getResult(), allocatedBytes(alloc, bytes));
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      free(f, dealloc.getMemref());
    } else if (auto c = dyn_cast<func::CallOp>(op)) {
      call(f, c);
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (op.getParentOp() != f.fn)
        continue;
      for (Value v : ret.getOperands()) {
        auto it = f.live.find(traceView(v));
        if (it == f.live.end())
          f.out.returned.push_back({0, Temporaries});
        else
          f.out.returned.push_back({it->second.bytes, it->second.kind});
      }
    }
    for (Region &r : op.getRegions())
      for (Block &b : r)
        walk(f, b);
  }
}

const BodyPlan &Planner::plan(func::FuncOp fn) {
  if (auto it = done.find(fn); it != done.end())
    return it->second;
  done[fn] = BodyPlan(); // a recursive call counts nothing twice
  Frame f;
  f.fn = fn;
  if (!fn.isExternal()) {
    auto it = roles.find(fn.getSymName());
    auto ret = cast<func::ReturnOp>(fn.getBody().back().getTerminator());
    for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
      Kind kind = Temporaries;
      if (it != roles.end() && k < it->second.outputs.size())
        kind = it->second.outputs[k];
      else if (gradFunctions.contains(fn.getSymName()) && k > 0)
        kind = Gradients;
      Value root = traceView(v);
      f.resultKind.try_emplace(root, kind);
      // A reduced gradient's local one is a gradient too.
      if (kind == Gradients)
        f.resultKind.try_emplace(computedFrom(root), kind);
    }
    // The forward ends where the local loss is computed.
    if (gradFunctions.contains(fn.getSymName()) && ret.getNumOperands() > 0)
      f.boundary = computedFrom(traceView(ret.getOperand(0)));
    walk(f, fn.getBody().front());
  }
  BodyPlan &out = done[fn];
  out = std::move(f.out);
  return out;
}

//===----------------------------------------------------------------------===//
// The manifest's roles
//===----------------------------------------------------------------------===//

Kind inputKind(const llvm::json::Object &t, bool fedBack, bool toGrad,
               bool hasGradCall) {
  if (auto role = t.getString(key::kRole)) {
    if (*role == key::kRoleTokens || *role == key::kRoleTargets)
      return Data;
    return State;
  }
  if (fedBack) {
    if (hasGradCall)
      return toGrad ? Parameters : OptimizerState;
    return Parameters;
  }
  // Outside a step: a float input with an initialiser or a frontend name
  // (a module's weight) is a parameter.
  auto dtype = t.getString(key::kDtype);
  bool isFloat = dtype && (dtype->starts_with("f") || dtype->starts_with("bf"));
  return isFloat && (t.get(key::kInit) || t.get(key::kTensorName))
             ? Parameters
             : Data;
}

/// The arguments of `fn` it passes to its grad function's call.
llvm::DenseSet<unsigned> passedToGrad(func::FuncOp fn, StringRef grad) {
  llvm::DenseSet<unsigned> out;
  fn.walk([&](func::CallOp c) {
    if (c.getCallee() != grad)
      return;
    for (Value v : c.getOperands())
      if (auto arg = dyn_cast<BlockArgument>(v))
        if (arg.getOwner() == &fn.getBody().front())
          out.insert(arg.getArgNumber());
  });
  return out;
}

Roles rolesOf(func::FuncOp fn, const llvm::json::Object &entry,
              bool isGradFunction) {
  Roles r;
  llvm::DenseMap<int64_t, int64_t> argOfResult;
  llvm::DenseSet<int64_t> fedBack;
  if (const llvm::json::Array *fb = entry.getArray(key::kFeedback))
    for (const llvm::json::Value &pair : *fb)
      if (const llvm::json::Array *p = pair.getAsArray(); p && p->size() == 2) {
        int64_t res = (*p)[0].getAsInteger().value_or(-1);
        int64_t arg = (*p)[1].getAsInteger().value_or(-1);
        argOfResult[res] = arg;
        fedBack.insert(arg);
      }
  if (const llvm::json::Array *d = entry.getArray(key::kDonated))
    for (const llvm::json::Value &pair : *d)
      if (const llvm::json::Array *p = pair.getAsArray(); p && p->size() == 2)
        r.donated.insert((*p)[0].getAsInteger().value_or(-1));
  StringRef grad;
  if (const llvm::json::Object *links = entry.getObject(key::kRoles))
    if (auto g = links->getString(key::kRoleGrad))
      grad = *g;
  llvm::DenseSet<unsigned> toGrad;
  if (!grad.empty())
    toGrad = passedToGrad(fn, grad);
  if (const llvm::json::Array *ins = entry.getArray(key::kInputs))
    for (auto [i, t] : llvm::enumerate(*ins)) {
      const llvm::json::Object *o = t.getAsObject();
      r.inputs.push_back(o ? inputKind(*o, fedBack.contains(i),
                                       toGrad.contains(i), !grad.empty())
                           : Data);
    }
  if (const llvm::json::Array *outs = entry.getArray(key::kOutputs))
    for (size_t k = 0; k < outs->size(); ++k) {
      auto it = argOfResult.find(k);
      if (it != argOfResult.end() && it->second >= 0 &&
          size_t(it->second) < r.inputs.size())
        r.outputs.push_back(r.inputs[it->second]);
      else
        r.outputs.push_back(isGradFunction && k > 0 ? Gradients : Temporaries);
    }
  return r;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

std::string mib(int64_t bytes) {
  return llvm::formatv("{0:f2} MiB", double(bytes) / (1024.0 * 1024.0)).str();
}

struct EntryPlan {
  int64_t arguments = 0, results = 0, peak = 0;
  Parts atPeak{};
};

struct MemoryPlanPass
    : public mlir::par::impl::MemoryPlanBase<MemoryPlanPass> {
  using MemoryPlanBase::MemoryPlanBase;

  void runOnOperation() override;
  EntryPlan entryPlan(func::FuncOp fn, const Roles *r, const BodyPlan &body);
  void warnOverLimit(func::FuncOp fn, const EntryPlan &e);
  void print(func::FuncOp fn, const EntryPlan &e, const BodyPlan &body);
};

EntryPlan MemoryPlanPass::entryPlan(func::FuncOp fn, const Roles *r,
                                    const BodyPlan &body) {
  // The runner keeps every argument and a buffer for every result (the
  // session's two buffer sets) while the body runs, but for the donated
  // results, which the body writes into their arguments.
  EntryPlan e;
  Parts held{};
  for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes())) {
    int64_t b = std::max<int64_t>(0, staticBytes(t));
    e.arguments += b;
    held[r && i < r->inputs.size() ? r->inputs[i] : Data] += b;
  }
  for (auto [k, t] : llvm::enumerate(fn.getResultTypes())) {
    if (r && r->donated.contains(k))
      continue;
    int64_t b = std::max<int64_t>(0, staticBytes(t));
    e.results += b;
    held[r && k < r->outputs.size() ? r->outputs[k] : Temporaries] += b;
  }
  e.peak = e.arguments + e.results + body.peak;
  for (int k = 0; k < NumKinds; ++k)
    e.atPeak[k] = held[k] + body.atPeak[k];
  return e;
}

void MemoryPlanPass::warnOverLimit(func::FuncOp fn, const EntryPlan &e) {
  if (limit <= 0 || e.peak <= limit)
    return;
  // The options that shrink the parts that dominate.
  int64_t state = e.atPeak[Parameters] + e.atPeak[Gradients] +
                  e.atPeak[OptimizerState];
  int64_t acts = e.atPeak[Activations];
  std::string advice;
  if (state >= acts)
    advice = "zero=3 (parameters, gradients and optimizer state split over "
             "the data-parallel ranks), then recompute=selective|full and "
             "sequence-parallel=true (activations)";
  else
    advice = "recompute=selective|full and sequence-parallel=true "
             "(activations), more micro-batches or pipeline stages, then "
             "zero=3 (parameters, gradients and optimizer state)";
  fn.emitWarning() << "the memory plan of '" << fn.getSymName()
                   << "' needs " << mib(e.peak) << " per device, over the "
                   << "memory-limit of " << mib(limit) << " (parameters "
                   << mib(e.atPeak[Parameters]) << ", gradients "
                   << mib(e.atPeak[Gradients]) << ", optimizer state "
                   << mib(e.atPeak[OptimizerState]) << ", activations "
                   << mib(acts) << "); options that reduce it: " << advice;
}

void MemoryPlanPass::print(func::FuncOp fn, const EntryPlan &e,
                           const BodyPlan &body) {
  llvm::outs() << "par-memory-plan: @" << fn.getSymName() << ": peak "
               << mib(e.peak) << " per device (" << e.peak
               << " bytes; arguments " << mib(e.arguments)
               << ", results " << mib(e.results) << ", program "
               << mib(body.peak) << ")";
  if (!body.complete)
    llvm::outs() << " (dynamic buffers not counted)";
  if (body.savedActivations)
    llvm::outs() << "\n  saved for the backward: "
                 << mib(body.savedActivations) << " of activations";
  llvm::outs() << "\n  at the peak:";
  for (int k = 0; k < NumKinds; ++k)
    if (e.atPeak[k])
      llvm::outs() << " " << kKindNames[k] << " " << mib(e.atPeak[k]);
  llvm::outs() << "\n";
}

llvm::json::Object toJson(const EntryPlan &e, const BodyPlan &body) {
  llvm::json::Object m;
  m[key::kMemoryPeak] = e.peak;
  m[key::kMemoryArguments] = e.arguments;
  m[key::kMemoryResults] = e.results;
  m[key::kMemoryProgramPeak] = body.peak;
  m[key::kMemorySavedActivations] = body.savedActivations;
  llvm::json::Object parts;
  for (int k = 0; k < NumKinds; ++k)
    parts[kKindNames[k]] = e.atPeak[k];
  m[key::kMemoryAtPeak] = std::move(parts);
  llvm::json::Object types;
  for (auto &[bytes, names] : body.types) {
    std::string joined;
    for (const std::string &n : names) {
      if (!joined.empty())
        joined += ", ";
      joined += n;
      if (joined.size() > 200)
        break;
    }
    types[std::to_string(bytes)] = joined;
  }
  m[key::kMemoryAllocations] = std::move(types);
  return m;
}

void MemoryPlanPass::runOnOperation() {
  ModuleOp module = getOperation();
  // The manifest says what each argument and result is.
  std::optional<llvm::json::Value> manifest;
  if (!this->manifest.empty()) {
    auto buf = llvm::MemoryBuffer::getFile(this->manifest);
    if (!buf) {
      module.emitError() << "cannot read the manifest '" << this->manifest
                         << "'";
      return signalPassFailure();
    }
    auto parsed = llvm::json::parse((*buf)->getBuffer());
    if (!parsed) {
      module.emitError() << "malformed manifest '" << this->manifest
                         << "': " << llvm::toString(parsed.takeError());
      return signalPassFailure();
    }
    manifest = std::move(*parsed);
  }
  llvm::StringSet<> gradFunctions;
  module.walk([&](func::FuncOp fn) {
    if (auto g = fn->getAttrOfType<FlatSymbolRefAttr>(ParDialect::kGradAttrName))
      gradFunctions.insert(g.getValue());
  });
  llvm::StringMap<Roles> roles;
  llvm::json::Array *entries = nullptr;
  if (manifest)
    if (llvm::json::Object *top = manifest->getAsObject())
      entries = top->getArray(key::kFunctions);
  if (entries)
    for (llvm::json::Value &v : *entries)
      if (llvm::json::Object *entry = v.getAsObject())
        if (auto name = entry->getString(key::kName))
          if (auto fn = module.lookupSymbol<func::FuncOp>(*name))
            roles[*name] =
                rolesOf(fn, *entry, gradFunctions.contains(*name));

  Planner planner(module, roles, gradFunctions);
  llvm::StringMap<llvm::json::Object> plans;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal() || fn.isPrivate())
      continue;
    auto r = roles.find(fn.getSymName());
    const BodyPlan &body = planner.plan(fn);
    EntryPlan e = entryPlan(fn, r == roles.end() ? nullptr : &r->second, body);
    if (report)
      print(fn, e, body);
    warnOverLimit(fn, e);
    plans[fn.getSymName()] = toJson(e, body);
  }
  if (!entries)
    return;
  for (llvm::json::Value &v : *entries)
    if (llvm::json::Object *entry = v.getAsObject())
      if (auto name = entry->getString(key::kName))
        if (auto it = plans.find(*name); it != plans.end())
          (*entry)[key::kMemory] = std::move(it->second);
  std::string error;
  auto file = openOutputFile(this->manifest, &error);
  if (!file) {
    module.emitError() << error;
    return signalPassFailure();
  }
  file->os() << llvm::formatv("{0:2}", *manifest) << "\n";
  file->keep();
}

} // namespace
