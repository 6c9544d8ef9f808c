//===- Kernels.cpp - The kernel entry points and their dispatch -----------===//
//
// The par_rt_k_* functions of par_kernel_abi.h (and par_rt_send_async, the
// started form of send, and par_rt_request_wait). Each validates its scalar arguments, resolves the
// axes code to a group or the coordinates to a peer, dispatches once through
// the context's device backend table, accounts statistics and tracing, and
// aborts the job with "par runtime: <kernel>: <reason>" on any failure:
// compiled code has no way to handle a status, and a collective that failed
// on one process would leave the others waiting forever. Between the
// checks and the end, a communicating call is marked for the watchdog
// (Watchdog.h: KernelCall::start and finish), which ends the job when one
// does not complete within the collective timeout.
//
// Statistics use the ring formulas par-comm-report uses, so that measured
// and predicted traffic compare directly. A bucket is one collective (one
// message) with the ring bytes of its members together, counted when it
// starts; its wait adds only time. Each call is also accounted under its
// kernel's name (Context.h's kKernelNames): one call, its bytes, its time.
//
// A started all-gather (par_rt_k_all_gather_start) is counted the same way
// and shares the buckets' handles, wait and progress. PAR_RT_DEFER_STARTED=1
// (a test hook) holds a started all-gather back until its wait.
//
// While buckets are in flight, every kernel entry first lets the backend
// advance them (its `progress`: MPI_Testall on the MPI backend), so that
// a transfer moves while the program computes between start and wait
// (matmuls, other collectives) and not only inside the wait.
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "Profile.h"
#include "Watchdog.h"

#include "../common/Dtype.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace par::rt;

namespace {

void *ptr(int64_t address) {
  return reinterpret_cast<void *>(static_cast<intptr_t>(address));
}

double ring(int64_t n) { return n <= 1 ? 0.0 : double(n - 1) / double(n); }

/// One kernel call: its context and name, the argument checks (each aborts
/// with the kernel's name), and the accounting at the end.
class KernelCall {
public:
  /// A kernel on the current context; most need a mesh (matmul does not).
  explicit KernelCall(const char *name, bool needsMesh = true)
      : name(name), ctx(current(name, needsMesh)), slot(slotOf(name)) {
    progress();
  }
  /// A host API call with the kernels' checks (par_rt_send_async).
  KernelCall(const char *name, par_rt_context_t &ctx)
      : name(name), ctx(ctx), slot(slotOf(name)) {
    progress();
  }

  [[noreturn]] void fail(const std::string &why) const { die(name, why); }

  int64_t elementSize(int32_t dtype) const {
    int64_t es = dtypeSize(dtype);
    if (!es)
      fail("unknown dtype " + std::to_string(dtype));
    return es;
  }

  void checkReduction(int32_t dtype, int32_t reduction) const {
    if (!isValidReduction(reduction))
      fail("unknown reduction " + std::to_string(reduction));
    if (dtype == PAR_I1 && reduction == PAR_AVG)
      fail("avg is not defined for i1");
  }

  /// Checks that every named size is non-negative.
  void checkSizes(std::initializer_list<std::pair<const char *, int64_t>>
                      sizes) const {
    for (auto [what, v] : sizes)
      if (v < 0)
        fail(std::string(what) + " is negative (" + std::to_string(v) + ")");
  }

  /// The product of `factors`, aborting on overflow (sizes come straight
  /// from compiled code).
  int64_t mul(std::initializer_list<int64_t> factors) const {
    int64_t r = 1;
    for (int64_t f : factors)
      if (__builtin_mul_overflow(r, f, &r))
        fail("buffer size overflows int64");
    return r;
  }

  /// Records a started collective's backend request; returns its handle.
  int64_t record(void *request, int64_t axes) {
    int64_t handle = ctx.nextRequest++;
    ctx.requests.emplace(handle, request);
    ctx.requestAxes.emplace(handle, axes);
    return handle;
  }

  void checkBuffer(const char *what, int64_t address, int64_t bytes) const {
    if (bytes > 0 && address == 0)
      fail(std::string(what) + " is null");
  }

  const par_rt_backend_group_t &group(int64_t axes) {
    std::string why;
    Group *g = findGroup(ctx, axes, why);
    if (!g)
      fail(why);
    axesCode = axes;
    return g->desc;
  }

