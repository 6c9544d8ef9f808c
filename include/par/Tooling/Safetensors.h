//===- Safetensors.h - Reading and writing .safetensors files ---*- C++ -*-===//
//
// The safetensors format (Hugging Face; what `safetensors.torch.save_file`
// writes and `load_file` reads): an unsigned 64-bit little-endian header
// size N, N bytes of JSON
//   { NAME: { "dtype": "F32", "shape": [d0, ...], "data_offsets": [b, e] },
//     ..., "__metadata__"?: { KEY: "VALUE", ... } }
// (padded with spaces), then the data: each tensor row-major and
// little-endian in bytes [b, e) of the region after the header. The dtypes
// par reads and writes are those of its dtype table: F64, F32, F16, BF16,
// I64, I32, I8 and BOOL (i1, one byte); entries of other dtypes are listed
// but cannot be read.
//
// The reader checks the header and every entry against the file (offsets
// in range and matching shape x element size, no overlaps) when it opens
// it, and reads one tensor at a time; the writer writes to a temporary file
// next to the target and renames it, so a reader never sees half a file.
// Failures return false with a message naming the file and, for an entry,
// the tensor.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_SAFETENSORS_H
#define PAR_TOOLING_SAFETENSORS_H

#include "par/Tooling/Function.h"

#include <map>
#include <string>
#include <vector>

namespace par::tooling {

/// The safetensors spelling of a dtype ("F32", "BOOL", ...).
const char *safetensorsDtypeName(par_dtype_t dtype);

struct SafetensorsEntry {
  std::string name;
  std::string dtypeName;   // as the file spells it
  bool supported = false;  // the dtype is in par's table
  par_dtype_t dtype = PAR_F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // offsets into the data region
};

class SafetensorsReader {
public:
  /// Opens `path` and checks its header; false with `error` set otherwise.
  bool open(const std::string &path, std::string &error);
  const std::string &path() const { return path_; }
  /// The entries, sorted by name.
  const std::vector<SafetensorsEntry> &entries() const { return entries_; }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// The entry called `name`, or nullptr.
  const SafetensorsEntry *find(const std::string &name) const;
  /// Reads entry `e`'s bytes into `out`; false with `error` set otherwise.
  bool read(const SafetensorsEntry &e, Buffer &out, std::string &error) const;

private:
  std::string path_;
  uint64_t dataStart = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// One tensor to write: `data` holds the row-major tensor of `shape`.
struct SafetensorsTensor {
  std::string name;
  par_dtype_t dtype = PAR_F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// Writes `tensors` (distinct names) and `metadata` to `path` atomically
/// (a temporary file renamed over it); false with `error` set otherwise.
bool writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsTensor> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error);

} // namespace par::tooling

#endif // PAR_TOOLING_SAFETENSORS_H
