/*===- par_runtime.h - The par runtime's host API ------------------------===*
 *
 * The host API: what tools (par-run, the tests, benchmarks) call to start
 * the runtime, declare the mesh, move data between processes and read
 * statistics. Opaque handles, every call that can fail returns a
 * par_status_t, options structs with an initializer, explicit ownership
 * (IREE runtime style).
 *
 * The kernel ABI compiled programs call (par_rt_k_*) is in
 * par_kernel_abi.h, which this header includes so that a host that also
 * calls kernels (par-run's pipeline driver, the tests) needs one include;
 * the types both share, and the interface version (PAR_RT_API_VERSION,
 * par_rt_api_version), are in par_types.h.
 *
 * A context runs on a world (how processes find each other: MPI, or local
 * for a single process outside any MPI job, see par_world_t) and a backend
 * (where kernel buffers live: host memory, or CUDA device memory). MPI and
 * CUDA are separate libraries next to libpar_runtime.so
 * (libpar_runtime_mpi.so, libpar_runtime_cuda.so), loaded only when a
 * context needs them; $PAR_RUNTIME_MPI_LIBRARY and $PAR_RUNTIME_CUDA_LIBRARY
 * name another file to load instead.
 *
 * Thread safety: none. One context per process, used from one thread at a
 * time.
 *===----------------------------------------------------------------------===*/

#ifndef PAR_RUNTIME_PAR_RUNTIME_H
#define PAR_RUNTIME_PAR_RUNTIME_H

#include "par/Runtime/par_kernel_abi.h"
#include "par/Runtime/par_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct par_rt_options_t {
  par_backend_t backend;
  par_world_t world;
} par_rt_options_t;

/* Fills `options` with defaults (CPU backend, world chosen automatically). */
void par_rt_options_initialize(par_rt_options_t *options);

/* Non-zero when the launcher's environment says this process is one rank of
 * an MPI job (mpirun or srun: OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or
 * SLURM_PROCID): what PAR_WORLD_AUTO decides by, for drivers that re-launch
 * themselves otherwise. */
int par_rt_inside_mpi_job(void);

typedef struct par_rt_context_t par_rt_context_t;

/* Starts the world (on MPI: loads libpar_runtime_mpi.so and initializes MPI
 * if not yet) and the backend. `argc`/`argv` may be NULL. Fails with
 * PAR_ERR_UNAVAILABLE when a library the context needs cannot be loaded.
 * On success *out_context owns everything; free it with
 * par_rt_context_destroy. Becomes the process's current context. */
par_status_t par_rt_context_create(const par_rt_options_t *options, int *argc,
                                   char ***argv,
                                   par_rt_context_t **out_context);

/* Finalizes the backend, and MPI after the last context if the runtime
 * initialized it. NULL is allowed. */
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
/* Clears the statistics, the per-kernel ones included. */
void par_rt_context_reset_stats(par_rt_context_t *context);

/* The same statistics per kernel, since creation (or the last reset).
 * `bytes_sent` and `seconds` are what the kernel added to par_rt_stats_t,
 * so they sum to its totals; `calls` counts every call of the kernel,
 * including those par_rt_stats_t.collectives leaves out (a bucket's
 * "wait", which adds time only, and "send_async", bytes and time), so the
 * calls of the other kernels sum to `collectives`. A started bucket is one
 * call of "all_reduce_start" (its bytes) and one of "wait" (the time it
 * blocked); a blocking one is "bucket_all_reduce". A started all-gather is
 * one call of "all_gather_start" (its bytes) and one of "wait". Local kernels
 * (all_slice, matmuls) are not counted, as in par_rt_stats_t. */
typedef struct par_rt_kernel_stats_t {
  const char *kernel; /* "all_reduce", "all_to_all", ... (static storage) */
  int64_t calls;
  double bytes_sent; /* ring-formula bytes this process sent */
  double seconds;    /* wall time inside the kernel */
} par_rt_kernel_stats_t;
/* Copies the record of every kernel the runtime accounts (those not yet
 * called included, with zeros), at most `capacity` of them, into `out`, and
 * returns how many there are: call with capacity 0 to size `out`. The
 * kernels and their order are fixed for a library (the same on every rank
 * of a job), so records of several ranks line up index by index. A NULL
 * context has none (0). */
int64_t par_rt_context_kernel_stats(const par_rt_context_t *context,
                                    par_rt_kernel_stats_t *out,
                                    int64_t capacity);

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
/* Starts receiving `count` elements into `buffer` from the peer
 * par_rt_k_recv would address and returns at once with a handle in
 * *request; par_rt_recv_wait completes it (the buffer is neither read nor
 * written until then). Started receives of one peer and tag match its
 * messages in the order started; they progress at every kernel entry. A
 * pipeline driver starts each receive where its program lists it and waits
 * where the tensor is read. A backend without started receives receives
 * at the start. */
par_status_t par_rt_recv_start(par_rt_context_t *context, void *buffer,
                               int64_t count, int32_t dtype, int64_t axes,
                               int64_t coords, int64_t tag, int64_t *request);
/* Completes a par_rt_recv_start (accounted as the kernel "recv", its time
 * the wait); PAR_ERR_INVALID_ARGUMENT for an unknown or completed handle. */