  /// The world rank a send/recv addresses, after checking its tag.
  int64_t peer(int64_t axes, int64_t coords, int64_t tag) {
    if (tag < 0 || tag > ctx.tagUpperBound)
      fail("tag " + std::to_string(tag) + " is outside [0, " +
           std::to_string(ctx.tagUpperBound) + "]");
    std::string why;
    int64_t rank = peerRank(ctx, axes, coords, why);
    if (rank < 0)
      fail(why);
    peerWorldRank = rank;
    return rank;
  }

  const par_rt_backend_t &ops() const { return *ctx.device.ops; }
  void *state() const { return ctx.device.state; }

  /// Starts the clock of a counted call (after the checks) and tells the
  /// watchdog (Watchdog.h) that this rank waits in it until `finish`.
  void start() {
    startTime = par_rt_now_seconds();
    if (slot >= 0)
      enterCollective(ctx, slot, axesCode, peerWorldRank);
  }
  /// Leaves the collective without accounting (a failure the caller
  /// returns as a status).
  void abandon() { leaveCollective(ctx); }
  /// The group the watchdog names for a call that resolves none (a wait).
  void waitsOn(int64_t axes) { axesCode = axes; }

  /// Finishes a communicating call: aborts on failure, otherwise accounts
  /// one collective with `bytes` sent (or only bytes and time, `counted`
  /// false, for a started send or a wait) and records it while tracing
  /// (uncounted calls only if `traced`: a wait shows where the program
  /// blocked on a started bucket). The kernel's own record counts the call
  /// once however many parts it finishes in (a bucket on CUDA: its start
  /// and its wait).
  void finish(par_status_t status, double bytes, bool counted = true,
              bool traced = false) {
    check(status);
    leaveCollective(ctx);
    double end = par_rt_now_seconds();
    ctx.stats.collectives += counted ? 1 : 0;
    ctx.stats.bytes_sent += bytes;
    ctx.stats.seconds += end - startTime;
    if (slot >= 0) {
      par_rt_kernel_stats_t &k = ctx.kernelStats[slot];
      k.calls += accounted ? 0 : 1;
      k.bytes_sent += bytes;
      k.seconds += end - startTime;
      accounted = true;
    }
    if (ctx.tracing && (counted || traced))
      ctx.trace.push_back({name, startTime, end, bytes});
    if (profiling())
      profileRecord(name, end - startTime, 0, bytes);
  }

  /// Finishes a local call (all_slice, matmuls): not a collective for the
  /// statistics (par-comm-report agrees).
  void finishLocal(par_status_t status) const { check(status); }

  par_rt_context_t &context() const { return ctx; }

private:
  const char *name;
  par_rt_context_t &ctx;
  int slot;               // in kKernelNames; -1 for a local kernel
  bool accounted = false; // the kernel's record has this call
  double startTime = 0;
  int64_t axesCode = 0;       // the group's, for the watchdog's message
  int64_t peerWorldRank = -1; // a send's or recv's peer


  static int slotOf(const char *name) {
    for (int k = 0; k < kNumKernels; ++k)
      if (std::strcmp(kKernelNames[k], name) == 0)
        return k;
    return -1;
  }

  static par_rt_context_t &current(const char *name, bool needsMesh) {
    par_rt_context_t *ctx = currentContext();
    if (!ctx)
      die(name, "no current context (par_rt_context_create was not called)");
    if (needsMesh && !ctx->hasMesh)
      die(name, "no mesh (par_rt_context_set_mesh was not called)");
    return *ctx;
  }

  void check(par_status_t status) const {
    if (status != PAR_OK)
      fail(ctx.device.lastError());
  }

