//===- Runtime.cpp - par runtime host API and kernel entry points ---------===//
//
// The C ABI of par_runtime.h. The host API returns statuses and keeps a
// message per context; the kernel entry points validate their scalar
// arguments, resolve the axes code to a group, dispatch to the CPU (MPI)
// kernels or to the CUDA backend's table, account statistics, and abort the
// job with "par runtime: <kernel>: <reason>" on any failure: compiled code
// has no way to handle a status, and a collective that failed on one process
// would leave the others waiting forever.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "../common/Dtype.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

// The library is built with hidden visibility; only the ABI is exported.
#define PAR_RT_EXPORT extern "C" __attribute__((visibility("default")))

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
/// MPI_Init_thread was ours, so MPI_Finalize is ours too.
bool weInitializedMpi = false;

par_rt_context_t *currentContext() {
  return liveContexts.empty() ? nullptr : liveContexts.back();
}

bool mpiUsable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

/// Registered when we initialize MPI. It finalizes MPI when the process
/// exits without destroying its last context, notably after a failed
/// par_rt_context_create (which keeps MPI alive so that the caller can fall
/// back to another backend, since MPI cannot be initialized twice).
void finalizeAtExit() {
  if (mpiUsable())
    MPI_Finalize();
}

par_status_t failCreate(par_status_t status, std::string message) {
  createError = std::move(message);
  return status;
}

void clearError(par_rt_context_t *ctx) {
  if (ctx)
    ctx->error.clear();
}

void freeGroups(par_rt_context_t &ctx) {
  if (mpiUsable())
    for (auto &entry : ctx.groups)
      if (entry.second.comm != MPI_COMM_NULL)
        MPI_Comm_free(&entry.second.comm);
  ctx.groups.clear();
  if (ctx.cuda)
    ctx.cuda->reset_groups(ctx.cudaState);
}

//===----------------------------------------------------------------------===//
// Axes codes and groups
//===----------------------------------------------------------------------===//

/// Decodes an axes code (byte k = listed axis k + 1, 0 ends the list) and
/// checks it against the mesh. Returns an empty string or the reason.
std::string decodeAxes(const par_rt_context_t &ctx, int64_t code,
                       std::vector<int> &axes) {
  auto bits = static_cast<uint64_t>(code);
  int numAxes = int(ctx.meshSizes.size());
  axes.clear();
  for (int k = 0; k < 8; ++k) {
    unsigned byte = (bits >> (8 * k)) & 0xFF;
    if (byte == 0) {
      if (bits >> (8 * k)) {
        char hex[40];
        std::snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)bits);
        return std::string("malformed axes code ") + hex +
               " (non-zero bytes after the terminating 0)";
      }
      break;
    }
    int axis = int(byte) - 1;
    if (axis >= numAxes)
      return "axes code lists axis " + std::to_string(axis) +
             " but the mesh has " + std::to_string(numAxes) + " axes";
    if (std::find(axes.begin(), axes.end(), axis) != axes.end())
      return "axes code lists axis " + std::to_string(axis) + " twice";
    axes.push_back(axis);
  }
  return {};
}

/// The group of `code` for this process, computed once per mesh and code.
/// Returns null and sets `why` for an invalid code.
Group *findGroup(par_rt_context_t &ctx, int64_t code, std::string &why) {
  auto it = ctx.groups.find(code);
  if (it != ctx.groups.end())
    return &it->second;
  Group g;
  g.axesCode = code;
  why = decodeAxes(ctx, code, g.axes);
  if (!why.empty())
    return nullptr;
  // index: row-major over the listed axes in listed order.
  for (int a : g.axes) {
    g.size *= ctx.meshSizes[a];
    g.index = g.index * ctx.meshSizes[a] + ctx.coords[a];
  }
  // color: row-major over the other axes in mesh order; the processes that
  // agree on those coordinates form the group.
  for (size_t a = 0; a < ctx.meshSizes.size(); ++a)
    if (std::find(g.axes.begin(), g.axes.end(), int(a)) == g.axes.end())
      g.color = g.color * ctx.meshSizes[a] + ctx.coords[a];
  return &ctx.groups.emplace(code, std::move(g)).first->second;
}

int64_t linearRank(const par_rt_context_t &ctx,
                   const std::vector<int64_t> &coords) {
  int64_t r = 0;
  for (size_t a = 0; a < coords.size(); ++a)
    r = r * ctx.meshSizes[a] + coords[a];
  return r;
}

//===----------------------------------------------------------------------===//
// Kernel plumbing
//===----------------------------------------------------------------------===//

