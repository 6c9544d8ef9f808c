//===- Context.cpp - Creating contexts, their backends, errors, aborts ----===//
//
// par_rt_context_create picks the world (local or MPI, from the options or
// the launcher's environment), creates its backend, and for
// PAR_BACKEND_CUDA starts the device backend on top of it: each process
// creates its device state, all agree on the outcome, the device backend
// bootstraps over the world broadcast, all agree again. Agreeing matters: a
// node without a GPU must make every process fail with the same message
// instead of leaving the others blocked in a collective bootstrap.
//
// Also here: the process-wide state (live contexts, the last create error),
// the error helpers every entry point uses, and `die`, which ends the whole
// job when a kernel fails. A created context of more than one process
// starts its collective watchdog (Watchdog.h) last.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "BackendLoader.h"
#include "Watchdog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

using namespace par::rt;

namespace {

//===----------------------------------------------------------------------===//
// Process-wide state. The ABI promises no thread safety (one context per
// process, one thread), so these are plain globals.
//===----------------------------------------------------------------------===//

/// Live contexts in creation order; the last one is the current context the
/// kernels act on.
std::vector<par_rt_context_t *> liveContexts;
/// Why the last par_rt_context_create failed (there is no context to hold
/// it): par_rt_context_last_error(NULL) returns it.
std::string createError;

par_status_t failCreate(par_status_t status, std::string message) {
  createError = std::move(message);
  return status;
}

/// Whether the launcher's environment says this process is one of an MPI
/// job (the same test par-run makes before re-launching itself).
bool insideMpiJob() {
  for (const char *var :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(var))
      return true;
  return false;
}

/// Creates a backend's state, or returns its status with the message in
/// `error`.
par_status_t createBackend(const par_rt_backend_t *ops,
                           const par_rt_backend_init_t &init, Backend &out,
                           std::string &error) {
  char text[512] = "";
  void *state = nullptr;
  par_status_t st = ops->create(&init, &state, text, sizeof(text));
  if (st == PAR_OK && !state) {
    st = PAR_ERR_UNAVAILABLE;
    std::snprintf(text, sizeof(text), "%s backend: create returned no state",
                  ops->name);
  }
  if (st != PAR_OK) {
    error = text;
    return st;
  }
  out = Backend{ops, state};
  return PAR_OK;
}

/// The world backend's table for `world` (local, or the loaded MPI one).
const par_rt_backend_t *worldTable(par_world_t world, std::string &error) {
  if (world == PAR_WORLD_AUTO)
    world = insideMpiJob() ? PAR_WORLD_MPI : PAR_WORLD_LOCAL;
  if (world == PAR_WORLD_LOCAL)
    return localBackend();
  return loadBackend(BackendLibrary::Mpi, error);
}

par_status_t worldBroadcast(void *user, void *buffer, int64_t bytes,
                            int64_t root) {
  const Backend &world = static_cast<par_rt_context_t *>(user)->world;
  return world.ops->broadcast_world(world.state, buffer, bytes, root);
}

/// Makes every process agree on the outcome of a step that can fail on some
/// processes only: the lowest failing rank's status and message reach all.
/// Returns the agreed status; `message` is this process's own message if it
/// failed, else the failing rank's.
par_status_t agree(par_rt_context_t &ctx, par_status_t local,
                   std::string &message) {
  const Backend &w = ctx.world;
  int32_t mine = local;
  std::vector<int32_t> all(ctx.rank == 0 ? size_t(ctx.worldSize) : 0);
  int64_t first = ctx.worldSize;
  par_status_t st = w.ops->gather_world(w.state, &mine, sizeof(mine),
                                        all.empty() ? nullptr : all.data());
  for (size_t r = 0; r < all.size() && first == ctx.worldSize; ++r)
    if (all[r] != PAR_OK)
      first = int64_t(r);
  if (st == PAR_OK)
    st = w.ops->broadcast_world(w.state, &first, sizeof(first), 0);
  struct {
    int32_t status;
    char text[500];
  } report = {};
  if (st == PAR_OK && first != ctx.worldSize) {
    if (first == ctx.rank) {
      report.status = local;
      std::snprintf(report.text, sizeof(report.text), "%s", message.c_str());
    }
    st = w.ops->broadcast_world(w.state, &report, sizeof(report), first);
  }
  if (local != PAR_OK)
    return local;
  if (st != PAR_OK) {
    message = w.lastError();
    return PAR_ERR_COMMUNICATION;
  }
  if (first == ctx.worldSize)
    return PAR_OK;
  message = std::string(report.text) + " (reported by rank " +
            std::to_string(first) + ")";
  return par_status_t(report.status);
}

/// Starts the device backend of a PAR_BACKEND_CUDA context over its world.
par_status_t startDevice(par_rt_context_t &ctx) {
  std::string message;
  par_rt_backend_init_t init = {};
  init.world = {ctx.rank, ctx.worldSize, ctx.localRank, ctx.tagUpperBound};
  init.world_user = &ctx;
  init.broadcast_world = worldBroadcast;
  const par_rt_backend_t *ops = loadBackend(BackendLibrary::Cuda, message);
  par_status_t local = ops ? createBackend(ops, init, ctx.device, message)
                           : PAR_ERR_UNAVAILABLE;
  par_status_t st = agree(ctx, local, message);
  if (st == PAR_OK && ops->connect) {
    local = ops->connect(ctx.device.state, &init);
    if (local != PAR_OK)
      message = ctx.device.lastError();
    st = agree(ctx, local, message);
  }
  if (st != PAR_OK) {
    if (ctx.device)
      ctx.device.ops->destroy(ctx.device.state);
    ctx.device = Backend();
    return setError(ctx, st, message);
  }
  return PAR_OK;
}

/// Frees what a context holds in its backends (not MPI itself: see
/// par_rt_context_destroy) and the context.
void releaseContext(par_rt_context_t *ctx) {
  stopWatchdog(*ctx);
  if (ctx->device && ctx->device.state != ctx->world.state)
    ctx->device.ops->destroy(ctx->device.state);
  if (ctx->world)
    ctx->world.ops->destroy(ctx->world.state);
  delete ctx;
}

/// Creates the world backend of `ctx` and reads the world from it.
par_status_t startWorld(par_rt_context_t &ctx, const par_rt_options_t &opts,
                        int *argc, char ***argv, std::string &error) {
  const par_rt_backend_t *ops = worldTable(opts.world, error);
  if (!ops)
    return PAR_ERR_UNAVAILABLE;
  par_rt_backend_init_t init = {};
  init.argc = argc;
  init.argv = argv;
  if (par_status_t st = createBackend(ops, init, ctx.world, error))
    return st;
  par_rt_backend_world_t w = {};
  ops->query_world(ctx.world.state, &w);
  ctx.rank = w.rank;
  ctx.worldSize = w.size;
  ctx.localRank = w.local_rank;
  ctx.tagUpperBound = w.tag_upper_bound;
  return PAR_OK;
}

} // namespace

