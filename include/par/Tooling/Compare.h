//===- Compare.h - Comparing results with a reference -----------*- C++ -*-===//
//
// Tolerances per element type, the element-wise comparison of a result
// with the reference's (largest absolute error, relative to the
// reference's largest magnitude; a NaN anywhere fails), and the check of a
// loss trajectory against the reference's (largest relative error over the
// steps). Both print the lines par-run's --verify reports.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_COMPARE_H
#define PAR_TOOLING_COMPARE_H

#include "par/Tooling/Function.h"

#include <string>

#include <vector>

namespace par::tooling {

/// The default relative tolerance for `dtype`: 1e-12 for f64, 1e-5 for
/// f32, 1e-3 for f16, 1e-2 for bf16, 0 (exact) for integers.
double defaultTolerance(par_dtype_t dtype);
/// `rtol` if it is >= 0, else the default for `dtype`.
double toleranceFor(double rtol, par_dtype_t dtype);
/// The same for a value computed in `computeType` ("f16", "bf16" or "":
/// mixed precision) whatever its own dtype.
double toleranceFor(double rtol, par_dtype_t dtype,
                    const std::string &computeType);
/// The same for a GPU program compared with the CPU reference (`gpu`): its
/// reductions (cuBLAS, tree sums in kernels) reassociate, and the defaults
/// widen to 1e-4 for f32 (an f32 sum of K terms in another order differs
/// by about sqrt(K) ulps, ~1e-5..1e-4 relative for the models' K and a few
/// steps), 1e-10 for f64, and for 16-bit values or a mixed-precision
/// program 1e-2 (f16) and 2e-2 (bf16): a reassociated f32 sum that
/// crosses a 16-bit rounding boundary moves the value one 16-bit ulp
/// (2^-11, 2^-8), and the steps compound a few of them.
double toleranceFor(double rtol, par_dtype_t dtype,
                    const std::string &computeType, bool gpu);

struct TensorDiff {
  double maxAbs = 0; // NaN if any element of either is NaN
  double rel = 0;    // maxAbs / the reference's largest magnitude
  bool nan = false;
};

/// Compares `actual` with `expected`, both global tensors of type `t`.
TensorDiff compareTensors(const Tensor &t, const void *actual,
                          const void *expected);

/// Prints result `k`'s comparison; returns whether it is within `tol`.
/// After `steps` > 1 training steps the line is informational (parameters
/// drift apart by rounding) and the result always passes.
bool reportTensorDiff(size_t k, const Tensor &t, const TensorDiff &d,
                      double tol, int64_t steps,
                      const std::string &name = {});

/// The largest relative error of `losses` against `reference` (NaN if any
/// loss of either is NaN).
double lossTrajectoryError(const std::vector<double> &losses,
                           const std::vector<double> &reference);

/// Prints the loss-trajectory line; returns whether it is within `tol`.
bool verifyLossTrajectory(const std::vector<double> &losses,
                          const std::vector<double> &reference, double tol);

} // namespace par::tooling

#endif // PAR_TOOLING_COMPARE_H
