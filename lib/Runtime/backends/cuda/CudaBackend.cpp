//===- CudaBackend.cpp - The CUDA backend over NCCL and cuBLAS ------------===//
//
// libpar_runtime.so loads this library with dlopen and drives it through the
// backend table of common/BackendApi.h (a device backend: the world, MPI or
// local, comes from another backend). It implements the kernel ABI on device
// memory:
//
//   all_reduce      ncclAllReduce (i1 as uint8: sum/max = max, min = min)
//   all_gather      ncclAllGather into [n][C][D], unpack to [C][n][D]
//   reduce_scatter  pack [A][n][B] to [n][A][B], ncclReduceScatter
//   all_to_all      pack, grouped ncclSend/ncclRecv, unpack
//   all_slice       one strided device copy
//   broadcast       ncclBroadcast
//   send/recv       ncclSend/ncclRecv on the world communicator
//   matmul          cuBLAS (f32, f64, f16, bf16); other dtypes on the host
//   batch_matmul    cublas{S,D}gemmStridedBatched (f32, f64, either operand
//                   transposed)
//   batch_matmul_mixed  cublasGemmStridedBatchedEx: f16 or bf16 A and B, f32
//                   C, CUBLAS_COMPUTE_32F (f32 A and B: the f32 form)
//   bucket          on the communication stream: the members copied into
//                   one staging buffer, one ncclAllReduce, copied back,
//                   an event recorded; the wait synchronizes the event
//   gather start    on the communication stream: ncclAllGather (into
//                   staging and unpacked when C > 1), an event recorded;
//                   the same wait
//
// Packing is cudaMemcpy2DAsync (a strided copy is exactly a block transpose
// of the layouts involved), so no device code is compiled and no nvcc is
// needed. All work runs on one stream per context, created blocking with
// respect to the legacy default stream so that it is ordered after the
// kernels a compiled program launched there, and the kernels it launches
// after a call are ordered after the call's work: calls do not synchronize
// (a compiled function synchronizes the whole context once, when it
// returns: libpar_runtime_gpu.so's mgpuStreamSynchronize), so the runtime's
// per-kernel times are enqueue times unless PAR_CUDA_SYNC=1.
//
// Matmuls are row-major: cuBLAS is column-major, and a row-major X is the
// column-major X^T, so C^T = B^T * A^T with the operands swapped.
//
// Environment, read when the backend is created:
//   PAR_CUDA_TF32=1  f32 GEMMs (matmul, batch_matmul) may use TF32 tensor
//                    cores (CUBLAS_TF32_TENSOR_OP_MATH): faster, with a
//                    10-bit mantissa for the products. Off by default (f32
//                    results then match the CPU backend's to rounding).
//   PAR_CUDA_SYNC=1  every call synchronizes the stream before returning:
//                    errors surface at the call that caused them and the
//                    per-kernel statistics time the device work.
//
// Group communicators come from ncclCommSplit of the world communicator
// (color/key computed by libpar_runtime.so), cached per axes code. The world
// communicator is bootstrapped with a unique id that rank 0 creates and
// broadcasts through the world backend's broadcast, handed over in
// par_rt_backend_init_t (so this library links no MPI). A world of one
// process (the local world: one GPU, no MPI) needs no broadcast.
//
//===----------------------------------------------------------------------===//

#include "../../common/BackendApi.h"
#include "../../common/Dtype.h"
#include "../../common/GroupEntry.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "par_runtime_cuda needs NCCL >= 2.18 (ncclCommSplit)"
#endif

using namespace par::rt;

namespace {

struct State {
  int device = -1;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  ncclComm_t world = nullptr;
  int64_t rank = 0;
  int64_t worldSize = 1;
  std::unordered_map<int64_t, ncclComm_t> groups; // by axes code
  void *scratch[2] = {nullptr, nullptr};          // device staging
  size_t scratchBytes[2] = {0, 0};
  std::vector<unsigned char> host[3]; // host staging for loop matmul
  /// Buckets run here, non-blocking with respect to the legacy default
  /// stream (so the program's later kernels there do not wait for them);
  /// created on the first bucket.
  cudaStream_t comm = nullptr;
  cudaEvent_t commTail = nullptr; // recorded after the last bucket
  std::unordered_set<void *> pendingBuckets; // BucketRequest
  std::string error;
  bool syncCalls = false; // PAR_CUDA_SYNC=1
};

State &st(void *state) { return *static_cast<State *>(state); }

par_status_t fail(State &s, par_status_t status, std::string message) {
  s.error = "CUDA backend: " + std::move(message);
  return status;
}

par_status_t cudaFail(State &s, const char *what, cudaError_t e) {
  // cudaMalloc's failure is the one a caller can act on.
  return fail(s,
              e == cudaErrorMemoryAllocation ? PAR_ERR_OUT_OF_MEMORY
                                             : PAR_ERR_COMMUNICATION,
              std::string(what) + ": " + cudaGetErrorString(e));
}

par_status_t ncclFail(State &s, const char *what, ncclResult_t r,
                      ncclComm_t comm) {
  std::string message = std::string(what) + ": " + ncclGetErrorString(r);
  const char *detail = ncclGetLastError(comm);
  if (detail && *detail)
    message += std::string(" (") + detail + ")";
  return fail(s, PAR_ERR_COMMUNICATION, message);
}

#define PAR_CUDA_CHECK(s, what, expr)                                          \
  do {                                                                         \
    cudaError_t e_ = (expr);                                                   \
    if (e_ != cudaSuccess)                                                     \
      return cudaFail(s, what, e_);                                            \
  } while (0)

#define PAR_NCCL_CHECK(s, what, comm, expr)                                    \
  do {                                                                         \
    ncclResult_t r_ = (expr);                                                  \
    if (r_ != ncclSuccess)                                                     \
      return ncclFail(s, what, r_, comm);                                      \
  } while (0)

ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case PAR_F32: return ncclFloat32;
  case PAR_F64: return ncclFloat64;
  case PAR_F16: return ncclFloat16;
  case PAR_BF16: return ncclBfloat16;
  case PAR_I32: return ncclInt32;
  case PAR_I64: return ncclInt64;
  case PAR_I8: return ncclInt8;
  default: return ncclUint8; // i1: one byte, 0 or 1
  }
}