  /// Lets started buckets advance (see the file comment).
  void progress() const {
    if (!ctx.requests.empty() && ctx.device.ops->progress)
      check(ctx.device.ops->progress(ctx.device.state));
  }
};

/// PAR_RT_DEFER_STARTED=1, a test hook: a started all-gather moves its data
/// only when it is waited for, so that a program reading the output before
/// its wait reads stale memory (test/e2e/zero-prefetch.test). Otherwise a
/// transfer may well complete early, inside later kernel calls.
bool deferStarted() {
  static const bool on = [] {
    const char *v = std::getenv("PAR_RT_DEFER_STARTED");
    return v && std::string(v) == "1";
  }();
  return on;
}

/// Reads and checks a bucket's members: `members` is the address of n
/// (in, out, count) int64 triples. Returns the members and, in `bytes`,
/// their bytes together.
std::vector<par_rt_bucket_member_t> readMembers(KernelCall &k, int64_t members,
                                                int64_t n, int32_t dtype,
                                                int32_t reduction,
                                                int64_t &bytes) {
  int64_t es = k.elementSize(dtype);
  k.checkReduction(dtype, reduction);
  if (n < 1)
    k.fail("a bucket needs at least one member, got " + std::to_string(n));
  k.checkBuffer("members", members, k.mul({n, 3, 8}));
  const int64_t *triples = static_cast<const int64_t *>(ptr(members));
  std::vector<par_rt_bucket_member_t> out;
  out.reserve(size_t(n));
  bytes = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t in = triples[3 * i], o = triples[3 * i + 1],
            count = triples[3 * i + 2];
    std::string at = "member " + std::to_string(i) + ": ";
    if (count < 0)
      k.fail(at + "count is negative (" + std::to_string(count) + ")");
    int64_t b = k.mul({count, es});
    if (b > 0 && (in == 0 || o == 0))
      k.fail(at + (in == 0 ? "in" : "out") + " is null");
    if (__builtin_add_overflow(bytes, b, &bytes))
      k.fail("buffer size overflows int64");
    out.push_back({ptr(in), ptr(o), count});
  }
  return out;
}

/// Starts a bucket, accounts it as one collective and records its request;
/// returns the handle.
int64_t startBucket(KernelCall &k, int64_t members, int64_t n, int32_t dtype,
                    int32_t reduction, int64_t axes) {
  int64_t bytes = 0;
  std::vector<par_rt_bucket_member_t> list =
      readMembers(k, members, n, dtype, reduction, bytes);
  const par_rt_backend_group_t &g = k.group(axes);
  k.start();
  void *request = nullptr;
  k.finish(k.ops().bucket_start(k.state(), &g, list.data(), n, dtype,
                                reduction, &request),
           2.0 * ring(g.size) * double(bytes));
  return k.record(request, axes);
}

} // namespace

PAR_RT_EXPORT void par_rt_k_all_reduce(int64_t in, int64_t out, int64_t count,
                                       int32_t dtype, int32_t reduction,
                                       int64_t axes) {
  KernelCall k("all_reduce");
  int64_t es = k.elementSize(dtype);
  k.checkReduction(dtype, reduction);
  k.checkSizes({{"count", count}});
  int64_t bytes = k.mul({count, es});
  k.checkBuffer("in", in, bytes);
  k.checkBuffer("out", out, bytes);
  const par_rt_backend_group_t &g = k.group(axes);
  k.start();
  k.finish(k.ops().all_reduce(k.state(), &g, ptr(in), ptr(out), count, dtype,
                              reduction),
           2.0 * ring(g.size) * double(bytes));
}

PAR_RT_EXPORT void par_rt_k_bucket_all_reduce(int64_t members, int64_t n,
                                              int32_t dtype, int32_t reduction,
                                              int64_t axes) {
  KernelCall k("bucket_all_reduce");
  // On device memory (CUDA) the backend packs: start and wait at once.
  if (std::string(k.ops().name) == "CUDA") {
    int64_t handle = startBucket(k, members, n, dtype, reduction, axes);
    k.start();
    k.finish(waitRequest(k.context(), handle), 0, /*counted=*/false);
    return;
  }
  // Host memory: the members packed into one buffer and one blocking
  // all-reduce (a backend's blocking collective is its fastest; a started
  // one waited for at once only adds the non-blocking path's cost).
  int64_t bytes = 0;
  std::vector<par_rt_bucket_member_t> list =
      readMembers(k, members, n, dtype, reduction, bytes);
  const par_rt_backend_group_t &g = k.group(axes);
  int64_t es = k.elementSize(dtype), total = 0;
  for (const par_rt_bucket_member_t &m : list)
    total += m.count;
  k.start();
  std::vector<unsigned char> staging(size_t(std::max<int64_t>(bytes, 1)));
  unsigned char *at = staging.data();
  for (const par_rt_bucket_member_t &m : list) {
    if (m.count)
      std::memcpy(at, m.in, size_t(m.count * es));
    at += m.count * es;
  }
  par_status_t st = k.ops().all_reduce(k.state(), &g, staging.data(),
                                       staging.data(), total, dtype, reduction);
  if (st == PAR_OK) {
    at = staging.data();
    for (const par_rt_bucket_member_t &m : list) {
      if (m.count)
        std::memcpy(m.out, at, size_t(m.count * es));
      at += m.count * es;
    }
  }
  k.finish(st, 2.0 * ring(g.size) * double(bytes));
}

