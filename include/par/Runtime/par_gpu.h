/*===- par_gpu.h - The GPU host library's C API ---------------------------===*
 *
 * libpar_runtime_gpu.so is the host side of a program compiled with
 * `par-compile --target cuda`: it implements, over the CUDA driver API, the
 * mgpu* functions MLIR's gpu-to-llvm lowering calls (module loading,
 * launches, streams, events, stream-ordered memory; the C signatures of
 * upstream mlir/lib/ExecutionEngine/CudaRuntimeWrappers.cpp), and the small
 * C API below for the code that drives such a program (the session, tools,
 * benchmarks). Plain C++, no LLVM/MLIR; links libcuda.so.1 (the driver).
 *
 * Contexts. Everything runs in the CUDA context current on the calling
 * thread (the CUDA backend's cudaSetDevice makes the device's primary
 * context current). When none is current, the library retains the primary
 * context of the device mgpuSetDefaultDevice chose (0 by default) and makes
 * it current.
 *
 * Modules. mgpuModuleLoad / mgpuModuleLoadJIT run in global constructors,
 * before any device is chosen: they only record the image. The CUmodule is
 * loaded at the first mgpuModuleGetFunction in a context and cached per
 * (module, context); functions are cached by name.
 *
 * Streams and memory. mgpuStreamCreate returns the legacy default stream
 * (NULL); destroying it does nothing. mgpuMemAlloc / mgpuMemFree are
 * stream-ordered (cuMemAllocAsync / cuMemFreeAsync on the device's default
 * memory pool, whose release threshold is raised so that the pool keeps its
 * memory across steps). par_gpu_alloc is plain cuMemAlloc (long-lived
 * buffers: parameters, inputs, outputs).
 *
 * Errors. Generated code cannot see return codes: the first failure is kept
 * (sticky) with what failed, the CUresult's name and text, and the kernel's
 * name for a launch; after it every mgpu* call does nothing (returns NULL
 * where it returns a handle) and the par_gpu_* calls below fail at once,
 * until par_gpu_clear_error. Nothing here aborts. mgpuMemHostRegisterMemRef
 * and mgpuMemHostUnregisterMemRef are not supported: they record an error.
 *
 * Thread safety: the calls may come from several threads (a mutex guards
 * the caches and the error); the current context is per thread, as in CUDA.
 *===----------------------------------------------------------------------===*/

#ifndef PAR_RUNTIME_PAR_GPU_H
#define PAR_RUNTIME_PAR_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first error since the start or the last par_gpu_clear_error, e.g.
 * "mgpuLaunchKernel (kernel 'main_kernel'): cuLaunchKernel failed:
 * CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)";
 * NULL when there is none. Valid until the next clear. */
const char *par_gpu_last_error(void);
/* Forgets the error: later calls run again. (A CUDA context that hit a
 * sticky device error, such as an illegal address, stays unusable.) */
void par_gpu_clear_error(void);

/* Each returns 0 on success, else non-zero with the reason in
 * par_gpu_last_error (also when an earlier error is pending: nothing was
 * done then). */
/* Device memory of `bytes` bytes (cuMemAlloc; *out is NULL for 0 bytes and
 * on failure). */
int par_gpu_alloc(void **out, size_t bytes);
/* Frees par_gpu_alloc's memory; NULL is ignored. Tries even while an error
 * is pending (clean-up), keeping the first error. */
int par_gpu_free(void *ptr);
/* Copies `bytes` between any two of host and device memory (UVA), and
 * returns when the copy is complete. */
int par_gpu_copy(void *dst, const void *src, size_t bytes);
/* Sets `bytes` bytes of device memory to zero, synchronously. */
int par_gpu_memset_zero(void *dst, size_t bytes);
/* Waits for all work of the current context (cuCtxSynchronize). */
int par_gpu_synchronize(void);
/* Kernel launches so far (statistics). */
int par_gpu_kernel_count(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAR_RUNTIME_PAR_GPU_H */
