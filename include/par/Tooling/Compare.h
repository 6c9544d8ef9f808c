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

/// The one-step tolerance of trained parameters and optimizer state:
/// toleranceFor's, except that a mixed-precision program (f16 or bf16
/// compute) takes bf16's 1e-2 for either format: AdamW divides each update
/// by the gradient's running magnitude, so an element whose gradient is
/// 16-bit rounding noise moves by up to the learning rate in either run,
/// whatever the format. --verify compares one step from the same state
/// (measured on the suite's GPT steps: f32 within 3e-7 of 1e-5; bf16 within
/// 1e-2 but for the token embedding's rows of rare tokens, 2e-2 with
/// sequence parallelism and 7e-2 with bf16 gradient reductions, whose
/// tests state their --state-rtol).
double trainedStateTolerance(double rtol, par_dtype_t dtype,
                             const std::string &computeType, bool gpu);

/// Prints the comparison of the tensor `label` and returns whether it is
/// within tolerance (never with a NaN): the largest elementwise error
/// relative to the reference's largest magnitude, within `tol`. After
/// several train steps --verify compares the last step run from the same
/// state in both programs (StepExecutor::keepLastStepInputs), so one
/// step's tolerance applies whatever the step count.
bool reportStateDiff(const std::string &label, const Tensor &t,
                     const TensorDiff &d, double tol);

/// reportStateDiff for result `k` (named after the input it feeds, if any).
bool reportTensorDiff(size_t k, const Tensor &t, const TensorDiff &d,
                      double tol, const std::string &name = {});

/// The largest relative error of `losses` against `reference` (NaN if any
/// loss of either is NaN).
double lossTrajectoryError(const std::vector<double> &losses,
                           const std::vector<double> &reference);

/// Prints the loss-trajectory line; returns whether it is within `tol`.
bool verifyLossTrajectory(const std::vector<double> &losses,
                          const std::vector<double> &reference, double tol);

} // namespace par::tooling

#endif // PAR_TOOLING_COMPARE_H