PAR_RT_EXPORT int64_t par_rt_k_all_reduce_start(int64_t members, int64_t n,
                                                int32_t dtype,
                                                int32_t reduction,
                                                int64_t axes) {
  KernelCall k("all_reduce_start");
  return startBucket(k, members, n, dtype, reduction, axes);
}

PAR_RT_EXPORT void par_rt_k_wait(int64_t request) {
  KernelCall k("wait");
  auto axes = k.context().requestAxes.find(request);
  if (axes != k.context().requestAxes.end())
    k.waitsOn(axes->second);
  k.start();
  par_status_t st = waitRequest(k.context(), request);
  if (st != PAR_OK)
    k.fail(k.context().error);
  // Time only: the bucket was counted when it started.
  k.finish(st, 0, /*counted=*/false, /*traced=*/true);
}

par_status_t par::rt::waitRequest(par_rt_context_t &ctx, int64_t request) {
  auto it = ctx.requests.find(request);
  if (it == ctx.requests.end())
    return setError(ctx, PAR_ERR_INVALID_ARGUMENT,
                    "request " + std::to_string(request) +
                        " is unknown or already complete");
  void *backendRequest = it->second;
  ctx.requests.erase(it);
  ctx.requestAxes.erase(request);
  auto deferred = ctx.deferredGathers.find(request);
  if (deferred != ctx.deferredGathers.end()) {
    // The held-back transfer, blocking, now.
    par_rt_context_t::DeferredGather d = deferred->second;
    ctx.deferredGathers.erase(deferred);
    std::string why;
    Group *g = findGroup(ctx, d.axes, why);
    if (!g)
      return setError(ctx, PAR_ERR_INVALID_ARGUMENT, why);
    return backendStatus(ctx, ctx.device,
                         ctx.device.ops->all_gather(ctx.device.state, &g->desc,
                                                    d.in, d.out, d.C, d.D,
                                                    d.dtype));
  }
  if (!backendRequest) // a receive done at its start (par_rt_recv_start)
    return PAR_OK;
  return backendStatus(ctx, ctx.device,
                       ctx.device.ops->bucket_wait(ctx.device.state,
                                                   backendRequest));
}

PAR_RT_EXPORT par_status_t par_rt_request_wait(par_rt_context_t *context,
                                               int64_t request) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  auto axes = context->requestAxes.find(request);
  enterCollective(*context, int(HostWait::RequestWait),
                  axes != context->requestAxes.end() ? axes->second : 0, -1);
  par_status_t st = waitRequest(*context, request);
  leaveCollective(*context);
  return st;
}

PAR_RT_EXPORT void par_rt_k_all_gather(int64_t in, int64_t out, int64_t C,
                                       int64_t D, int32_t dtype, int64_t axes) {
  KernelCall k("all_gather");
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"C", C}, {"D", D}});
  const par_rt_backend_group_t &g = k.group(axes);
  int64_t inBytes = k.mul({C, D, es});
  int64_t outBytes = k.mul({inBytes, g.size});
  k.checkBuffer("in", in, inBytes);
  k.checkBuffer("out", out, outBytes);
  k.start();
  k.finish(k.ops().all_gather(k.state(), &g, ptr(in), ptr(out), C, D, dtype),
           ring(g.size) * double(outBytes));
}

PAR_RT_EXPORT int64_t par_rt_k_all_gather_start(int64_t in, int64_t out,
                                                int64_t C, int64_t D,
                                                int32_t dtype, int64_t axes) {
  KernelCall k("all_gather_start");
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"C", C}, {"D", D}});
  const par_rt_backend_group_t &g = k.group(axes);
  int64_t inBytes = k.mul({C, D, es});
  int64_t outBytes = k.mul({inBytes, g.size});
  k.checkBuffer("in", in, inBytes);
  k.checkBuffer("out", out, outBytes);
  k.start();
  void *request = nullptr;
  // Counted when it starts, as a bucket; its wait adds only time.
  if (deferStarted()) {
    k.finish(PAR_OK, ring(g.size) * double(outBytes));
    int64_t handle = k.record(nullptr, axes);
    k.context().deferredGathers.emplace(
        handle, par_rt_context_t::DeferredGather{ptr(in), ptr(out), C, D,
                                                 dtype, axes});
    return handle;
  }
  k.finish(k.ops().gather_start(k.state(), &g, ptr(in), ptr(out), C, D, dtype,
                                &request),
           ring(g.size) * double(outBytes));
  return k.record(request, axes);
}

