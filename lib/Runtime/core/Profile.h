//===- Profile.h - The kernel profiler's records ----------------*- C++ -*-===//
//
// par_rt_profile_* (par_runtime.h) and par_rt_k_profile_* (par_kernel_abi.h):
// while on, every outlined kernel, BLAS call and collective adds its time
// to a record by name. Records are kept for the thread that calls kernels
// (a rank's main thread); the OpenMP and BLAS threads inside a call are in
// the call's time.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CORE_PROFILE_H
#define PAR_RUNTIME_CORE_PROFILE_H

#include <string>

namespace par::rt {

/// Whether the profiler is on (par_rt_profile_start .. _stop).
bool profiling();

/// Adds one call of `name` taking `seconds` (with `flops` floating-point
/// operations and `bytes` sent) to its record.
void profileRecord(const std::string &name, double seconds, double flops,
                   double bytes);

} // namespace par::rt

#endif // PAR_RUNTIME_CORE_PROFILE_H
