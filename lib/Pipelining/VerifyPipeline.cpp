//===- VerifyPipeline.cpp - par-verify-pipeline ---------------------------===//
//
// The programs par-pipeline-schedule stores are deadlock-free by
// construction; a hand edit may not be. This pass re-parses them and
// simulates them under blocking send/recv (lib/Schedule's verifier), so a
// schedule that would hang is rejected before anything runs.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/Passes.h"
#include "par/Pipelining/PipelinePrograms.h"

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
    ::par::pipeline::PipelineShape shape;
    ::par::pipeline::Programs programs;
    if (failed(loadPipelinePrograms(module, shape, programs)))
      return signalPassFailure();
    std::vector<std::string> errors = verifyPipelinePrograms(shape, programs);
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