[[noreturn]] void die(const char *kernel, const std::string &why) {
  par_rt_context_t *ctx = currentContext();
  if (ctx)
    std::fprintf(stderr, "par runtime: %s: %s (rank %lld)\n", kernel,
                 why.c_str(), (long long)ctx->rank);
  else
    std::fprintf(stderr, "par runtime: %s: %s\n", kernel, why.c_str());
  std::fflush(stderr);
  // Every rank's collectives would wait for this one forever: take the whole
  // job down. mpirun then exits non-zero.
  if (mpiUsable())
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

par_rt_context_t &kernelContext(const char *kernel) {
  par_rt_context_t *ctx = currentContext();
  if (!ctx)
    die(kernel, "no current context (par_rt_context_create was not called)");
  if (!ctx->hasMesh)
    die(kernel, "no mesh (par_rt_context_set_mesh was not called)");
  return *ctx;
}

void *ptr(int64_t address) {
  return reinterpret_cast<void *>(static_cast<intptr_t>(address));
}

int64_t checkedDtype(const char *kernel, int32_t dtype) {
  int64_t es = dtypeSize(dtype);
  if (!es)
    die(kernel, "unknown dtype " + std::to_string(dtype));
  return es;
}

void checkReduction(const char *kernel, int32_t dtype, int32_t reduction) {
  if (!isValidReduction(reduction))
    die(kernel, "unknown reduction " + std::to_string(reduction));
  if (dtype == PAR_I1 && reduction == PAR_AVG)
    die(kernel, "avg is not defined for i1");
}

void checkSize(const char *kernel, const char *what, int64_t v) {
  if (v < 0)
    die(kernel, std::string(what) + " is negative (" + std::to_string(v) + ")");
}

/// a * b, aborting on overflow (sizes come straight from compiled code).
int64_t mul(const char *kernel, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    die(kernel, "buffer size overflows int64");
  return r;
}

void checkBuffer(const char *kernel, const char *what, int64_t address,
                 int64_t bytes) {
  if (bytes > 0 && address == 0)
    die(kernel, std::string(what) + " is null");
}

Group &kernelGroup(par_rt_context_t &ctx, const char *kernel, int64_t axes) {
  std::string why;
  Group *g = findGroup(ctx, axes, why);
  if (!g)
    die(kernel, why);
  return *g;
}

par_rt_cuda_group_t cudaGroup(const Group &g) {
  return {g.axesCode, g.size, g.index, g.color};
}

double ring(int64_t n) { return n <= 1 ? 0.0 : double(n - 1) / double(n); }

/// Finishes a kernel: aborts on failure, otherwise accounts one collective
/// with `bytes` sent (the ring formulas par-comm-report uses, so that measured
/// and predicted traffic compare directly).
void finish(par_rt_context_t &ctx, const char *kernel, par_status_t status,
            double start, double bytes, bool counted = true) {
  if (status != PAR_OK)
    die(kernel, ctx.cuda ? ctx.cuda->last_error(ctx.cudaState) : ctx.error);
  if (!counted)
    return;
  double end = par_rt_now_seconds();
  ctx.stats.collectives += 1;
  ctx.stats.bytes_sent += bytes;
  ctx.stats.seconds += end - start;
  if (ctx.tracing)
    ctx.trace.push_back({kernel, start, end, bytes});
}

/// World rank of this process with its coordinates on the listed axes
/// replaced by `coords` (16 bits per listed axis, listed order).
int64_t peerRank(par_rt_context_t &ctx, const char *kernel, int64_t axes,
                 int64_t coords) {
  std::vector<int> listed;
  std::string why = decodeAxes(ctx, axes, listed);
  if (!why.empty())
    die(kernel, why);
  if (listed.size() > 4)
    die(kernel, "at most 4 listed axes fit the 64-bit coords (16 bits each)");
  auto bits = static_cast<uint64_t>(coords);
  if (listed.size() < 4 && (bits >> (16 * listed.size())) != 0)
    die(kernel, "coords has bits beyond the " + std::to_string(listed.size()) +
                    " listed axes");
  std::vector<int64_t> c = ctx.coords;
  for (size_t k = 0; k < listed.size(); ++k) {
    int64_t v = int64_t((bits >> (16 * k)) & 0xFFFF);
    int a = listed[k];
    if (v >= ctx.meshSizes[a])
      die(kernel, "coordinate " + std::to_string(v) + " on axis " +
                      std::to_string(a) + " is outside its size " +
                      std::to_string(ctx.meshSizes[a]));
    c[a] = v;
  }
  return linearRank(ctx, c);
}

void checkTag(par_rt_context_t &ctx, const char *kernel, int64_t tag) {
  if (tag < 0 || tag > ctx.tagUpperBound)
    die(kernel, "tag " + std::to_string(tag) + " is outside [0, " +
                    std::to_string(ctx.tagUpperBound) + "]");
}

//===----------------------------------------------------------------------===//
// CUDA backend start-up
//===----------------------------------------------------------------------===//

int hostBroadcastWorld(void *user, void *buffer, int64_t bytes, int64_t root) {
  auto *ctx = static_cast<par_rt_context_t *>(user);
  return bcastBytes(*ctx, buffer, bytes, int(root), ctx->world) == PAR_OK ? 0
                                                                          : 1;
}

/// Makes every process agree on the outcome of a step that can fail on some
/// processes only (a node without a GPU): the lowest failing rank's status
/// and message reach all, so nobody goes on into a collective bootstrap the
/// others never join. Returns the agreed status; `message` is this process's
/// own message if it failed, else the failing rank's.
par_status_t agree(par_rt_context_t &ctx, par_status_t local,
                   std::string &message) {
  int first = local != PAR_OK ? int(ctx.rank) : int(ctx.worldSize);
  int rc = MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, ctx.world);
  if (rc != MPI_SUCCESS) {
    mpiError(ctx, "MPI_Allreduce", rc);
    message = ctx.error;
    return PAR_ERR_COMMUNICATION;
  }
  if (first == int(ctx.worldSize))
    return PAR_OK;
  struct {
    int32_t status;
    char text[500];
  } report = {};
  if (first == int(ctx.rank)) {
    report.status = local;
    std::snprintf(report.text, sizeof(report.text), "%s", message.c_str());
  }
  rc = MPI_Bcast(&report, sizeof(report), MPI_BYTE, first, ctx.world);
  if (local != PAR_OK)
    return local;
  if (rc != MPI_SUCCESS) {
    mpiError(ctx, "MPI_Bcast", rc);
    message = ctx.error;
    return PAR_ERR_COMMUNICATION;
  }
  message = std::string(report.text) + " (reported by rank " +
            std::to_string(first) + ")";
  return par_status_t(report.status);
}