ncclRedOp_t ncclOp(int32_t dtype, int32_t reduction) {
  // On 0/1 bytes, or is max and and is min.
  if (dtype == PAR_I1)
    return reduction == PAR_MIN ? ncclMin : ncclMax;
  switch (reduction) {
  case PAR_MAX: return ncclMax;
  case PAR_MIN: return ncclMin;
  case PAR_AVG: return ncclAvg;
  default: return ncclSum;
  }
}

/// Waits for the stream (host staging needs the data).
par_status_t wait(State &s, const char *what) {
  PAR_CUDA_CHECK(s, what, cudaStreamSynchronize(s.stream));
  return PAR_OK;
}

/// The end of a call: launch errors now; the work itself completes in
/// stream order (or here, with PAR_CUDA_SYNC=1).
par_status_t sync(State &s, const char *what) {
  if (s.syncCalls)
    return wait(s, what);
  PAR_CUDA_CHECK(s, what, cudaGetLastError());
  return PAR_OK;
}

/// Device staging buffer `which`, grown to at least `bytes`. Growing frees
/// the old buffer, which is idle: cudaFree waits for the device first.
par_status_t devScratch(State &s, int which, size_t bytes, void *&out) {
  if (s.scratchBytes[which] < bytes) {
    if (s.scratch[which])
      cudaFree(s.scratch[which]);
    s.scratch[which] = nullptr;
    s.scratchBytes[which] = 0;
    PAR_CUDA_CHECK(s, "cudaMalloc", cudaMalloc(&s.scratch[which], bytes));
    s.scratchBytes[which] = bytes;
  }
  out = s.scratch[which];
  return PAR_OK;
}

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && pa < pb + bBytes && pb < pa + aBytes;
}

/// [A][n][B] -> [n][A][B]: block j is A rows of B elements taken with a
/// stride of n*B.
par_status_t pack(State &s, const void *in, void *out, int64_t A, int64_t n,
                  int64_t B, int64_t es) {
  if (A == 0 || B == 0)
    return PAR_OK;
  size_t row = size_t(B * es);
  for (int64_t j = 0; j < n; ++j)
    PAR_CUDA_CHECK(s, "cudaMemcpy2DAsync",
                   cudaMemcpy2DAsync(static_cast<char *>(out) + j * A * row,
                                     row,
                                     static_cast<const char *>(in) + j * row,
                                     size_t(n) * row, row, size_t(A),
                                     cudaMemcpyDeviceToDevice, s.stream));
  return PAR_OK;
}

/// [n][C][D] -> [C][n][D], on `stream`.
par_status_t unpackOn(State &s, cudaStream_t stream, const void *in, void *out,
                      int64_t C, int64_t n, int64_t D, int64_t es) {
  if (C == 0 || D == 0)
    return PAR_OK;
  size_t row = size_t(D * es);
  for (int64_t j = 0; j < n; ++j)
    PAR_CUDA_CHECK(s, "cudaMemcpy2DAsync",
                   cudaMemcpy2DAsync(static_cast<char *>(out) + j * row,
                                     size_t(n) * row,
                                     static_cast<const char *>(in) +
                                         j * C * row,
                                     row, row, size_t(C),
                                     cudaMemcpyDeviceToDevice, stream));
  return PAR_OK;
}

/// [n][C][D] -> [C][n][D], on the context's stream.
par_status_t unpack(State &s, const void *in, void *out, int64_t C, int64_t n,
                    int64_t D, int64_t es) {
  return unpackOn(s, s.stream, in, out, C, n, D, es);
}

/// While buckets are in flight, the main stream's collectives queue behind
/// them: NCCL promises no progress for two communicators' kernels running
/// at once on one GPU, so only compute overlaps a bucket.
par_status_t afterBuckets(State &s) {
  if (!s.pendingBuckets.empty())
    PAR_CUDA_CHECK(s, "cudaStreamWaitEvent",
                   cudaStreamWaitEvent(s.stream, s.commTail, 0));
  return PAR_OK;
}

