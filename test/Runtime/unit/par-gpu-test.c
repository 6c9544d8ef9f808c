/* libpar_runtime_gpu.so driven from C (test/Runtime/gpu/host-api.test):
 * the par_gpu.h API and the mgpu* entry points a compiled CUDA program
 * calls, declared here with MLIR's C signatures. Without a GPU (the
 * driver stub) every call that needs the driver fails cleanly with a
 * sticky error that names it, and module loading touches no driver. With
 * a GPU, allocation, copies and synchronization work. Prints one line per
 * check; exits non-zero if a check failed. */

#include "par/Runtime/par_gpu.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void *mgpuModuleLoad(void *data, size_t size);
void *mgpuModuleLoadJIT(void *ptx, int optLevel);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *function, intptr_t gx, intptr_t gy, intptr_t gz,
                      intptr_t bx, intptr_t by, intptr_t bz, int32_t smem,
                      void *stream, void **params, void **extra,
                      size_t nparams);
void *mgpuStreamCreate(void);
void mgpuStreamDestroy(void *stream);
void mgpuStreamSynchronize(void *stream);
void *mgpuEventCreate(void);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool hostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream);
void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream);
void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                               int64_t elementSize);
void mgpuSetDefaultDevice(int32_t device);

static int failures = 0;

static void report(bool ok, const char *what) {
  printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  failures += !ok;
}

static const char *errorText(void) {
  const char *e = par_gpu_last_error();
  return e ? e : "(none)";
}

static bool mentions(const char *text, const char *part) {
  return text && strstr(text, part) != NULL;
}

int main(void) {
  static char image[] = "not a cubin";
  mgpuSetDefaultDevice(0);
  void *module = mgpuModuleLoad(image, sizeof(image));
  void *jit = mgpuModuleLoadJIT(image, 2);
  report(module && jit && !par_gpu_last_error(),
         "mgpuModuleLoad records the image without the driver");
  report(mgpuStreamCreate() == NULL && !par_gpu_last_error(),
         "mgpuStreamCreate returns the legacy default stream");
  mgpuStreamDestroy(NULL);
  report(!par_gpu_last_error(), "destroying the default stream is a no-op");

  void *buffer = (void *)1;
  int rc = par_gpu_alloc(&buffer, 1024);
  if (rc != 0) {
    /* No GPU: the first driver call fails and says which and why. */
    const char *first = par_gpu_last_error();
    printf("error: %s\n", errorText());
    report(buffer == NULL, "par_gpu_alloc fails without a GPU, *out NULL");
    report(mentions(first, "par_gpu_alloc") && mentions(first, "CUDA_ERROR"),
           "the error names the call and the CUDA error");
    /* Sticky: later calls do nothing and keep the first error. */
    report(mgpuModuleGetFunction(module, "main_kernel") == NULL &&
               mgpuMemAlloc(64, NULL, false) == NULL &&
               mgpuEventCreate() == NULL,
           "calls after an error do nothing");
    mgpuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL, 0);
    mgpuMemcpy(NULL, NULL, 16, NULL);
    mgpuMemset32(NULL, 0, 4, NULL);
    mgpuStreamSynchronize(NULL);
    report(par_gpu_last_error() == first && mentions(first, "par_gpu_alloc"),
           "the first error stays");
    report(par_gpu_copy(buffer, image, 4) != 0 &&
               par_gpu_memset_zero(buffer, 4) != 0 &&
               par_gpu_synchronize() != 0,
           "par_gpu_* fail at once while an error is pending");
    report(par_gpu_kernel_count() == 0, "no launches counted");
    par_gpu_clear_error();
    report(par_gpu_last_error() == NULL, "par_gpu_clear_error forgets it");
    /* A function lookup loads the module lazily: the kernel is named. */
    report(mgpuModuleGetFunction(module, "main_kernel") == NULL &&
               mentions(par_gpu_last_error(), "mgpuModuleGetFunction") &&
               mentions(par_gpu_last_error(), "main_kernel") &&
               mentions(par_gpu_last_error(), "CUDA_ERROR"),
           "mgpuModuleGetFunction names the kernel");
    printf("error: %s\n", errorText());
    par_gpu_clear_error();
    report(par_gpu_synchronize() != 0 &&
               mentions(par_gpu_last_error(), "par_gpu_synchronize"),
           "par_gpu_synchronize fails without a GPU");
    par_gpu_clear_error();
    report(par_gpu_free(NULL) == 0 && !par_gpu_last_error(),
           "par_gpu_free(NULL) is a no-op");
    printf("gpu: unavailable\n");
  } else {
    /* A GPU: memory round trip. */
    unsigned char in[1024], out[1024];
    for (int i = 0; i < 1024; ++i)
      in[i] = (unsigned char)(i * 7);
    report(par_gpu_copy(buffer, in, sizeof(in)) == 0 &&
               par_gpu_copy(out, buffer, sizeof(out)) == 0 &&
               memcmp(in, out, sizeof(in)) == 0,
           "par_gpu_copy round trip");
    report(par_gpu_memset_zero(buffer, sizeof(in)) == 0 &&
               par_gpu_copy(out, buffer, sizeof(out)) == 0 && out[5] == 0,
           "par_gpu_memset_zero");
    void *pooled = mgpuMemAlloc(4096, NULL, false);
    mgpuMemset32(pooled, 0x01020304u, 1024, NULL);
    mgpuStreamSynchronize(NULL);
    unsigned word = 0;
    report(pooled && par_gpu_copy(&word, pooled, 4) == 0 &&
               word == 0x01020304u,
           "mgpuMemAlloc and mgpuMemset32 on the pool");
    mgpuMemFree(pooled, NULL);
    report(par_gpu_free(buffer) == 0 && par_gpu_synchronize() == 0 &&
               !par_gpu_last_error(),
           "par_gpu_free and par_gpu_synchronize");
    /* Not a cubin: the lazy load fails at the lookup, naming the kernel. */
    report(mgpuModuleGetFunction(module, "main_kernel") == NULL &&
               mentions(par_gpu_last_error(), "main_kernel"),
           "a bad image fails at the first lookup");
    printf("error: %s\n", errorText());
    par_gpu_clear_error();
    printf("gpu: available\n");
  }
  mgpuMemHostRegisterMemRef(1, NULL, 4);
  report(mentions(par_gpu_last_error(), "not supported"),
         "mgpuMemHostRegisterMemRef records an error");
  par_gpu_clear_error();
  mgpuModuleUnload(module);
  mgpuModuleUnload(jit);
  report(!par_gpu_last_error(), "mgpuModuleUnload");
  printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
