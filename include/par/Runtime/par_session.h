/*===- par_session.h - Loading and calling compiled par programs ---------===*
 *
 * The session API sits over the runtime's host API (par_runtime.h) the way
 * IREE's iree/runtime/session.h sits over its HAL: a driver (par-run, a
 * test, an embedding application) opens a compiled artifact directory,
 * looks up a function, learns its interface and calls it, without knowing
 * the manifest format or the memref calling convention.
 *
 *   session   one artifact directory and one of its two programs: the SPMD
 *             program (sharded.json + sharded.so) or the unsharded
 *             reference (reference.json + reference.so). Entry points are
 *             the symbols par_packed_<name> of the .so.
 *   function  one entry point: its mesh, and per input and output the
 *             element type, global shape, this rank's local shape and the
 *             sharding (which mesh axes split each dimension, which hold
 *             partial values).
 *
 * Calls take and return this rank's local blocks (row-major, contiguous).
 * par_function_scatter and par_function_gather convert between a global
 * tensor and the local blocks by the tensor's sharding.
 *
 * A driver's calls, on every rank of a job (errors unchecked for brevity):
 *
 *   par_session_options_t o;
 *   par_session_options_initialize(&o);
 *   o.context = ctx;                      // from par_rt_context_create
 *   par_session_t *s;
 *   par_session_create("out", &o, &s);    // out/sharded.json, sharded.so
 *   par_function_t *f;
 *   par_session_lookup_function(s, "mlp", &f);
 *   par_function_scatter(f, PAR_INPUT, 0, x_global, x_local);  // each input
 *   par_function_call(f, inputs, outputs);                     // local blocks
 *   par_function_gather(f, PAR_OUTPUT, 0, outputs[0], y_global, NULL);
 *   par_session_destroy(s);
 *
 * Targets: a program runs on the CPU (host memory) or, compiled with
 * par-compile --target cuda, on a GPU (device memory; its .so links
 * libpar_runtime_gpu.so, whose par_gpu_* functions the session finds in
 * it). par_session_target names it. par_function_call takes host memory
 * for both (a GPU call copies in and out); session buffers
 * (par_session_buffer_alloc) hold memory where the program runs, so a
 * driver keeps state there across calls with par_function_call_buffers and
 * copies only what it reads.
 *
 * Ownership: par_session_create returns a session the caller frees with
 * par_session_destroy; functions, their info structs and every string and
 * array they point to are owned by the session and live until it is
 * destroyed. Buffers passed to calls are the caller's: a call copies its
 * results into them and keeps nothing.
 *
 * Errors: every fallible call returns a par_status_t; the message of the
 * last failure is par_session_last_error(session) (par_session_last_error
 * (NULL) for a failed par_session_create).
 *
 * Thread safety: none beyond the runtime's. A session (and its functions)
 * is used from one thread; calls and collectives act on the runtime's
 * current context. Info queries only read immutable data.
 *
 * Element types: the runtime's one table (par_dtype_info in par_types.h),
 * with the size in memory and the .npy descriptor of each. i1 is one byte holding 0 or 1
 * (numpy bool, "|b1"). bf16 has no numpy type: its .npy convention is the
 * raw 16-bit pattern as little-endian uint16 ("<u2"); in numpy,
 * (a.astype(np.uint32) << 16).view(np.float32) widens it to f32.
 *===----------------------------------------------------------------------===*/

#ifndef PAR_RUNTIME_PAR_SESSION_H
#define PAR_RUNTIME_PAR_SESSION_H

#include "par/Runtime/par_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------- Element types ----------------------------===*/

/* Element `index` of a buffer of `dtype` as a double, and back (floats
 * round to nearest even, integers round to nearest, i1 is value != 0). */
double par_dtype_load(par_dtype_t dtype, const void *base, int64_t index);
void par_dtype_store(par_dtype_t dtype, void *base, int64_t index,
                     double value);

/*===---------------------------- Sessions ------------------------------===*/

