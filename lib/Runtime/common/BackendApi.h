/*===- BackendApi.h - The table every runtime backend implements ----------===*
 *
 * libpar_runtime.so (core/) owns the host API, the kernel entry points, the
 * mesh, argument validation, group arithmetic (size/index/color of an axes
 * code, peer ranks), statistics, tracing and error reporting. Everything
 * that moves data goes through one table of this type, whichever library
 * implements it:
 *
 *   local  core/LocalBackend.cpp: a world of one process, collectives are
 *          copies (part of libpar_runtime.so: no MPI loaded at all)
 *   mpi    backends/mpi: libpar_runtime_mpi.so, linked with libmpi
 *   cuda   backends/cuda: libpar_runtime_cuda.so, NCCL + cuBLAS
 *
 * The plugin libraries export one symbol each, par_rt_<name>_backend_get,
 * returning their table; core dlopen()s them on demand (core/BackendLoader)
 * and dispatches through the table once per call. Private to the runtime:
 * not part of the public ABI, versioned so that a stale library is refused
 * instead of misused.
 *
 * Two roles. A *world* backend (local, mpi) knows the processes: rank,
 * size, barrier, the world broadcast/gather, aborting the job. A *device*
 * backend runs the kernels on its memory. local and mpi are both (host
 * memory); cuda is a device backend only and joins the world backend's
 * processes, bootstrapping NCCL through the world broadcast it is handed.
 * core/BackendLoader checks that a table fills every entry of its role.
 *
 * Every entry that returns a status sets last_error(state) on failure.
 * Arguments arrive validated (known dtype and reduction, non-negative sizes
 * that do not overflow, root < size, A*B == C*D, i1 never with avg, peers
 * inside the world, tags inside the world's tag range).
 *===----------------------------------------------------------------------===*/

#ifndef PAR_RUNTIME_COMMON_BACKENDAPI_H
#define PAR_RUNTIME_COMMON_BACKENDAPI_H

#include "par/Runtime/par_types.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1: the CUDA-only table. 2: one table for every backend. 3: bucket
 * all-reduces (bucket_start, bucket_wait, progress). 4: batch_matmul_mixed.
 * 5: started all-gathers (gather_start; bucket_wait completes any request).
 * 6: started receives (recv_start). */
#define PAR_RT_BACKEND_ABI_VERSION 6u

/* The processes of a world, as its world backend reports them. */
typedef struct par_rt_backend_world_t {
  int64_t rank;
  int64_t size;
  int64_t local_rank;      /* rank among the processes on this node */
  int64_t tag_upper_bound; /* largest send/recv tag */
} par_rt_backend_world_t;

/* What a backend is created and connected with. */
typedef struct par_rt_backend_init_t {
  /* World backends: the program's arguments (MPI_Init_thread's; may be
   * NULL). */
  int *argc;
  char ***argv;
  /* Device backends: the world they join, and its broadcast (from world
   * rank `root` to all; returns a status) for their bootstrap. */
  par_rt_backend_world_t world;
  void *world_user;
  par_status_t (*broadcast_world)(void *world_user, void *buffer,
                                  int64_t bytes, int64_t root);
} par_rt_backend_init_t;

/* The group of one axes code, as core computed it: processes with the same
 * color form the group, `index` is this process's rank in it. `axes` is the
 * cache key for the backend's communicator. */
typedef struct par_rt_backend_group_t {
  int64_t axes;
  int64_t size;
  int64_t index;
  int64_t color;
} par_rt_backend_group_t;

/* One member of a bucket all-reduce: `count` elements of `in` reduced over
 * the group into `out` (`in == out` is allowed). */
typedef struct par_rt_bucket_member_t {
  const void *in;
  void *out;
  int64_t count;
} par_rt_bucket_member_t;

