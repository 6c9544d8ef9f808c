//===- LossScaleOps.cpp - par's loss-scaling ops and policy ---------------===//
//
// Verifiers of #par.loss_scale, par.all_finite (par.scale_loss and
// par.update_loss_scale are checked by their ODS constraints).
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/IR/ParDialect.h"

#include <cmath>

using namespace mlir;
using namespace mlir::par;

LogicalResult
LossScaleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      LossScaleKind kind, APFloat initF, APFloat growthF,
                      APFloat backoffF, int64_t interval, int64_t hysteresis,
                      APFloat minF) {
  double init = initF.convertToDouble(), growth = growthF.convertToDouble(),
         backoff = backoffF.convertToDouble(), min = minF.convertToDouble();
  if (!std::isfinite(init) || init <= 0)
    return emitError() << "loss scale: init must be positive and finite, got "
                       << init;
  // The minimum bounds the back-off; a static scale never backs off.
  if (!std::isfinite(min) || min <= 0 ||
      (kind == LossScaleKind::Dynamic && min > init))
    return emitError() << "loss scale: min must be in (0, init], got " << min
                       << " with init " << init;
  if (!std::isfinite(growth) || growth <= 1)
    return emitError() << "loss scale: growth must be > 1, got " << growth;
  if (!(backoff > 0 && backoff < 1))
    return emitError() << "loss scale: backoff must be in (0, 1), got "
                       << backoff;
  if (interval < 1)
    return emitError() << "loss scale: interval must be >= 1, got "
                       << interval;
  if (hysteresis < 1)
    return emitError() << "loss scale: hysteresis must be >= 1, got "
                       << hysteresis;
  return success();
}

LogicalResult AllFiniteOp::verify() {
  for (auto [i, v] : llvm::enumerate(getInputs()))
    if (!isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()))
      return emitOpError() << "input #" << i
                           << " is not a floating-point tensor: " << v.getType();
  return success();
}

LogicalResult AllFiniteOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (!getMeshAttr())
    return success();
  if (!tables.lookupNearestSymbolFrom<MeshOp>(*this, getMeshAttr()))
    return emitOpError() << "refers to " << getMeshAttr()
                         << ", which is not a par.mesh";
  return success();
}