/// The NCCL communicator of a group, split from the world on first use.
/// ncclCommSplit is collective over the world; as with MPI_Comm_split in the
/// CPU backend, SPMD programs reach it on every process.
par_status_t groupComm(State &s, const par_rt_backend_group_t *g,
                       ncclComm_t &out) {
  if (par_status_t st = afterBuckets(s))
    return st;
  auto it = s.groups.find(g->axes);
  if (it != s.groups.end()) {
    out = it->second;
    return PAR_OK;
  }
  ncclComm_t comm = nullptr;
  PAR_NCCL_CHECK(s, "ncclCommSplit", s.world,
                 ncclCommSplit(s.world, int(g->color), int(g->index), &comm,
                               nullptr));
  s.groups.emplace(g->axes, comm);
  out = comm;
  return PAR_OK;
}

//===----------------------------------------------------------------------===//
// Table entries
//===----------------------------------------------------------------------===//

par_status_t create(const par_rt_backend_init_t *init, void **outState,
                    char *error, size_t errorSize) {
  *outState = nullptr;
  auto report = [&](par_status_t status, const std::string &message) {
    std::snprintf(error, errorSize, "%s", message.c_str());
    return status;
  };
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return report(PAR_ERR_UNAVAILABLE,
                  std::string("CUDA backend: no GPU or driver available: ") +
                      cudaGetErrorString(e));
  if (count == 0)
    return report(PAR_ERR_UNAVAILABLE, "CUDA backend: no GPU or driver "
                                       "available: no CUDA device found");
  auto *s = new State;
  s->device = int(init->world.local_rank % count);
  auto cleanup = [&](const char *what, const char *why) {
    std::string message =
        std::string("CUDA backend: ") + what + " failed: " + why;
    if (s->blas)
      cublasDestroy(s->blas);
    if (s->stream)
      cudaStreamDestroy(s->stream);
    delete s;
    return report(PAR_ERR_UNAVAILABLE, message);
  };
  if ((e = cudaSetDevice(s->device)) != cudaSuccess)
    return cleanup("cudaSetDevice", cudaGetErrorString(e));
  // Blocking with respect to the legacy default stream (no
  // cudaStreamNonBlocking): collectives start after work the program
  // queued there.
  if ((e = cudaStreamCreate(&s->stream)) != cudaSuccess)
    return cleanup("cudaStreamCreate", cudaGetErrorString(e));
  cublasStatus_t b = cublasCreate(&s->blas);
  if (b != CUBLAS_STATUS_SUCCESS)
    return cleanup("cublasCreate", cublasGetStatusString(b));
  cublasSetStream(s->blas, s->stream);
  const char *syncEnv = std::getenv("PAR_CUDA_SYNC");
  s->syncCalls = syncEnv && std::strcmp(syncEnv, "1") == 0;
  const char *tf32 = std::getenv("PAR_CUDA_TF32");
  if (tf32 && std::strcmp(tf32, "1") == 0) {
    b = cublasSetMathMode(s->blas, CUBLAS_TF32_TENSOR_OP_MATH);
    if (b != CUBLAS_STATUS_SUCCESS)
      return cleanup("cublasSetMathMode (PAR_CUDA_TF32=1)",
                     cublasGetStatusString(b));
  }
  *outState = s;
  return PAR_OK;
}

par_status_t connect(void *state, const par_rt_backend_init_t *init) {
  State &s = st(state);
  int64_t rank = init->world.rank, worldSize = init->world.size;
  s.rank = rank;
  s.worldSize = worldSize;
  // Rank 0 broadcasts the id together with whether it could make one, so
  // that a failure there does not leave the others waiting in
  // ncclCommInitRank.
  struct {
    ncclUniqueId id;
    int32_t ok;
  } boot = {};
  ncclResult_t r = ncclSuccess;
  if (rank == 0) {
    r = ncclGetUniqueId(&boot.id);
    boot.ok = r == ncclSuccess;
  }
  if (worldSize > 1 &&
      init->broadcast_world(init->world_user, &boot, sizeof(boot), 0) !=
          PAR_OK)
    return fail(s, PAR_ERR_COMMUNICATION,
                "broadcasting the NCCL unique id over the world failed");
  if (!boot.ok)
    return rank == 0 ? ncclFail(s, "ncclGetUniqueId", r, nullptr)
                     : fail(s, PAR_ERR_COMMUNICATION,
                            "rank 0 could not create the NCCL unique id");
  PAR_NCCL_CHECK(s, "ncclCommInitRank", nullptr,
                 ncclCommInitRank(&s.world, int(worldSize), boot.id,
                                  int(rank)));
  return PAR_OK;
}

void resetGroups(void *state) {
  State &s = st(state);
  for (auto &entry : s.groups)
    ncclCommDestroy(entry.second);
  s.groups.clear();
}

void freeBuckets(State &s);