par_status_t startCuda(par_rt_context_t &ctx) {
  std::string message;
  par_status_t local = PAR_OK;
  const par_rt_cuda_backend_t *table = loadCudaBackend(message);
  void *state = nullptr;
  if (!table) {
    local = PAR_ERR_UNAVAILABLE;
  } else {
    char text[512] = "";
    local = table->create(ctx.localRank, &state, text, sizeof(text));
    if (local != PAR_OK)
      message = text;
  }
  if (par_status_t st = agree(ctx, local, message)) {
    if (state)
      table->destroy(state);
    return setError(ctx, st, message);
  }
  par_rt_cuda_host_t host = {&ctx, hostBroadcastWorld};
  local = table->connect(state, &host, ctx.rank, ctx.worldSize);
  if (local != PAR_OK)
    message = table->last_error(state);
  if (par_status_t st = agree(ctx, local, message)) {
    table->destroy(state);
    return setError(ctx, st, message);
  }
  ctx.cuda = table;
  ctx.cudaState = state;
  return PAR_OK;
}

void releaseContext(par_rt_context_t *ctx) {
  freeGroups(*ctx);
  if (ctx->cuda)
    ctx->cuda->destroy(ctx->cudaState);
  ctx->cuda = nullptr;
  if (mpiUsable()) {
    if (ctx->peers != MPI_COMM_NULL)
      MPI_Comm_free(&ctx->peers);
    if (ctx->world != MPI_COMM_NULL)
      MPI_Comm_free(&ctx->world);
  }
  delete ctx;
}

} // namespace

//===----------------------------------------------------------------------===//
// Helpers shared with MpiKernels.cpp
//===----------------------------------------------------------------------===//

par_status_t par::rt::setError(par_rt_context_t &ctx, par_status_t status,
                               std::string message) {
  ctx.error = std::move(message);
  return status;
}

par_status_t par::rt::mpiError(par_rt_context_t &ctx, const char *call,
                               int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    std::snprintf(text, sizeof(text), "error code %d", code);
  return setError(ctx, PAR_ERR_COMMUNICATION,
                  std::string(call) + " failed: " + text);
}

unsigned char *par::rt::scratch(par_rt_context_t &ctx, int which,
                                size_t bytes) {
  std::vector<unsigned char> &buf = ctx.scratch[which];
  if (buf.size() < bytes)
    buf.resize(bytes);
  return buf.data();
}

