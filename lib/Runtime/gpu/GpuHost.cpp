//===- GpuHost.cpp - The host side of compiled CUDA programs --------------===//
//
// libpar_runtime_gpu.so: the mgpu* functions MLIR's gpu-to-llvm lowering
// calls, over the CUDA driver API, and the par_gpu_* C API of
// include/par/Runtime/par_gpu.h (which documents the behaviour). The
// signatures follow upstream mlir/lib/ExecutionEngine/CudaRuntimeWrappers.cpp
// (MLIR 22); the implementation is our own:
//
//  - module images are only recorded at load (global constructors run
//    before a device is chosen) and loaded per context on first lookup;
//  - the legacy default stream everywhere (mgpuStreamCreate returns NULL),
//    so the program's kernels are ordered with the CUDA backend's blocking
//    stream (collectives, cuBLAS);
//  - stream-ordered allocation on the default memory pool with the release
//    threshold raised, so the steady state allocates nothing for real;
//  - a sticky first error instead of aborts: generated code cannot look at
//    return codes, so the driver of the program asks par_gpu_last_error
//    after a step.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_gpu.h"

#include <cuda.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#define PAR_GPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

std::mutex mutex; // guards everything below (not the counters)
std::atomic<bool> failed{false};
std::string firstError;
std::atomic<int64_t> launches{0};
/// Set by an atexit handler: the driver may be torn down by then, and the
/// artifacts' global destructors (mgpuModuleUnload) still run after it.
std::atomic<bool> exiting{false};
int32_t defaultDevice = 0;

/// Names of the results a user is likely to meet, for drivers (the stub)
/// whose cuGetErrorName fails.
const char *fallbackName(CUresult r) {
  switch (r) {
  case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
  case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
  case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
  case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
  case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
  case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
  case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
  case CUDA_ERROR_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
  case CUDA_ERROR_INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
  case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
  case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
  case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
  case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
  case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
  default: return nullptr;
  }
}

std::string describe(CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
    name = fallbackName(r);
  if (cuGetErrorString(r, &text) != CUDA_SUCCESS || !text) {
    // The stub answers neither; say what matters most.
    text = r == CUDA_ERROR_STUB_LIBRARY
               ? "libcuda.so.1 is the toolkit's stub: no NVIDIA driver here"
           : r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected"
                                       : nullptr;
  }
  std::string out = name ? name : "CUresult " + std::to_string(int(r));
  if (text && *text)
    out += std::string(" (") + text + ")";
  return out;
}

/// Records `message` unless an error is already pending. Caller holds
/// `mutex`.
void recordLocked(std::string message) {
  if (failed.load(std::memory_order_relaxed))
    return;
  firstError = "par gpu: " + std::move(message);
  failed.store(true, std::memory_order_release);
}

void record(std::string message) {
  std::lock_guard<std::mutex> lock(mutex);
  recordLocked(std::move(message));
}

/// Records a failed driver call `call` made by `what`. Returns false for
/// a failure (so that `if (!check(...)) return` reads naturally).
bool checkLocked(CUresult r, const std::string &what, const char *call) {
  if (r == CUDA_SUCCESS)
    return true;
  recordLocked(what + ": " + call + " failed: " + describe(r));
  return false;
}

bool check(CUresult r, const std::string &what, const char *call) {
  if (r == CUDA_SUCCESS)
    return true;
  std::lock_guard<std::mutex> lock(mutex);
  return checkLocked(r, what, call);
}

bool pending() { return failed.load(std::memory_order_acquire); }

//===----------------------------------------------------------------------===//
// Contexts
//===----------------------------------------------------------------------===//

/// What the library set up once per context.
struct ContextInfo {
  bool pools = false; // stream-ordered allocation available
};
std::unordered_map<CUcontext, ContextInfo> contexts;
std::unordered_map<int, CUcontext> retainedPrimary; // by device ordinal
bool initialized = false;

