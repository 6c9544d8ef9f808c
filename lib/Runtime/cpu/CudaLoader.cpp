//===- CudaLoader.cpp - Finding and loading libpar_runtime_cuda.so --------===//
//
// The CUDA backend is a separate library so that libpar_runtime.so has no
// CUDA, NCCL or cuBLAS dependency: it loads on any machine, and only a
// context created with PAR_BACKEND_CUDA pulls the GPU stack in.
//
// Lookup order: $PAR_RUNTIME_CUDA_LIBRARY if set (the only candidate then;
// tests use it to exercise the "not built" path), else the directory
// libpar_runtime.so itself was loaded from (found with dladdr, so a build or
// install tree works without LD_LIBRARY_PATH), else the dynamic linker's
// default search path.
//
// The library is never dlclose()d: NCCL and the CUDA runtime start threads
// and register exit handlers that must not outlive their code.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {
const char *const kLibName = "libpar_runtime_cuda.so";

/// The directory holding the library this function is compiled into.
std::string ownDirectory() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&ownDirectory), &info) ||
      !info.dli_fname)
    return {};
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}
} // namespace

const par_rt_cuda_backend_t *par::rt::loadCudaBackend(std::string &error) {
  static const par_rt_cuda_backend_t *loaded = nullptr;
  if (loaded)
    return loaded;

  std::vector<std::string> candidates;
  const char *override = std::getenv("PAR_RUNTIME_CUDA_LIBRARY");
  if (override && *override) {
    candidates.push_back(override);
  } else {
    std::string dir = ownDirectory();
    if (!dir.empty())
      candidates.push_back(dir + "/" + kLibName);
    candidates.push_back(kLibName); // default search path
  }

  for (const std::string &path : candidates) {
    bool bareName = path.find('/') == std::string::npos;
    if (!bareName && access(path.c_str(), F_OK) != 0)
      continue; // not there: try the next place
    dlerror();
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      std::string why = dlerror();
      // For a bare name the loader says "<name>: cannot open shared object
      // file" when the library itself is absent; a missing dependency
      // (libnccl.so.2, ...) names the dependency instead and is reported.
      if (bareName && why.rfind(std::string(kLibName) + ":", 0) == 0)
        continue;
      error = "CUDA backend: cannot load " + path + ": " + why;
      return nullptr;
    }
    auto get = reinterpret_cast<par_rt_cuda_backend_get_fn>(
        dlsym(handle, "par_rt_cuda_backend_get"));
    const par_rt_cuda_backend_t *table = get ? get() : nullptr;
    if (!table) {
      error = "CUDA backend: " + path + " has no par_rt_cuda_backend_get";
      return nullptr;
    }
    if (table->abi_version != PAR_RT_CUDA_BACKEND_ABI_VERSION) {
      error = "CUDA backend: " + path + " has interface version " +
              std::to_string(table->abi_version) + ", expected " +
              std::to_string(PAR_RT_CUDA_BACKEND_ABI_VERSION) +
              " (a stale build?)";
      return nullptr;
    }
    loaded = table;
    return loaded;
  }
  error = std::string("CUDA backend not built (") + kLibName + " not found)";
  return nullptr;
}