PAR_RT_EXPORT void par_rt_k_reduce_scatter(int64_t in, int64_t out, int64_t A,
                                           int64_t B, int32_t dtype,
                                           int32_t reduction, int64_t axes) {
  KernelCall k("reduce_scatter");
  int64_t es = k.elementSize(dtype);
  k.checkReduction(dtype, reduction);
  k.checkSizes({{"A", A}, {"B", B}});
  const par_rt_backend_group_t &g = k.group(axes);
  int64_t outBytes = k.mul({A, B, es});
  int64_t inBytes = k.mul({outBytes, g.size});
  k.checkBuffer("in", in, inBytes);
  k.checkBuffer("out", out, outBytes);
  k.start();
  k.finish(k.ops().reduce_scatter(k.state(), &g, ptr(in), ptr(out), A, B,
                                  dtype, reduction),
           ring(g.size) * double(inBytes));
}

PAR_RT_EXPORT void par_rt_k_all_to_all(int64_t in, int64_t out, int64_t A,
                                       int64_t B, int64_t C, int64_t D,
                                       int32_t dtype, int64_t axes) {
  KernelCall k("all_to_all");
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"A", A}, {"B", B}, {"C", C}, {"D", D}});
  if (k.mul({A, B}) != k.mul({C, D}))
    k.fail("the blocks sent (A*B = " + std::to_string(A * B) +
           ") and received (C*D = " + std::to_string(C * D) +
           ") differ in size");
  const par_rt_backend_group_t &g = k.group(axes);
  int64_t bytes = k.mul({A, B, es, g.size});
  k.checkBuffer("in", in, bytes);
  k.checkBuffer("out", out, bytes);
  k.start();
  k.finish(k.ops().all_to_all(k.state(), &g, ptr(in), ptr(out), A, B, C, D,
                              dtype),
           ring(g.size) * double(bytes));
}

PAR_RT_EXPORT void par_rt_k_all_slice(int64_t in, int64_t out, int64_t A,
                                      int64_t B, int32_t dtype, int64_t axes) {
  KernelCall k("all_slice");
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"A", A}, {"B", B}});
  const par_rt_backend_group_t &g = k.group(axes);
  int64_t outBytes = k.mul({A, B, es});
  k.checkBuffer("in", in, k.mul({outBytes, g.size}));
  k.checkBuffer("out", out, outBytes);
  k.finishLocal(
      k.ops().all_slice(k.state(), &g, ptr(in), ptr(out), A, B, dtype));
}

PAR_RT_EXPORT void par_rt_k_broadcast(int64_t in, int64_t out, int64_t count,
                                      int32_t dtype, int64_t root,
                                      int64_t axes) {
  KernelCall k("broadcast");
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"count", count}});
  const par_rt_backend_group_t &g = k.group(axes);
  if (root < 0 || root >= g.size)
    k.fail("root " + std::to_string(root) + " is outside the group of " +
           std::to_string(g.size));
  int64_t bytes = k.mul({count, es});
  if (g.index == root)
    k.checkBuffer("in", in, bytes);
  k.checkBuffer("out", out, bytes);
  k.start();
  // As par-comm-report counts it: every member of a real group moves S
  // (the root sends it, pipelined/tree broadcasts forward it).
  k.finish(k.ops().broadcast(k.state(), &g, ptr(in), ptr(out), count, dtype,
                             root),
           g.size > 1 ? double(bytes) : 0.0);
}

PAR_RT_EXPORT void par_rt_k_send(int64_t in, int64_t count, int32_t dtype,
                                 int64_t axes, int64_t coords, int64_t tag) {
  KernelCall k("send");
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"count", count}});
  int64_t bytes = k.mul({count, es});
  k.checkBuffer("in", in, bytes);
  int64_t peer = k.peer(axes, coords, tag);
  k.start();
  k.finish(k.ops().send(k.state(), ptr(in), count, dtype, peer, tag),
           double(bytes));
}

