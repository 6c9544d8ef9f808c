//===- HostApi.cpp - Statistics, tracing and the world operations ---------===//
//
// The host API entry points that are neither context creation (Context.cpp)
// nor mesh and groups (Mesh.cpp) nor kernels (Kernels.cpp): statistics (in
// total and per kernel) and tracing, kept by the core for every backend, and the world operations
// par-run uses (barrier, broadcast_world, gather_world), which go to the
// world backend (local or MPI, also under PAR_BACKEND_CUDA). Every call
// returns a status and leaves its message in the context. The world
// operations and par_rt_wait_sends are waits the watchdog (Watchdog.h)
// times, like the kernels' collectives.
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "Watchdog.h"

#include <chrono>

using namespace par::rt;

PAR_RT_EXPORT void par_rt_context_stats(const par_rt_context_t *context,
                                        par_rt_stats_t *out) {
  if (!out)
    return;
  *out = context ? context->stats : par_rt_stats_t{0, 0.0, 0.0};
}

void par::rt::resetKernelStats(par_rt_kernel_stats_t (&stats)[kNumKernels]) {
  for (int k = 0; k < kNumKernels; ++k)
    stats[k] = par_rt_kernel_stats_t{kKernelNames[k], 0, 0.0, 0.0};
}

PAR_RT_EXPORT void par_rt_context_reset_stats(par_rt_context_t *context) {
  if (!context)
    return;
  context->stats = par_rt_stats_t{0, 0.0, 0.0};
  resetKernelStats(context->kernelStats);
}

PAR_RT_EXPORT int64_t
par_rt_context_kernel_stats(const par_rt_context_t *context,
                            par_rt_kernel_stats_t *out, int64_t capacity) {
  if (!context)
    return 0;
  for (int64_t k = 0; k < kNumKernels && k < capacity && out; ++k)
    out[k] = context->kernelStats[k];
  return kNumKernels;
}

PAR_RT_EXPORT void par_rt_trace_enable(par_rt_context_t *context,
                                       int enable) {
  if (context)
    context->tracing = enable != 0;
}

PAR_RT_EXPORT int64_t par_rt_trace_take(par_rt_context_t *context,
                                        par_rt_trace_event_t *events,
                                        int64_t capacity) {
  if (!context)
    return 0;
  int64_t n = context->trace.size();
  for (int64_t i = 0; i < n && i < capacity && events; ++i)
    events[i] = context->trace[i];
  context->trace.clear();
  return n;
}

PAR_RT_EXPORT double par_rt_now_seconds(void) {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

PAR_RT_EXPORT par_status_t par_rt_barrier(par_rt_context_t *context) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  const Backend &w = context->world;
  CollectiveScope watched(*context, HostWait::Barrier);
  return backendStatus(*context, w, w.ops->barrier(w.state));
}

PAR_RT_EXPORT par_status_t par_rt_broadcast_world(par_rt_context_t *context,
                                                  void *buffer, int64_t bytes,
                                                  int64_t root) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  par_rt_context_t &ctx = *context;
  if (bytes < 0 || root < 0 || root >= ctx.worldSize || (bytes && !buffer))
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "broadcast_world: bad bytes, root or buffer");
  const Backend &w = ctx.world;
  CollectiveScope watched(ctx, HostWait::BroadcastWorld);
  return backendStatus(ctx, w,
                       w.ops->broadcast_world(w.state, buffer, bytes, root));
}

PAR_RT_EXPORT par_status_t par_rt_gather_world(par_rt_context_t *context,
                                               const void *local,
                                               int64_t bytes,
                                               void *gathered_on_root) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  par_rt_context_t &ctx = *context;
  if (bytes < 0 || (bytes && !local))
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "gather_world: bad bytes or local buffer");
  const Backend &w = ctx.world;
  CollectiveScope watched(ctx, HostWait::GatherWorld);
  return backendStatus(
      ctx, w, w.ops->gather_world(w.state, local, bytes, gathered_on_root));
}

PAR_RT_EXPORT par_status_t par_rt_wait_sends(par_rt_context_t *context) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  const Backend &d = context->device;
  CollectiveScope watched(*context, HostWait::WaitSends);
  return backendStatus(*context, d, d.ops->wait_sends(d.state));
}