//===----------------------------------------------------------------------===//
// Helpers shared by the core's files
//===----------------------------------------------------------------------===//

par_rt_context_t *par::rt::currentContext() {
  return liveContexts.empty() ? nullptr : liveContexts.back();
}

par_status_t par::rt::setError(par_rt_context_t &ctx, par_status_t status,
                               std::string message) {
  ctx.error = std::move(message);
  return status;
}

par_status_t par::rt::backendStatus(par_rt_context_t &ctx,
                                    const Backend &backend,
                                    par_status_t status) {
  if (status != PAR_OK)
    ctx.error = backend.lastError();
  return status;
}

bool par::rt::beginCall(par_rt_context_t *ctx) {
  if (!ctx)
    return false;
  ctx->error.clear();
  return true;
}

void par::rt::die(const char *kernel, const std::string &why) {
  par_rt_context_t *ctx = currentContext();
  if (ctx)
    std::fprintf(stderr, "par runtime: %s: %s (rank %lld)\n", kernel,
                 why.c_str(), (long long)ctx->rank);
  else
    std::fprintf(stderr, "par runtime: %s: %s\n", kernel, why.c_str());
  std::fflush(stderr);
  // Every rank's collectives would wait for this one forever: take the whole
  // job down. mpirun then exits non-zero. Without a context, MPI may still
  // be up (a failed create keeps it for a fallback): abort through it then.
  if (ctx)
    ctx->world.ops->abort_job(ctx->world.state, 1);
  else if (const par_rt_backend_t *mpi = loadedMpiBackend())
    mpi->abort_job(nullptr, 1);
  std::_Exit(1);
}

