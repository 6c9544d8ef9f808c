//===- Compare.cpp - Comparing results with a reference -------------------===//
//
// Errors are relative to the reference's largest magnitude (not per
// element), so that values near zero do not dominate.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace par::tooling {

double defaultTolerance(par_dtype_t dtype) {
  switch (dtype) {
  case PAR_F64: return 1e-12;
  case PAR_F32: return 1e-5;
  case PAR_F16: return 1e-3;
  case PAR_BF16: return 1e-2;
  default: return 0; // integers: exact
  }
}

double toleranceFor(double rtol, par_dtype_t dtype) {
  return rtol >= 0 ? rtol : defaultTolerance(dtype);
}

double toleranceFor(double rtol, par_dtype_t dtype,
                    const std::string &computeType) {
  if (rtol >= 0)
    return rtol;
  double t = defaultTolerance(dtype);
  // A 16-bit computation in an f32 result: a different summation order in
  // f32 may round a 16-bit value to the neighbouring one (one ulp: 2^-10
  // relative for f16, 2^-7 for bf16); the defaults allow about that.
  if (computeType == "f16")
    return std::max(t, defaultTolerance(PAR_F16));
  if (computeType == "bf16")
    return std::max(t, defaultTolerance(PAR_BF16));
  return t;
}

double toleranceFor(double rtol, par_dtype_t dtype,
                    const std::string &computeType, bool gpu) {
  double t = toleranceFor(rtol, dtype, computeType);
  if (rtol >= 0 || !gpu || t == 0)
    return t; // given, a CPU program, or integers (exact everywhere)
  if (dtype == PAR_BF16 || computeType == "bf16")
    return std::max(t, 2e-2);
  if (dtype == PAR_F16 || computeType == "f16")
    return std::max(t, 1e-2);
  if (dtype == PAR_F64)
    return std::max(t, 1e-10);
  return std::max(t, 1e-4);
}

TensorDiff compareTensors(const Tensor &t, const void *actual,
                          const void *expected) {
  TensorDiff d;
  double maxRef = 0;
  for (int64_t i = 0; i < t.globalCount; ++i) {
    double a = par_dtype_load(t.dtype, actual, i);
    double b = par_dtype_load(t.dtype, expected, i);
    // A NaN anywhere is a failure, even where both runs agree on it.
    d.nan |= std::isnan(a) || std::isnan(b);
    if (!std::isnan(a) && !std::isnan(b)) {
      d.maxAbs = std::max(d.maxAbs, std::fabs(a - b));
    }
    maxRef = std::max(maxRef, std::fabs(b));
  }
  if (d.nan)
    d.maxAbs = NAN;
  d.rel = maxRef > 0 ? d.maxAbs / maxRef : d.maxAbs;
  return d;
}

double trainedStateTolerance(double rtol, par_dtype_t dtype,
                             const std::string &computeType, bool gpu) {
  // 16-bit compute: the bf16 default for either format (see the header).
  return toleranceFor(rtol, dtype, computeType.empty() ? "" : "bf16", gpu);
}

bool reportStateDiff(const std::string &label, const Tensor &t,
                     const TensorDiff &d, double tol) {
  bool ok = !d.nan && d.rel <= tol;
  printf("  %s %s: max abs error %.3g, max rel error %.3g (tolerance %.0e "
         "rel) %s\n",
         label.c_str(), t.dtypeName.c_str(), d.maxAbs, d.rel, tol,
         ok ? "OK" : "MISMATCH");
  return ok;
}

bool reportTensorDiff(size_t k, const Tensor &t, const TensorDiff &d,
                      double tol, const std::string &name) {
  std::string label = "result" + std::to_string(k);
  if (!name.empty())
    label += " (" + name + ")";
  return reportStateDiff(label, t, d, tol);
}

double lossTrajectoryError(const std::vector<double> &losses,
                           const std::vector<double> &reference) {
  double worst = 0;
  for (size_t i = 0; i < losses.size() && i < reference.size(); ++i) {
    if (std::isnan(losses[i]) || std::isnan(reference[i]))
      return NAN;
    worst = std::max(worst, std::fabs(losses[i] - reference[i]) /
                                std::max(std::fabs(reference[i]), 1e-30));
  }
  return worst;
}

bool verifyLossTrajectory(const std::vector<double> &losses,
                          const std::vector<double> &reference, double tol) {
  double worst = lossTrajectoryError(losses, reference);
  bool ok = worst <= tol;
  printf("  loss trajectory over %lld steps: max rel error %.3g (tolerance "
         "%.0e rel) %s\n",
         (long long)losses.size(), worst, tol, ok ? "OK" : "MISMATCH");
  return ok;
}

} // namespace par::tooling