PAR_RT_EXPORT void par_rt_k_recv(int64_t out, int64_t count, int32_t dtype,
                                 int64_t axes, int64_t coords, int64_t tag) {
  KernelCall k("recv");
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"count", count}});
  k.checkBuffer("out", out, k.mul({count, es}));
  int64_t peer = k.peer(axes, coords, tag);
  k.start();
  // The sender accounts the bytes.
  k.finish(k.ops().recv(k.state(), ptr(out), count, dtype, peer, tag), 0.0);
}

PAR_RT_EXPORT par_status_t par_rt_recv_start(par_rt_context_t *context,
                                             void *buffer, int64_t count,
                                             int32_t dtype, int64_t axes,
                                             int64_t coords, int64_t tag,
                                             int64_t *request) {
  if (request)
    *request = -1;
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  if (!request)
    return setError(*context, PAR_ERR_INVALID_ARGUMENT,
                    "recv_start: request is null");
  KernelCall k("recv_start", *context);
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"count", count}});
  k.checkBuffer("buffer", int64_t(intptr_t(buffer)), k.mul({count, es}));
  int64_t peer = k.peer(axes, coords, tag);
  // A backend without started receives (local, CUDA) receives now; the
  // handle then completes at once.
  void *backendRequest = nullptr;
  par_status_t st =
      k.ops().recv_start
          ? k.ops().recv_start(k.state(), buffer, count, dtype, peer, tag,
                               &backendRequest)
          : k.ops().recv(k.state(), buffer, count, dtype, peer, tag);
  if (st != PAR_OK)
    return backendStatus(k.context(), k.context().device, st);
  *request = k.record(backendRequest, axes);
  return PAR_OK;
}

PAR_RT_EXPORT par_status_t par_rt_recv_wait(par_rt_context_t *context,
                                            int64_t request) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  // Accounted as the recv it completes: the time is the wait.
  KernelCall k("recv", *context);
  auto axes = k.context().requestAxes.find(request);
  if (axes != k.context().requestAxes.end())
    k.waitsOn(axes->second);
  k.start();
  par_status_t st = waitRequest(k.context(), request);
  if (st != PAR_OK) {
    k.abandon();
    return st;
  }
  k.finish(st, 0.0);
  return PAR_OK;
}

PAR_RT_EXPORT par_status_t par_rt_send_async(par_rt_context_t *context,
                                             const void *buffer, int64_t count,
                                             int32_t dtype, int64_t axes,
                                             int64_t coords, int64_t tag) {
  if (!beginCall(context))
    return PAR_ERR_INVALID_ARGUMENT;
  KernelCall k("send_async", *context);
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"count", count}});
  int64_t bytes = k.mul({count, es});
  k.checkBuffer("buffer", int64_t(intptr_t(buffer)), bytes);
  int64_t peer = k.peer(axes, coords, tag);
  k.start();
  par_status_t st =
      k.ops().send_async(k.state(), buffer, count, dtype, peer, tag);
  if (st != PAR_OK) {
    k.abandon();
    return backendStatus(k.context(), k.context().device, st);
  }
  // Bytes and time, not a collective: par_rt_wait_sends completes it.
  k.finish(st, double(bytes), /*counted=*/false);
  return PAR_OK;
}

namespace {

/// A matmul's record for the profiler, named by its shape ("matmul
/// 1024x768x768 f32", "batch_matmul 48x256x256x64 f32"): its time from here
/// to the end of the scope and its 2*batch*M*N*K operations.
class GemmProfile {
public:
  GemmProfile(const char *kind, int64_t batch, int64_t M, int64_t N,
              int64_t K, int32_t dtype)
      : kind(kind), batch(batch), M(M), N(N), K(K), dtype(dtype),
        start(profiling() ? par_rt_now_seconds() : -1) {}
  ~GemmProfile() {
    if (start < 0)
      return;
    double seconds = par_rt_now_seconds() - start;
    std::string shape = (batch > 1 || std::strcmp(kind, "matmul") != 0
                             ? std::to_string(batch) + "x"
                             : std::string()) +
                        std::to_string(M) + "x" + std::to_string(N) + "x" +
                        std::to_string(K);
    const par_dtype_info_t *type = par_dtype_info(par_dtype_t(dtype));
    profileRecord(std::string(kind) + " " + shape + " " +
                      (type ? type->name : "?"),
                  seconds, 2.0 * double(batch) * M * N * K, 0);
  }

private:
  const char *kind;
  int64_t batch, M, N, K;
  int32_t dtype;
  double start;
};

} // namespace