typedef struct par_rt_backend_t {
  uint32_t abi_version; /* PAR_RT_BACKEND_ABI_VERSION */
  const char *name;     /* for messages: "local", "MPI", "CUDA" */

  /*--- Lifetime (every backend) ---*/
  /* Local set-up (a world backend also joins its world here). On failure
   * writes a message into `error` and returns PAR_ERR_UNAVAILABLE (no
   * device, driver or launcher) or another status; *out_state is NULL. */
  par_status_t (*create)(const par_rt_backend_init_t *init, void **out_state,
                         char *error, size_t error_size);
  /* Collective bootstrap after every process created its state; NULL when
   * there is none. */
  par_status_t (*connect)(void *state, const par_rt_backend_init_t *init);
  void (*destroy)(void *state);
  /* Process-wide, after the last context was destroyed (MPI_Finalize if the
   * backend initialized MPI); NULL when there is nothing to do. */
  void (*finalize)(void);
  const char *(*last_error)(void *state);

  /*--- World (world backends; NULL in a device backend) ---*/
  void (*query_world)(void *state, par_rt_backend_world_t *out);
  /* Ends every process of the job; `state` may be NULL (no context). */
  void (*abort_job)(void *state, int exit_code);
  par_status_t (*barrier)(void *state);
  par_status_t (*broadcast_world)(void *state, void *buffer, int64_t bytes,
                                  int64_t root);
  /* Root 0 without a destination (gathered_on_root NULL) still takes part,
   * then fails with PAR_ERR_INVALID_ARGUMENT. */
  par_status_t (*gather_world)(void *state, const void *local, int64_t bytes,
                               void *gathered_on_root);

  /*--- Groups (every backend) ---*/
  /* Creates the group's communicator now (collective over the world). */
  par_status_t (*prepare_group)(void *state,
                                const par_rt_backend_group_t *group);
  /* The mesh changed: drop the cached group communicators. */
  void (*reset_groups)(void *state);

  /*--- Kernels (every backend), on the backend's memory ---*/
  par_status_t (*all_reduce)(void *state, const par_rt_backend_group_t *group,
                             const void *in, void *out, int64_t count,
                             int32_t dtype, int32_t reduction);
  par_status_t (*all_gather)(void *state, const par_rt_backend_group_t *group,
                             const void *in, void *out, int64_t C, int64_t D,
                             int32_t dtype);
  par_status_t (*reduce_scatter)(void *state,
                                 const par_rt_backend_group_t *group,
                                 const void *in, void *out, int64_t A,
                                 int64_t B, int32_t dtype, int32_t reduction);
  par_status_t (*all_to_all)(void *state, const par_rt_backend_group_t *group,
                             const void *in, void *out, int64_t A, int64_t B,
                             int64_t C, int64_t D, int32_t dtype);
  par_status_t (*all_slice)(void *state, const par_rt_backend_group_t *group,
                            const void *in, void *out, int64_t A, int64_t B,
                            int32_t dtype);
  par_status_t (*broadcast)(void *state, const par_rt_backend_group_t *group,
                            const void *in, void *out, int64_t count,
                            int32_t dtype, int64_t root);
  /* `peer` is a world rank. A backend without tags (NCCL) matches messages
   * between a pair of processes in call order. */
  par_status_t (*send)(void *state, const void *in, int64_t count,
                       int32_t dtype, int64_t peer, int64_t tag);
  /* Starts a send; the buffer stays untouched until wait_sends. */
  par_status_t (*send_async)(void *state, const void *in, int64_t count,
                             int32_t dtype, int64_t peer, int64_t tag);
  par_status_t (*wait_sends)(void *state);
  par_status_t (*recv)(void *state, void *out, int64_t count, int32_t dtype,
                       int64_t peer, int64_t tag);
  par_status_t (*matmul)(void *state, const void *a, const void *b, void *c,
                         int64_t M, int64_t N, int64_t K, int32_t dtype,
                         int32_t accumulate);
  /* f32/f64 (par_rt_k_batch_matmul); NULL when the backend has none. */
  par_status_t (*batch_matmul)(void *state, const void *a, const void *b,
                               void *c, int64_t batch, int64_t M, int64_t N,
                               int64_t K, int32_t trans_a, int32_t trans_b,
                               int32_t dtype, int32_t accumulate);
  /* par_rt_k_batch_matmul_mixed: A and B of dtype_a, dtype_b (f32, f16,
   * bf16), C f32, f32 accumulation. NULL on host-memory backends: core then
   * widens the 16-bit operands to f32 on the host and calls batch_matmul. */
  par_status_t (*batch_matmul_mixed)(void *state, const void *a,
                                     const void *b, void *c, int64_t batch,
                                     int64_t M, int64_t N, int64_t K,
                                     int32_t trans_a, int32_t trans_b,
                                     int32_t dtype_a, int32_t dtype_b,
                                     int32_t accumulate);

  /*--- Buckets and started gathers (every backend) ---*/
  /* Starts the all-reduce of `n` >= 1 members of one dtype and reduction as
   * ONE message over the group (members packed in order into one staging
   * buffer, unless there is one member) and returns the backend's request
   * in *request (NULL on failure). The member array is copied. Until
   * bucket_wait the inputs may be read but not written, the outputs neither
   * read nor written. Requests complete in any order. */
  par_status_t (*bucket_start)(void *state,
                               const par_rt_backend_group_t *group,
                               const par_rt_bucket_member_t *members,
                               int64_t n, int32_t dtype, int32_t reduction,
                               void **request);
  /* Completes a started bucket or all-gather: the outputs hold the
   * results. Frees the request, also on failure. */
  par_status_t (*bucket_wait)(void *state, void *request);
  /* Lets started buckets advance without blocking (MPI progresses a
   * nonblocking collective mostly inside MPI calls); NULL when they
   * progress on their own. Called by core at kernel entries while requests
   * are pending. */
  par_status_t (*progress)(void *state);
  /* Starts all_gather's transfer (same arguments and layout) and returns
   * the backend's request in *request (NULL on failure), completed by
   * bucket_wait, in any order with the buckets. Until then `in` may be read
   * but not written, `out` neither read nor written. */
  par_status_t (*gather_start)(void *state,
                               const par_rt_backend_group_t *group,
                               const void *in, void *out, int64_t C,
                               int64_t D, int32_t dtype, void **request);
  /* Starts recv's transfer (same arguments) and returns the backend's
   * request in *request (NULL on failure), completed by bucket_wait in any
   * order with the others; `out` is neither read nor written until then.
   * NULL when the backend has none: core receives at the start. */
  par_status_t (*recv_start)(void *state, void *out, int64_t count,
                             int32_t dtype, int64_t peer, int64_t tag,
                             void **request);
} par_rt_backend_t;

typedef const par_rt_backend_t *(*par_rt_backend_get_fn)(void);

/* The one symbol each plugin library exports. */
const par_rt_backend_t *par_rt_mpi_backend_get(void);
const par_rt_backend_t *par_rt_cuda_backend_get(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAR_RUNTIME_COMMON_BACKENDAPI_H */
