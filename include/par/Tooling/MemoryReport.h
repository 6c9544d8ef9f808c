//===- MemoryReport.h - Predicted and measured memory per rank --*- C++ -*-===//
//
// par-run's memory line and its limit (docs/RationaleMemory.md): the
// runtime counts what the programs hold (their pool allocations and the
// session's buffers) with its high-water mark; the compiler's memory plan
// (the manifest's "memory" entry of a function) predicts it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_MEMORYREPORT_H
#define PAR_TOOLING_MEMORYREPORT_H

#include "par/Runtime/par_runtime.h"
#include "par/Runtime/par_session.h"
#include "par/Support/ByteSize.h"

#include <cstdint>
#include <string>

namespace par::tooling {

/// Formats bytes in MiB with one decimal ("12.5 MiB").
std::string formatMiB(int64_t bytes);

/// The predicted peak of `fn`'s memory plan in bytes; -1 when `fn` is null
/// or the artifact has no plan.
int64_t predictedPeak(par_function_t *fn);

/// Makes every allocation past `limitBytes` of this rank's programs fail
/// with a message that names the running function, what it was
/// allocating and the plan's figure for `fn` (null: none), and ends the
/// process (mpirun then ends the others).
void setMemoryLimit(int64_t limitBytes, par_function_t *fn, int64_t rank);

/// The predicted peak the limit's message names from now on (< 0: none;
/// a pipelined run's, known once its stages are loaded).
void setMemoryPrediction(int64_t predictedBytes);

/// Records this process's resident set (VmRSS) before the run's first
/// buffer, the baseline of reportMemory's resident growth.
void noteResidentBaseline();

/// Rank 0 prints, once for the run, "par-run: memory (rank R): predicted P
/// MiB, measured peak M MiB; resident peak H MiB over B MiB before the
/// first buffer (+G MiB)" for the rank R with the largest measured peak
/// (`predicted` is that rank's plan; < 0: the artifact has none, printed
/// "none"; M the runtime allocator's high-water mark; H the kernel's
/// VmHWM, B the VmRSS noteResidentBaseline saw). Collective: every rank
/// calls it.
void reportMemory(par_rt_context_t *ctx, int64_t predicted);

} // namespace par::tooling

#endif // PAR_TOOLING_MEMORYREPORT_H
