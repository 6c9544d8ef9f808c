//===- MpiBackend.cpp - The MPI world and host-memory backend -------------===//
//
// libpar_runtime_mpi.so: everything in the runtime that calls MPI. Core
// dlopen()s it (RTLD_GLOBAL, see core/BackendLoader.cpp) when a context's
// world is MPI, and drives it through the table of common/BackendApi.h,
// exported as par_rt_mpi_backend_get. This file holds start-up and
// shutdown, the world operations (barrier, broadcast/gather over the world,
// aborting the job), the program's point-to-point messages and the table;
// MpiCollectives.cpp holds the collectives.
//
// create initializes MPI (MPI_THREAD_SERIALIZED) unless the application
// did, with MPI_ERRORS_RETURN so that errors come back as codes. MPI is
// finalized by `finalize`, which core calls after the last context, and only
// if this library initialized it; an atexit handler covers a process that
// exits without destroying its contexts, notably after a failed create,
// which keeps MPI alive so that the caller can fall back to another backend
// (MPI cannot be initialized twice).
//
//===----------------------------------------------------------------------===//

#include "MpiState.h"

#include "../../common/Dtype.h"
#include "../../common/HostKernels.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace par::rt;
using namespace par::rt::mpi;

namespace {

/// MPI_Init_thread was ours, so MPI_Finalize is ours too.
bool weInitializedMpi = false;

bool mpiUsable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void finalizeAtExit() {
  if (mpiUsable())
    MPI_Finalize();
}

/// Initializes MPI if nobody did yet; on failure sets `why`.
par_status_t initializeMpi(int *argc, char ***argv, std::string &why) {
  int initialized = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    why = "MPI was already finalized in this process and cannot be "
          "initialized again";
    return PAR_ERR_UNAVAILABLE;
  }
  MPI_Initialized(&initialized);
  if (initialized)
    return PAR_OK;
  // SERIALIZED, not FUNNELED: the context may be used from a thread other
  // than the one that created it, as long as only one at a time.
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) !=
      MPI_SUCCESS) {
    why = "MPI_Init_thread failed";
    return PAR_ERR_COMMUNICATION;
  }
  weInitializedMpi = true;
  std::atexit(finalizeAtExit);
  // MPI is ours: report errors instead of MPI's default of aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return PAR_OK;
}

/// The rank among the processes sharing this node (it picks the GPU).
int64_t nodeLocalRank(MPI_Comm world, int64_t rank) {
  MPI_Comm node;
  if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, int(rank),
                          MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return rank;
  int localRank = 0;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_free(&node);
  return localRank;
}

void destroy(void *state) {
  State *s = static_cast<State *>(state);
  if (!s)
    return;
  if (mpiUsable()) {
    waitAllBuckets(*s);
    for (auto &entry : s->groups)
      MPI_Comm_free(&entry.second);
    for (MPI_Comm *c : {&s->peers, &s->world})
      if (*c != MPI_COMM_NULL)
        MPI_Comm_free(c);
  }
  delete s;
}

par_status_t create(const par_rt_backend_init_t *init, void **outState,
                    char *error, size_t errorSize) {
  *outState = nullptr;
  std::string why;
  if (par_status_t status = initializeMpi(init->argc, init->argv, why)) {
    std::snprintf(error, errorSize, "%s", why.c_str());
    return status;
  }
  auto *s = new State;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &s->world);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &s->peers);
  if (rc != MPI_SUCCESS) {
    mpiError(*s, "MPI_Comm_dup", rc);
    std::snprintf(error, errorSize, "%s", s->error.c_str());
    destroy(s);
    return PAR_ERR_COMMUNICATION;
  }
  MPI_Comm_set_errhandler(s->world, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(s->peers, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(s->world, &rank);
  MPI_Comm_size(s->world, &size);
  s->info.rank = rank;
  s->info.size = size;
  s->info.local_rank = nodeLocalRank(s->world, rank);
  int *tagUb = nullptr, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagUb, &flag);
  if (flag && tagUb)
    s->info.tag_upper_bound = *tagUb;
  *outState = s;
  return PAR_OK;
}

void finalize() {
  if (weInitializedMpi && mpiUsable())
    MPI_Finalize();
}

const char *lastError(void *state) { return st(state).error.c_str(); }

void queryWorld(void *state, par_rt_backend_world_t *out) {
  *out = st(state).info;
}

void abortJob(void *, int exitCode) {
  if (mpiUsable())
    MPI_Abort(MPI_COMM_WORLD, exitCode);
  std::_Exit(exitCode);
}