typedef enum par_program_t {
  PAR_PROGRAM_SHARDED = 0,   /* sharded.json + sharded.so (SPMD, all ranks) */
  PAR_PROGRAM_REFERENCE = 1, /* reference.json + reference.so (1 device) */
} par_program_t;

typedef struct par_session_options_t {
  par_program_t program;
  /* The runtime context the functions run under (borrowed; must outlive
   * the session). It gives this process's rank and the world for
   * par_function_gather. NULL: a single process of rank 0. */
  par_rt_context_t *context;
  /* 0: read the manifest only (functions can be inspected, not called;
   * the .so is not opened). */
  int load_code;
} par_session_options_t;

/* Defaults: the sharded program, no context, code loaded. */
void par_session_options_initialize(par_session_options_t *options);

typedef struct par_session_t par_session_t;
typedef struct par_function_t par_function_t;

/* Reads `artifact_dir`'s manifest of the chosen program and, with
 * load_code, opens its .so. */
par_status_t par_session_create(const char *artifact_dir,
                                const par_session_options_t *options,
                                par_session_t **out_session);
/* NULL is allowed. */
void par_session_destroy(par_session_t *session);

/* The last error's message, valid until the next call on `session`; with
 * NULL, why the last par_session_create failed. */
const char *par_session_last_error(const par_session_t *session);
/* The manifest's path ("DIR/sharded.json"). */
const char *par_session_manifest_path(const par_session_t *session);

/* What the program runs on: the manifest's "target", "cpu" (also for
 * manifests without one) or "cuda:<chip>" ("cuda:sm_90"). */
const char *par_session_target(const par_session_t *session);
/* Non-zero for a GPU program (target "cuda..."): its session buffers are
 * device memory. */
int par_session_on_device(const par_session_t *session);

/*===------------------------ Session buffers ---------------------------===*/

/* Memory where the session's program runs: host memory for a CPU program,
 * device memory (par_gpu_alloc) for a GPU program. Buffers are owned by
 * the caller, freed with par_session_buffer_free (those left are freed by
 * par_session_destroy). A GPU session needs its code loaded. Every
 * transfer is synchronous; GPU failures fail the call with
 * par_gpu_last_error's text in par_session_last_error. */
typedef struct par_buffer_t par_buffer_t;

/* A zero-filled buffer of `bytes` (0 is allowed). */
par_status_t par_session_buffer_alloc(par_session_t *session, size_t bytes,
                                      par_buffer_t **out_buffer);
/* NULL is allowed. */
void par_session_buffer_free(par_session_t *session, par_buffer_t *buffer);
/* The size it was allocated with, and its memory (a device pointer for a
 * GPU program: for par_rt_* transfers of the backend, never dereference it
 * on the host). */
size_t par_buffer_size(const par_buffer_t *buffer);
void *par_buffer_data(const par_buffer_t *buffer);
/* Host -> buffer and buffer -> host, `bytes` from the buffer's start. */
par_status_t par_session_buffer_upload(par_session_t *session,
                                       par_buffer_t *dst, const void *src,
                                       size_t bytes);
par_status_t par_session_buffer_download(par_session_t *session,
                                         const par_buffer_t *src, void *dst,
                                         size_t bytes);
/* Buffer -> buffer (`bytes` from both starts), and zero-filling. */
par_status_t par_session_buffer_copy(par_session_t *session,
                                     par_buffer_t *dst,
                                     const par_buffer_t *src, size_t bytes);
par_status_t par_session_buffer_zero(par_session_t *session,
                                     par_buffer_t *buffer);

/* The function `name` (NULL or "": the manifest's first). Fails if the
 * manifest has none of that name, if its entry is malformed, or (with
 * load_code) if the .so lacks par_packed_<name>. */
par_status_t par_session_lookup_function(par_session_t *session,
                                         const char *name,
                                         par_function_t **out_function);

/* The manifest's functions, in order: their count, and the name of function
 * `index` (NULL when out of range; owned by the session). */
int64_t par_session_function_count(const par_session_t *session);
const char *par_session_function_name(const par_session_t *session,
                                      int64_t index);

/* The pipeline section par-pipeline-split/par-pipeline-schedule write. */

