//===- Npy.h - Reading and writing .npy files -------------------*- C++ -*-===//
//
// numpy's .npy format (versions 1 to 3, C order, little-endian) for every
// element type of the dtype table (par_session.h): f64 "<f8", f32 "<f4",
// f16 "<f2", i64 "<i8", i32 "<i4", i8 "|i1", i1 as numpy bool "|b1", and
// bf16, which numpy lacks, as its raw 16-bit patterns "<u2".
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_NPY_H
#define PAR_TOOLING_NPY_H

#include "par/Tooling/Function.h"

#include <string>
#include <vector>

namespace par::tooling {

/// Writes `data` (the row-major tensor) to `path`; fatal on failure.
void writeNpy(const std::string &path, par_dtype_t dtype,
              const std::vector<int64_t> &shape, const void *data);

/// Reads `path`, which must hold exactly `t`'s global tensor (its dtype and
/// global shape); `name` is the input's name for messages. Fatal otherwise.
Buffer readNpy(const std::string &path, const Tensor &t,
               const std::string &name);

} // namespace par::tooling

#endif // PAR_TOOLING_NPY_H