par_status_t par::rt::groupComm(par_rt_context_t &ctx, Group &group,
                                MPI_Comm &out) {
  if (group.comm == MPI_COMM_NULL) {
    // Collective over the world: every process creates its own group's
    // communicator in the same call. SPMD programs reach each collective on
    // every process, so the first use of an axes code is reached by all.
    int rc = MPI_Comm_split(ctx.world, int(group.color), int(group.index),
                            &group.comm);
    if (rc != MPI_SUCCESS)
      return mpiError(ctx, "MPI_Comm_split", rc);
  }
  out = group.comm;
  return PAR_OK;
}

//===----------------------------------------------------------------------===//
// Host API
//===----------------------------------------------------------------------===//

PAR_RT_EXPORT void par_rt_options_initialize(par_rt_options_t *options) {
  if (options)
    options->backend = PAR_BACKEND_CPU;
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

  int initialized = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return failCreate(PAR_ERR_UNAVAILABLE,
                      "MPI was already finalized in this process and cannot "
                      "be initialized again");
  MPI_Initialized(&initialized);
  if (!initialized) {
    // SERIALIZED, not FUNNELED: the context may be used from a thread other
    // than the one that created it, as long as only one at a time.
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS)
      return failCreate(PAR_ERR_COMMUNICATION, "MPI_Init_thread failed");
    weInitializedMpi = true;
    std::atexit(finalizeAtExit);
    // MPI is ours: report errors instead of MPI's default of aborting.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }

  auto ctx = std::make_unique<par_rt_context_t>();
  ctx->backend = opts.backend;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &ctx->world);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &ctx->peers);
  if (rc != MPI_SUCCESS) {
    mpiError(*ctx, "MPI_Comm_dup", rc);
    std::string message = ctx->error;
    releaseContext(ctx.release());
    return failCreate(PAR_ERR_COMMUNICATION, message);
  }
  MPI_Comm_set_errhandler(ctx->world, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(ctx->peers, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(ctx->world, &rank);
  MPI_Comm_size(ctx->world, &size);
  ctx->rank = rank;
  ctx->worldSize = size;

  // The rank among the processes sharing this node picks the GPU.
  MPI_Comm node;
  if (MPI_Comm_split_type(ctx->world, MPI_COMM_TYPE_SHARED, rank,
                          MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    int localRank = 0;
    MPI_Comm_rank(node, &localRank);
    ctx->localRank = localRank;
    MPI_Comm_free(&node);
  } else {
    ctx->localRank = rank;
  }

  int *tagUb = nullptr, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagUb, &flag);
  if (flag && tagUb)
    ctx->tagUpperBound = *tagUb;

  if (opts.backend == PAR_BACKEND_CUDA) {
    if (par_status_t st = startCuda(*ctx)) {
      std::string message = ctx->error;
      releaseContext(ctx.release());
      return failCreate(st, message);
    }
  }
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
  releaseContext(context);
  if (weInitializedMpi && liveContexts.empty() && mpiUsable())
    MPI_Finalize();
}

PAR_RT_EXPORT const char *
par_rt_context_last_error(const par_rt_context_t *context) {
  return context ? context->error.c_str() : createError.c_str();
}

PAR_RT_EXPORT par_status_t par_rt_context_set_mesh(par_rt_context_t *context,
                                                   int64_t num_axes,
                                                   const int64_t *sizes) {
  if (!context)
    return PAR_ERR_INVALID_ARGUMENT;
  par_rt_context_t &ctx = *context;
  clearError(context);
  // An axes code stores axis + 1 in a byte.
  if (num_axes < 0 || num_axes > 255)
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "a mesh has 0 to 255 axes, got " +
                        std::to_string(num_axes));
  if (num_axes > 0 && !sizes)
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT, "sizes is NULL");
  int64_t devices = 1;
  for (int64_t a = 0; a < num_axes; ++a) {
    if (sizes[a] < 1)
      return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                      "mesh axis " + std::to_string(a) + " has size " +
                          std::to_string(sizes[a]) + "; sizes must be >= 1");
    if (__builtin_mul_overflow(devices, sizes[a], &devices))
      return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                      "the mesh's device count overflows int64");
  }
  if (devices != ctx.worldSize)
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "world size " + std::to_string(ctx.worldSize) +
                        " does not match the mesh's " +
                        std::to_string(devices) + " devices");
  freeGroups(ctx);
  ctx.meshSizes.assign(sizes, sizes + num_axes);
  ctx.coords.assign(size_t(num_axes), 0);
  // Row-major, last axis fastest.
  int64_t r = ctx.rank;
  for (int64_t a = num_axes - 1; a >= 0; --a) {
    ctx.coords[a] = r % sizes[a];
    r /= sizes[a];
  }
  ctx.hasMesh = true;
  return PAR_OK;
}

