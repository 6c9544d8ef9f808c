//===- VerifyPipeline.cpp - par-verify-pipeline ---------------------------===//
//
// The programs par-pipeline-schedule stores are deadlock-free by
// construction, and #par.pipeline's verifier proves it again whenever the
// attribute is parsed. This pass runs the same proof (lib/Pipelining/Schedule's
// simulation under blocking send/recv) on the module's pipeline as it is,
// for IR built in memory and as the stage's stated contract.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Passes.h"

#define DEBUG_TYPE "par-verify-pipeline"

namespace mlir::par {
#define GEN_PASS_DEF_VERIFYPIPELINE
#include "par/Pipelining/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct VerifyPipelinePass
    : public mlir::par::impl::VerifyPipelineBase<VerifyPipelinePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pipe =
        module->getAttrOfType<PipelineAttr>(ParDialect::kPipelineAttrName);
    if (!pipe || !pipe.isScheduled()) {
      module.emitError("no pipeline programs in the module (run "
                       "par-pipeline-split and par-pipeline-schedule)");
      return signalPassFailure();
    }
    std::vector<std::string> errors = verifyPipelinePrograms(pipe);
    if (errors.empty()) {
      markAllAnalysesPreserved();
      return;
    }
    InFlightDiagnostic diag =
        module.emitError() << "the pipeline programs are invalid: "
                           << errors.front();
    for (size_t i = 1; i < errors.size(); ++i)
      diag.attachNote() << errors[i];
    signalPassFailure();
  }
};
} // namespace