/* A pipeline action (the manifest's "op" values, in this order). */
typedef enum par_pipeline_op_t {
  PAR_PIPELINE_FWD = 0,        /* forward of (mb, stage) */
  PAR_PIPELINE_BWD = 1,        /* full backward */
  PAR_PIPELINE_BWD_INPUT = 2,  /* the input-gradient half (ZB-H1) */
  PAR_PIPELINE_BWD_WEIGHT = 3, /* the weight-gradient half (ZB-H1) */
  PAR_PIPELINE_SEND_ACT = 4,   /* stage `stage`'s input activation */
  PAR_PIPELINE_RECV_ACT = 5,
  PAR_PIPELINE_SEND_GRAD = 6,  /* the gradient of stage `stage`'s input */
  PAR_PIPELINE_RECV_GRAD = 7
} par_pipeline_op_t;

typedef struct par_pipeline_action_t {
  par_pipeline_op_t op;
  int64_t mb, stage;
  int64_t peer; /* the other rank of a transfer; -1 for compute actions */
} par_pipeline_action_t;

/* One rank's ordered actions. */
typedef struct par_pipeline_program_t {
  int64_t num_actions;
  const par_pipeline_action_t *actions;
} par_pipeline_program_t;

/* A stage's functions by role (names in this manifest; NULL if absent). */
typedef struct par_pipeline_stage_t {
  const char *forward;
  const char *backward;    /* the full backward */
  const char *input_grad;  /* ZB-H1's halves of the backward */
  const char *weight_grad;
  const char *update;      /* the optimizer update */
  /* The full backward split at its residuals (par-pipeline-stash): F runs
   * stash_forward, (args, [x]) -> (y, residuals...), and B stash_backward,
   * (args, [x], residuals..., [dy]) -> (0, grads..., [dx]). */
  const char *stash_forward;
  const char *stash_backward;
  /* ZB-H1's halves on the residuals: BI stash_input_grad, the backward's
   * arguments -> (0, dx, saved...); BW stash_weight_grad, (args, [x],
   * residuals..., saved..., [dy]) -> (0, grads...). */
  const char *stash_input_grad;
  const char *stash_weight_grad;
} par_pipeline_stage_t;

typedef struct par_pipeline_info_t {
  int present;          /* 0: the artifact is not pipelined */
  const char *func;     /* the split function; NULL if absent */
  const char *step;     /* the unpipelined train step; NULL if absent */
  const char *logits;   /* the logits function; NULL if absent */
  const char *axis;     /* the pipeline mesh axis; NULL if absent */
  const char *schedule; /* NULL if absent */
  const char *backward; /* "full" or "split"; NULL if absent */
  int64_t p, m, v;      /* ranks, micro-batches, virtual stages (0 absent) */
  int64_t num_stages;   /* the stage table (stage s on rank s mod p) */
  const par_pipeline_stage_t *stages;
  int64_t num_programs; /* one program per pipeline rank */
  const par_pipeline_program_t *programs;
} par_pipeline_info_t;
/* Fails if the pipeline section is malformed (not if it is absent). */
par_status_t par_session_pipeline(par_session_t *session,
                                  par_pipeline_info_t *out_info);

/*===--------------------------- Functions ------------------------------===*/

typedef struct par_mesh_axis_t {
  const char *name;
  int64_t size;
} par_mesh_axis_t;

