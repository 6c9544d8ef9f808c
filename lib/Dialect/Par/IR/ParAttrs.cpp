//===- ParAttrs.cpp - par attributes: the typed contracts -----------------===//
//
// The generated attribute classes, and the pipeline's typed contract:
// #par.stage (a stage's functions by symbol), #par.program (a rank's
// actions) and #par.pipeline, whose verifier is lib/Pipelining/Schedule's deadlock
// proof; #par.sharding's custom syntax and #par.init's checks.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::par;
namespace pl = ::par::pipeline;

//===----------------------------------------------------------------------===//
// Parameter parsers and printers
//===----------------------------------------------------------------------===//

template <typename AttrT>
FailureOr<SmallVector<AttrT>> mlir::par::parseAttrList(AsmParser &parser) {
  SmallVector<AttrT> out;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() {
        AttrT attr;
        if (parser.parseAttribute(attr))
          return failure();
        out.push_back(attr);
        return success();
      }))
    return failure();
  return out;
}

template <typename AttrT>
void mlir::par::printAttrList(AsmPrinter &printer, ArrayRef<AttrT> attrs) {
  printer << '[';
  llvm::interleaveComma(attrs, printer,
                        [&](AttrT a) { printer.printAttribute(a); });
  printer << ']';
}

/// `name=N`, the label one of `labels`; returns the label parsed.
static ParseResult parseLabelled(AsmParser &parser,
                                 ArrayRef<StringRef> labels, StringRef &label,
                                 int64_t &value) {
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&label))
    return failure();
  if (!llvm::is_contained(labels, label))
    return parser.emitError(loc) << "expected '" << llvm::join(labels.begin(), labels.end(), "' or '")
                                 << "', got '" << label << "'";
  return failure(parser.parseEqual() || parser.parseInteger(value));
}

FailureOr<SmallVector<pl::Action>> mlir::par::parseActions(AsmParser &parser) {
  SmallVector<pl::Action> out;
  auto parseOne = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    StringRef name, label;
    pl::Action a;
    if (parser.parseKeyword(&name))
      return failure();
    if (!pl::parseActionMnemonic(name.str(), a.op))
      return parser.emitError(loc)
             << "unknown pipeline action '" << name
             << "' (expected fwd, bwd, bi, bw, send_act, recv_act, "
                "send_grad or recv_grad)";
    int64_t mb, stage, peer = -1;
    if (parser.parseLParen() || parseLabelled(parser, {"mb"}, label, mb) ||
        parser.parseComma() || parseLabelled(parser, {"s"}, label, stage))
      return failure();
    if (!a.isCompute()) {
      StringRef want = a.isSend() ? "to" : "from";
      if (parser.parseComma() || parseLabelled(parser, {want}, label, peer))
        return failure();
    }
    if (parser.parseRParen())
      return failure();
    a.mb = mb;
    a.stage = stage;
    a.peer = peer;
    out.push_back(a);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseOne))
    return failure();
  return out;
}

void mlir::par::printActions(AsmPrinter &printer, ArrayRef<pl::Action> actions) {
  printer << '[';
  llvm::interleaveComma(actions, printer, [&](const pl::Action &a) {
    printer << pl::getActionMnemonic(a.op) << "(mb=" << a.mb
            << ", s=" << a.stage;
    if (a.isSend())
      printer << ", to=" << a.peer;
    else if (a.isRecv())
      printer << ", from=" << a.peer;
    printer << ')';
  });
  printer << ']';
}

#define GET_ATTRDEF_CLASSES
#include "par/Dialect/Par/IR/ParAttrs.cpp.inc"

void ParDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "par/Dialect/Par/IR/ParAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

SmallVector<StringRef> ShardingAttr::getDimAxes(int64_t dim) const {
  SmallVector<StringRef> axes;
  for (Attribute a : getDims()[dim])
    axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}

SmallVector<StringRef> ShardingAttr::getPartialAxisNames() const {
  SmallVector<StringRef> axes;
  for (Attribute a : getPartialAxes())
    axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}

bool ShardingAttr::isFullyReplicated() const {
  return !isPartial() &&
         llvm::all_of(getDims(), [](ArrayAttr a) { return a.empty(); });
}