PAR_RT_EXPORT int64_t par_rt_context_rank(const par_rt_context_t *context) {
  return context ? context->rank : -1;
}

PAR_RT_EXPORT int64_t
par_rt_context_world_size(const par_rt_context_t *context) {
  return context ? context->worldSize : -1;
}

PAR_RT_EXPORT int64_t par_rt_context_coordinate(const par_rt_context_t *context,
                                                int64_t axis) {
  if (!context || !context->hasMesh || axis < 0 ||
      axis >= int64_t(context->coords.size()))
    return -1;
  return context->coords[axis];
}

PAR_RT_EXPORT void par_rt_context_stats(const par_rt_context_t *context,
                                        par_rt_stats_t *out) {
  if (!out)
    return;
  *out = context ? context->stats : par_rt_stats_t{0, 0.0, 0.0};
}

PAR_RT_EXPORT void par_rt_context_reset_stats(par_rt_context_t *context) {
  if (context)
    context->stats = par_rt_stats_t{0, 0.0, 0.0};
}

PAR_RT_EXPORT par_status_t par_rt_barrier(par_rt_context_t *context) {
  if (!context)
    return PAR_ERR_INVALID_ARGUMENT;
  clearError(context);
  int rc = MPI_Barrier(context->world);
  return rc == MPI_SUCCESS ? PAR_OK : mpiError(*context, "MPI_Barrier", rc);
}

PAR_RT_EXPORT par_status_t par_rt_context_prepare_axes(
    par_rt_context_t *context, int64_t axes) {
  if (!context)
    return PAR_ERR_INVALID_ARGUMENT;
  clearError(context);
  std::string why;
  Group *g = findGroup(*context, axes, why);
  if (!g)
    return setError(*context, PAR_ERR_INVALID_ARGUMENT, why);
  MPI_Comm comm;
  return groupComm(*context, *g, comm);
}

PAR_RT_EXPORT double par_rt_now_seconds(void) {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

PAR_RT_EXPORT par_status_t par_rt_broadcast_world(par_rt_context_t *context,
                                                  void *buffer, int64_t bytes,
                                                  int64_t root) {
  if (!context)
    return PAR_ERR_INVALID_ARGUMENT;
  par_rt_context_t &ctx = *context;
  clearError(context);
  if (bytes < 0 || root < 0 || root >= ctx.worldSize || (bytes && !buffer))
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "broadcast_world: bad bytes, root or buffer");
  return bcastBytes(ctx, buffer, bytes, int(root), ctx.world);
}

PAR_RT_EXPORT par_status_t par_rt_gather_world(par_rt_context_t *context,
                                               const void *local,
                                               int64_t bytes,
                                               void *gathered_on_root) {
  if (!context)
    return PAR_ERR_INVALID_ARGUMENT;
  par_rt_context_t &ctx = *context;
  clearError(context);
  if (bytes < 0 || (bytes && !local))
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "gather_world: bad bytes or local buffer");
  bool root = ctx.rank == 0;
  // A root without a destination still takes part (into scratch), or the
  // other processes would wait for it forever; it reports the error after.
  void *dest = gathered_on_root;
  if (root && bytes && !dest)
    dest = scratch(ctx, 0, size_t(bytes * ctx.worldSize));
  if (bytes <= INT_MAX) {
    int rc = MPI_Gather(local, int(bytes), MPI_BYTE, root ? dest : nullptr,
                        int(bytes), MPI_BYTE, 0, ctx.world);
    if (rc != MPI_SUCCESS)
      return mpiError(ctx, "MPI_Gather", rc);
  } else {
    // MPI's int counts and displacements cannot place blocks this large:
    // point-to-point in pieces, each rank's block at rank * bytes.
    const int64_t piece = int64_t(1) << 30;
    auto *out = static_cast<unsigned char *>(dest);
    if (root)
      std::memcpy(out, local, size_t(bytes));
    for (int64_t r = 1; r < ctx.worldSize; ++r) {
      if (!root && r != ctx.rank)
        continue;
      for (int64_t off = 0; off < bytes; off += piece) {
        int n = int(std::min(piece, bytes - off));
        int rc = root ? MPI_Recv(out + r * bytes + off, n, MPI_BYTE, int(r), 0,
                                 ctx.world, MPI_STATUS_IGNORE)
                      : MPI_Send(static_cast<const unsigned char *>(local) + off,
                                 n, MPI_BYTE, 0, 0, ctx.world);
        if (rc != MPI_SUCCESS)
          return mpiError(ctx, root ? "MPI_Recv" : "MPI_Send", rc);
      }
    }
  }
  if (root && bytes && !gathered_on_root)
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "gather_world: gathered_on_root is NULL on the root");
  return PAR_OK;
}