void destroy(void *state) {
  if (!state)
    return;
  State &s = st(state);
  cudaStreamSynchronize(s.stream);
  freeBuckets(s);
  resetGroups(state);
  if (s.world)
    ncclCommDestroy(s.world);
  for (void *p : s.scratch)
    if (p)
      cudaFree(p);
  if (s.blas)
    cublasDestroy(s.blas);
  if (s.stream)
    cudaStreamDestroy(s.stream);
  delete &s;
}

const char *lastError(void *state) { return st(state).error.c_str(); }

par_status_t allReduce(State &s, const par_rt_backend_group_t *g,
                       ncclComm_t comm, const void *in, void *out,
                       int64_t count, int32_t dtype, int32_t reduction) {
  // ncclAvg on integers sums then divides (truncating), like the CPU
  // backend; on floats it pre-scales by 1/n, which can differ in the last
  // bit from sum-then-divide.
  PAR_NCCL_CHECK(s, "ncclAllReduce", comm,
                 ncclAllReduce(in, out, size_t(count), ncclType(dtype),
                               ncclOp(dtype, reduction), comm, s.stream));
  return sync(s, "all_reduce");
}

par_status_t allGather(State &s, const par_rt_backend_group_t *g,
                       ncclComm_t comm, const void *in, void *out, int64_t C,
                       int64_t D, int32_t dtype) {
  int64_t n = g->size, es = dtypeSize(dtype), block = C * D;
  size_t outBytes = size_t(n * block * es);
  // C == 1: the output already is [n][D]. (NCCL's in-place form needs the
  // input at block `index` exactly; any other overlap goes through scratch.)
  bool inPlace = in == static_cast<char *>(out) + g->index * block * es;
  if (C == 1 && (inPlace || !overlaps(in, size_t(block * es), out, outBytes))) {
    PAR_NCCL_CHECK(s, "ncclAllGather", comm,
                   ncclAllGather(in, out, size_t(block), ncclType(dtype), comm,
                                 s.stream));
    return sync(s, "all_gather");
  }
  void *tmp = nullptr;
  if (par_status_t r = devScratch(s, 0, outBytes, tmp))
    return r;
  PAR_NCCL_CHECK(s, "ncclAllGather", comm,
                 ncclAllGather(in, tmp, size_t(block), ncclType(dtype), comm,
                               s.stream));
  if (par_status_t r = unpack(s, tmp, out, C, n, D, es))
    return r;
  return sync(s, "all_gather");
}

par_status_t reduceScatter(State &s, const par_rt_backend_group_t *g,
                           ncclComm_t comm, const void *in, void *out,
                           int64_t A, int64_t B, int32_t dtype,
                           int32_t reduction) {
  int64_t n = g->size, es = dtypeSize(dtype), block = A * B;
  size_t inBytes = size_t(n * block * es);
  const void *send = in;
  bool inPlace = out == static_cast<const char *>(in) + g->index * block * es;
  if (A != 1 ||
      (!inPlace && overlaps(in, inBytes, out, size_t(block * es)))) {
    void *tmp = nullptr;
    if (par_status_t r = devScratch(s, 0, inBytes, tmp))
      return r;
    if (par_status_t r = pack(s, in, tmp, A, n, B, es))
      return r;
    send = tmp;
  }
  PAR_NCCL_CHECK(s, "ncclReduceScatter", comm,
                 ncclReduceScatter(send, out, size_t(block), ncclType(dtype),
                                   ncclOp(dtype, reduction), comm, s.stream));
  return sync(s, "reduce_scatter");
}

par_status_t allToAll(State &s, const par_rt_backend_group_t *g,
                      ncclComm_t comm, const void *in, void *out, int64_t A,
                      int64_t B, int64_t C, int64_t D, int32_t dtype) {
  int64_t n = g->size, es = dtypeSize(dtype), block = A * B; // == C * D
  size_t bytes = size_t(n * block * es);
  bool alias = overlaps(in, bytes, out, bytes);
  const char *send = static_cast<const char *>(in);
  if (A != 1 || alias) {
    void *tmp = nullptr;
    if (par_status_t r = devScratch(s, 0, bytes, tmp))
      return r;
    if (par_status_t r = pack(s, in, tmp, A, n, B, es))
      return r;
    send = static_cast<const char *>(tmp);
  }
  char *recv = static_cast<char *>(out);
  if (C != 1) {
    void *tmp = nullptr;
    if (par_status_t r = devScratch(s, 1, bytes, tmp))
      return r;
    recv = static_cast<char *>(tmp);
  }
  // Point-to-point in one group (ncclAlltoAll is only in recent NCCLs).
  size_t blockBytes = size_t(block * es);
  PAR_NCCL_CHECK(s, "ncclGroupStart", comm, ncclGroupStart());
  for (int64_t j = 0; j < n; ++j) {
    ncclResult_t r = ncclSend(send + j * blockBytes, size_t(block),
                              ncclType(dtype), int(j), comm, s.stream);
    if (r == ncclSuccess)
      r = ncclRecv(recv + j * blockBytes, size_t(block), ncclType(dtype),
                   int(j), comm, s.stream);
    if (r != ncclSuccess) {
      ncclGroupEnd();
      return ncclFail(s, "ncclSend/ncclRecv", r, comm);
    }
  }
  PAR_NCCL_CHECK(s, "ncclGroupEnd", comm, ncclGroupEnd());
  if (C != 1)
    if (par_status_t r = unpack(s, recv, out, C, n, D, es))
      return r;
  return sync(s, "all_to_all");
}