//===----------------------------------------------------------------------===//
// Host API: contexts
//===----------------------------------------------------------------------===//

PAR_RT_EXPORT int par_rt_inside_mpi_job(void) { return insideMpiJob(); }

PAR_RT_EXPORT void par_rt_options_initialize(par_rt_options_t *options) {
  if (!options)
    return;
  options->backend = PAR_BACKEND_CPU;
  options->world = PAR_WORLD_AUTO;
}

PAR_RT_EXPORT par_status_t par_rt_context_create(
    const par_rt_options_t *options, int *argc, char ***argv,
    par_rt_context_t **out_context) {
  createError.clear();
  if (!out_context)
    return failCreate(PAR_ERR_INVALID_ARGUMENT, "out_context is NULL");
  *out_context = nullptr;
  par_rt_options_t opts;
  par_rt_options_initialize(&opts);
  if (options)
    opts = *options;
  if (opts.backend != PAR_BACKEND_CPU && opts.backend != PAR_BACKEND_CUDA)
    return failCreate(PAR_ERR_INVALID_ARGUMENT,
                      "unknown backend " + std::to_string(int(opts.backend)));
  if (opts.world != PAR_WORLD_AUTO && opts.world != PAR_WORLD_MPI &&
      opts.world != PAR_WORLD_LOCAL)
    return failCreate(PAR_ERR_INVALID_ARGUMENT,
                      "unknown world " + std::to_string(int(opts.world)));

  auto ctx = std::make_unique<par_rt_context_t>();
  ctx->backend = opts.backend;
  std::string message;
  if (par_status_t st = startWorld(*ctx, opts, argc, argv, message)) {
    releaseContext(ctx.release());
    return failCreate(st, message);
  }
  if (opts.backend == PAR_BACKEND_CUDA) {
    if (par_status_t st = startDevice(*ctx)) {
      message = ctx->error;
      releaseContext(ctx.release());
      return failCreate(st, message);
    }
  } else {
    ctx->device = ctx->world;
  }
  // Once the world and device are up (their bootstraps are not watched).
  startWatchdog(*ctx);
  liveContexts.push_back(ctx.get());
  *out_context = ctx.release();
  return PAR_OK;
}

PAR_RT_EXPORT void par_rt_context_destroy(par_rt_context_t *context) {
  if (!context)
    return;
  liveContexts.erase(
      std::remove(liveContexts.begin(), liveContexts.end(), context),
      liveContexts.end());
  const par_rt_backend_t *world = context->world.ops;
  releaseContext(context);
  // MPI is finalized with the last context (if the runtime initialized it),
  // not with a failed create: the caller may fall back to another backend,
  // and MPI cannot be initialized twice.
  if (liveContexts.empty() && world->finalize)
    world->finalize();
}

PAR_RT_EXPORT const char *
par_rt_context_last_error(const par_rt_context_t *context) {
  return context ? context->error.c_str() : createError.c_str();
}

PAR_RT_EXPORT int32_t par_rt_api_version(void) { return PAR_RT_API_VERSION; }