par_status_t barrier(void *state) {
  State &s = st(state);
  PAR_MPI_CHECK(s, "MPI_Barrier", MPI_Barrier(s.world));
  return PAR_OK;
}

par_status_t broadcastWorld(void *state, void *buffer, int64_t bytes,
                            int64_t root) {
  State &s = st(state);
  return bcastBytes(s, buffer, bytes, int(root), s.world);
}

/// gather_world beyond MPI's int counts and displacements: point-to-point
/// in pieces, each rank's block at rank * bytes.
par_status_t gatherLarge(State &s, const void *local, int64_t bytes,
                         unsigned char *dest) {
  const int64_t piece = int64_t(1) << 30;
  bool root = s.info.rank == 0;
  if (root)
    std::memcpy(dest, local, size_t(bytes));
  for (int64_t r = 1; r < s.info.size; ++r) {
    if (!root && r != s.info.rank)
      continue;
    for (int64_t off = 0; off < bytes; off += piece) {
      int n = int(std::min(piece, bytes - off));
      int rc = root ? MPI_Recv(dest + r * bytes + off, n, MPI_BYTE, int(r), 0,
                               s.world, MPI_STATUS_IGNORE)
                    : MPI_Send(static_cast<const unsigned char *>(local) + off,
                               n, MPI_BYTE, 0, 0, s.world);
      if (rc != MPI_SUCCESS)
        return mpiError(s, root ? "MPI_Recv" : "MPI_Send", rc);
    }
  }
  return PAR_OK;
}

par_status_t gatherWorld(void *state, const void *local, int64_t bytes,
                         void *gatheredOnRoot) {
  State &s = st(state);
  bool root = s.info.rank == 0;
  // A root without a destination still takes part (into scratch), or the
  // other processes would wait for it forever; it reports the error after.
  void *dest = gatheredOnRoot;
  if (root && bytes && !dest)
    dest = scratch(s, 0, size_t(bytes * s.info.size));
  if (bytes <= INT_MAX) {
    PAR_MPI_CHECK(s, "MPI_Gather",
                  MPI_Gather(local, int(bytes), MPI_BYTE,
                             root ? dest : nullptr, int(bytes), MPI_BYTE, 0,
                             s.world));
  } else if (par_status_t st = gatherLarge(
                 s, local, bytes, static_cast<unsigned char *>(dest))) {
    return st;
  }
  if (root && bytes && !gatheredOnRoot)
    return fail(s, PAR_ERR_INVALID_ARGUMENT,
                "gather_world: gathered_on_root is NULL on the root");
  return PAR_OK;
}

par_status_t prepareGroup(void *state, const par_rt_backend_group_t *g) {
  MPI_Comm comm;
  return groupComm(st(state), g, comm);
}

void resetGroups(void *state) {
  State &s = st(state);
  if (mpiUsable())
    for (auto &entry : s.groups)
      MPI_Comm_free(&entry.second);
  s.groups.clear();
}

/// Messages a send/recv of `count` elements takes (at least one).
int64_t numPieces(int64_t count) {
  return count == 0 ? 1 : (count + kPiece - 1) / kPiece;
}

/// A send's pieces, each sent at once or, with `requests`, started.
par_status_t sendPieces(State &s, const void *in, int64_t count,
                        int32_t dtype, int64_t peer, int64_t tag,
                        std::vector<MPI_Request> *requests) {
  MPI_Datatype type = moveType(dtype);
  int64_t es = dtypeSize(dtype);
  // Messages between a pair with the same tag never overtake each other,
  // so the receiver reassembles the pieces in order (started or not). An
  // empty message is still one message: the receiver waits for it.
  for (int64_t off = 0, pieces = numPieces(count); pieces--; off += kPiece) {
    int piece = int(std::min(kPiece, count - off));
    const unsigned char *at = static_cast<const unsigned char *>(in) + off * es;
    if (!requests) {
      PAR_MPI_CHECK(s, "MPI_Send",
                    MPI_Send(at, piece, type, int(peer), int(tag), s.peers));
      continue;
    }
    MPI_Request req;
    PAR_MPI_CHECK(s, "MPI_Isend",
                  MPI_Isend(at, piece, type, int(peer), int(tag), s.peers,
                            &req));
    requests->push_back(req);
  }
  return PAR_OK;
}