par_status_t allSlice(void *state, const par_rt_backend_group_t *g,
                      const void *in, void *out, int64_t A, int64_t B,
                      int32_t dtype) {
  State &s = st(state);
  int64_t n = g->size, es = dtypeSize(dtype);
  size_t row = size_t(B * es);
  if (A > 0 && row > 0)
    PAR_CUDA_CHECK(s, "cudaMemcpy2DAsync",
                   cudaMemcpy2DAsync(out, row,
                                     static_cast<const char *>(in) +
                                         g->index * row,
                                     size_t(n) * row, row, size_t(A),
                                     cudaMemcpyDeviceToDevice, s.stream));
  return sync(s, "all_slice");
}

par_status_t broadcast(State &s, const par_rt_backend_group_t *g,
                       ncclComm_t comm, const void *in, void *out,
                       int64_t count, int32_t dtype, int64_t root) {
  PAR_NCCL_CHECK(s, "ncclBroadcast", comm,
                 ncclBroadcast(in, out, size_t(count), ncclType(dtype),
                               int(root), comm, s.stream));
  return sync(s, "broadcast");
}

par_status_t prepareGroup(void *state, const par_rt_backend_group_t *g) {
  ncclComm_t comm;
  return groupComm(st(state), g, comm);
}

/// `tag` is unused: NCCL matches a pair's messages in call order.
par_status_t send(void *state, const void *in, int64_t count, int32_t dtype,
                  int64_t peer, int64_t) {
  State &s = st(state);
  PAR_NCCL_CHECK(s, "ncclSend", s.world,
                 ncclSend(in, size_t(count), ncclType(dtype), int(peer),
                          s.world, s.stream));
  return sync(s, "send");
}

/// NCCL point-to-point runs in call order, so a started send is sent now;
/// there is then nothing to wait for.
par_status_t sendAsync(void *state, const void *in, int64_t count,
                       int32_t dtype, int64_t peer, int64_t tag) {
  return send(state, in, count, dtype, peer, tag);
}

par_status_t waitSends(void *) { return PAR_OK; }

par_status_t recv(void *state, void *out, int64_t count, int32_t dtype,
                  int64_t peer, int64_t) {
  State &s = st(state);
  PAR_NCCL_CHECK(s, "ncclRecv", s.world,
                 ncclRecv(out, size_t(count), ncclType(dtype), int(peer),
                          s.world, s.stream));
  return sync(s, "recv");
}

par_status_t blasFail(State &s, const char *what, cublasStatus_t b) {
  return fail(s, PAR_ERR_COMMUNICATION,
              std::string(what) + ": " + cublasGetStatusString(b));
}

/// Copies to the host, runs the shared loop (Dtype.h), copies back: for the
/// integer and i1 dtypes, which cuBLAS has no GEMM for with these types.
par_status_t hostFallbackMatmul(State &s, const void *a, const void *b,
                                void *c, int64_t M, int64_t N, int64_t K,
                                int32_t dtype, bool accumulate) {
  int64_t es = dtypeSize(dtype);
  size_t aBytes = size_t(M * K * es), bBytes = size_t(K * N * es),
         cBytes = size_t(M * N * es);
  s.host[0].resize(aBytes);
  s.host[1].resize(bBytes);
  s.host[2].resize(cBytes);
  PAR_CUDA_CHECK(s, "cudaMemcpyAsync",
                 cudaMemcpyAsync(s.host[0].data(), a, aBytes,
                                 cudaMemcpyDeviceToHost, s.stream));
  PAR_CUDA_CHECK(s, "cudaMemcpyAsync",
                 cudaMemcpyAsync(s.host[1].data(), b, bBytes,
                                 cudaMemcpyDeviceToHost, s.stream));
  if (accumulate)
    PAR_CUDA_CHECK(s, "cudaMemcpyAsync",
                   cudaMemcpyAsync(s.host[2].data(), c, cBytes,
                                   cudaMemcpyDeviceToHost, s.stream));
  if (par_status_t r = wait(s, "matmul"))
    return r;
  hostMatmul(s.host[0].data(), s.host[1].data(), s.host[2].data(), M, N, K,
             dtype, accumulate);
  PAR_CUDA_CHECK(s, "cudaMemcpyAsync",
                 cudaMemcpyAsync(c, s.host[2].data(), cBytes,
                                 cudaMemcpyHostToDevice, s.stream));
  return wait(s, "matmul"); // the host buffers are reused by the next call
}