typedef struct par_function_info_t {
  const char *name;
  int64_t num_inputs, num_outputs;
  int64_t num_axes; /* the mesh; a process's rank is row-major in it */
  const par_mesh_axis_t *axes;
  int64_t devices;  /* product of the axis sizes */
  /* Train steps: num_feedback pairs (result, argument) in `feedback`;
   * after a step the result feeds the argument. */
  int64_t num_feedback;
  const int64_t *feedback;
  /* num_donated pairs (result, argument) in `donated`: the program
   * computes the result in the argument's buffer. A caller that passes that
   * buffer for both (par_function_call_buffers) gets the update in place and
   * keeps one buffer; one that passes a separate output gets the argument
   * unchanged (the runtime runs the program on a copy in the output). */
  int64_t num_donated;
  const int64_t *donated;
  int64_t micro_batches; /* gradient accumulation (1: none) */
  /* Pipeline stage functions: the stage (-1: none) and for each leading
   * argument the split function's argument it stands for. */
  int64_t stage;
  int64_t num_stage_args;
  const int64_t *stage_args;
  /* The functions this one is linked to (names in this manifest; NULL if
   * absent): its gradient (a train step: the one it calls), its train step,
   * a pipeline stage's update, the logits function for sampling. */
  const char *grad;
  const char *step;
  const char *update;
  const char *logits;
  /* Mixed precision: "f16" or "bf16" (NULL: f32 as written). Loss scaling
   * (a train step): the result with the next loss scale and the one with
   * the all-finite flag (1: the step was taken, 0: skipped); -1 if none. */
  const char *compute_type;
  int64_t loss_scale_result, finite_result;
  double min_loss_scale; /* the policy's minimum scale (0: none) */
  /* Gradient compression (par-compress-gradients; a train step or a stage
   * update): the method ("int8", "sign", "topk"; NULL: none) and, per call
   * and rank by the ring formulas, the bytes its compressed exchanges send
   * and those the fp32 ring all-reduce of the same gradients would send
   * (0 without compression). Its error-feedback buffers are the inputs of
   * role "error_feedback". */
  const char *compression_method;
  double compressed_bytes, uncompressed_bytes;
} par_function_info_t;

void par_function_info(const par_function_t *function,
                       par_function_info_t *out_info);

typedef enum par_io_t { PAR_INPUT = 0, PAR_OUTPUT = 1 } par_io_t;

typedef struct par_tensor_info_t {
  par_dtype_t dtype;
  int64_t rank;
  const int64_t *global_shape, *local_shape;
  int64_t global_count, local_count; /* elements */
  /* Dimension d is split over dim_axis_counts[d] mesh axes (indices into
   * the function's axes, major first), listed one dimension after the
   * other in dim_axes. */
  const int64_t *dim_axis_counts;
  const int64_t *dim_axes;
  /* Mesh axes over which the local blocks hold partial values, reduced by
   * partial_kind (PAR_SUM, PAR_MAX or PAR_MIN). */
  int64_t num_partial;
  const int64_t *partial_axes;
  par_reduction_t partial_kind;
  /* The program's initialiser (par.init): "", "zeros", "ones" or
   * "uniform:<scale>" (the manifest's spelling, par/Manifest/Schema.h). */
  const char *init;
  /* The input's role: "", "loss_scale" (the train state's loss scale, fed
   * by the driver; par-loss-scale) or "error_feedback" (an error-feedback
   * buffer of gradient compression: state fed back like optimizer state,
   * one row per device; the unsharded reference has no such input). */
  const char *role;
  /* The frontend's names (par-import; "" without): the PyTorch name of the
   * tensor (par.name, its key in a state_dict or .safetensors file) and the
   * number of its other names (a tied parameter's par.aliases, each from
   * par_function_tensor_alias). `vocab` > 0 for an input of role "tokens"
   * or "targets" whose values lie in [0, vocab) (par.vocab); else 0. */
  const char *name;
  int64_t num_aliases;
  int64_t vocab;
  /* A segment of a fused parameter (par.slice; par-import splits a fused
   * q|k|v or gate|up projection per segment): the name of the fused tensor
   * ("" if none) and where the slice lies in it, dimension slice_dim from
   * slice_offset, the size global_shape[slice_dim]. Weights files hold the
   * fused tensor. slice_extent > 0: the fused tensor's size in slice_dim,
   * which the slice reaches past (a vocabulary padded to a multiple of tp);
   * the rest of the tensor is padding, zero on load and not saved. */
  const char *slice_of;
  int64_t slice_dim, slice_offset, slice_extent;
} par_tensor_info_t;

par_status_t par_function_tensor(const par_function_t *function, par_io_t io,
                                 int64_t index, par_tensor_info_t *out_info);