/// Makes sure a context is current on this thread (see par_gpu.h) and that
/// its memory pool is set up; returns it, or NULL after recording why.
/// Caller holds `mutex`.
CUcontext currentContextLocked(const char *what, ContextInfo **info) {
  if (!initialized) {
    if (!checkLocked(cuInit(0), what, "cuInit"))
      return nullptr;
    initialized = true;
  }
  CUcontext ctx = nullptr;
  if (!checkLocked(cuCtxGetCurrent(&ctx), what, "cuCtxGetCurrent"))
    return nullptr;
  if (!ctx) {
    CUdevice dev = 0;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS) {
      if (!checkLocked(cuDeviceGet(&dev, defaultDevice), what, "cuDeviceGet"))
        return nullptr;
    }
    auto it = retainedPrimary.find(int(dev));
    if (it == retainedPrimary.end()) {
      CUcontext primary = nullptr;
      if (!checkLocked(cuDevicePrimaryCtxRetain(&primary, dev), what,
                       "cuDevicePrimaryCtxRetain"))
        return nullptr;
      it = retainedPrimary.emplace(int(dev), primary).first;
    }
    if (!checkLocked(cuCtxSetCurrent(it->second), what, "cuCtxSetCurrent"))
      return nullptr;
    ctx = it->second;
  }
  auto found = contexts.find(ctx);
  if (found == contexts.end()) {
    ContextInfo ci;
    CUdevice dev = 0;
    int supported = 0;
    if (!checkLocked(cuCtxGetDevice(&dev), what, "cuCtxGetDevice"))
      return nullptr;
    if (cuDeviceGetAttribute(&supported,
                             CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                             dev) == CUDA_SUCCESS &&
        supported) {
      // Keep freed memory in the pool across synchronizations (the default
      // threshold 0 returns it to the OS at every sync): no real
      // allocation per step once the pool has grown.
      CUmemoryPool pool = nullptr;
      cuuint64_t threshold = UINT64_MAX;
      if (!checkLocked(cuDeviceGetDefaultMemPool(&pool, dev), what,
                       "cuDeviceGetDefaultMemPool") ||
          !checkLocked(cuMemPoolSetAttribute(
                           pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                           &threshold),
                       what, "cuMemPoolSetAttribute"))
        return nullptr;
      ci.pools = true;
    }
    found = contexts.emplace(ctx, ci).first;
  }
  if (info)
    *info = &found->second;
  return ctx;
}

CUcontext currentContext(const char *what, ContextInfo **info = nullptr) {
  std::lock_guard<std::mutex> lock(mutex);
  return currentContextLocked(what, info);
}

//===----------------------------------------------------------------------===//
// Modules
//===----------------------------------------------------------------------===//

struct Loaded {
  CUcontext ctx;
  CUmodule module;
  std::unordered_map<std::string, CUfunction> functions;
};

/// What mgpuModuleLoad returns: the image, loaded lazily per context.
struct Module {
  const void *data;
  size_t size;
  bool jit;     // PTX for the driver's JIT
  int optLevel; // for the JIT
  std::vector<Loaded> loaded;
};

std::unordered_set<Module *> modules;                    // live handles
std::unordered_map<CUfunction, std::string> kernelNames; // for messages
std::unordered_set<CUdeviceptr> managed; // mgpuMemAlloc's host-shared ones

void onExit() { exiting.store(true); }
struct RegisterExit {
  RegisterExit() { std::atexit(onExit); }
} registerExit;

/// Loads `m` into `ctx`. Caller holds `mutex`.
Loaded *loadLocked(Module &m, CUcontext ctx, const char *name) {
  std::string what = std::string("mgpuModuleGetFunction (kernel '") + name +
                     "')";
  CUmodule module = nullptr;
  char log[4096] = "";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log))),
                    reinterpret_cast<void *>(uintptr_t(m.optLevel))};
  CUresult r = cuModuleLoadDataEx(&module, m.data, m.jit ? 3u : 2u, options,
                                  values);
  if (r != CUDA_SUCCESS) {
    std::string message = what + ": cuModuleLoadDataEx failed: " + describe(r);
    if (log[0])
      message += std::string("; JIT log: ") + log;
    recordLocked(message);
    return nullptr;
  }
  m.loaded.push_back({ctx, module, {}});
  return &m.loaded.back();
}

} // namespace

//===----------------------------------------------------------------------===//
// mgpu*: what gpu-to-llvm's host code calls
//===----------------------------------------------------------------------===//

PAR_GPU_EXPORT void *mgpuModuleLoad(void *data, size_t gpuBlobSize) {
  // Only recorded: see the file comment. Also after an error (the handle
  // is harmless, and the program's constructors must not see NULL).
  auto *m = new Module{data, gpuBlobSize, false, 0, {}};
  std::lock_guard<std::mutex> lock(mutex);
  modules.insert(m);
  return m;
}

PAR_GPU_EXPORT void *mgpuModuleLoadJIT(void *data, int optLevel) {
  auto *m = new Module{data, 0, true, optLevel, {}};
  std::lock_guard<std::mutex> lock(mutex);
  modules.insert(m);
  return m;
}

