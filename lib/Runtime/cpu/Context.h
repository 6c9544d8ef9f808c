//===- Context.h - The runtime context (internal) ---------------*- C++ -*-===//
//
// What a par_rt_context_t holds, shared by the host API / kernel entry points
// (Runtime.cpp), the MPI kernels (MpiKernels.cpp) and the CUDA loader
// (CudaLoader.cpp). Not installed, not part of the ABI.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CPU_CONTEXT_H
#define PAR_RUNTIME_CPU_CONTEXT_H

#include "../common/CudaBackendApi.h"
#include "par/Runtime/par_runtime.h"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace par::rt {

/// The group of processes one axes code denotes, for this process. size,
/// index and color are pure arithmetic on the mesh (so all_slice, which does
/// not communicate, never creates a communicator); `comm` is created on the
/// first collective that needs it and cached until the mesh changes.
struct Group {
  int64_t axesCode = 0;
  std::vector<int> axes; // listed mesh axes, in listed order
  int64_t size = 1;      // product of the listed axes' sizes
  int64_t index = 0;     // row-major over the listed axes, listed order
  int64_t color = 0;     // row-major over the unlisted axes, mesh order
  MPI_Comm comm = MPI_COMM_NULL;
};

} // namespace par::rt

struct par_rt_context_t {
  par_backend_t backend = PAR_BACKEND_CPU;

  /// A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN: our traffic never
  /// matches the application's messages, and MPI errors come back as codes.
  MPI_Comm world = MPI_COMM_NULL;
  /// A second duplicate for par_rt_k_send/recv, whose tags come from the
  /// program: they can then never match the runtime's own point-to-point
  /// traffic on `world` (the large-buffer path of par_rt_gather_world).
  MPI_Comm peers = MPI_COMM_NULL;
  int64_t tagUpperBound = 32767; // MPI_TAG_UB, at least 32767 by the standard
  int64_t rank = 0;
  int64_t worldSize = 1;
  int64_t localRank = 0; // rank among the processes on this node

  bool hasMesh = false;
  std::vector<int64_t> meshSizes;
  std::vector<int64_t> coords; // this process's coordinates
  std::unordered_map<int64_t, par::rt::Group> groups;

  std::string error; // par_rt_context_last_error
  par_rt_stats_t stats = {0, 0.0, 0.0};

  /// Reused host staging buffers for packing and f16/bf16 widening; kernels
  /// are called often with the same sizes, so they stop allocating after
  /// the first calls.
  std::vector<unsigned char> scratch[3];

  /// Kernel records while tracing (par_rt_trace_enable).
  bool tracing = false;
  std::vector<par_rt_trace_event_t> trace;

  /// Sends started by par_rt_send_async, completed by par_rt_wait_sends.
  std::vector<MPI_Request> pendingSends;

  /// The CUDA backend's table and state when backend == PAR_BACKEND_CUDA.
  const par_rt_cuda_backend_t *cuda = nullptr;
  void *cudaState = nullptr;
};

namespace par::rt {

/// Sets ctx.error and returns `status`.
par_status_t setError(par_rt_context_t &ctx, par_status_t status,
                      std::string message);

/// Sets ctx.error to "<call> failed: <MPI's text for code>" and returns
/// PAR_ERR_COMMUNICATION.
par_status_t mpiError(par_rt_context_t &ctx, const char *call, int code);

/// Grows scratch buffer `which` (0..2) to at least `bytes` and returns it.
unsigned char *scratch(par_rt_context_t &ctx, int which, size_t bytes);

/// The group's communicator, created (collectively, over the world) and
/// cached on first use.
par_status_t groupComm(par_rt_context_t &ctx, Group &group, MPI_Comm &out);

/// Loads libpar_runtime_cuda.so and returns its table, or sets `error` and
/// returns null.
const par_rt_cuda_backend_t *loadCudaBackend(std::string &error);

// The CPU (MPI) kernels. Arguments are validated by the entry points.
par_status_t cpuAllReduce(par_rt_context_t &ctx, Group &g, const void *in,
                          void *out, int64_t count, int32_t dtype,
                          int32_t reduction);
par_status_t cpuAllGather(par_rt_context_t &ctx, Group &g, const void *in,
                          void *out, int64_t C, int64_t D, int32_t dtype);
par_status_t cpuReduceScatter(par_rt_context_t &ctx, Group &g, const void *in,
                              void *out, int64_t A, int64_t B, int32_t dtype,
                              int32_t reduction);
par_status_t cpuAllToAll(par_rt_context_t &ctx, Group &g, const void *in,
                         void *out, int64_t A, int64_t B, int64_t C,
                         int64_t D, int32_t dtype);
par_status_t cpuAllSlice(par_rt_context_t &ctx, Group &g, const void *in,
                         void *out, int64_t A, int64_t B, int32_t dtype);
par_status_t cpuBroadcast(par_rt_context_t &ctx, Group &g, const void *in,
                          void *out, int64_t count, int32_t dtype,
                          int64_t root);
par_status_t cpuSend(par_rt_context_t &ctx, const void *in, int64_t count,
                     int32_t dtype, int64_t peer, int64_t tag);
/// cpuSend started with MPI_Isend; the requests go to ctx.pendingSends.
par_status_t cpuSendAsync(par_rt_context_t &ctx, const void *in, int64_t count,
                          int32_t dtype, int64_t peer, int64_t tag);
par_status_t cpuRecv(par_rt_context_t &ctx, void *out, int64_t count,
                     int32_t dtype, int64_t peer, int64_t tag);
/// `batch` row-major GEMMs with optional transposes (f32/f64, BLAS).
par_status_t cpuBatchMatmul(par_rt_context_t &ctx, const void *a,
                            const void *b, void *c, int64_t batch, int64_t M,
                            int64_t N, int64_t K, bool transA, bool transB,
                            int32_t dtype, bool accumulate);
par_status_t cpuMatmul(par_rt_context_t &ctx, const void *a, const void *b,
                       void *c, int64_t M, int64_t N, int64_t K,
                       int32_t dtype, bool accumulate);

/// Broadcasts `bytes` over `comm` in pieces MPI's int counts can express.
par_status_t bcastBytes(par_rt_context_t &ctx, void *buffer, int64_t bytes,
                        int root, MPI_Comm comm);

} // namespace par::rt

#endif // PAR_RUNTIME_CPU_CONTEXT_H