//===----------------------------------------------------------------------===//
// Kernel ABI
//===----------------------------------------------------------------------===//

PAR_RT_EXPORT void par_rt_k_all_reduce(int64_t in, int64_t out, int64_t count,
                                       int32_t dtype, int32_t reduction,
                                       int64_t axes) {
  const char *k = "all_reduce";
  par_rt_context_t &ctx = kernelContext(k);
  int64_t es = checkedDtype(k, dtype);
  checkReduction(k, dtype, reduction);
  checkSize(k, "count", count);
  int64_t bytes = mul(k, count, es);
  checkBuffer(k, "in", in, bytes);
  checkBuffer(k, "out", out, bytes);
  Group &g = kernelGroup(ctx, k, axes);
  double start = par_rt_now_seconds();
  par_status_t st;
  if (ctx.cuda) {
    par_rt_cuda_group_t cg = cudaGroup(g);
    st = ctx.cuda->all_reduce(ctx.cudaState, &cg, ptr(in), ptr(out), count,
                              dtype, reduction);
  } else {
    st = cpuAllReduce(ctx, g, ptr(in), ptr(out), count, dtype, reduction);
  }
  finish(ctx, k, st, start, 2.0 * ring(g.size) * double(bytes));
}

PAR_RT_EXPORT void par_rt_k_all_gather(int64_t in, int64_t out, int64_t C,
                                       int64_t D, int32_t dtype, int64_t axes) {
  const char *k = "all_gather";
  par_rt_context_t &ctx = kernelContext(k);
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "C", C);
  checkSize(k, "D", D);
  Group &g = kernelGroup(ctx, k, axes);
  int64_t inBytes = mul(k, mul(k, C, D), es);
  int64_t outBytes = mul(k, inBytes, g.size);
  checkBuffer(k, "in", in, inBytes);
  checkBuffer(k, "out", out, outBytes);
  double start = par_rt_now_seconds();
  par_status_t st;
  if (ctx.cuda) {
    par_rt_cuda_group_t cg = cudaGroup(g);
    st = ctx.cuda->all_gather(ctx.cudaState, &cg, ptr(in), ptr(out), C, D,
                              dtype);
  } else {
    st = cpuAllGather(ctx, g, ptr(in), ptr(out), C, D, dtype);
  }
  finish(ctx, k, st, start, ring(g.size) * double(outBytes));
}

PAR_RT_EXPORT void par_rt_k_reduce_scatter(int64_t in, int64_t out, int64_t A,
                                           int64_t B, int32_t dtype,
                                           int32_t reduction, int64_t axes) {
  const char *k = "reduce_scatter";
  par_rt_context_t &ctx = kernelContext(k);
  int64_t es = checkedDtype(k, dtype);
  checkReduction(k, dtype, reduction);
  checkSize(k, "A", A);
  checkSize(k, "B", B);
  Group &g = kernelGroup(ctx, k, axes);
  int64_t outBytes = mul(k, mul(k, A, B), es);
  int64_t inBytes = mul(k, outBytes, g.size);
  checkBuffer(k, "in", in, inBytes);
  checkBuffer(k, "out", out, outBytes);
  double start = par_rt_now_seconds();
  par_status_t st;
  if (ctx.cuda) {
    par_rt_cuda_group_t cg = cudaGroup(g);
    st = ctx.cuda->reduce_scatter(ctx.cudaState, &cg, ptr(in), ptr(out), A, B,
                                  dtype, reduction);
  } else {
    st = cpuReduceScatter(ctx, g, ptr(in), ptr(out), A, B, dtype, reduction);
  }
  finish(ctx, k, st, start, ring(g.size) * double(inBytes));
}

