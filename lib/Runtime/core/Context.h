//===- Context.h - The runtime context and core internals -------*- C++ -*-===//
//
// What a par_rt_context_t holds, and the helpers the core's files share:
// Context.cpp (creation, the world and device backends, errors, aborting),
// Mesh.cpp (mesh, axes codes, groups, peers), HostApi.cpp and Kernels.cpp
// (the C entry points). Not installed, not part of the ABI.
//
// A context talks to at most two backends through their tables
// (common/BackendApi.h): `world` (local or MPI) for the host API's world
// operations, and `device` for the kernels; for the CPU backend both are the
// same table and state.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CORE_CONTEXT_H
#define PAR_RUNTIME_CORE_CONTEXT_H

#include "../common/BackendApi.h"
#include "par/Runtime/par_runtime.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

// The library is built with hidden visibility; only the ABI is exported.
#define PAR_RT_EXPORT extern "C" __attribute__((visibility("default")))

namespace par::rt {

class Watchdog;

/// One backend's table and this context's state in it.
struct Backend {
  const par_rt_backend_t *ops = nullptr;
  void *state = nullptr;

  explicit operator bool() const { return ops && state; }
  const char *lastError() const { return ops->last_error(state); }
};

/// The kernels the statistics account per name, in the order
/// par_rt_context_kernel_stats lists them: every entry point of Kernels.cpp
/// that communicates (all_slice and the matmuls are local).
inline constexpr const char *kKernelNames[] = {
    "all_reduce",       "bucket_all_reduce", "all_reduce_start",
    "wait",             "all_gather",        "all_gather_start",
    "reduce_scatter",   "all_to_all",        "broadcast",
    "send",             "send_async",        "recv"};
inline constexpr int kNumKernels =
    int(sizeof(kKernelNames) / sizeof(kKernelNames[0]));

/// Zeroed per-kernel records, named by kKernelNames.
void resetKernelStats(par_rt_kernel_stats_t (&stats)[kNumKernels]);

/// The group of processes one axes code denotes, for this process: pure
/// arithmetic on the mesh (so all_slice, which does not communicate, never
/// creates a communicator). The backend caches its communicator by `desc.axes`.
struct Group {
  std::vector<int> axes;       // listed mesh axes, in listed order
  par_rt_backend_group_t desc; // axes code, size, index, color
};

} // namespace par::rt

struct par_rt_context_t {
  par_backend_t backend = PAR_BACKEND_CPU;
  par::rt::Backend world;  // local or MPI
  par::rt::Backend device; // == world for PAR_BACKEND_CPU

  int64_t rank = 0;
  int64_t worldSize = 1;
  int64_t localRank = 0;         // rank among the processes on this node
  int64_t tagUpperBound = 32767; // the world's largest send/recv tag

  bool hasMesh = false;
  std::vector<int64_t> meshSizes;
  std::vector<int64_t> coords; // this process's coordinates
  std::unordered_map<int64_t, par::rt::Group> groups;

  std::string error; // par_rt_context_last_error
  par_rt_stats_t stats = {0, 0.0, 0.0};
  /// The same per kernel, indexed like par::rt::kKernelNames.
  par_rt_kernel_stats_t kernelStats[par::rt::kNumKernels];

  par_rt_context_t() { par::rt::resetKernelStats(kernelStats); }

  /// Kernel records while tracing (par_rt_trace_enable).
  bool tracing = false;
  std::vector<par_rt_trace_event_t> trace;

  /// Buckets and gathers started (par_rt_k_all_reduce_start,
  /// par_rt_k_all_gather_start) and not waited for: the
  /// handle the program holds -> the device backend's request. Handles are
  /// never reused, so a stale one is recognised as such.
  std::unordered_map<int64_t, void *> requests;
  /// Their groups' axes codes, for the watchdog's message.
  std::unordered_map<int64_t, int64_t> requestAxes;
  /// Started all-gathers that PAR_RT_DEFER_STARTED=1 holds back (Kernels.cpp):
  /// the handle -> the blocking all-gather the wait runs.
  struct DeferredGather {
    const void *in;
    void *out;
    int64_t C, D;
    int32_t dtype;
    int64_t axes;
  };
  std::unordered_map<int64_t, DeferredGather> deferredGathers;
  int64_t nextRequest = 1;

  /// Watchdog.h: ends the job when a collective does not complete within
  /// the timeout; null for one process or a timeout of 0.
  par::rt::Watchdog *watchdog = nullptr;
};

namespace par::rt {

/// The last context created and not destroyed, or null.
par_rt_context_t *currentContext();

/// Prints "par runtime: <kernel>: <why> (rank r)" and ends the whole job
/// (through the world backend, so that mpirun tears every process down).
[[noreturn]] void die(const char *kernel, const std::string &why);

/// Sets ctx.error and returns `status`.
par_status_t setError(par_rt_context_t &ctx, par_status_t status,
                      std::string message);

/// `status` from a call into `backend`: on failure copies the backend's
/// message into ctx.error.
par_status_t backendStatus(par_rt_context_t &ctx, const Backend &backend,
                           par_status_t status);

/// Clears ctx.error at the start of a host API call; false for a null
/// context (the call then returns PAR_ERR_INVALID_ARGUMENT).
bool beginCall(par_rt_context_t *ctx);

/// Decodes an axes code (byte k = listed axis k + 1, 0 ends the list) and
/// checks it against the mesh. Returns an empty string or the reason.
std::string decodeAxes(const par_rt_context_t &ctx, int64_t code,
                       std::vector<int> &axes);

/// The group of `code` for this process, computed once per mesh and code.
/// Returns null and sets `why` for an invalid code.
Group *findGroup(par_rt_context_t &ctx, int64_t code, std::string &why);

/// World rank of this process with its coordinates on the listed axes of
/// `axes` replaced by `coords` (16 bits per listed axis, listed order), or
/// -1 with `why` set.
int64_t peerRank(const par_rt_context_t &ctx, int64_t axes, int64_t coords,
                 std::string &why);

/// Completes started bucket `request` (Kernels.cpp): PAR_OK, or
/// PAR_ERR_INVALID_ARGUMENT for a handle that was never started or is
/// already complete, or the backend's failure; sets ctx.error.
par_status_t waitRequest(par_rt_context_t &ctx, int64_t request);

/// The local backend (core/LocalBackend.cpp): a world of one process.
const par_rt_backend_t *localBackend();

} // namespace par::rt

#endif // PAR_RUNTIME_CORE_CONTEXT_H
