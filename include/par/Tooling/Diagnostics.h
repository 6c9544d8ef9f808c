//===- Diagnostics.h - How the tooling reports bad input --------*- C++ -*-===//
//
// The tooling library serves command-line drivers: on bad input (a missing
// file, a program that does not fit the request) it prints
// "<tool>: error: <message>" and ends the process with status 1, as
// par-run always has. The session API below it reports statuses instead.
// The exit skips atexit handlers: in a job, the runtime's MPI_Finalize
// there would wait for the other ranks, which wait in a collective for
// this one; the job's launcher ends them when this rank exits non-zero.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_DIAGNOSTICS_H
#define PAR_TOOLING_DIAGNOSTICS_H

#include "par/Runtime/par_runtime.h"

#include <string>

namespace par::tooling {

/// The name errors start with ("par-run").
void setToolName(const std::string &name);
const std::string &toolName();

/// Prints "<tool>: error: <msg>" to stderr, flushes stdout, runs the
/// cleanups registered with atFatal and exits with status 1.
[[noreturn]] void fatal(const std::string &msg);
/// Registers `cleanup` (e.g. removing a temporary directory) for fatal
/// and crash.
void atFatal(void (*cleanup)());

/// Prints "<tool>: <msg>" to stderr, runs the cleanups and aborts (a
/// deliberate crash, for tests of the failure path).
[[noreturn]] void crash(const std::string &msg);

/// fatal(what + ": " + the context's last error) unless `s` is PAR_OK.
void checkRuntime(par_status_t s, par_rt_context_t *ctx,
                  const std::string &what);

} // namespace par::tooling

#endif // PAR_TOOLING_DIAGNOSTICS_H