par_status_t matmul(void *state, const void *a, const void *b, void *c,
                    int64_t M, int64_t N, int64_t K, int32_t dtype,
                    int32_t accumulate) {
  State &s = st(state);
  if (M == 0 || N == 0)
    return PAR_OK;
  if (dtype != PAR_F32 && dtype != PAR_F64 && dtype != PAR_F16 &&
      dtype != PAR_BF16)
    return hostFallbackMatmul(s, a, b, c, M, N, K, dtype, accumulate != 0);
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return fail(s, PAR_ERR_INVALID_ARGUMENT,
                "matmul dimensions exceed cuBLAS's 32-bit int");
  // cuBLAS is column-major. A row-major X is the column-major X^T, and
  // C^T = B^T * A^T, so swapping the operands (and M with N) computes the
  // row-major product with no transposes.
  int m = int(N), n = int(M), k = int(K);
  int lda = int(N), ldb = int(std::max<int64_t>(K, 1)), ldc = int(N);
  cublasStatus_t r;
  if (dtype == PAR_F32) {
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    r = cublasSgemm(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha,
                    static_cast<const float *>(b), lda,
                    static_cast<const float *>(a), ldb, &beta,
                    static_cast<float *>(c), ldc);
  } else if (dtype == PAR_F64) {
    double alpha = 1.0, beta = accumulate ? 1.0 : 0.0;
    r = cublasDgemm(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha,
                    static_cast<const double *>(b), lda,
                    static_cast<const double *>(a), ldb, &beta,
                    static_cast<double *>(c), ldc);
  } else {
    // f16/bf16 with f32 accumulation, one rounding at the end, as the CPU
    // backend's loop does.
    cudaDataType_t t = dtype == PAR_F16 ? CUDA_R_16F : CUDA_R_16BF;
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    r = cublasGemmEx(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, b, t,
                     lda, a, t, ldb, &beta, c, t, ldc, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
  }
  if (r != CUBLAS_STATUS_SUCCESS)
    return blasFail(s, "cublas gemm", r);
  return sync(s, "matmul");
}

/// One strided-batched row-major GEMM, C = op(A) * op(B) (+ C), as cuBLAS
/// sees it (see the file comment). `kind`: 's'/'d' for cublas{S,D}gemm..,
/// 'x' for cublasGemmStridedBatchedEx with operands of `type` and f32 C.
par_status_t stridedBatched(State &s, char kind, cudaDataType_t type,
                            const void *a, const void *b, void *c,
                            int64_t batch, int64_t M, int64_t N, int64_t K,
                            bool transA, bool transB, bool accumulate) {
  if (batch == 0 || M == 0 || N == 0)
    return PAR_OK;
  if (batch > INT_MAX || M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return fail(s, PAR_ERR_INVALID_ARGUMENT,
                "batch_matmul dimensions exceed cuBLAS's 32-bit int");
  // Column-major: C^T[N][M] = op(B)^T[N][K] * op(A)^T[K][M]. B stored
  // [K][N] is the column-major N x K op(B)^T (no transpose, ld N); stored
  // [N][K] (trans_b) it is K x N, transposed (ld K). Likewise A.
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  int m = int(N), n = int(M), k = int(K);
  int ldb = int(std::max<int64_t>(transB ? K : N, 1));
  int lda = int(std::max<int64_t>(transA ? M : K, 1));
  int ldc = int(N);
  long long strideB = (long long)K * N, strideA = (long long)M * K,
            strideC = (long long)M * N;
  cublasStatus_t r;
  if (kind == 'd') {
    double alpha = 1.0, beta = accumulate ? 1.0 : 0.0;
    r = cublasDgemmStridedBatched(
        s.blas, opB, opA, m, n, k, &alpha, static_cast<const double *>(b),
        ldb, strideB, static_cast<const double *>(a), lda, strideA, &beta,
        static_cast<double *>(c), ldc, strideC, int(batch));
  } else if (kind == 's') {
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    r = cublasSgemmStridedBatched(
        s.blas, opB, opA, m, n, k, &alpha, static_cast<const float *>(b), ldb,
        strideB, static_cast<const float *>(a), lda, strideA, &beta,
        static_cast<float *>(c), ldc, strideC, int(batch));
  } else {
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    r = cublasGemmStridedBatchedEx(
        s.blas, opB, opA, m, n, k, &alpha, b, type, ldb, strideB, a, type,
        lda, strideA, &beta, c, CUDA_R_32F, ldc, strideC, int(batch),
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  if (r != CUBLAS_STATUS_SUCCESS)
    return blasFail(s, kind == 'x' ? "cublasGemmStridedBatchedEx"
                                   : "cublas gemm strided batched",
                    r);
  return sync(s, "batch_matmul");
}

par_status_t batchMatmul(void *state, const void *a, const void *b, void *c,
                         int64_t batch, int64_t M, int64_t N, int64_t K,
                         int32_t transA, int32_t transB, int32_t dtype,
                         int32_t accumulate) {
  State &s = st(state);
  if (dtype != PAR_F32 && dtype != PAR_F64)
    return fail(s, PAR_ERR_INVALID_ARGUMENT,
                "batch_matmul supports f32 and f64 only");
  return stridedBatched(s, dtype == PAR_F64 ? 'd' : 's', CUDA_R_32F, a, b, c,
                        batch, M, N, K, transA != 0, transB != 0,
                        accumulate != 0);
}

par_status_t batchMatmulMixed(void *state, const void *a, const void *b,
                              void *c, int64_t batch, int64_t M, int64_t N,
                              int64_t K, int32_t transA, int32_t transB,
                              int32_t dtypeA, int32_t dtypeB,
                              int32_t accumulate) {
  State &s = st(state);
  if (dtypeA != dtypeB)
    return fail(s, PAR_ERR_INVALID_ARGUMENT,
                std::string("batch_matmul_mixed needs A and B of one dtype "
                            "on CUDA (got ") +
                    dtypeName(dtypeA) + " and " + dtypeName(dtypeB) + ")");
  if (dtypeA == PAR_F32)
    return stridedBatched(s, 's', CUDA_R_32F, a, b, c, batch, M, N, K,
                          transA != 0, transB != 0, accumulate != 0);
  return stridedBatched(s, 'x', dtypeA == PAR_F16 ? CUDA_R_16F : CUDA_R_16BF,
                        a, b, c, batch, M, N, K, transA != 0, transB != 0,
                        accumulate != 0);
}

//===----------------------------------------------------------------------===//
// Buckets
//===----------------------------------------------------------------------===//

/// A started bucket or all-gather: `done` is recorded on the communication
/// stream after its outputs are written; `staging` is a stream-ordered
/// allocation.
struct BucketRequest {
  cudaEvent_t done = nullptr;
  void *staging = nullptr;
};

void releaseBucket(State &s, BucketRequest *r) {
  if (r->staging)
    cudaFreeAsync(r->staging, s.comm);
  if (r->done)
    cudaEventDestroy(r->done);
  delete r;
}

void freeBuckets(State &s) {
  if (s.comm)
    cudaStreamSynchronize(s.comm);
  for (void *p : s.pendingBuckets)
    releaseBucket(s, static_cast<BucketRequest *>(p));
  s.pendingBuckets.clear();
  if (s.commTail)
    cudaEventDestroy(s.commTail);
  if (s.comm)
    cudaStreamDestroy(s.comm);
  s.commTail = nullptr;
  s.comm = nullptr;
}

/// Orders the communication stream (created on first use) after
/// everything the program queued.
par_status_t joinCommStream(State &s) {
  if (!s.comm) {
    PAR_CUDA_CHECK(s, "cudaStreamCreateWithFlags",
                   cudaStreamCreateWithFlags(&s.comm, cudaStreamNonBlocking));
    PAR_CUDA_CHECK(s, "cudaEventCreateWithFlags",
                   cudaEventCreateWithFlags(&s.commTail,
                                            cudaEventDisableTiming));
  }
  // After everything the program queued: an event on the legacy default
  // stream also follows the blocking streams' work (s.stream's).
  cudaEvent_t ready;
  PAR_CUDA_CHECK(s, "cudaEventCreateWithFlags",
                 cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  cudaError_t e = cudaEventRecord(ready, cudaStreamLegacy);
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(s.comm, ready, 0);
  cudaEventDestroy(ready);
  PAR_CUDA_CHECK(s, "cudaStreamWaitEvent", e);
  return PAR_OK;
}

/// Records the request's `done` (and the stream's tail) after its work.
par_status_t recordDone(State &s, BucketRequest &r) {
  PAR_CUDA_CHECK(s, "cudaEventCreateWithFlags",
                 cudaEventCreateWithFlags(&r.done, cudaEventDisableTiming));
  PAR_CUDA_CHECK(s, "cudaEventRecord", cudaEventRecord(r.done, s.comm));
  PAR_CUDA_CHECK(s, "cudaEventRecord", cudaEventRecord(s.commTail, s.comm));
  return PAR_OK;
}

/// Queues a bucket's work on the communication stream.
par_status_t enqueueBucket(State &s, ncclComm_t comm, BucketRequest &r,
                           const par_rt_bucket_member_t *members, int64_t n,
                           int32_t dtype, int32_t reduction) {
  if (par_status_t st = joinCommStream(s))
    return st;
  ncclDataType_t type = ncclType(dtype);
  ncclRedOp_t op = ncclOp(dtype, reduction);
  if (n == 1) {
    const par_rt_bucket_member_t &m = members[0];
    PAR_NCCL_CHECK(s, "ncclAllReduce", comm,
                   ncclAllReduce(m.in, m.out, size_t(m.count), type, op, comm,
                                 s.comm));
  } else {
    int64_t es = dtypeSize(dtype), total = 0;
    for (int64_t i = 0; i < n; ++i)
      total += members[i].count;
    PAR_CUDA_CHECK(s, "cudaMallocAsync",
                   cudaMallocAsync(&r.staging,
                                   size_t(std::max<int64_t>(total * es, 1)),
                                   s.comm));
    auto *staging = static_cast<char *>(r.staging);
    for (int64_t i = 0, off = 0; i < n; off += members[i++].count * es)
      if (members[i].count)
        PAR_CUDA_CHECK(s, "cudaMemcpyAsync",
                       cudaMemcpyAsync(staging + off, members[i].in,
                                       size_t(members[i].count * es),
                                       cudaMemcpyDeviceToDevice, s.comm));
    PAR_NCCL_CHECK(s, "ncclAllReduce", comm,
                   ncclAllReduce(staging, staging, size_t(total), type, op,
                                 comm, s.comm));
    for (int64_t i = 0, off = 0; i < n; off += members[i++].count * es)
      if (members[i].count)
        PAR_CUDA_CHECK(s, "cudaMemcpyAsync",
                       cudaMemcpyAsync(members[i].out, staging + off,
                                       size_t(members[i].count * es),
                                       cudaMemcpyDeviceToDevice, s.comm));
  }
  return recordDone(s, r);
}

/// Queues a started all-gather on the communication stream: ncclAllGather
/// into the output ([n][D] when C == 1), or into stream-ordered staging
/// unpacked to [C][n][D] on the same stream.
par_status_t enqueueGather(State &s, const par_rt_backend_group_t *g,
                           ncclComm_t comm, BucketRequest &r, const void *in,
                           void *out, int64_t C, int64_t D, int32_t dtype) {
  if (par_status_t st = joinCommStream(s))
    return st;
  int64_t n = g->size, es = dtypeSize(dtype), block = C * D;
  size_t outBytes = size_t(n * block * es);
  bool inPlace = in == static_cast<char *>(out) + g->index * block * es;
  if (C == 1 && (inPlace || !overlaps(in, size_t(block * es), out, outBytes))) {
    PAR_NCCL_CHECK(s, "ncclAllGather", comm,
                   ncclAllGather(in, out, size_t(block), ncclType(dtype), comm,
                                 s.comm));
    return recordDone(s, r);
  }
  PAR_CUDA_CHECK(s, "cudaMallocAsync",
                 cudaMallocAsync(&r.staging, std::max<size_t>(outBytes, 1),
                                 s.comm));
  PAR_NCCL_CHECK(s, "ncclAllGather", comm,
                 ncclAllGather(in, r.staging, size_t(block), ncclType(dtype),
                               comm, s.comm));
  if (par_status_t st = unpackOn(s, s.comm, r.staging, out, C, n, D, es))
    return st;
  return recordDone(s, r);
}

par_status_t bucketStart(State &s, const par_rt_backend_group_t *,
                         ncclComm_t comm, const par_rt_bucket_member_t *members,
                         int64_t n, int32_t dtype, int32_t reduction,
                         void **request) {
  *request = nullptr;
  auto *r = new BucketRequest;
  if (par_status_t st = enqueueBucket(s, comm, *r, members, n, dtype,
                                      reduction)) {
    if (s.comm)
      cudaStreamSynchronize(s.comm);
    releaseBucket(s, r);
    return st;
  }
  s.pendingBuckets.insert(r);
  *request = r;
  return PAR_OK;
}

par_status_t gatherStart(State &s, const par_rt_backend_group_t *g,
                         ncclComm_t comm, const void *in, void *out, int64_t C,
                         int64_t D, int32_t dtype, void **request) {
  *request = nullptr;
  auto *r = new BucketRequest;
  if (par_status_t st = enqueueGather(s, g, comm, *r, in, out, C, D, dtype)) {
    if (s.comm)
      cudaStreamSynchronize(s.comm);
    releaseBucket(s, r);
    return st;
  }
  s.pendingBuckets.insert(r);
  *request = r;
  return PAR_OK;
}

par_status_t bucketWait(void *state, void *request) {
  State &s = st(state);
  auto *r = static_cast<BucketRequest *>(request);
  s.pendingBuckets.erase(r);
  cudaError_t e = cudaEventSynchronize(r->done);
  releaseBucket(s, r);
  PAR_CUDA_CHECK(s, "cudaEventSynchronize", e);
  return PAR_OK;
}

const par_rt_backend_t kTable = {
    PAR_RT_BACKEND_ABI_VERSION,
    "CUDA",
    create,
    connect,
    destroy,
    /*finalize=*/nullptr,
    lastError,
    // A device backend: the world operations come from the world backend.
    /*query_world=*/nullptr,
    /*abort_job=*/nullptr,
    /*barrier=*/nullptr,
    /*broadcast_world=*/nullptr,
    /*gather_world=*/nullptr,
    prepareGroup,
    resetGroups,
    OnGroup<allReduce>::entry,
    OnGroup<allGather>::entry,
    OnGroup<reduceScatter>::entry,
    OnGroup<allToAll>::entry,
    allSlice,
    OnGroup<broadcast>::entry,
    send,
    sendAsync,
    waitSends,
    recv,
    matmul,
    batchMatmul,
    batchMatmulMixed,
    OnGroup<bucketStart>::entry,
    bucketWait,
    /*progress=*/nullptr, // NCCL's kernels progress on their own
    OnGroup<gatherStart>::entry,
    /*recv_start=*/nullptr, // core receives at the start (on the stream)
};

} // namespace

extern "C" __attribute__((visibility("default"))) const par_rt_backend_t *
par_rt_cuda_backend_get(void) {
  return &kTable;
}