par_status_t par_rt_recv_wait(par_rt_context_t *context, int64_t request);
/* Completes a bucket all-reduce started by par_rt_k_all_reduce_start (or an
 * all-gather started by par_rt_k_all_gather_start; par_kernel_abi.h), as
 * par_rt_k_wait does, but returns a status instead
 * of ending the job: PAR_ERR_INVALID_ARGUMENT ("request 7 is unknown or
 * already complete") for a handle that was never returned or was already
 * waited for. */
par_status_t par_rt_request_wait(par_rt_context_t *context, int64_t request);
double par_rt_now_seconds(void);

/* Host-side helpers par-run uses (over the world communicator, sizes in
 * bytes): broadcast `bytes` from `root` to all; gather `bytes` from every
 * rank into `gathered_on_root` (world_size * bytes, rank 0 only). */
par_status_t par_rt_broadcast_world(par_rt_context_t *context, void *buffer,
                                    int64_t bytes, int64_t root);
par_status_t par_rt_gather_world(par_rt_context_t *context, const void *local,
                                 int64_t bytes, void *gathered_on_root);

/* The BLAS kernels the CPU matmuls run on (lib/Runtime/core/BlasKernels.cpp),
 * chosen when this library loads, in words: "OpenBLAS 0.3.21, Cooperlake
 * kernels (par's choice: the CPU has AVX-512 with BF16; OpenBLAS had picked
 * Haswell)". A static string, valid for the life of the process. */
const char *par_rt_blas_kernels(void);
/* The calling thread's OpenMP threads: the ones the parallel loops of
 * compiled CPU programs and the runtime's GEMMs (split over them; OpenBLAS
 * itself runs one thread) use. set overrides OMP_NUM_THREADS. */
void par_rt_set_threads(int threads);
int par_rt_threads(void);

/* The kernel profiler (lib/Runtime/core/Profile.cpp; par-run --profile).
 * Between start and stop, every outlined kernel of a compiled CPU program
 * (par-outline-kernels' hooks), every BLAS call and every collective adds
 * its time to a record by name: "par_kernel_7_generic", "matmul
 * 1024x768x768 f32", "all_reduce". `flops` counts a matmul's 2*M*N*K per
 * call (0 for the others); `bytes` what a collective sent. start clears
 * the records. count snapshots them (in name order); get reads entry
 * `index` of the snapshot (its name is valid until the next count or
 * start). One thread: the one that calls the programs. */
typedef struct par_rt_profile_entry {
  const char *name;
  int64_t calls;
  double seconds;
  double flops;
  double bytes;
} par_rt_profile_entry_t;
void par_rt_profile_start(void);
void par_rt_profile_stop(void);
int64_t par_rt_profile_count(void);
par_status_t par_rt_profile_get(int64_t index, par_rt_profile_entry_t *out);

/* The buffer pool (lib/Runtime/core/Allocator.cpp): compiled CPU programs
 * allocate their buffers through it (MLIR's _mlir_memref_to_llvm_alloc,
 * _aligned_alloc and _free, which this library defines), so a train step's
 * intermediates reuse the blocks the previous step freed instead of a
 * malloc (and, for large ones, an mmap and its page faults) each.
 * `system_allocs`: blocks taken from the system; `pool_hits`: allocations
 * served from freed blocks; `cached_bytes`: freed bytes held for reuse
 * (at most PAR_RT_POOL_LIMIT bytes, default 8 GiB; beyond it a freed
 * block goes back to the system). par_rt_free releases a buffer a compiled
 * program returned (pool block or not); par_rt_alloc_bytes is the size a
 * pool block was asked with, as the memory count holds it (-1 for a
 * buffer that is not a live pool block). */
typedef struct par_rt_alloc_stats {
  int64_t system_allocs;
  int64_t pool_hits;
  int64_t frees;
  int64_t cached_bytes;
  int64_t live_bytes;
} par_rt_alloc_stats_t;
void par_rt_alloc_stats(par_rt_alloc_stats_t *out);
void par_rt_free(void *buffer);
int64_t par_rt_alloc_bytes(const void *buffer);

/* The memory a process's programs hold (docs/RationaleMemory.md): the
 * bytes compiled programs ask the pool for (as asked, not rounded to a size
 * class) plus what the host reserves for them (the session's buffers: the
 * arguments and results it keeps), with its high-water mark since the last
 * reset. A limit makes the process behave like a device of that size: an
 * allocation past it is refused; the pool then calls the handler (which
 * should report and end the process; without one, or if it returns, the
 * pool prints what happened and exits with status 1), and a reservation
 * fails. The scope names the function the session is running, for the
 * handler's message. */
typedef struct par_rt_memory_stats {
  int64_t live_bytes;
  int64_t peak_bytes;
  int64_t limit_bytes; /* 0: no limit */
} par_rt_memory_stats_t;
typedef void (*par_rt_out_of_memory_fn)(int64_t bytes, int64_t live_bytes,
                                        int64_t limit_bytes, void *user);
void par_rt_memory_stats(par_rt_memory_stats_t *out);
void par_rt_memory_reset_peak(void);
void par_rt_memory_set_limit(int64_t limit_bytes,
                             par_rt_out_of_memory_fn handler, void *user);
/* Counts host memory held for programs: 0, or -1 (nothing counted) when it
 * would pass the limit. */
int par_rt_memory_reserve(int64_t bytes);
void par_rt_memory_release(int64_t bytes);
void par_rt_memory_set_scope(const char *function_name);
const char *par_rt_memory_scope(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAR_RUNTIME_PAR_RUNTIME_H */
