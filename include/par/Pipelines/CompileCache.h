//===- CompileCache.h - par-compile's persistent artifact cache -*- C++ -*-===//
//
// A directory of compiled artifacts keyed by everything that decides their
// bytes: the model's text, every compile option, the target and host CPU,
// and par itself (the compiler's and the runtime's files, hashed). As JAX's
// and torch.compile's persistent caches do, a second compile of the same
// thing copies the artifact instead of building it.
//
//   DIR/<key>/INDEX      one line per file: "<size> <blake3> <name>"
//   DIR/<key>/<name>...  the artifact's files
//
// An entry is written in a temporary directory and renamed into place, so
// readers see a whole entry or none, whatever other processes do (lit runs
// par-compile in parallel). A reader checks every file's size and hash: a
// corrupt or truncated entry is reported as a warning, removed and rebuilt,
// never used. The cache is bounded: after a store the least recently used
// entries (the INDEX's modification time, touched on every hit) are removed
// until the total is under the limit (the newest always stays). Removal
// renames an entry away first, so a concurrent reader sees it whole or not
// at all.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PIPELINES_COMPILECACHE_H
#define PAR_PIPELINES_COMPILECACHE_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mlir::par {

class CompileCache {
public:
  /// `limitBytes`: the bound on the entries' total size.
  CompileCache(StringRef dir, uint64_t limitBytes)
      : dir(dir.str()), limitBytes(limitBytes) {}

  /// The default directory: $PAR_COMPILE_CACHE, else
  /// $XDG_CACHE_HOME/par/compile, else ~/.cache/par/compile.
  static std::string defaultDir();
  /// The default bound (10 GiB).
  static constexpr uint64_t kDefaultLimit = 10ull << 30;

  /// The key of `parts` (hex BLAKE3 of their lengths and bytes).
  static std::string key(ArrayRef<std::string> parts);
  /// Hex BLAKE3 of a file's bytes ("" if it cannot be read).
  static std::string hashFile(StringRef path);

  /// Copies the entry `key`'s files into `outDir` and returns true when the
  /// entry exists and is whole. A corrupt entry is removed and `warning`
  /// says why (the caller prints it); a missing one returns false quietly.
  bool fetch(StringRef key, StringRef outDir, std::string &warning);

  /// Stores `files` (names in `outDir`) as the entry `key`, then evicts
  /// the least recently used entries past the limit. Best effort: a cache
  /// that cannot be written leaves the artifact as it is (`warning` says
  /// why).
  void store(StringRef key, StringRef outDir, ArrayRef<std::string> files,
             std::string &warning);

  /// Removes every entry (par-compile --cache-clean).
  LogicalResult clean(std::string &error);

private:
  void evict();
  void remove(StringRef entry);

  std::string dir;
  uint64_t limitBytes;
};

/// Parses a size such as "512M", "10GiB" or "1000000" into bytes.
bool parseByteSize(StringRef text, uint64_t &bytes);

} // namespace mlir::par

#endif // PAR_PIPELINES_COMPILECACHE_H