PAR_GPU_EXPORT void mgpuModuleUnload(void *module) {
  auto *m = static_cast<Module *>(module);
  std::lock_guard<std::mutex> lock(mutex);
  if (!modules.erase(m))
    return;
  // Failures here are not worth an error (destructors at dlclose or
  // exit); at exit the driver may be gone, so leave it alone then.
  for (Loaded &l : m->loaded) {
    for (auto &f : l.functions)
      kernelNames.erase(f.second);
    if (!exiting.load())
      cuModuleUnload(l.module);
  }
  delete m;
}

PAR_GPU_EXPORT void *mgpuModuleGetFunction(void *module, const char *name) {
  if (pending())
    return nullptr;
  auto *m = static_cast<Module *>(module);
  std::lock_guard<std::mutex> lock(mutex);
  if (!name)
    name = "";
  std::string what = std::string("mgpuModuleGetFunction (kernel '") + name +
                     "')";
  if (!modules.count(m)) {
    recordLocked(what + ": unknown or unloaded module");
    return nullptr;
  }
  CUcontext ctx = currentContextLocked(what.c_str(), nullptr);
  if (!ctx)
    return nullptr;
  Loaded *l = nullptr;
  for (Loaded &candidate : m->loaded)
    if (candidate.ctx == ctx)
      l = &candidate;
  if (!l && !(l = loadLocked(*m, ctx, name)))
    return nullptr;
  auto it = l->functions.find(name);
  if (it != l->functions.end())
    return it->second;
  CUfunction f = nullptr;
  if (!checkLocked(cuModuleGetFunction(&f, l->module, name), what,
                   "cuModuleGetFunction"))
    return nullptr;
  l->functions.emplace(name, f);
  kernelNames[f] = name;
  return f;
}

PAR_GPU_EXPORT void mgpuLaunchKernel(void *function, intptr_t gridX,
                                     intptr_t gridY, intptr_t gridZ,
                                     intptr_t blockX, intptr_t blockY,
                                     intptr_t blockZ, int32_t smem,
                                     void *stream, void **params,
                                     void **extra, size_t /*paramsCount*/) {
  if (pending())
    return;
  auto name = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = kernelNames.find(static_cast<CUfunction>(function));
    return it == kernelNames.end() ? std::string("?") : it->second;
  };
  // An empty grid has nothing to do (empty tensors); CUDA would refuse it.
  if (gridX == 0 || gridY == 0 || gridZ == 0)
    return;
  for (intptr_t d : {gridX, gridY, gridZ, blockX, blockY, blockZ})
    if (d < 0 || uintptr_t(d) > UINT_MAX) {
      record("mgpuLaunchKernel (kernel '" + name() + "'): grid " +
             std::to_string(gridX) + "x" + std::to_string(gridY) + "x" +
             std::to_string(gridZ) + ", block " + std::to_string(blockX) +
             "x" + std::to_string(blockY) + "x" + std::to_string(blockZ) +
             " out of range");
      return;
    }
  CUresult r = cuLaunchKernel(
      static_cast<CUfunction>(function), unsigned(gridX), unsigned(gridY),
      unsigned(gridZ), unsigned(blockX), unsigned(blockY), unsigned(blockZ),
      unsigned(smem), static_cast<CUstream>(stream), params, extra);
  if (r != CUDA_SUCCESS) {
    check(r, "mgpuLaunchKernel (kernel '" + name() + "')", "cuLaunchKernel");
    return;
  }
  launches.fetch_add(1, std::memory_order_relaxed);
}

PAR_GPU_EXPORT void *mgpuStreamCreate() {
  return nullptr; // the legacy default stream
}

PAR_GPU_EXPORT void mgpuStreamDestroy(void *stream) {
  if (stream && !pending())
    check(cuStreamDestroy(static_cast<CUstream>(stream)), "mgpuStreamDestroy",
          "cuStreamDestroy");
}

PAR_GPU_EXPORT void mgpuStreamSynchronize(void *stream) {
  if (pending() || !currentContext("mgpuStreamSynchronize"))
    return;
  // The legacy stream (every compiled function's): the whole context, so
  // that the CUDA backend's cuBLAS/NCCL work the function queued on its own
  // stream (which does not synchronize per call) is complete as well when
  // the function returns.
  if (!stream) {
    check(cuCtxSynchronize(), "mgpuStreamSynchronize", "cuCtxSynchronize");
    return;
  }
  check(cuStreamSynchronize(static_cast<CUstream>(stream)),
        "mgpuStreamSynchronize", "cuStreamSynchronize");
}

