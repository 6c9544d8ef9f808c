/*===- par_runtime.h - The par runtime's C ABI ---------------------------===*
 *
 * Two halves:
 *
 *  1. The host API (par_rt_*_create/destroy, ...), used by par-run: opaque
 *     handles, every call returns a par_status_t, options structs with an
 *     initializer, explicit ownership (IREE runtime style).
 *
 *  2. The kernel ABI (par_rt_k_*), called by compiled programs. Only scalar
 *     arguments (buffers as 64-bit addresses), so that generated code needs
 *     no descriptor conventions. Kernels act on the process's current
 *     context (the last one created); they abort the whole job with a
 *     message naming the collective on failure (a compiled program has no
 *     way to handle a status).
 *
 * Mesh and groups: the mesh has num_axes axes with the given sizes; a
 * process's rank is the row-major linear index of its coordinates (last axis
 * fastest). A collective over an ordered list of axes runs within the group
 * of processes that differ only in those axes; inside the group, a process's
 * index is the row-major linear index of its coordinates on the listed axes,
 * in the listed order. Axis lists are encoded in one int64 "axes code":
 * byte k holds (axis index + 1) of the k-th listed axis, 0 ends the list (at
 * most 8 axes). Communicators are created once per axes code and cached.
 *
 * Communicators are created collectively the first time an axes code is
 * used: every process of the world must reach that collective (SPMD
 * programs do).
 *
 * Element types: i1 is one byte holding 0 or 1 (sum and max are "or", min
 * is "and"; avg is rejected). MPI tags must lie in [0, MPI_TAG_UB]; the
 * CUDA backend (NCCL) matches sends and receives in call order instead.
 * Send/recv coordinates hold at most 4 axes.
 *
 * Thread safety: none. One context per process, used from one thread.
 *===----------------------------------------------------------------------===*/

#ifndef PAR_RUNTIME_PAR_RUNTIME_H
#define PAR_RUNTIME_PAR_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===--------------------------- Host API -------------------------------===*/

typedef enum par_status_t {
  PAR_OK = 0,
  PAR_ERR_INVALID_ARGUMENT = 1, /* bad sizes, unknown axis, world != mesh */
  PAR_ERR_UNAVAILABLE = 2,      /* backend not built or no device/driver */
  PAR_ERR_COMMUNICATION = 3,    /* MPI/NCCL reported an error */
  PAR_ERR_OUT_OF_MEMORY = 4,
} par_status_t;

typedef enum par_backend_t {
  PAR_BACKEND_CPU = 0,  /* MPI collectives on host memory */
  PAR_BACKEND_CUDA = 1, /* NCCL collectives on device memory, bootstrapped over MPI */
} par_backend_t;

typedef enum par_dtype_t {
  PAR_F32 = 0, PAR_F64 = 1, PAR_F16 = 2, PAR_BF16 = 3,
  PAR_I32 = 4, PAR_I64 = 5, PAR_I8 = 6, PAR_I1 = 7,
} par_dtype_t;

typedef enum par_reduction_t {
  PAR_SUM = 0, PAR_MAX = 1, PAR_MIN = 2, PAR_AVG = 3,
} par_reduction_t;

typedef struct par_rt_options_t {
  par_backend_t backend;
} par_rt_options_t;

/* Fills `options` with defaults (CPU backend). */
void par_rt_options_initialize(par_rt_options_t *options);

typedef struct par_rt_context_t par_rt_context_t;

/* Initializes MPI (if not yet) and the backend. `argc`/`argv` may be NULL.
 * On success *out_context owns everything; free it with
 * par_rt_context_destroy. Becomes the process's current context. */
par_status_t par_rt_context_create(const par_rt_options_t *options, int *argc,
                                   char ***argv,
                                   par_rt_context_t **out_context);

/* Finalizes the backend and MPI. NULL is allowed. */
void par_rt_context_destroy(par_rt_context_t *context);

/* The last error's message, valid until the next call on `context`. With
 * NULL: why the last par_rt_context_create failed ("" after a success). */
const char *par_rt_context_last_error(const par_rt_context_t *context);

/* Declares the mesh. Fails with PAR_ERR_INVALID_ARGUMENT if the number of
 * processes differs from the product of `sizes`. */
par_status_t par_rt_context_set_mesh(par_rt_context_t *context,
                                     int64_t num_axes, const int64_t *sizes);

int64_t par_rt_context_rank(const par_rt_context_t *context);
int64_t par_rt_context_world_size(const par_rt_context_t *context);
/* This process's coordinate on mesh axis `axis`. */
int64_t par_rt_context_coordinate(const par_rt_context_t *context,
                                  int64_t axis);

/* Collective statistics since creation (or the last reset). */
typedef struct par_rt_stats_t {
  int64_t collectives; /* calls */
  double bytes_sent;   /* ring-formula bytes this process sent */
  double seconds;      /* wall time inside collectives */
} par_rt_stats_t;
void par_rt_context_stats(const par_rt_context_t *context,
                          par_rt_stats_t *out);
void par_rt_context_reset_stats(par_rt_context_t *context);

