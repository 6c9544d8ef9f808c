//===- PipelinePrograms.cpp - The pipeline programs in the IR -------------===//
//
// See PipelinePrograms.h.
//
//===----------------------------------------------------------------------===//

#include "par/Pipelining/PipelinePrograms.h"
#include "par/Dialect/Par/IR/ParDialect.h"

using namespace mlir;
using namespace mlir::par;
namespace pl = ::par::pipeline;

LogicalResult mlir::par::loadPipelinePrograms(ModuleOp module,
                                              pl::PipelineShape &shape,
                                              pl::Programs &programs) {
  auto dict = module->getAttrOfType<DictionaryAttr>(
      ParDialect::kPipelineAttrName);
  auto get = [&](StringRef key) -> int64_t {
    auto a = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr();
    return a ? a.getInt() : -1;
  };
  auto list = dict ? dict.getAs<ArrayAttr>("programs") : ArrayAttr();
  if (!list || get("p") < 1 || get("m") < 1 || get("v") < 1)
    return module.emitError("no pipeline programs in the module (run "
                            "par-pipeline-split and par-pipeline-schedule)");
  std::string text = "pipeline p=" + std::to_string(get("p")) +
                     " m=" + std::to_string(get("m")) +
                     " v=" + std::to_string(get("v")) + " backward=" +
                     (dict.getAs<StringAttr>("backward")
                          ? dict.getAs<StringAttr>("backward").getValue().str()
                          : std::string("full")) +
                     "\n";
  for (auto [r, a] : llvm::enumerate(list)) {
    auto s = dyn_cast<StringAttr>(a);
    if (!s)
      return module.emitError("par.pipeline programs must be strings");
    text += "rank " + std::to_string(r) + ": " + s.getValue().str() + "\n";
  }
  std::string error;
  if (!pl::parsePrograms(text, "par.pipeline", shape, programs, error))
    return module.emitError() << error;
  return success();
}

std::vector<std::string>
mlir::par::verifyPipelinePrograms(const pl::PipelineShape &shape,
                                  const pl::Programs &programs) {
  pl::VerifyResult r = pl::verifyPrograms(shape, programs, pl::Costs());
  return r.ok ? std::vector<std::string>() : r.errors;
}
