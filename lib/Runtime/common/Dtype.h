//===- Dtype.h - Element types and host loops shared by the backends -*- C++ -*-===//
//
// The dtype table (sizes, names, .npy descriptors), and the plain-loop matmul used for
// the dtypes BLAS has no routine for (the CPU backend) or that cuBLAS does not
// cover (the CUDA backend copies to the host and runs the same loop).
//
// Arithmetic conventions for the loop matmul, kept identical in both
// backends so results do not depend on where a program runs:
//  - f16/bf16: products and sums in f32, one rounding at the end;
//  - integers: two's-complement wrap-around (done in the unsigned type, since
//    signed overflow is undefined behaviour in C++);
//  - i1 (one byte, 0 or 1): the boolean semiring, sum = or, product = and.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COMMON_DTYPE_H
#define PAR_RUNTIME_COMMON_DTYPE_H

#include "Float16.h"
#include "par/Runtime/par_types.h"

#include <cstdint>
#include <type_traits>
#include <vector>

namespace par::rt {

/// The dtype table (par_types.h's par_dtype_info_t): the one definition the
/// core exports (par_dtype_info) and the backends read.
inline constexpr par_dtype_info_t kDtypeTable[] = {
    {PAR_F64, "f64", 8, 1, "<f8"},  {PAR_F32, "f32", 4, 1, "<f4"},
    {PAR_F16, "f16", 2, 1, "<f2"},  {PAR_BF16, "bf16", 2, 1, "<u2"},
    {PAR_I64, "i64", 8, 0, "<i8"},  {PAR_I32, "i32", 4, 0, "<i4"},
    {PAR_I8, "i8", 1, 0, "|i1"},    {PAR_I1, "i1", 1, 0, "|b1"},
};

inline const par_dtype_info_t *findDtype(int32_t dtype) {
  for (const par_dtype_info_t &d : kDtypeTable)
    if (d.dtype == dtype)
      return &d;
  return nullptr;
}

/// Bytes per element, or 0 for an unknown dtype.
inline int64_t dtypeSize(int32_t dtype) {
  const par_dtype_info_t *d = findDtype(dtype);
  return d ? d->element_size : 0;
}

inline const char *dtypeName(int32_t dtype) {
  const par_dtype_info_t *d = findDtype(dtype);
  return d ? d->name : "?";
}

inline bool isValidReduction(int32_t r) {
  return r == PAR_SUM || r == PAR_MAX || r == PAR_MIN || r == PAR_AVG;
}

inline const char *reductionName(int32_t r) {
  switch (r) {
  case PAR_SUM: return "sum";
  case PAR_MAX: return "max";
  case PAR_MIN: return "min";
  case PAR_AVG: return "avg";
  default: return "?";
  }
}

namespace detail {
/// Row-at-a-time accumulation in `Acc`, so that the inner loop is a
/// contiguous axpy over a row of B (cache friendly, vectorizable).
template <typename T, typename Acc, typename Load, typename Store,
          typename MulAdd>
void loopMatmul(const T *a, const T *b, T *c, int64_t M, int64_t N, int64_t K,
                bool accumulate, Load load, Store store, MulAdd mulAdd) {
  std::vector<Acc> row(size_t(N > 0 ? N : 0));
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j)
      row[j] = accumulate ? load(c[i * N + j]) : Acc(0);
    for (int64_t k = 0; k < K; ++k) {
      Acc aik = load(a[i * K + k]);
      const T *bk = b + k * N;
      for (int64_t j = 0; j < N; ++j)
        row[j] = mulAdd(row[j], aik, load(bk[j]));
    }
    for (int64_t j = 0; j < N; ++j)
      c[i * N + j] = store(row[j]);
  }
}

template <typename T> void intMatmul(const void *a, const void *b, void *c,
                                     int64_t M, int64_t N, int64_t K,
                                     bool acc) {
  using U = std::make_unsigned_t<T>;
  loopMatmul<T, U>(
      static_cast<const T *>(a), static_cast<const T *>(b), static_cast<T *>(c),
      M, N, K, acc, [](T v) { return U(v); }, [](U v) { return T(v); },
      [](U s, U x, U y) { return U(s + U(x * y)); });
}
} // namespace detail

/// C[M][N] = A[M][K] * B[K][N] (+ C), row-major, any dtype. Returns false for
/// an unknown dtype.
inline bool hostMatmul(const void *a, const void *b, void *c, int64_t M,
                       int64_t N, int64_t K, int32_t dtype, bool accumulate) {
  using namespace detail;
  switch (dtype) {
  case PAR_F32:
    loopMatmul<float, float>(
        static_cast<const float *>(a), static_cast<const float *>(b),
        static_cast<float *>(c), M, N, K, accumulate,
        [](float v) { return v; }, [](float v) { return v; },
        [](float s, float x, float y) { return s + x * y; });
    return true;
  case PAR_F64:
    loopMatmul<double, double>(
        static_cast<const double *>(a), static_cast<const double *>(b),
        static_cast<double *>(c), M, N, K, accumulate,
        [](double v) { return v; }, [](double v) { return v; },
        [](double s, double x, double y) { return s + x * y; });
    return true;
  case PAR_F16:
  case PAR_BF16: {
    bool bf = dtype == PAR_BF16;
    loopMatmul<uint16_t, float>(
        static_cast<const uint16_t *>(a), static_cast<const uint16_t *>(b),
        static_cast<uint16_t *>(c), M, N, K, accumulate,
        [bf](uint16_t v) { return bf ? bf16ToFloat(v) : halfToFloat(v); },
        [bf](float v) { return bf ? floatToBf16(v) : floatToHalf(v); },
        [](float s, float x, float y) { return s + x * y; });
    return true;
  }
  case PAR_I32: intMatmul<int32_t>(a, b, c, M, N, K, accumulate); return true;
  case PAR_I64: intMatmul<int64_t>(a, b, c, M, N, K, accumulate); return true;
  case PAR_I8: intMatmul<int8_t>(a, b, c, M, N, K, accumulate); return true;
  case PAR_I1:
    loopMatmul<uint8_t, uint8_t>(
        static_cast<const uint8_t *>(a), static_cast<const uint8_t *>(b),
        static_cast<uint8_t *>(c), M, N, K, accumulate,
        [](uint8_t v) { return uint8_t(v != 0); },
        [](uint8_t v) { return v; },
        [](uint8_t s, uint8_t x, uint8_t y) { return uint8_t(s | (x & y)); });
    return true;
  default:
    return false;
  }
}

} // namespace par::rt

#endif // PAR_RUNTIME_COMMON_DTYPE_H
