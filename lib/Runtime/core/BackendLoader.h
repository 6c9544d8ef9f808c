//===- BackendLoader.h - Loading the backend libraries ----------*- C++ -*-===//
//
// libpar_runtime.so links neither MPI nor CUDA: the backends that need them
// are plugin libraries, loaded the first time a context needs one.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CORE_BACKENDLOADER_H
#define PAR_RUNTIME_CORE_BACKENDLOADER_H

#include "../common/BackendApi.h"

#include <string>

namespace par::rt {

enum class BackendLibrary { Mpi, Cuda };

/// Loads the library of `which` (once per process) and returns its table,
/// checked for the interface version and for every entry its role needs;
/// or sets `error` and returns null.
const par_rt_backend_t *loadBackend(BackendLibrary which, std::string &error);

/// The MPI table if this process has loaded it already, else null (for
/// aborting a job that has no context any more).
const par_rt_backend_t *loadedMpiBackend();

/// Whether `table` fills every entry a world backend (`world`) or a device
/// backend needs; names the first missing one in `missing`.
bool hasEntriesFor(const par_rt_backend_t &table, bool world,
                   std::string &missing);

} // namespace par::rt

#endif // PAR_RUNTIME_CORE_BACKENDLOADER_H
