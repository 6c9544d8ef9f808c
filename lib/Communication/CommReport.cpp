//===- CommReport.cpp - par-comm-report -----------------------------------===//
//
// Prints, per function, every collective with its axes, group size, element
// type, local type and the bytes one device sends per call (ring formulas of
// docs/Formulas.md), then the total. Tests and benchmarks read it.
//
//===----------------------------------------------------------------------===//

#include "par/Communication/Passes.h"
#include "par/Dialect/Par/Analysis/FactorChoice.h"
#include "par/Dialect/Par/Analysis/TieClasses.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

#define DEBUG_TYPE "par-comm-report"

namespace mlir::par {
#define GEN_PASS_DEF_COMMREPORT
#include "par/Communication/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct CommReportPass : public mlir::par::impl::CommReportBase<CommReportPass> {
  using CommReportBase::CommReportBase;

  void runOnOperation() override {
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file;
    llvm::raw_ostream *os = &llvm::outs();
    if (outputFile != "-") {
      file = openOutputFile(outputFile, &error);
      if (!file) {
        getOperation().emitError() << "cannot open report file '"
                                   << outputFile << "': " << error;
        return signalPassFailure();
      }
      os = &file->os();
    }
    getOperation().walk([&](FunctionOpInterface fn) {
      if (fn.isExternal())
        return;
      *os << "par-comm-report: @" << fn.getName() << "\n";
      int64_t count = 0;
      double total = 0;
      fn->walk([&](Operation *op) {
        if (!isa<AllReduceOp, BucketAllReduceOp, AllGatherOp,
                 ReduceScatterOp, AllToAllOp, BroadcastOp, SendOp, RecvOp>(op))
          return;
        auto axes = op->getAttrOfType<ArrayAttr>("axes");
        auto meshSym = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
        MeshOp mesh = lookupMesh(op, meshSym, /*emitErrors=*/false);
        int64_t n = 1;
        if (mesh)
          for (StringAttr a : axes.getAsRange<StringAttr>())
            n *= std::max<int64_t>(1, mesh.getAxisSize(a.getValue()));
        Type type = op->getNumOperands() ? op->getOperand(0).getType()
                                         : op->getResult(0).getType();
        double bytes = collectiveBytes(op);
        *os << "  " << op->getName() << " axes=" << axes << " n=" << n << " "
            << cast<RankedTensorType>(type).getElementType() << " ";
        // A bucket is one message: its members' count instead of one type.
        if (auto bucket = dyn_cast<BucketAllReduceOp>(op))
          *os << bucket.getInputs().size() << " tensors";
        else
          *os << type;
        // ZeRO-3's parameter gathers say which phase they serve.
        if (auto phase =
                op->getAttrOfType<StringAttr>(ParDialect::kZeROGatherAttrName))
          *os << " (zero=3 " << phase.getValue() << ")";
        if (auto phase =
                op->getAttrOfType<StringAttr>(ParDialect::kSPGatherAttrName))
          *os << " (sequence-parallel " << phase.getValue() << ")";
        *os << ": " << llvm::format("%.0f", bytes) << " bytes\n";
        ++count;
        total += bytes;
      });
      *os << "  total: " << count << " collectives, "
          << llvm::format("%.0f", total) << " bytes per device\n";
    });
    if (file)
      file->keep();
    markAllAnalysesPreserved();
  }
};
} // namespace
