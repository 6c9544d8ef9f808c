//===- PipelineSchedule.cpp - par-pipeline-schedule -----------------------===//
//
// One global timetable (lib/Pipelining/Schedule) gives every pipeline rank its ordered
// actions: forwards and backwards of (micro-batch, stage) and the transfers
// between ranks, in one global event order, which is what makes them
// deadlock-free under blocking send/recv. They are verified and stored in
// the module, where par-verify-pipeline re-checks them and the manifest
// hands them to par-run, which executes them as they are.
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/Analysis/OpCost.h"
#include "par/Pipelining/Passes.h"

#define DEBUG_TYPE "par-pipeline-schedule"

namespace mlir::par {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "par/Pipelining/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;
namespace pl = ::par::pipeline;

namespace {

/// The stage table with what par-autodiff and par-optimizer made from each
/// stage's functions (their `par.grad` and `par.update`), where they ran.
template <typename LinkFn>
SmallVector<StageAttr> completeStages(PipelineAttr pipe, LinkFn linked) {
  SmallVector<StageAttr> out;
  for (StageAttr st : pipe.getStages())
    out.push_back(StageAttr::get(
        st.getContext(), st.getForward(), st.getLoss(), st.getInputLoss(),
        st.getWeightLoss(), linked(st.getLoss(), ParDialect::kGradAttrName),
        linked(st.getInputLoss(), ParDialect::kGradAttrName),
        linked(st.getWeightLoss(), ParDialect::kGradAttrName),
        linked(st.getLoss(), ParDialect::kUpdateAttrName),
        st.getStashForward(), st.getStashBackward(), st.getStashInputGrad(),
        st.getStashWeightGrad()));
  return out;
}

/// Each stage's action costs from its functions (see the pass's
/// description), scaled so that the mean forward costs 1. Empty when a
/// stage lacks a function they need.
/// The diagram's note on the costs it was timed with.
std::string costsNote(const pl::Costs &costs) {
  if (costs.stages.empty())
    return " (unit costs: F=1, B=2)";
  std::string s = " (estimated stage costs F:BI:BW";
  for (size_t i = 0; i < costs.stages.size(); ++i) {
    const pl::StageCosts &k = costs.stages[i];
    s += (i ? ", " : " ") + pl::formatNumber(k.f) + ":" +
         pl::formatNumber(k.bi) + ":" + pl::formatNumber(k.bw);
  }
  return s + ")";
}

template <typename LookupFn>
std::vector<pl::StageCosts>
estimateStageCosts(ArrayRef<StageAttr> stages, bool split, LookupFn lookup) {
  std::vector<pl::StageCosts> out;
  for (StageAttr st : stages) {
    FunctionOpInterface fwd = lookup(st.getForward(), StringRef());
    FunctionOpInterface loss = lookup(st.getLoss(), StringRef());
    FunctionOpInterface grad = lookup(st.getLoss(), ParDialect::kGradAttrName);
    if (!fwd || !loss || !grad)
      return {};
    pl::StageCosts k;
    k.f = getFunctionCost(fwd);
    double lossCost = getFunctionCost(loss);
    k.b = std::max(getFunctionCost(grad) - lossCost, 0.0);
    k.bi = 0;
    if (split && st.getInputLoss()) {
      FunctionOpInterface in = lookup(st.getInputLoss(), StringRef());
      FunctionOpInterface inGrad =
          lookup(st.getInputLoss(), ParDialect::kGradAttrName);
      if (!in || !inGrad)
        return {};
      k.bi = std::clamp(getFunctionCost(inGrad) - getFunctionCost(in), 0.0,
                        k.b);
    }
    k.bw = k.b - k.bi;
    out.push_back(k);
  }
  double meanF = 0;
  for (const pl::StageCosts &k : out)
    meanF += k.f / out.size();
  if (!(meanF > 0))
    return {};
  // An empty half (the first stage's BI) still takes a call: a hundredth
  // of a forward.
  const double least = 0.01;
  for (pl::StageCosts &k : out) {
    k.f = std::max(k.f / meanF, least);
    k.bi = std::max(k.bi / meanF, least);
    k.bw = std::max(k.bw / meanF, least);
    k.b = split ? k.bi + k.bw : std::max(k.b / meanF, least);
  }
  return out;
}

struct PipelineSchedulePass
    : public mlir::par::impl::PipelineScheduleBase<PipelineSchedulePass> {
  using PipelineScheduleBase::PipelineScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pipe =
        module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName);
    if (!pipe) {
      module.emitError("par-pipeline-schedule: the module has no pipeline "
                       "stages (run par-pipeline-split first)");
      return signalPassFailure();
    }
    int64_t S = pipe.getStages().size();
    Operation *split = module.lookupSymbol(pipe.getFunc());
    // The pipeline axis and its size.
    int64_t p = -1;
    for (auto mesh : module.getOps<MeshOp>())
      for (auto [name, size] :
           llvm::zip(mesh.getAxisNames().getAsRange<StringAttr>(),
                     mesh.getAxisSizes()))
        if (name.getValue() == axis)
          p = size;
    if (p < 1) {
      module.emitError() << "par-pipeline-schedule: no mesh has an axis named '"
                         << axis << "'";
      return signalPassFailure();
    }
    pl::ScheduleConfig config;
    if (!pl::parseScheduleKind(schedule, config.kind)) {
      module.emitError() << "par-pipeline-schedule: unknown schedule '"
                         << schedule
                         << "' (expected gpipe, 1f1b, interleaved, zbh1 or zbv)";
      return signalPassFailure();
    }
    if ((config.kind == pl::ScheduleKind::ZBH1 ||
         config.kind == pl::ScheduleKind::ZBV) &&
        !pipe.getStages().front().getWeightLoss()) {
      module.emitError() << "par-pipeline-schedule: " << schedule
                         << " runs the input and "
                            "weight halves of each backward apart: split with "
                            "par-pipeline-split=split-backward=true";
      return signalPassFailure();
    }
    if (microBatches < 0 || virtualStages < 1) {
      module.emitError() << "par-pipeline-schedule: micro-batches must be >= "
                            "1 (or 0: the train step's) and virtual >= 1";
      return signalPassFailure();
    }
    if (S != p * virtualStages) {
      module.emitError() << "par-pipeline-schedule: " << S
                         << " stages cannot be placed on the '" << axis
                         << "' axis of size " << p << " with " 
                         << static_cast<int64_t>(virtualStages)
                         << " stage(s) per rank (stages must be "
                         << p * virtualStages << ")";
      return signalPassFailure();
    }
    // The micro-batch count is the train step's (par-optimizer links it
    // from the split function by `par.step`) unless given; a given one must
    // agree, since the step is the unpipelined reference of the same
    // computation.
    FunctionOpInterface step =
        split ? getLinkedFunction(split, ParDialect::kStepAttrName)
              : FunctionOpInterface();
    auto stepAttr = step ? step->getAttrOfType<IntegerAttr>(
                               ParDialect::kMicroBatchesAttrName)
                         : IntegerAttr();
    int64_t stepM = stepAttr ? stepAttr.getInt() : 1;
    int64_t m = microBatches > 0 ? static_cast<int64_t>(microBatches)
                                 : (step ? stepM : 1);
    if (step && stepM != m) {
      step.emitOpError() << "accumulates " << stepM
                         << " micro-batch(es) but the pipeline schedule has "
                         << m << " (give par-optimizer micro-batches=" << m
                         << ")";
      return signalPassFailure();
    }
    // Loss scaling: each rank runs its stages' updates one after another,
    // each deciding with one mesh-wide all_reduce; with v > 1 a decision
    // would cover only the stages that happen to share an update slot.
    if (auto splitFn = dyn_cast_or_null<FunctionOpInterface>(split);
        virtualStages > 1 && splitFn)
      for (unsigned i = 0; i < splitFn.getNumArguments(); ++i)
        if (splitFn.getArgAttr(i, ParDialect::kLossScaleAttrName)) {
          splitFn.emitOpError("has a loss scale: interleaved stages "
                            "(virtual-stages > 1) cannot take one global "
                            "step-or-skip decision yet; use v = 1 (1f1b, "
                            "gpipe, zbh1) or no loss scaling (bf16)");
          return signalPassFailure();
        }
    config.shape.p = p;
    config.shape.m = m;
    config.shape.v = virtualStages;
    std::string error = pl::validateConfig(config);
    if (error.empty() && stageCosts && config.kind == pl::ScheduleKind::ZBV) {
      auto lookup = [&](FlatSymbolRefAttr sym,
                        StringRef link) -> FunctionOpInterface {
        auto fn = dyn_cast_or_null<FunctionOpInterface>(
            sym ? module.lookupSymbol(sym) : nullptr);
        return fn && !link.empty() ? getLinkedFunction(fn, link) : fn;
      };
      config.costs.stages = estimateStageCosts(
          pipe.getStages(), config.shape.splitBackward, lookup);
      // The uniform costs: the stages' means (for the formulas).
      if (!config.costs.stages.empty()) {
        config.costs.takeStageMeans();
        error = pl::validateConfig(config);
      }
    }
    pl::Timetable timetable;
    if (error.empty())
      pl::buildTimetable(config, timetable, error);
    if (!error.empty()) {
      module.emitError() << "par-pipeline-schedule: " << error;
      return signalPassFailure();
    }
    pl::Programs programs = pl::derivePrograms(timetable);
    auto symbolOf = [](FunctionOpInterface f) {
      return f ? FlatSymbolRefAttr::get(f.getOperation()) : FlatSymbolRefAttr();
    };
    auto linked = [&](FlatSymbolRefAttr from, StringRef link) {
      Operation *op = from ? module.lookupSymbol(from) : nullptr;
      return symbolOf(op ? getLinkedFunction(op, link) : FunctionOpInterface());
    };
    PipelineAttr scheduled =
        pipe.withStages(completeStages(pipe, linked))
            .withSchedule(symbolOf(step),
                          split ? split->getAttrOfType<FlatSymbolRefAttr>(
                                      ParDialect::kLogitsAttrName)
                                : FlatSymbolRefAttr(),
                          schedule, axis, m, programs);
    std::vector<std::string> errors = verifyPipelinePrograms(scheduled);
    if (!errors.empty()) {
      module.emitError() << "par-pipeline-schedule: the derived programs do "
                            "not verify: "
                         << errors.front();
      return signalPassFailure();
    }
    module->setAttr(ParDialect::kPipelineAttrName, scheduled);
    if (diagram) {
      pl::Metrics metrics = pl::computeMetrics(timetable);
      llvm::outs() << "par-pipeline-schedule: " << schedule << " p=" << p
                   << " m=" << m
                   << " v=" << static_cast<int64_t>(virtualStages)
                   << costsNote(config.costs) << "\n"
                   << pl::renderDiagram(timetable) << "  bubble fraction "
                   << pl::formatNumber(metrics.bubbleFraction)
                   << ", peak activations on rank 0: "
                   << metrics.peakActivations[0] << "\n";
    }
  }
};
} // namespace