PAR_GPU_EXPORT void mgpuStreamWaitEvent(void *stream, void *event) {
  if (pending())
    return;
  check(cuStreamWaitEvent(static_cast<CUstream>(stream),
                          static_cast<CUevent>(event), 0),
        "mgpuStreamWaitEvent", "cuStreamWaitEvent");
}

PAR_GPU_EXPORT void *mgpuEventCreate() {
  if (pending() || !currentContext("mgpuEventCreate"))
    return nullptr;
  CUevent event = nullptr;
  if (!check(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "mgpuEventCreate",
             "cuEventCreate"))
    return nullptr;
  return event;
}

PAR_GPU_EXPORT void mgpuEventDestroy(void *event) {
  if (event && !pending())
    check(cuEventDestroy(static_cast<CUevent>(event)), "mgpuEventDestroy",
          "cuEventDestroy");
}

PAR_GPU_EXPORT void mgpuEventSynchronize(void *event) {
  if (pending())
    return;
  check(cuEventSynchronize(static_cast<CUevent>(event)),
        "mgpuEventSynchronize", "cuEventSynchronize");
}

PAR_GPU_EXPORT void mgpuEventRecord(void *event, void *stream) {
  if (pending())
    return;
  check(cuEventRecord(static_cast<CUevent>(event),
                      static_cast<CUstream>(stream)),
        "mgpuEventRecord", "cuEventRecord");
}

PAR_GPU_EXPORT void *mgpuMemAlloc(uint64_t sizeBytes, void *stream,
                                  bool isHostShared) {
  if (pending() || sizeBytes == 0)
    return nullptr;
  std::string what = "mgpuMemAlloc (" + std::to_string(sizeBytes) + " bytes)";
  ContextInfo *info = nullptr;
  if (!currentContext(what.c_str(), &info))
    return nullptr;
  CUdeviceptr p = 0;
  if (isHostShared) {
    if (!check(cuMemAllocManaged(&p, sizeBytes, CU_MEM_ATTACH_GLOBAL), what,
               "cuMemAllocManaged"))
      return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    managed.insert(p);
  } else if (info->pools) {
    if (!check(cuMemAllocAsync(&p, sizeBytes, static_cast<CUstream>(stream)),
               what, "cuMemAllocAsync"))
      return nullptr;
  } else if (!check(cuMemAlloc(&p, sizeBytes), what, "cuMemAlloc")) {
    return nullptr;
  }
  return reinterpret_cast<void *>(p);
}

PAR_GPU_EXPORT void mgpuMemFree(void *ptr, void *stream) {
  if (!ptr || pending())
    return;
  ContextInfo *info = nullptr;
  if (!currentContext("mgpuMemFree", &info))
    return;
  // Managed memory (mgpuMemAlloc's isHostShared) is not pool memory.
  auto p = reinterpret_cast<CUdeviceptr>(ptr);
  bool wasManaged;
  {
    std::lock_guard<std::mutex> lock(mutex);
    wasManaged = managed.erase(p) != 0;
  }
  if (info->pools && !wasManaged)
    check(cuMemFreeAsync(p, static_cast<CUstream>(stream)), "mgpuMemFree",
          "cuMemFreeAsync");
  else
    check(cuMemFree(p), "mgpuMemFree", "cuMemFree");
}

PAR_GPU_EXPORT void mgpuMemcpy(void *dst, void *src, size_t sizeBytes,
                               void *stream) {
  if (pending() || sizeBytes == 0 || !currentContext("mgpuMemcpy"))
    return;
  check(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                      reinterpret_cast<CUdeviceptr>(src), sizeBytes,
                      static_cast<CUstream>(stream)),
        "mgpuMemcpy (" + std::to_string(sizeBytes) + " bytes)",
        "cuMemcpyAsync");
}

PAR_GPU_EXPORT void mgpuMemset32(void *dst, unsigned int value, size_t count,
                                 void *stream) {
  if (pending() || count == 0 || !currentContext("mgpuMemset32"))
    return;
  check(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                         static_cast<CUstream>(stream)),
        "mgpuMemset32", "cuMemsetD32Async");
}