ShardingAttr ShardingAttr::get(MLIRContext *ctx, FlatSymbolRefAttr mesh,
                               ArrayRef<SmallVector<StringRef>> dims,
                               ArrayRef<StringRef> partial,
                               ReductionKind kind) {
  Builder b(ctx);
  SmallVector<ArrayAttr> dimAttrs;
  for (const auto &axes : dims)
    dimAttrs.push_back(b.getStrArrayAttr(axes));
  return ShardingAttr::get(ctx, mesh, dimAttrs, b.getStrArrayAttr(partial),
                           partial.empty() ? ReductionKind::Sum : kind);
}

ShardingAttr ShardingAttr::getReplicated(MLIRContext *ctx,
                                         FlatSymbolRefAttr mesh,
                                         int64_t rank) {
  SmallVector<SmallVector<StringRef>> dims(rank);
  return get(ctx, mesh, dims);
}

ShardingAttr ShardingAttr::withoutPartial() const {
  return ShardingAttr::get(getContext(), getMesh(), getDims(),
                           ArrayAttr::get(getContext(), {}),
                           ReductionKind::Sum);
}

LogicalResult
ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     FlatSymbolRefAttr mesh, ArrayRef<ArrayAttr> dims,
                     ArrayAttr partialAxes, ReductionKind partialKind) {
  if (!mesh)
    return emitError() << "sharding needs a mesh symbol";
  llvm::StringSet<> seen;
  auto check = [&](Attribute a, StringRef where) -> LogicalResult {
    auto s = dyn_cast<StringAttr>(a);
    if (!s)
      return emitError() << "mesh axes must be strings, got " << a;
    if (!seen.insert(s.getValue()).second)
      return emitError() << "mesh axis '" << s.getValue()
                         << "' is used more than once in a sharding (again "
                         << where << ")";
    return success();
  };
  for (auto [d, axes] : llvm::enumerate(dims))
    for (Attribute a : axes)
      if (failed(check(a, ("in dimension " + Twine(d)).str())))
        return failure();
  for (Attribute a : partialAxes)
    if (failed(check(a, "as a partial axis")))
      return failure();
  if (!partialAxes.empty() && partialKind == ReductionKind::Avg)
    return emitError() << "partial reduction kind must be sum, max or min";
  return success();
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, APFloat scale) {
  bool hasScale = !scale.isPosZero();
  if (kind == InitKind::Fill) {
    if (!scale.isFinite())
      return emitError() << "'fill' initialiser needs a finite value, got "
                         << scale.convertToDouble();
    return success();
  }
  if (kind != InitKind::Uniform) {
    if (hasScale)
      return emitError() << "'" << stringifyInitKind(kind)
                         << "' initialiser takes no scale, got "
                         << scale.convertToDouble();
    return success();
  }
  if (!scale.isFinite() || scale.isNegative() || scale.isZero())
    return emitError() << "'uniform' initialiser needs a positive finite "
                          "scale, got "
                       << scale.convertToDouble();
  return success();
}

static ParseResult parseAxisSet(AsmParser &p, SmallVectorImpl<Attribute> &out) {
  return p.parseCommaSeparatedList(AsmParser::Delimiter::Braces, [&]() {
    std::string name;
    if (p.parseString(&name))
      return failure();
    out.push_back(StringAttr::get(p.getContext(), name));
    return success();
  });
}

Attribute ShardingAttr::parse(AsmParser &p, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<ArrayAttr> dims;
  SmallVector<Attribute> partial;
  ReductionKind kind = ReductionKind::Sum;
  SMLoc loc = p.getCurrentLocation();
  if (p.parseLess() || p.parseAttribute(mesh) || p.parseComma())
    return {};
  if (p.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() {
        SmallVector<Attribute> axes;
        if (parseAxisSet(p, axes))
          return failure();
        dims.push_back(ArrayAttr::get(p.getContext(), axes));
        return success();
      }))
    return {};
  if (succeeded(p.parseOptionalComma())) {
    if (p.parseKeyword("partial"))
      return {};
    StringRef kw;
    SMLoc kwLoc = p.getCurrentLocation();
    if (p.parseKeyword(&kw))
      return {};
    std::optional<ReductionKind> k = symbolizeReductionKind(kw);
    if (!k) {
      p.emitError(kwLoc) << "unknown reduction kind '" << kw
                         << "' (expected sum, max or min)";
      return {};
    }
    kind = *k;
    if (parseAxisSet(p, partial))
      return {};
  }
  if (p.parseGreater())
    return {};
  // Without partial axes the kind means nothing: keep one canonical form.
  if (partial.empty())
    kind = ReductionKind::Sum;
  return p.getChecked<ShardingAttr>(loc, p.getContext(), mesh, dims,
                                    ArrayAttr::get(p.getContext(), partial),
                                    kind);
}

