//===- MemrefCopy.cpp - MLIR's strided memref copy, without MLIR ----------===//
//
// finalize-memref-to-llvm lowers a memref.copy between memrefs that are not
// both contiguous to a call of `memrefCopy(elemSize, src, dst)` with
// unranked descriptors, a function MLIR ships in libmlir_c_runner_utils.so.
// Compiled programs link libpar_runtime.so anyway, so the runtime provides
// the function itself (same C signature) and artifacts need no MLIR library
// at run time.
//
// The copy collapses the innermost dimensions in which both sides are
// contiguous (size-1 dimensions always are) into one run of bytes, then walks
// the remaining outer dimensions with an odometer, keeping both offsets
// incrementally: one memmove per run, any rank, any (also negative or zero)
// strides.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include <cstring>
#include <vector>

using namespace par::rt;

namespace {

/// The fixed part of a ranked descriptor; sizes[rank] and strides[rank]
/// follow it.
struct DescriptorHead {
  char *allocated;
  char *aligned;
  int64_t offset;
};

struct View {
  char *base; // aligned + offset, in bytes
  const int64_t *sizes;
  const int64_t *strides;
};

View viewOf(const par_rt_unranked_memref_t *m, int64_t elemSize) {
  auto *head = static_cast<DescriptorHead *>(m->descriptor);
  auto *tail = reinterpret_cast<const int64_t *>(head + 1);
  return {head->aligned + head->offset * elemSize, tail, tail + m->rank};
}

void copyStrided(const View &src, const View &dst, int64_t rank,
                 int64_t elemSize) {
  for (int64_t d = 0; d < rank; ++d)
    if (src.sizes[d] == 0)
      return;
  // The innermost dimensions where both sides are contiguous: one run.
  int64_t run = 1, outer = rank;
  while (outer > 0) {
    int64_t d = outer - 1;
    bool contiguous = src.sizes[d] == 1 ||
                      (src.strides[d] == run && dst.strides[d] == run);
    if (!contiguous)
      break;
    run *= src.sizes[d];
    outer = d;
  }
  size_t bytes = size_t(run * elemSize);
  std::vector<int64_t> index(size_t(outer), 0);
  int64_t srcOff = 0, dstOff = 0; // in elements
  for (;;) {
    std::memmove(dst.base + dstOff * elemSize, src.base + srcOff * elemSize,
                 bytes);
    // Advance the odometer over the outer dimensions, last fastest.
    int64_t d = outer - 1;
    for (; d >= 0; --d) {
      srcOff += src.strides[d];
      dstOff += dst.strides[d];
      if (++index[size_t(d)] < src.sizes[d])
        break;
      srcOff -= src.strides[d] * src.sizes[d];
      dstOff -= dst.strides[d] * dst.sizes[d];
      index[size_t(d)] = 0;
    }
    if (d < 0)
      return;
  }
}

} // namespace

PAR_RT_EXPORT void memrefCopy(int64_t elem_size, par_rt_unranked_memref_t *src,
                              par_rt_unranked_memref_t *dst) {
  if (!src || !dst || !src->descriptor || !dst->descriptor)
    die("memrefCopy", "null descriptor");
  if (src->rank != dst->rank || src->rank < 0)
    die("memrefCopy", "source rank " + std::to_string(src->rank) +
                          " and destination rank " +
                          std::to_string(dst->rank) + " differ");
  View s = viewOf(src, elem_size), d = viewOf(dst, elem_size);
  for (int64_t k = 0; k < src->rank; ++k)
    if (s.sizes[k] != d.sizes[k])
      die("memrefCopy", "dimension " + std::to_string(k) + " has size " +
                            std::to_string(s.sizes[k]) + " in the source, " +
                            std::to_string(d.sizes[k]) +
                            " in the destination");
  copyStrided(s, d, src->rank, elem_size);
}
