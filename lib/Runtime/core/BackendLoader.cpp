//===- BackendLoader.cpp - Finding and loading the backend libraries ------===//
//
// The MPI and CUDA backends are separate libraries so that libpar_runtime.so
// has no MPI, CUDA, NCCL or cuBLAS dependency: it loads on any machine, a
// single process outside an MPI job runs on the local backend with no MPI at
// all, and only a context that needs MPI or CUDA pulls that stack in.
//
// Lookup order, per library: $PAR_RUNTIME_MPI_LIBRARY /
// $PAR_RUNTIME_CUDA_LIBRARY if set (the only candidate then; tests use it to
// exercise the "not built" paths), else the directory libpar_runtime.so
// itself was loaded from (found with dladdr, so a build or install tree works
// without LD_LIBRARY_PATH), else the dynamic linker's default search path.
//
// The MPI backend is opened RTLD_GLOBAL: Open MPI's own components, which
// libmpi dlopen()s in MPI_Init, need libmpi's symbols in the global scope.
// The CUDA backend stays RTLD_LOCAL. Neither is ever dlclose()d: MPI cannot
// be initialized twice in a process, and NCCL and the CUDA runtime start
// threads and register exit handlers that must not outlive their code.
//
//===----------------------------------------------------------------------===//

#include "BackendLoader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

using namespace par::rt;

namespace {

struct LibrarySpec {
  const char *title;    // "MPI backend"
  const char *fileName; // libpar_runtime_mpi.so
  const char *envVar;   // PAR_RUNTIME_MPI_LIBRARY
  const char *symbol;   // par_rt_mpi_backend_get
  int flags;            // dlopen flags
  bool world;           // the role its table must fill
};

const LibrarySpec kSpecs[] = {
    {"MPI backend", "libpar_runtime_mpi.so", "PAR_RUNTIME_MPI_LIBRARY",
     "par_rt_mpi_backend_get", RTLD_NOW | RTLD_GLOBAL, true},
    {"CUDA backend", "libpar_runtime_cuda.so", "PAR_RUNTIME_CUDA_LIBRARY",
     "par_rt_cuda_backend_get", RTLD_NOW | RTLD_LOCAL, false},
};

const par_rt_backend_t *loadedTables[2] = {nullptr, nullptr};

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

std::vector<std::string> candidates(const LibrarySpec &spec) {
  const char *override = std::getenv(spec.envVar);
  if (override && *override)
    return {override};
  std::vector<std::string> out;
  std::string dir = ownDirectory();
  if (!dir.empty())
    out.push_back(dir + "/" + spec.fileName);
  out.push_back(spec.fileName); // default search path
  return out;
}

/// Reads and checks the table of an opened library.
const par_rt_backend_t *tableOf(const LibrarySpec &spec, void *handle,
                                const std::string &path, std::string &error) {
  auto get = reinterpret_cast<par_rt_backend_get_fn>(dlsym(handle, spec.symbol));
  const par_rt_backend_t *table = get ? get() : nullptr;
  if (!table) {
    error = std::string(spec.title) + ": " + path + " has no " + spec.symbol;
    return nullptr;
  }
  if (table->abi_version != PAR_RT_BACKEND_ABI_VERSION) {
    error = std::string(spec.title) + ": " + path +
            " has interface version " + std::to_string(table->abi_version) +
            ", expected " + std::to_string(PAR_RT_BACKEND_ABI_VERSION) +
            " (a stale build?)";
    return nullptr;
  }
  std::string missing;
  if (!hasEntriesFor(*table, spec.world, missing)) {
    error = std::string(spec.title) + ": " + path + " has no " + missing +
            " entry (a stale build?)";
    return nullptr;
  }
  return table;
}

} // namespace

bool par::rt::hasEntriesFor(const par_rt_backend_t &t, bool world,
                            std::string &missing) {
  struct Entry {
    const char *name;
    bool present;
    bool worldOnly;
  };
  const Entry entries[] = {
      {"create", t.create != nullptr, false},
      {"destroy", t.destroy != nullptr, false},
      {"last_error", t.last_error != nullptr, false},
      {"query_world", t.query_world != nullptr, true},
      {"abort_job", t.abort_job != nullptr, true},
      {"barrier", t.barrier != nullptr, true},
      {"broadcast_world", t.broadcast_world != nullptr, true},
      {"gather_world", t.gather_world != nullptr, true},
      {"prepare_group", t.prepare_group != nullptr, false},
      {"reset_groups", t.reset_groups != nullptr, false},
      {"all_reduce", t.all_reduce != nullptr, false},
      {"all_gather", t.all_gather != nullptr, false},
      {"reduce_scatter", t.reduce_scatter != nullptr, false},
      {"all_to_all", t.all_to_all != nullptr, false},
      {"all_slice", t.all_slice != nullptr, false},
      {"broadcast", t.broadcast != nullptr, false},
      {"send", t.send != nullptr, false},
      {"send_async", t.send_async != nullptr, false},
      {"wait_sends", t.wait_sends != nullptr, false},
      {"recv", t.recv != nullptr, false},
      {"matmul", t.matmul != nullptr, false},
      {"bucket_start", t.bucket_start != nullptr, false},
      {"bucket_wait", t.bucket_wait != nullptr, false},
      {"gather_start", t.gather_start != nullptr, false},
  };
  for (const Entry &e : entries)
    if (!e.present && (world || !e.worldOnly)) {
      missing = e.name;
      return false;
    }
  return true;
}

const par_rt_backend_t *par::rt::loadedMpiBackend() {
  return loadedTables[int(BackendLibrary::Mpi)];
}

const par_rt_backend_t *par::rt::loadBackend(BackendLibrary which,
                                             std::string &error) {
  const par_rt_backend_t *&loaded = loadedTables[int(which)];
  if (loaded)
    return loaded;
  const LibrarySpec &spec = kSpecs[int(which)];
  for (const std::string &path : candidates(spec)) {
    bool bareName = path.find('/') == std::string::npos;
    if (!bareName && access(path.c_str(), F_OK) != 0)
      continue; // not there: try the next place
    dlerror();
    void *handle = dlopen(path.c_str(), spec.flags);
    if (!handle) {
      std::string why = dlerror();
      // For a bare name the loader says "<name>: cannot open shared object
      // file" when the library itself is absent; a missing dependency
      // (libmpi.so.40, libnccl.so.2, ...) names the dependency instead and
      // is reported.
      if (bareName && why.rfind(std::string(spec.fileName) + ":", 0) == 0)
        continue;
      error = std::string(spec.title) + ": cannot load " + path + ": " + why;
      return nullptr;
    }
    loaded = tableOf(spec, handle, path, error);
    return loaded;
  }
  error = std::string(spec.title) + " not built (" + spec.fileName +
          " not found)";
  return nullptr;
}