/* Kernel tracing: while enabled, every collective and send/recv a program
 * calls is recorded (kernel name, start and end as par_rt_now_seconds,
 * bytes sent). par_rt_trace_take copies up to `capacity` records into
 * `events`, clears the record and returns how many there were. */
typedef struct par_rt_trace_event_t {
  const char *kernel; /* "all_reduce", "send", ... (static storage) */
  double start, end;
  double bytes;
} par_rt_trace_event_t;
void par_rt_trace_enable(par_rt_context_t *context, int enable);
int64_t par_rt_trace_take(par_rt_context_t *context,
                          par_rt_trace_event_t *events, int64_t capacity);

par_status_t par_rt_barrier(par_rt_context_t *context);
/* Creates the communicator of an axes code now. Creation is collective over
 * the world, which SPMD programs reach together on first use; a driver whose
 * ranks run different programs (par-run's pipeline) calls this for every
 * axes code on every rank first. */
par_status_t par_rt_context_prepare_axes(par_rt_context_t *context,
                                         int64_t axes);

/* Starts sending `count` elements of `buffer` to the peer par_rt_k_send
 * would address (same axes/coords/tag encoding) and returns at once; the
 * buffer must stay untouched until par_rt_wait_sends returns. Messages to
 * one peer with one tag still arrive in order. A pipeline driver uses it to
 * compute while an activation travels (the CUDA backend sends at once). */
par_status_t par_rt_send_async(par_rt_context_t *context, const void *buffer,
                               int64_t count, int32_t dtype, int64_t axes,
                               int64_t coords, int64_t tag);
/* Completes every par_rt_send_async started so far. */
par_status_t par_rt_wait_sends(par_rt_context_t *context);
double par_rt_now_seconds(void);

/* Host-side helpers par-run uses (over the world communicator, sizes in
 * bytes): broadcast `bytes` from `root` to all; gather `bytes` from every
 * rank into `gathered_on_root` (world_size * bytes, rank 0 only). */
par_status_t par_rt_broadcast_world(par_rt_context_t *context, void *buffer,
                                    int64_t bytes, int64_t root);
par_status_t par_rt_gather_world(par_rt_context_t *context, const void *local,
                                 int64_t bytes, void *gathered_on_root);

/*===------------------------- Kernel ABI -------------------------------===*
 * Buffers are row-major and contiguous. `in`/`out` are addresses.
 * Shape conventions, with n the group size:
 *  - all_gather along dim d: the output viewed as [C][n][D] receives, in
 *    block j, process j's input viewed as [C][D].
 *  - reduce_scatter along dim d: the input viewed as [A][n][B]; process j
 *    keeps the reduction of block j, as [A][B].
 *  - all_to_all: the input viewed as [A][n][B] sends block j to process j;
 *    the output viewed as [C][n][D] holds in block j what process j sent.
 *  - all_slice: the output [A][B] is block (own index) of the input
 *    viewed as [A][n][B]; no communication.
 *===--------------------------------------------------------------------===*/

void par_rt_k_all_reduce(int64_t in, int64_t out, int64_t count,
                         int32_t dtype, int32_t reduction, int64_t axes);
void par_rt_k_all_gather(int64_t in, int64_t out, int64_t C, int64_t D,
                         int32_t dtype, int64_t axes);
void par_rt_k_reduce_scatter(int64_t in, int64_t out, int64_t A, int64_t B,
                             int32_t dtype, int32_t reduction, int64_t axes);
void par_rt_k_all_to_all(int64_t in, int64_t out, int64_t A, int64_t B,
                         int64_t C, int64_t D, int32_t dtype, int64_t axes);
void par_rt_k_all_slice(int64_t in, int64_t out, int64_t A, int64_t B,
                        int32_t dtype, int64_t axes);
/* `root` is the root's index within the group. */
void par_rt_k_broadcast(int64_t in, int64_t out, int64_t count,
                        int32_t dtype, int64_t root, int64_t axes);
/* The peer is this process with its coordinates on the listed axes replaced
 * by `coords`: byte-pairs, 16 bits per listed axis, in listed order. */
void par_rt_k_send(int64_t in, int64_t count, int32_t dtype, int64_t axes,
                   int64_t coords, int64_t tag);
void par_rt_k_recv(int64_t out, int64_t count, int32_t dtype, int64_t axes,
                   int64_t coords, int64_t tag);

/* C[M][N] = A[M][K] * B[K][N] (+ C if accumulate), row-major, f32/f64
 * through BLAS. */
void par_rt_k_matmul(int64_t a, int64_t b, int64_t c, int64_t M, int64_t N,
                     int64_t K, int32_t dtype, int32_t accumulate);

/* For each of `batch` consecutive matrices: C[M][N] = op(A) * op(B)
 * (+ C if accumulate), where op(A) is A[M][K], or the transpose of A stored
 * as [K][M] when trans_a; op(B) is B[K][N], or B stored as [N][K] when
 * trans_b. f32/f64 through BLAS (CPU backend only). */
void par_rt_k_batch_matmul(int64_t a, int64_t b, int64_t c, int64_t batch,
                           int64_t M, int64_t N, int64_t K, int32_t trans_a,
                           int32_t trans_b, int32_t dtype, int32_t accumulate);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAR_RUNTIME_PAR_RUNTIME_H */