par_status_t send(void *state, const void *in, int64_t count, int32_t dtype,
                  int64_t peer, int64_t tag) {
  return sendPieces(st(state), in, count, dtype, peer, tag, nullptr);
}

par_status_t sendAsync(void *state, const void *in, int64_t count,
                       int32_t dtype, int64_t peer, int64_t tag) {
  State &s = st(state);
  return sendPieces(s, in, count, dtype, peer, tag, &s.pendingSends);
}

par_status_t waitSends(void *state) {
  State &s = st(state);
  if (s.pendingSends.empty())
    return PAR_OK;
  int rc = MPI_Waitall(int(s.pendingSends.size()), s.pendingSends.data(),
                       MPI_STATUSES_IGNORE);
  s.pendingSends.clear();
  return rc == MPI_SUCCESS ? PAR_OK : mpiError(s, "MPI_Waitall", rc);
}

par_status_t recv(void *state, void *out, int64_t count, int32_t dtype,
                  int64_t peer, int64_t tag) {
  State &s = st(state);
  MPI_Datatype type = moveType(dtype);
  int64_t es = dtypeSize(dtype);
  for (int64_t off = 0, pieces = numPieces(count); pieces--; off += kPiece) {
    int piece = int(std::min(kPiece, count - off));
    MPI_Status status;
    PAR_MPI_CHECK(s, "MPI_Recv",
                  MPI_Recv(static_cast<unsigned char *>(out) + off * es, piece,
                           type, int(peer), int(tag), s.peers, &status));
    // A longer message fails above (MPI_ERR_TRUNCATE); a shorter one would
    // silently leave stale data, so it is an error too.
    int got = 0;
    MPI_Get_count(&status, type, &got);
    if (got != piece)
      return fail(s, PAR_ERR_COMMUNICATION,
                  "received " + std::to_string(got) + " elements from rank " +
                      std::to_string(peer) + ", expected " +
                      std::to_string(piece));
  }
  return PAR_OK;
}

using Host = HostKernelEntries<State>;

const par_rt_backend_t kTable = {
    PAR_RT_BACKEND_ABI_VERSION,
    "MPI",
    create,
    /*connect=*/nullptr,
    destroy,
    finalize,
    lastError,
    queryWorld,
    abortJob,
    barrier,
    broadcastWorld,
    gatherWorld,
    prepareGroup,
    resetGroups,
    OnGroup<allReduce>::entry,
    OnGroup<allGather>::entry,
    OnGroup<reduceScatter>::entry,
    OnGroup<allToAll>::entry,
    Host::allSlice,
    OnGroup<broadcast>::entry,
    send,
    sendAsync,
    waitSends,
    recv,
    Host::matmul,
    Host::batchMatmul,
    /*batch_matmul_mixed=*/nullptr, // core widens on the host
    OnGroup<bucketStart>::entry,
    bucketWait,
    bucketProgress,
    OnGroup<gatherStart>::entry,
    recvStart,
};

} // namespace

//===----------------------------------------------------------------------===//
// Helpers shared with MpiCollectives.cpp
//===----------------------------------------------------------------------===//

par_status_t par::rt::mpi::fail(State &s, par_status_t status,
                                std::string message) {
  s.error = std::move(message);
  return status;
}

par_status_t par::rt::mpi::mpiError(State &s, const char *call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    std::snprintf(text, sizeof(text), "error code %d", code);
  return fail(s, PAR_ERR_COMMUNICATION, std::string(call) + " failed: " + text);
}

unsigned char *par::rt::mpi::scratch(State &s, int which, size_t bytes) {
  std::vector<unsigned char> &buf = s.scratch[which];
  if (buf.size() < bytes)
    buf.resize(bytes);
  return buf.data();
}

par_status_t par::rt::mpi::groupComm(State &s, const par_rt_backend_group_t *g,
                                     MPI_Comm &out) {
  auto it = s.groups.find(g->axes);
  if (it != s.groups.end()) {
    out = it->second;
    return PAR_OK;
  }
  // Collective over the world: every process creates its own group's
  // communicator in the same call. SPMD programs reach each collective on
  // every process, so the first use of an axes code is reached by all.
  MPI_Comm comm;
  PAR_MPI_CHECK(s, "MPI_Comm_split",
                MPI_Comm_split(s.world, int(g->color), int(g->index), &comm));
  s.groups.emplace(g->axes, comm);
  out = comm;
  return PAR_OK;
}

extern "C" __attribute__((visibility("default"))) const par_rt_backend_t *
par_rt_mpi_backend_get(void) {
  return &kTable;
}