PAR_RT_EXPORT void par_rt_k_matmul(int64_t a, int64_t b, int64_t c, int64_t M,
                                   int64_t N, int64_t K, int32_t dtype,
                                   int32_t accumulate) {
  KernelCall k("matmul", /*needsMesh=*/false);
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"M", M}, {"N", N}, {"K", K}});
  k.checkBuffer("a", a, k.mul({M, K, es}));
  k.checkBuffer("b", b, k.mul({K, N, es}));
  k.checkBuffer("c", c, k.mul({M, N, es}));
  GemmProfile profile("matmul", 1, M, N, K, dtype);
  k.finishLocal(k.ops().matmul(k.state(), ptr(a), ptr(b), ptr(c), M, N, K,
                               dtype, accumulate));
}

PAR_RT_EXPORT void par_rt_k_batch_matmul_mixed(
    int64_t a, int64_t b, int64_t c, int64_t batch, int64_t M, int64_t N,
    int64_t K, int32_t transA, int32_t transB, int32_t dtypeA, int32_t dtypeB,
    int32_t accumulate) {
  KernelCall k("batch_matmul_mixed", /*needsMesh=*/false);
  if (!k.ops().batch_matmul && !k.ops().batch_matmul_mixed)
    k.fail(std::string("not available on the ") + k.ops().name + " backend");
  for (int32_t d : {dtypeA, dtypeB})
    if (d != PAR_F32 && d != PAR_F16 && d != PAR_BF16)
      k.fail("inputs must be f32, f16 or bf16");
  k.checkSizes({{"batch", batch}, {"M", M}, {"N", N}, {"K", K}});
  k.checkBuffer("a", a, k.mul({batch, M, K, k.elementSize(dtypeA)}));
  k.checkBuffer("b", b, k.mul({batch, K, N, k.elementSize(dtypeB)}));
  k.checkBuffer("c", c, k.mul({batch, M, N, 4}));
  GemmProfile profile("batch_matmul_mixed", batch, M, N, K, dtypeA);
  // A device backend takes the 16-bit operands as they are (cuBLAS).
  if (k.ops().batch_matmul_mixed) {
    k.finishLocal(k.ops().batch_matmul_mixed(
        k.state(), ptr(a), ptr(b), ptr(c), batch, M, N, K, transA, transB,
        dtypeA, dtypeB, accumulate));
    return;
  }
  // Widening is exact: the f32 GEMM forms the same products as the loop.
  auto widen = [](int32_t dtype, const void *p, int64_t n,
                  std::vector<float> &out) -> const void * {
    if (dtype == PAR_F32)
      return p;
    out.resize(n);
    const uint16_t *h = static_cast<const uint16_t *>(p);
    for (int64_t i = 0; i < n; ++i)
      out[i] = dtype == PAR_BF16 ? bf16ToFloat(h[i]) : halfToFloat(h[i]);
    return out.data();
  };
  std::vector<float> wa, wb;
  const void *pa = widen(dtypeA, ptr(a), batch * M * K, wa);
  const void *pb = widen(dtypeB, ptr(b), batch * K * N, wb);
  k.finishLocal(k.ops().batch_matmul(k.state(), pa, pb, ptr(c), batch, M, N,
                                     K, transA, transB, PAR_F32, accumulate));
}

PAR_RT_EXPORT void par_rt_k_batch_matmul(int64_t a, int64_t b, int64_t c,
                                         int64_t batch, int64_t M, int64_t N,
                                         int64_t K, int32_t transA,
                                         int32_t transB, int32_t dtype,
                                         int32_t accumulate) {
  KernelCall k("batch_matmul", /*needsMesh=*/false);
  if (!k.ops().batch_matmul)
    k.fail(std::string("not available on the ") + k.ops().name + " backend");
  if (dtype != PAR_F32 && dtype != PAR_F64)
    k.fail("only f32 and f64 are supported");
  int64_t es = k.elementSize(dtype);
  k.checkSizes({{"batch", batch}, {"M", M}, {"N", N}, {"K", K}});
  k.checkBuffer("a", a, k.mul({batch, M, K, es}));
  k.checkBuffer("b", b, k.mul({batch, K, N, es}));
  k.checkBuffer("c", c, k.mul({batch, M, N, es}));
  GemmProfile profile("batch_matmul", batch, M, N, K, dtype);
  k.finishLocal(k.ops().batch_matmul(k.state(), ptr(a), ptr(b), ptr(c), batch,
                                     M, N, K, transA, transB, dtype,
                                     accumulate));
}
