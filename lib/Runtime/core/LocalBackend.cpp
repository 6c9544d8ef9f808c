//===- LocalBackend.cpp - A world of one process, without MPI -------------===//
//
// The world and device backend of a single process outside any MPI job
// (par_world_t: PAR_WORLD_LOCAL, or PAR_WORLD_AUTO without a launcher's
// environment). It is part of libpar_runtime.so, so such a run loads no MPI
// library at all.
//
// With one process every group has size 1: each collective is a copy of its
// input to its output (a reduction over one value is that value, avg
// divides by 1, the block layouts [C][1][D] and [C][D] coincide), the world
// broadcast is nothing and the world gather a copy. The program's
// send/recv can only address this process itself: a send is buffered at
// once (so par_rt_send_async completes immediately too) and a later recv
// with the same tag takes the oldest such message, as MPI's eager sends to
// self behave; a recv with no message waiting fails with a clear error
// instead of waiting forever. A bucket all-reduce (a started all-gather)
// copies its members (its input) when it starts; its wait only frees the
// request. matmuls run on the host kernels that the MPI backend uses too
// (common/HostKernels).
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "../common/Dtype.h"
#include "../common/HostKernels.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>

using namespace par::rt;

namespace {

struct Message {
  int64_t tag;
  std::vector<unsigned char> bytes;
};

struct State {
  std::string error;
  std::deque<Message> toSelf; // sends not received yet, oldest first
};

State &st(void *state) { return *static_cast<State *>(state); }

par_status_t fail(void *state, par_status_t status, std::string message) {
  st(state).error = "local backend: " + std::move(message);
  return status;
}

/// Every group of a world of one has one member; anything else would be a
/// core bug, reported rather than miscomputed.
par_status_t checkGroup(void *state, const par_rt_backend_group_t *g) {
  if (g->size == 1 && g->index == 0)
    return PAR_OK;
  return fail(state, PAR_ERR_INVALID_ARGUMENT,
              "a group of " + std::to_string(g->size) +
                  " processes in a world of one");
}

/// The collective over a group of one: out = in (`elements` of `dtype`).
par_status_t copy(void *state, const par_rt_backend_group_t *g, const void *in,
                  void *out, int64_t elements, int32_t dtype) {
  if (par_status_t s = checkGroup(state, g))
    return s;
  if (in != out && elements > 0)
    std::memmove(out, in, size_t(elements * dtypeSize(dtype)));
  return PAR_OK;
}

par_status_t create(const par_rt_backend_init_t *, void **outState, char *,
                    size_t) {
  *outState = new State;
  return PAR_OK;
}

void destroy(void *state) { delete &st(state); }

const char *lastError(void *state) { return st(state).error.c_str(); }

void queryWorld(void *, par_rt_backend_world_t *out) {
  *out = {/*rank=*/0, /*size=*/1, /*local_rank=*/0,
          /*tag_upper_bound=*/INT_MAX};
}

void abortJob(void *, int exitCode) { std::_Exit(exitCode); }

par_status_t nothing(void *) { return PAR_OK; }

par_status_t broadcastWorld(void *, void *, int64_t, int64_t) {
  return PAR_OK; // the root (0) is the only process
}

par_status_t gatherWorld(void *state, const void *local, int64_t bytes,
                         void *gatheredOnRoot) {
  if (bytes && !gatheredOnRoot)
    return fail(state, PAR_ERR_INVALID_ARGUMENT,
                "gather_world: gathered_on_root is NULL on the root");
  if (bytes && local != gatheredOnRoot)
    std::memmove(gatheredOnRoot, local, size_t(bytes));
  return PAR_OK;
}

par_status_t prepareGroup(void *state, const par_rt_backend_group_t *g) {
  return checkGroup(state, g);
}

void resetGroups(void *) {}

par_status_t allReduce(void *state, const par_rt_backend_group_t *g,
                       const void *in, void *out, int64_t count, int32_t dtype,
                       int32_t) {
  return copy(state, g, in, out, count, dtype);
}

par_status_t allGather(void *state, const par_rt_backend_group_t *g,
                       const void *in, void *out, int64_t C, int64_t D,
                       int32_t dtype) {
  return copy(state, g, in, out, C * D, dtype);
}

par_status_t reduceScatter(void *state, const par_rt_backend_group_t *g,
                           const void *in, void *out, int64_t A, int64_t B,
                           int32_t dtype, int32_t) {
  return copy(state, g, in, out, A * B, dtype);
}

par_status_t allToAll(void *state, const par_rt_backend_group_t *g,
                      const void *in, void *out, int64_t A, int64_t B, int64_t,
                      int64_t, int32_t dtype) {
  return copy(state, g, in, out, A * B, dtype);
}

par_status_t broadcast(void *state, const par_rt_backend_group_t *g,
                       const void *in, void *out, int64_t count, int32_t dtype,
                       int64_t) {
  return copy(state, g, in, out, count, dtype);
}

par_status_t send(void *state, const void *in, int64_t count, int32_t dtype,
                  int64_t peer, int64_t tag) {
  if (peer != 0)
    return fail(state, PAR_ERR_INVALID_ARGUMENT,
                "send to rank " + std::to_string(peer) + " in a world of one");
  auto *p = static_cast<const unsigned char *>(in);
  st(state).toSelf.push_back(
      {tag, std::vector<unsigned char>(p, p + count * dtypeSize(dtype))});
  return PAR_OK;
}

par_status_t recv(void *state, void *out, int64_t count, int32_t dtype,
                  int64_t peer, int64_t tag) {
  State &s = st(state);
  if (peer != 0)
    return fail(state, PAR_ERR_INVALID_ARGUMENT,
                "recv from rank " + std::to_string(peer) +
                    " in a world of one");
  auto it = s.toSelf.begin();
  while (it != s.toSelf.end() && it->tag != tag)
    ++it;
  if (it == s.toSelf.end())
    return fail(state, PAR_ERR_COMMUNICATION,
                "recv with tag " + std::to_string(tag) +
                    " from this process itself, which sent no such message "
                    "before (it would wait forever)");
  int64_t es = dtypeSize(dtype), got = int64_t(it->bytes.size()) / es;
  if (got != count)
    return fail(state, PAR_ERR_COMMUNICATION,
                "received " + std::to_string(got) +
                    " elements from rank 0, expected " +
                    std::to_string(count));
  if (count)
    std::memcpy(out, it->bytes.data(), it->bytes.size());
  s.toSelf.erase(it);
  return PAR_OK;
}

/// A bucket over a group of one: each member copied at once, so the
/// request is only a non-null token and the wait has nothing to do.
char completedRequest;

par_status_t bucketStart(void *state, const par_rt_backend_group_t *g,
                         const par_rt_bucket_member_t *members, int64_t n,
                         int32_t dtype, int32_t, void **request) {
  *request = nullptr;
  for (int64_t i = 0; i < n; ++i)
    if (par_status_t s = copy(state, g, members[i].in, members[i].out,
                              members[i].count, dtype))
      return s;
  *request = &completedRequest;
  return PAR_OK;
}

/// The same for a started all-gather: copied at once.
par_status_t gatherStart(void *state, const par_rt_backend_group_t *g,
                         const void *in, void *out, int64_t C, int64_t D,
                         int32_t dtype, void **request) {
  *request = nullptr;
  if (par_status_t s = allGather(state, g, in, out, C, D, dtype))
    return s;
  *request = &completedRequest;
  return PAR_OK;
}

par_status_t bucketWait(void *, void *) { return PAR_OK; }

using Host = HostKernelEntries<State>;

const par_rt_backend_t kTable = {
    PAR_RT_BACKEND_ABI_VERSION,
    "local",
    create,
    /*connect=*/nullptr,
    destroy,
    /*finalize=*/nullptr,
    lastError,
    queryWorld,
    abortJob,
    /*barrier=*/nothing,
    broadcastWorld,
    gatherWorld,
    prepareGroup,
    resetGroups,
    allReduce,
    allGather,
    reduceScatter,
    allToAll,
    Host::allSlice,
    broadcast,
    send,
    /*send_async=*/send, // buffered at once: complete when it returns
    /*wait_sends=*/nothing,
    recv,
    Host::matmul,
    Host::batchMatmul,
    /*batch_matmul_mixed=*/nullptr, // core widens on the host
    bucketStart,
    bucketWait,
    /*progress=*/nullptr, // copies complete at the start
    gatherStart,
    /*recv_start=*/nullptr, // core receives at the start
};

} // namespace

const par_rt_backend_t *par::rt::localBackend() { return &kTable; }
