//===- Watchdog.h - Ending a job whose collective never completes -*- C++ -*-===//
//
// A collective that one rank never reaches (a rank stuck in compute, a lost
// peer) would leave every other rank waiting forever. The watchdog ends
// such a job with a message naming the collective and the ranks that have
// not reached it:
//
//   par runtime: rank 2: all_reduce #57 over mesh axes {1} (ranks 0-3) did
//   not complete within 3 s: rank 3 has not reached it (its last collective
//   was #56)
//
// Each rank publishes, in one 64-byte slot of a node-shared table (a POSIX
// shared-memory object rank 0 creates at context creation, names over the
// world broadcast and unlinks once every rank has mapped it), the number of
// collectives it entered, whether it is inside one, which one, since when
// and with which group or peer: plain atomic stores at kernel entry and
// exit, nothing else on the hot path. A thread (no MPI calls, no locks the
// main thread takes while communicating) wakes every 100 ms; when its rank
// has been inside one collective longer than the timeout it reads the
// other ranks' slots, prints the message and _exit(124)s (timeout(1)'s
// code; par-run's launcher says what it means); the launcher
// (mpirun) then stops the others. Ranks on another node than rank 0 have
// no shared slots: they still time out, and say the others' state is
// unknown.
//
// The timeout is the environment's PAR_COLLECTIVE_TIMEOUT (seconds, may be
// fractional; default 600, as NCCL's and torch.distributed's; 0 disables).
// par-run --collective-timeout sets it. A single-process world has none.
// Every wait counts: the kernels' collectives and point-to-point transfers
// (Kernels.cpp) and the host API's world operations and waits (HostApi.cpp),
// including the barrier the ranks of par-run wait in while rank 0 computes
// --verify's reference, so the timeout must exceed that.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CORE_WATCHDOG_H
#define PAR_RUNTIME_CORE_WATCHDOG_H

#include "Context.h"

#include <cstdint>

namespace par::rt {

/// What a rank waits in that is not a kernel (kKernelNames' entries come
/// first; these follow them in the watchdog's name table).
enum class HostWait : int {
  Barrier = kNumKernels,
  BroadcastWorld,
  GatherWorld,
  WaitSends,
  RequestWait,
};

class Watchdog;

/// The exit status of a rank the watchdog ends.
inline constexpr int kTimeoutExitCode = 124;

/// Starts the watchdog of `ctx` (a world collective among all ranks: every
/// rank of the world must call it, after the world is up). Does nothing
/// for a world of one process or a timeout of 0.
void startWatchdog(par_rt_context_t &ctx);
/// Stops and frees the watchdog of `ctx`, if any.
void stopWatchdog(par_rt_context_t &ctx);
/// Tells the watchdog the mesh (the groups it names are computed from it).
void watchdogSetMesh(par_rt_context_t &ctx);

/// Marks this rank as inside collective `id` (a kKernelNames index or a
/// HostWait) over the group of axes code `axes`, or with world rank `peer`
/// (-1: a group) until leaveCollective.
void enterCollective(par_rt_context_t &ctx, int id, int64_t axes,
                     int64_t peer);
void leaveCollective(par_rt_context_t &ctx);

/// enterCollective/leaveCollective for one scope (the host API's waits).
class CollectiveScope {
public:
  CollectiveScope(par_rt_context_t &ctx, HostWait what) : ctx(ctx) {
    enterCollective(ctx, int(what), 0, -1);
  }
  ~CollectiveScope() { leaveCollective(ctx); }
  CollectiveScope(const CollectiveScope &) = delete;
  CollectiveScope &operator=(const CollectiveScope &) = delete;

private:
  par_rt_context_t &ctx;
};

} // namespace par::rt

#endif // PAR_RUNTIME_CORE_WATCHDOG_H
