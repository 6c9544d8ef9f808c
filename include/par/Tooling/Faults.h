//===- Faults.h - Faults injected on purpose, for the fault tests -*- C++ -*-===//
//
// Tests of the failure paths (test/Faults) make one rank misbehave at a
// chosen train step through the environment (the launcher forwards these
// variables to every rank):
//
//   PAR_RUN_INJECT_HANG=R:S  rank R sleeps, as a rank stuck in compute,
//                            before step S (for an hour): the others wait
//                            in their next collective until the runtime's
//                            collective watchdog ends the job
//                            (par-run --collective-timeout)
//   PAR_RUN_INJECT_KILL=R:S  rank R raises SIGKILL on itself before step S:
//                            par-run names the rank and the signal
//
//   PAR_RUN_INJECT_CRASH=R   rank R crashes (abort) just before the program
//                            runs (or trains), while the others wait in
//                            its collectives
//
// Steps count from 1, as the train log does.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_FAULTS_H
#define PAR_TOOLING_FAULTS_H

#include <cstdint>

namespace par::tooling {

/// Called by the train loops (plain and pipelined) at the start of every
/// step: injects the faults the environment asks for on `rank` before
/// `step`. Cheap when none is asked for.
void injectStepFaults(int64_t rank, int64_t step);

/// PAR_RUN_INJECT_CRASH: called once before the program runs.
void injectCrash(int64_t rank);

} // namespace par::tooling

#endif // PAR_TOOLING_FAULTS_H