PAR_RT_EXPORT void par_rt_k_all_to_all(int64_t in, int64_t out, int64_t A,
                                       int64_t B, int64_t C, int64_t D,
                                       int32_t dtype, int64_t axes) {
  const char *k = "all_to_all";
  par_rt_context_t &ctx = kernelContext(k);
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "A", A);
  checkSize(k, "B", B);
  checkSize(k, "C", C);
  checkSize(k, "D", D);
  if (mul(k, A, B) != mul(k, C, D))
    die(k, "the blocks sent (A*B = " + std::to_string(A * B) +
               ") and received (C*D = " + std::to_string(C * D) +
               ") differ in size");
  Group &g = kernelGroup(ctx, k, axes);
  int64_t bytes = mul(k, mul(k, mul(k, A, B), es), g.size);
  checkBuffer(k, "in", in, bytes);
  checkBuffer(k, "out", out, bytes);
  double start = par_rt_now_seconds();
  par_status_t st;
  if (ctx.cuda) {
    par_rt_cuda_group_t cg = cudaGroup(g);
    st = ctx.cuda->all_to_all(ctx.cudaState, &cg, ptr(in), ptr(out), A, B, C,
                              D, dtype);
  } else {
    st = cpuAllToAll(ctx, g, ptr(in), ptr(out), A, B, C, D, dtype);
  }
  finish(ctx, k, st, start, ring(g.size) * double(bytes));
}

PAR_RT_EXPORT void par_rt_k_all_slice(int64_t in, int64_t out, int64_t A,
                                      int64_t B, int32_t dtype, int64_t axes) {
  const char *k = "all_slice";
  par_rt_context_t &ctx = kernelContext(k);
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "A", A);
  checkSize(k, "B", B);
  Group &g = kernelGroup(ctx, k, axes);
  int64_t outBytes = mul(k, mul(k, A, B), es);
  checkBuffer(k, "in", in, mul(k, outBytes, g.size));
  checkBuffer(k, "out", out, outBytes);
  par_status_t st;
  if (ctx.cuda) {
    par_rt_cuda_group_t cg = cudaGroup(g);
    st = ctx.cuda->all_slice(ctx.cudaState, &cg, ptr(in), ptr(out), A, B,
                             dtype);
  } else {
    st = cpuAllSlice(ctx, g, ptr(in), ptr(out), A, B, dtype);
  }
  // Local: not a collective for the statistics (par-comm-report agrees).
  finish(ctx, k, st, 0, 0, /*counted=*/false);
}

PAR_RT_EXPORT void par_rt_k_broadcast(int64_t in, int64_t out, int64_t count,
                                      int32_t dtype, int64_t root,
                                      int64_t axes) {
  const char *k = "broadcast";
  par_rt_context_t &ctx = kernelContext(k);
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "count", count);
  Group &g = kernelGroup(ctx, k, axes);
  if (root < 0 || root >= g.size)
    die(k, "root " + std::to_string(root) + " is outside the group of " +
               std::to_string(g.size));
  int64_t bytes = mul(k, count, es);
  if (g.index == root)
    checkBuffer(k, "in", in, bytes);
  checkBuffer(k, "out", out, bytes);
  double start = par_rt_now_seconds();
  par_status_t st;
  if (ctx.cuda) {
    par_rt_cuda_group_t cg = cudaGroup(g);
    st = ctx.cuda->broadcast(ctx.cudaState, &cg, ptr(in), ptr(out), count,
                             dtype, root);
  } else {
    st = cpuBroadcast(ctx, g, ptr(in), ptr(out), count, dtype, root);
  }
  // As par-comm-report counts it: every member of a real group moves S
  // (the root sends it, pipelined/tree broadcasts forward it).
  finish(ctx, k, st, start, g.size > 1 ? double(bytes) : 0.0);
}

PAR_RT_EXPORT void par_rt_k_send(int64_t in, int64_t count, int32_t dtype,
                                 int64_t axes, int64_t coords, int64_t tag) {
  const char *k = "send";
  par_rt_context_t &ctx = kernelContext(k);
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "count", count);
  int64_t bytes = mul(k, count, es);
  checkBuffer(k, "in", in, bytes);
  checkTag(ctx, k, tag);
  int64_t peer = peerRank(ctx, k, axes, coords);
  double start = par_rt_now_seconds();
  par_status_t st = ctx.cuda ? ctx.cuda->send(ctx.cudaState, ptr(in), count,
                                              dtype, peer)
                             : cpuSend(ctx, ptr(in), count, dtype, peer, tag);
  finish(ctx, k, st, start, double(bytes));
}

PAR_RT_EXPORT par_status_t par_rt_send_async(par_rt_context_t *context,
                                           const void *buffer, int64_t count,
                                           int32_t dtype, int64_t axes,
                                           int64_t coords, int64_t tag) {
  const char *k = "send_async";
  if (!context)
    return PAR_ERR_INVALID_ARGUMENT;
  par_rt_context_t &ctx = *context;
  clearError(context);
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "count", count);
  int64_t bytes = mul(k, count, es);
  checkBuffer(k, "buffer", (int64_t)(intptr_t)buffer, bytes);
  checkTag(ctx, k, tag);
  int64_t peer = peerRank(ctx, k, axes, coords);
  double start = par_rt_now_seconds();
  if (ctx.cuda) // NCCL point-to-point runs in call order: send now.
    return ctx.cuda->send(ctx.cudaState, const_cast<void *>(buffer), count,
                          dtype, peer);
  if (par_status_t st = cpuSendAsync(ctx, buffer, count, dtype, peer, tag))
    return st;
  ctx.stats.bytes_sent += bytes;
  ctx.stats.seconds += par_rt_now_seconds() - start;
  return PAR_OK;
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

