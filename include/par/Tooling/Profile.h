//===- Profile.h - par-run --profile's table ---------------------*- C++ -*-===//
//
// The runtime profiler's records (par_rt_profile_*, par_runtime.h) as
// torch.profiler's key_averages() table: per kernel, calls and time per
// step, share of the step and, for GEMMs, GFLOP/s.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_PROFILE_H
#define PAR_TOOLING_PROFILE_H

#include <cstdint>

namespace par::tooling {

/// Prints the records of `steps` profiled steps (the first `firstStep`)
/// that took `stepSeconds` in all: the top `rows` by time, the rest in one
/// line, and what the records do not cover (the step functions' own code
/// between kernels: allocation, copies, the calls).
void printProfile(int64_t firstStep, int64_t steps, double stepSeconds,
                  int64_t rows);

} // namespace par::tooling

#endif // PAR_TOOLING_PROFILE_H