PAR_GPU_EXPORT void mgpuMemset16(void *dst, unsigned short value,
                                 size_t count, void *stream) {
  if (pending() || count == 0 || !currentContext("mgpuMemset16"))
    return;
  check(cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                         static_cast<CUstream>(stream)),
        "mgpuMemset16", "cuMemsetD16Async");
}

/// Host registration is not needed by par's programs (all their buffers
/// are device memory); a call means a pipeline that expects it.
PAR_GPU_EXPORT void mgpuMemHostRegisterMemRef(int64_t /*rank*/,
                                              void * /*descriptor*/,
                                              int64_t /*elementSizeBytes*/) {
  record("mgpuMemHostRegisterMemRef: host memory registration is not "
         "supported (par's CUDA programs take device buffers)");
}

PAR_GPU_EXPORT void mgpuMemHostUnregisterMemRef(int64_t /*rank*/,
                                                void * /*descriptor*/,
                                                int64_t /*elementSizeBytes*/) {
  record("mgpuMemHostUnregisterMemRef: host memory registration is not "
         "supported (par's CUDA programs take device buffers)");
}

PAR_GPU_EXPORT void mgpuSetDefaultDevice(int32_t device) {
  std::lock_guard<std::mutex> lock(mutex);
  defaultDevice = device;
}

//===----------------------------------------------------------------------===//
// par_gpu_*: the C API of par_gpu.h
//===----------------------------------------------------------------------===//

PAR_GPU_EXPORT const char *par_gpu_last_error(void) {
  if (!pending())
    return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  return firstError.c_str();
}

PAR_GPU_EXPORT void par_gpu_clear_error(void) {
  std::lock_guard<std::mutex> lock(mutex);
  failed.store(false);
  firstError.clear();
}

PAR_GPU_EXPORT int par_gpu_alloc(void **out, size_t bytes) {
  if (!out) {
    record("par_gpu_alloc: out is NULL");
    return -1;
  }
  *out = nullptr;
  if (pending())
    return -1;
  if (bytes == 0)
    return 0;
  std::string what = "par_gpu_alloc (" + std::to_string(bytes) + " bytes)";
  if (!currentContext(what.c_str()))
    return -1;
  CUdeviceptr p = 0;
  if (!check(cuMemAlloc(&p, bytes), what, "cuMemAlloc"))
    return -1;
  *out = reinterpret_cast<void *>(p);
  return 0;
}

PAR_GPU_EXPORT int par_gpu_free(void *ptr) {
  if (!ptr)
    return 0;
  // While an error is pending this still tries (clean-up); a failure then
  // keeps the first error.
  if (!pending() && !currentContext("par_gpu_free"))
    return -1;
  CUresult r = cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
  return check(r, "par_gpu_free", "cuMemFree") ? 0 : -1;
}

PAR_GPU_EXPORT int par_gpu_copy(void *dst, const void *src, size_t bytes) {
  if (pending())
    return -1;
  if (bytes == 0)
    return 0;
  std::string what = "par_gpu_copy (" + std::to_string(bytes) + " bytes)";
  if (!currentContext(what.c_str()))
    return -1;
  // On the legacy default stream (after the program's work there), then
  // waited for: cuMemcpy alone returns early for device-to-device copies.
  return check(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                             reinterpret_cast<CUdeviceptr>(src), bytes,
                             nullptr),
               what, "cuMemcpyAsync") &&
                 check(cuStreamSynchronize(nullptr), what,
                       "cuStreamSynchronize")
             ? 0
             : -1;
}

PAR_GPU_EXPORT int par_gpu_memset_zero(void *dst, size_t bytes) {
  if (pending())
    return -1;
  if (bytes == 0)
    return 0;
  std::string what =
      "par_gpu_memset_zero (" + std::to_string(bytes) + " bytes)";
  if (!currentContext(what.c_str()))
    return -1;
  return check(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), 0, bytes,
                               nullptr),
               what, "cuMemsetD8Async") &&
                 check(cuStreamSynchronize(nullptr), what,
                       "cuStreamSynchronize")
             ? 0
             : -1;
}

PAR_GPU_EXPORT int par_gpu_synchronize(void) {
  if (pending() || !currentContext("par_gpu_synchronize"))
    return -1;
  return check(cuCtxSynchronize(), "par_gpu_synchronize", "cuCtxSynchronize")
             ? 0
             : -1;
}

PAR_GPU_EXPORT int par_gpu_kernel_count(void) {
  int64_t n = launches.load(std::memory_order_relaxed);
  return n > INT_MAX ? INT_MAX : int(n);
}
