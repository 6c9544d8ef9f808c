/*===- CudaBackendApi.h - libpar_runtime <-> libpar_runtime_cuda ----------===*
 *
 * The CUDA backend lives in its own shared library so that libpar_runtime.so
 * loads on machines without the CUDA toolkit. libpar_runtime.so dlopen()s it
 * on demand and reads this function table from the one exported symbol,
 * par_rt_cuda_backend_get. Private to the runtime: not part of the public
 * ABI, versioned so that a stale library is refused instead of misused.
 *
 * Division of labour: libpar_runtime.so owns MPI, the mesh, argument
 * validation, group arithmetic (size/index/color of an axes code, peer
 * ranks), statistics and error reporting; the CUDA library only moves and
 * reduces device memory. It does not link MPI: the NCCL unique id travels
 * through the broadcast_world callback.
 *===----------------------------------------------------------------------===*/

#ifndef PAR_RUNTIME_COMMON_CUDABACKENDAPI_H
#define PAR_RUNTIME_COMMON_CUDABACKENDAPI_H

#include "par/Runtime/par_runtime.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PAR_RT_CUDA_BACKEND_ABI_VERSION 1u

/* Services libpar_runtime.so provides to the CUDA backend. */
typedef struct par_rt_cuda_host_t {
  void *user;
  /* MPI_Bcast of `bytes` from world rank `root` over the context's world
   * communicator; returns 0 on success. */
  int (*broadcast_world)(void *user, void *buffer, int64_t bytes, int64_t root);
} par_rt_cuda_host_t;

/* The group of one axes code, as libpar_runtime.so computed it: processes
 * with the same color form the group, `index` is this process's rank in it
 * (the NCCL communicator's rank). `axes` is the cache key. */
typedef struct par_rt_cuda_group_t {
  int64_t axes;
  int64_t size;
  int64_t index;
  int64_t color;
} par_rt_cuda_group_t;

/* Every function but create/destroy/last_error/reset_groups returns a
 * status; on failure last_error(state) says why. Arguments arrive validated
 * (known dtype and reduction, non-negative sizes, root < size, A*B == C*D,
 * i1 never with avg). Buffers are device pointers; every call returns with
 * its work complete (the backend synchronizes its stream). */
typedef struct par_rt_cuda_backend_t {
  uint32_t abi_version; /* PAR_RT_CUDA_BACKEND_ABI_VERSION */

  /* Picks device local_rank % device count; creates the stream and cuBLAS
   * handle. Local, no communication. On failure writes a message into
   * `error` and returns PAR_ERR_UNAVAILABLE (no device or driver) or another
   * status; *out_state is then NULL. */
  par_status_t (*create)(int64_t local_rank, void **out_state, char *error,
                         size_t error_size);
  /* Bootstraps NCCL over the world: rank 0 creates the unique id and
   * broadcasts it through host->broadcast_world. Collective. */
  par_status_t (*connect)(void *state, const par_rt_cuda_host_t *host,
                          int64_t rank, int64_t world_size);
  void (*destroy)(void *state);
  const char *(*last_error)(void *state);
  /* The mesh changed: drop the cached group communicators. */
  void (*reset_groups)(void *state);

  par_status_t (*all_reduce)(void *state, const par_rt_cuda_group_t *group,
                             const void *in, void *out, int64_t count,
                             int32_t dtype, int32_t reduction);
  par_status_t (*all_gather)(void *state, const par_rt_cuda_group_t *group,
                             const void *in, void *out, int64_t C, int64_t D,
                             int32_t dtype);
  par_status_t (*reduce_scatter)(void *state, const par_rt_cuda_group_t *group,
                                 const void *in, void *out, int64_t A,
                                 int64_t B, int32_t dtype, int32_t reduction);
  par_status_t (*all_to_all)(void *state, const par_rt_cuda_group_t *group,
                             const void *in, void *out, int64_t A, int64_t B,
                             int64_t C, int64_t D, int32_t dtype);
  par_status_t (*all_slice)(void *state, const par_rt_cuda_group_t *group,
                            const void *in, void *out, int64_t A, int64_t B,
                            int32_t dtype);
  par_status_t (*broadcast)(void *state, const par_rt_cuda_group_t *group,
                            const void *in, void *out, int64_t count,
                            int32_t dtype, int64_t root);
  /* `peer` is a world rank. NCCL has no tags: messages between a pair of
   * processes match in call order. */
  par_status_t (*send)(void *state, const void *in, int64_t count,
                       int32_t dtype, int64_t peer);
  par_status_t (*recv)(void *state, void *out, int64_t count, int32_t dtype,
                       int64_t peer);
  par_status_t (*matmul)(void *state, const void *a, const void *b, void *c,
                         int64_t M, int64_t N, int64_t K, int32_t dtype,
                         int32_t accumulate);
} par_rt_cuda_backend_t;

typedef const par_rt_cuda_backend_t *(*par_rt_cuda_backend_get_fn)(void);

/* The one symbol libpar_runtime_cuda.so exports. */
const par_rt_cuda_backend_t *par_rt_cuda_backend_get(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAR_RUNTIME_COMMON_CUDABACKENDAPI_H */