void ShardingAttr::print(AsmPrinter &p) const {
  auto printSet = [&](ArrayAttr axes) {
    p << "{";
    llvm::interleaveComma(axes, p, [&](Attribute a) {
      p.printString(cast<StringAttr>(a).getValue());
    });
    p << "}";
  };
  p << "<" << getMesh() << ", [";
  llvm::interleaveComma(getDims(), p, printSet);
  p << "]";
  if (isPartial()) {
    p << ", partial " << stringifyReductionKind(getPartialKind()) << " ";
    printSet(getPartialAxes());
  }
  p << ">";
}


//===----------------------------------------------------------------------===//
// StageAttr
//===----------------------------------------------------------------------===//

SmallVector<std::pair<StringRef, FlatSymbolRefAttr>>
StageAttr::getSymbols() const {
  SmallVector<std::pair<StringRef, FlatSymbolRefAttr>> out;
  auto add = [&](StringRef role, FlatSymbolRefAttr sym) {
    if (sym)
      out.push_back({role, sym});
  };
  add("forward", getForward());
  add("loss", getLoss());
  add("input_loss", getInputLoss());
  add("weight_loss", getWeightLoss());
  add("backward", getBackward());
  add("input_grad", getInputGrad());
  add("weight_grad", getWeightGrad());
  add("update", getUpdate());
  add("stash_forward", getStashForward());
  add("stash_backward", getStashBackward());
  add("stash_input_grad", getStashInputGrad());
  add("stash_weight_grad", getStashWeightGrad());
  return out;
}

//===----------------------------------------------------------------------===//
// ProgramAttr
//===----------------------------------------------------------------------===//