/* The function's memory plan (par-memory-plan, bytes per device): the
 * predicted peak (the arguments and results a runner keeps, plus the most
 * the program holds at once) and what is live then by kind.
 * PAR_ERR_INVALID_ARGUMENT when the artifact has no plan for it. */
typedef struct par_memory_plan_t {
  int64_t peak_bytes;
  int64_t argument_bytes, result_bytes, program_peak_bytes;
  int64_t parameters, gradients, optimizer_state, activations, temporaries,
      communication, state, data;
} par_memory_plan_t;
par_status_t par_function_memory_plan(const par_function_t *function,
                                      par_memory_plan_t *out_plan);
/* The tensor types the plan allocates with exactly `bytes` bytes ("a, b"),
 * or NULL: for naming an allocation the runtime refused. */
const char *par_function_allocation_types(const par_function_t *function,
                                          int64_t bytes);

/* Alias `k` (0 <= k < num_aliases) of tensor (io, index): a string owned by
 * the session; NULL if out of range. */
const char *par_function_tensor_alias(const par_function_t *function,
                                      par_io_t io, int64_t index, int64_t k);

/* This process's rank and its coordinates on the function's mesh
 * (num_axes values), and the rank of given coordinates. */
int64_t par_function_rank(const par_function_t *function);
void par_function_coords(const par_function_t *function, int64_t rank,
                         int64_t *out_coords);
int64_t par_function_rank_of(const par_function_t *function,
                             const int64_t *coords);

/* Calls the function on this rank's local blocks: inputs[i] holds input
 * i's local block; results are copied into outputs[k] (local size of
 * output k). Host memory for both targets: a GPU program's call copies the
 * inputs to device memory and the results back (par_function_call_buffers
 * keeps them there). Programs may run collectives: in a sharded session
 * every rank calls, in the same order. */
par_status_t par_function_call(par_function_t *function,
                               const void *const *inputs,
                               void *const *outputs);

/* par_function_call on session buffers of the function's session: inputs[i]
 * holds input i's local block, the results are written into outputs[k]
 * (each at least the local size). An output buffer must not be an input's
 * or another output's: a driver that feeds results back (train state)
 * keeps two sets and swaps them. On a CPU program the results are copied
 * into the outputs exactly as par_function_call copies them; on a GPU
 * program the program writes them there (device memory) and nothing
 * passes through the host. */
par_status_t par_function_call_buffers(par_function_t *function,
                                       par_buffer_t *const *inputs,
                                       par_buffer_t *const *outputs);

/* par_function_call_buffers into new session buffers: out_results[k]
 * (num_outputs of them, the caller's, freed with par_session_buffer_free)
 * holds result k. A CPU program's results are handed over where it
 * allocated them (no copy and no zero-filled buffer per result); results
 * that are an argument's memory or share another result's are copied, and
 * a GPU program (or one with donated arguments) writes fresh buffers. On
 * failure every out_results[k] is NULL. */
par_status_t par_function_call_new(par_function_t *function,
                                   par_buffer_t *const *inputs,
                                   par_buffer_t **out_results);

/* Copies this rank's local block of tensor (io, index) out of `global`
 * (every rank holds the whole tensor; no communication). For a partial
 * tensor one rank per partial group (coordinate 0 on every partial axis)
 * takes the values and the others the reduction's neutral element. */
par_status_t par_function_scatter(const par_function_t *function, par_io_t io,
                                  int64_t index, const void *global,
                                  void *local);

/* Collective over the world (the session's context; without one, this
 * process alone): gathers every rank's local block of tensor (io, index)
 * to rank 0, which assembles `global_on_root` (partial values reduced by
 * partial_kind); other ranks may pass NULL. Along a mesh axis
 * the tensor neither splits nor holds partial over, the blocks are copies:
 * the one at coordinate source_coords[axis] is taken (source_coords NULL:
 * coordinate 0 on every axis). */
par_status_t par_function_gather(const par_function_t *function, par_io_t io,
                                 int64_t index, const void *local,
                                 void *global_on_root,
                                 const int64_t *source_coords);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAR_RUNTIME_PAR_SESSION_H */