PAR_RT_EXPORT par_status_t par_rt_wait_sends(par_rt_context_t *context) {
  if (!context)
    return PAR_ERR_INVALID_ARGUMENT;
  clearError(context);
  if (context->pendingSends.empty())
    return PAR_OK;
  int rc = MPI_Waitall(int(context->pendingSends.size()),
                       context->pendingSends.data(), MPI_STATUSES_IGNORE);
  context->pendingSends.clear();
  return rc == MPI_SUCCESS ? PAR_OK : mpiError(*context, "MPI_Waitall", rc);
}

PAR_RT_EXPORT void par_rt_k_recv(int64_t out, int64_t count, int32_t dtype,
                                 int64_t axes, int64_t coords, int64_t tag) {
  const char *k = "recv";
  par_rt_context_t &ctx = kernelContext(k);
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "count", count);
  checkBuffer(k, "out", out, mul(k, count, es));
  checkTag(ctx, k, tag);
  int64_t peer = peerRank(ctx, k, axes, coords);
  double start = par_rt_now_seconds();
  par_status_t st = ctx.cuda ? ctx.cuda->recv(ctx.cudaState, ptr(out), count,
                                              dtype, peer)
                             : cpuRecv(ctx, ptr(out), count, dtype, peer, tag);
  // The sender accounts the bytes.
  finish(ctx, k, st, start, 0.0);
}

PAR_RT_EXPORT void par_rt_k_matmul(int64_t a, int64_t b, int64_t c, int64_t M,
                                   int64_t N, int64_t K, int32_t dtype,
                                   int32_t accumulate) {
  const char *k = "matmul";
  par_rt_context_t *ctxp = currentContext();
  if (!ctxp)
    die(k, "no current context (par_rt_context_create was not called)");
  par_rt_context_t &ctx = *ctxp; // matmul needs no mesh
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "M", M);
  checkSize(k, "N", N);
  checkSize(k, "K", K);
  checkBuffer(k, "a", a, mul(k, mul(k, M, K), es));
  checkBuffer(k, "b", b, mul(k, mul(k, K, N), es));
  checkBuffer(k, "c", c, mul(k, mul(k, M, N), es));
  par_status_t st =
      ctx.cuda ? ctx.cuda->matmul(ctx.cudaState, ptr(a), ptr(b), ptr(c), M, N,
                                  K, dtype, accumulate)
               : cpuMatmul(ctx, ptr(a), ptr(b), ptr(c), M, N, K, dtype,
                           accumulate != 0);
  finish(ctx, k, st, 0, 0, /*counted=*/false);
}

PAR_RT_EXPORT void par_rt_k_batch_matmul(int64_t a, int64_t b, int64_t c,
                                         int64_t batch, int64_t M, int64_t N,
                                         int64_t K, int32_t transA,
                                         int32_t transB, int32_t dtype,
                                         int32_t accumulate) {
  const char *k = "batch_matmul";
  par_rt_context_t *ctxp = currentContext();
  if (!ctxp)
    die(k, "no current context (par_rt_context_create was not called)");
  par_rt_context_t &ctx = *ctxp;
  if (ctx.cuda)
    die(k, "not available on the CUDA backend (the compiler emits it only "
           "for CPU programs)");
  if (dtype != PAR_F32 && dtype != PAR_F64)
    die(k, "only f32 and f64 are supported");
  int64_t es = checkedDtype(k, dtype);
  checkSize(k, "batch", batch);
  checkSize(k, "M", M);
  checkSize(k, "N", N);
  checkSize(k, "K", K);
  checkBuffer(k, "a", a, mul(k, mul(k, batch, mul(k, M, K)), es));
  checkBuffer(k, "b", b, mul(k, mul(k, batch, mul(k, K, N)), es));
  checkBuffer(k, "c", c, mul(k, mul(k, batch, mul(k, M, N)), es));
  par_status_t st = cpuBatchMatmul(ctx, ptr(a), ptr(b), ptr(c), batch, M, N,
                                   K, transA != 0, transB != 0, dtype,
                                   accumulate != 0);
  finish(ctx, k, st, 0, 0, /*counted=*/false);
}
