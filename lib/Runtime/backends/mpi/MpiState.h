//===- MpiState.h - The MPI backend's per-context state ---------*- C++ -*-===//
//
// Shared by the files of libpar_runtime_mpi.so: MpiBackend.cpp (start-up,
// the world operations, point-to-point, the table) and MpiCollectives.cpp
// (the collectives). Private to the backend.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_BACKENDS_MPI_MPISTATE_H
#define PAR_RUNTIME_BACKENDS_MPI_MPISTATE_H

#include "../../common/BackendApi.h"
#include "../../common/GroupEntry.h"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace par::rt::mpi {

struct State {
  /// A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN: our traffic never
  /// matches the application's messages, and MPI errors come back as codes.
  MPI_Comm world = MPI_COMM_NULL;
  /// A second duplicate for the program's send/recv, whose tags come from
  /// the program: they can then never match the runtime's own point-to-point
  /// traffic on `world` (the large-buffer path of gather_world).
  MPI_Comm peers = MPI_COMM_NULL;
  par_rt_backend_world_t info = {0, 1, 0, 32767};

  /// Group communicators by axes code, created on first use.
  std::unordered_map<int64_t, MPI_Comm> groups;

  /// Reused host staging buffers for packing and f16/bf16 widening; kernels
  /// are called often with the same sizes, so they stop allocating after
  /// the first calls.
  std::vector<unsigned char> scratch[3];

  /// Sends started by send_async, completed by wait_sends.
  std::vector<MPI_Request> pendingSends;

  /// Buckets and all-gathers started and not waited for (MpiCollectives.cpp's
  /// BucketRequest): tested by progress, completed by destroy.
  std::unordered_set<void *> pendingBuckets;

  std::string error;
};

inline State &st(void *state) { return *static_cast<State *>(state); }

/// Elements per MPI call when splitting elementwise operations (MPI counts
/// are int).
constexpr int64_t kPiece = int64_t(1) << 30;

/// Sets s.error and returns `status`.
par_status_t fail(State &s, par_status_t status, std::string message);

/// Sets s.error to "<call> failed: <MPI's text for code>" and returns
/// PAR_ERR_COMMUNICATION.
par_status_t mpiError(State &s, const char *call, int code);

/// Grows scratch buffer `which` (0..2) to at least `bytes` and returns it.
unsigned char *scratch(State &s, int which, size_t bytes);

/// The group's communicator, created (collectively, over the world) and
/// cached on first use.
par_status_t groupComm(State &s, const par_rt_backend_group_t *g,
                       MPI_Comm &out);

/// Broadcasts `bytes` over `comm` in pieces MPI's int counts can express.
par_status_t bcastBytes(State &s, void *buffer, int64_t bytes, int root,
                        MPI_Comm comm);

/// The MPI type that moves `dtype` (no arithmetic needed).
MPI_Datatype moveType(int32_t dtype);

#define PAR_MPI_CHECK(s, call, expr)                                           \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_ != MPI_SUCCESS)                                                    \
      return ::par::rt::mpi::mpiError(s, call, rc_);                           \
  } while (0)

// The collectives (MpiCollectives.cpp), on the group's communicator; the
// table reaches them through OnGroup (common/GroupEntry.h).
par_status_t allReduce(State &s, const par_rt_backend_group_t *g, MPI_Comm comm,
                       const void *in, void *out, int64_t count, int32_t dtype,
                       int32_t reduction);
par_status_t allGather(State &s, const par_rt_backend_group_t *g, MPI_Comm comm,
                       const void *in, void *out, int64_t C, int64_t D,
                       int32_t dtype);
par_status_t reduceScatter(State &s, const par_rt_backend_group_t *g,
                           MPI_Comm comm, const void *in, void *out, int64_t A,
                           int64_t B, int32_t dtype, int32_t reduction);
par_status_t allToAll(State &s, const par_rt_backend_group_t *g, MPI_Comm comm,
                      const void *in, void *out, int64_t A, int64_t B,
                      int64_t C, int64_t D, int32_t dtype);
par_status_t broadcast(State &s, const par_rt_backend_group_t *g, MPI_Comm comm,
                       const void *in, void *out, int64_t count, int32_t dtype,
                       int64_t root);

/// Bucket all-reduces: one MPI_Iallreduce (in pieces of kPiece) over the
/// members packed into a staging buffer; the wait unpacks.
par_status_t bucketStart(State &s, const par_rt_backend_group_t *g,
                         MPI_Comm comm, const par_rt_bucket_member_t *members,
                         int64_t n, int32_t dtype, int32_t reduction,
                         void **request);
/// A started all-gather: one MPI_Iallgather, into the output when the
/// layouts coincide (C == 1), else into a staging buffer that the wait
/// unpacks to [C][n][D]. The same request and wait as a bucket.
par_status_t gatherStart(State &s, const par_rt_backend_group_t *g,
                         MPI_Comm comm, const void *in, void *out, int64_t C,
                         int64_t D, int32_t dtype, void **request);
/// A started receive: MPI_Irecv of each piece on the peers' communicator;
/// the wait checks that each piece came whole (as recv does).
par_status_t recvStart(void *state, void *out, int64_t count, int32_t dtype,
                       int64_t peer, int64_t tag, void **request);
/// Completes a started bucket, all-gather or receive.
par_status_t bucketWait(void *state, void *request);
/// MPI_Testall on every pending bucket: OpenMPI advances a nonblocking
/// collective mostly inside MPI calls, and this one runs at kernel entries.
par_status_t bucketProgress(void *state);
/// Completes the transfers of every pending bucket and frees them, leaving
/// their outputs alone (context destruction).
void waitAllBuckets(State &s);

} // namespace par::rt::mpi

#endif // PAR_RUNTIME_BACKENDS_MPI_MPISTATE_H
