/*===- par_types.h - Types shared by the host API and the kernel ABI ------===*
 *
 * The status codes, element types, reductions and backend choices that both
 * halves of the runtime's C interface use (par_runtime.h: the host API;
 * par_kernel_abi.h: the kernel ABI generated code calls), and the version of
 * that interface. Include one of those two headers rather than this one.
 *
 * Versioning: PAR_RT_API_VERSION is the version of the interface a caller
 * was compiled against; par_rt_api_version() is the version of the library
 * it runs with. It is bumped on any change a caller compiled against the old
 * headers could notice (a new options field, a new entry point, a changed
 * meaning); a tool checks `par_rt_api_version() == PAR_RT_API_VERSION` before
 * creating a context.
 *===----------------------------------------------------------------------===*/

#ifndef PAR_RUNTIME_PAR_TYPES_H
#define PAR_RUNTIME_PAR_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* 1: the single par_runtime.h. 2: host API and kernel ABI split, the world
 * option (local or MPI), memrefCopy, par_rt_api_version. 3: bucket
 * all-reduces (par_rt_k_bucket_all_reduce, par_rt_k_all_reduce_start,
 * par_rt_k_wait, par_rt_request_wait). 4: per-kernel statistics
 * (par_rt_context_kernel_stats); the session's gradient compression
 * (par_function_info_t.compression_*) and "error_feedback" inputs. 5: the
 * session's tensor names, aliases and vocabularies (par_tensor_info_t.name,
 * num_aliases, vocab; par_function_tensor_alias) and the roles "tokens" and
 * "targets". 6: started all-gathers (par_rt_k_all_gather_start, completed by
 * par_rt_k_wait; the kernel record "all_gather_start"). 7: the session's
 * segments of fused parameters (par_tensor_info_t.slice_of, slice_dim,
 * slice_offset). 8: padding past a slice's tensor (slice_extent). 9: a
 * pipeline stage's stashing forward and backward
 * (par_pipeline_stage_t.stash_forward, stash_backward, stash_input_grad,
 * stash_weight_grad). */
#define PAR_RT_API_VERSION 9

#ifdef __cplusplus
extern "C" {
#endif

typedef enum par_status_t {
  PAR_OK = 0,
  PAR_ERR_INVALID_ARGUMENT = 1, /* bad sizes, unknown axis, world != mesh */
  PAR_ERR_UNAVAILABLE = 2,      /* backend not built or no device/driver */
  PAR_ERR_COMMUNICATION = 3,    /* MPI/NCCL reported an error */
  PAR_ERR_OUT_OF_MEMORY = 4,
} par_status_t;

/* Where kernel buffers live and which library moves them. */
typedef enum par_backend_t {
  PAR_BACKEND_CPU = 0,  /* host memory: MPI, or copies in a world of one */
  PAR_BACKEND_CUDA = 1, /* NCCL collectives on device memory, bootstrapped
                           over the world */
} par_backend_t;

/* How the processes of a job find each other (the "world"). */
typedef enum par_world_t {
  /* MPI when the launcher's environment says this process is part of an MPI
   * job (mpirun, srun: OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or
   * SLURM_PROCID is set), else local. */
  PAR_WORLD_AUTO = 0,
  PAR_WORLD_MPI = 1,   /* always MPI (a singleton outside mpirun) */
  PAR_WORLD_LOCAL = 2, /* one process, no MPI loaded at all */
} par_world_t;

typedef enum par_dtype_t {
  PAR_F32 = 0, PAR_F64 = 1, PAR_F16 = 2, PAR_BF16 = 3,
  PAR_I32 = 4, PAR_I64 = 5, PAR_I8 = 6, PAR_I1 = 7,
} par_dtype_t;

/* One table for every par_dtype_t (compiler, runtime and tooling use its
 * codes and names): the name manifests use, the size in memory, and the
 * .npy descriptor. i1 is one byte holding 0 or 1 (numpy bool, "|b1"); bf16
 * has no numpy type and is stored as its raw 16-bit pattern ("<u2"). */
typedef struct par_dtype_info_t {
  par_dtype_t dtype;
  const char *name;      /* as in manifests: "f32", "bf16", "i1", ... */
  int64_t element_size;  /* bytes per element in memory */
  int is_float;
  const char *npy_descr; /* "<f4", "|i1", "|b1"; bf16: "<u2" (raw bits) */
} par_dtype_info_t;

/* The table entry of `dtype`, or NULL if it is no par_dtype_t. */
const par_dtype_info_t *par_dtype_info(par_dtype_t dtype);
/* The number of entries and entry `i` (for listing the table). */
int64_t par_dtype_count(void);
const par_dtype_info_t *par_dtype_info_at(int64_t i);
/* Looks up a manifest name ("f32"); PAR_ERR_INVALID_ARGUMENT if unknown. */
par_status_t par_dtype_from_name(const char *name, par_dtype_t *out_dtype);

typedef enum par_reduction_t {
  PAR_SUM = 0, PAR_MAX = 1, PAR_MIN = 2, PAR_AVG = 3,
} par_reduction_t;

/* The PAR_RT_API_VERSION the library was built with. */
int32_t par_rt_api_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAR_RUNTIME_PAR_TYPES_H */