LogicalResult ProgramAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  ArrayRef<pl::Action> actions) {
  for (const pl::Action &a : actions) {
    if (a.mb < 0 || a.stage < 0)
      return emitError() << "pipeline action " << pl::formatAction(a)
                         << " has a negative micro-batch or stage";
    if (!a.isCompute() && (a.stage < 1 || a.peer < 0))
      return emitError() << "pipeline transfer " << pl::formatAction(a)
                         << " needs a stage >= 1 and a peer rank >= 0";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// PipelineAttr
//===----------------------------------------------------------------------===//

/// The shape of `numPrograms` programs over `numStages` stages.
static pl::PipelineShape shapeOf(size_t numStages, size_t numPrograms,
                                 StringAttr schedule, int64_t m) {
  pl::PipelineShape shape;
  shape.p = static_cast<int>(numPrograms);
  shape.m = static_cast<int>(m);
  shape.v = numPrograms ? static_cast<int>(numStages / numPrograms) : 0;
  pl::ScheduleKind kind;
  if (schedule && pl::parseScheduleKind(schedule.str(), kind))
    pl::applyScheduleKind(kind, shape);
  return shape;
}

static pl::Programs programsOf(ArrayRef<ProgramAttr> programs) {
  pl::Programs out;
  for (ProgramAttr p : programs)
    out.emplace_back(p.getActions().begin(), p.getActions().end());
  return out;
}

/// lib/Pipelining/Schedule's proof over the programs; its error sentences.
static std::vector<std::string> proofErrors(size_t numStages,
                                            StringAttr schedule, int64_t m,
                                            ArrayRef<ProgramAttr> programs) {
  pl::VerifyResult r = pl::verifyPrograms(
      shapeOf(numStages, programs.size(), schedule, m), programsOf(programs),
      pl::Costs());
  return r.ok ? std::vector<std::string>() : r.errors;
}

LogicalResult PipelineAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, FlatSymbolRefAttr func,
    ArrayRef<StageAttr> stages, FlatSymbolRefAttr step,
    FlatSymbolRefAttr logits, StringAttr schedule, StringAttr axis,
    int64_t microBatches, ArrayRef<ProgramAttr> programs) {
  if (!func)
    return emitError() << "#par.pipeline needs the split function";
  if (stages.empty())
    return emitError() << "#par.pipeline needs at least one stage";
  bool anySchedule = schedule || axis || microBatches != 0;
  if (programs.empty()) {
    if (anySchedule)
      return emitError() << "#par.pipeline has a schedule but no programs";
    return success();
  }
  if (!schedule || !axis || microBatches < 1)
    return emitError() << "#par.pipeline's programs need a schedule, an "
                          "axis and micro_batches >= 1";
  pl::ScheduleKind kind;
  if (!pl::parseScheduleKind(schedule.str(), kind))
    return emitError() << "unknown schedule '" << schedule.getValue()
                       << "' (expected gpipe, 1f1b, interleaved, zbh1 or zbv)";
  if (stages.size() % programs.size() != 0)
    return emitError() << stages.size() << " stages cannot be placed on "
                       << programs.size() << " pipeline ranks";
  if (kind == pl::ScheduleKind::ZBH1 || kind == pl::ScheduleKind::ZBV)
    for (auto [k, st] : llvm::enumerate(stages))
      if (!st.getWeightLoss() || (k > 0 && !st.getInputLoss()))
        return emitError() << schedule.getValue()
                           << " runs the input and weight halves of each "
                              "backward apart, but stage "
                           << k << " has no "
                           << (st.getWeightLoss() ? "input_loss"
                                                  : "weight_loss");
  std::vector<std::string> errors =
      proofErrors(stages.size(), schedule, microBatches, programs);
  if (errors.empty())
    return success();
  InFlightDiagnostic diag = emitError() << "the pipeline programs are invalid: "
                                        << errors.front();
  for (size_t i = 1; i < errors.size(); ++i)
    diag.attachNote() << errors[i];
  return diag;
}

pl::PipelineShape PipelineAttr::getShape() const {
  return shapeOf(getStages().size(), getPrograms().size(), getSchedule(),
                 getMicroBatches());
}

pl::Programs PipelineAttr::getSchedulePrograms() const {
  return programsOf(getPrograms());
}

PipelineAttr PipelineAttr::withSchedule(FlatSymbolRefAttr step,
                                        FlatSymbolRefAttr logits,
                                        StringRef schedule, StringRef axis,
                                        int64_t microBatches,
                                        const pl::Programs &programs) const {
  MLIRContext *ctx = getContext();
  SmallVector<ProgramAttr> list;
  for (const std::vector<pl::Action> &p : programs)
    list.push_back(ProgramAttr::get(ctx, p));
  return PipelineAttr::get(ctx, getFunc(), getStages(), step, logits,
                           StringAttr::get(ctx, schedule),
                           StringAttr::get(ctx, axis), microBatches, list);
}

PipelineAttr PipelineAttr::withStages(ArrayRef<StageAttr> stages) const {
  return PipelineAttr::get(getContext(), getFunc(), stages, getStep(),
                           getLogits(), getSchedule(), getAxis(),
                           getMicroBatches(), getPrograms());
}

std::vector<std::string> mlir::par::verifyPipelinePrograms(PipelineAttr p) {
  if (!p.isScheduled())
    return {};
  return proofErrors(p.getStages().size(), p.getSchedule(),
                     p.getMicroBatches(), p.getPrograms());
}

//===----------------------------------------------------------------------===//
// Links between functions
//===----------------------------------------------------------------------===//

FunctionOpInterface mlir::par::getLinkedFunction(Operation *fn,
                                                 StringRef linkName) {
  auto sym = fn->getAttrOfType<FlatSymbolRefAttr>(linkName);
  if (!sym)
    return {};
  return dyn_cast_or_null<FunctionOpInterface>(
      SymbolTable::lookupNearestSymbolFrom(fn, sym));
}
