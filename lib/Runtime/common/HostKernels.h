//===- HostKernels.h - Host-memory kernels of the CPU backends --*- C++ -*-===//
//
// The kernels that need no communication and run the same in every backend
// whose buffers are host memory (local and MPI): all_slice's strided copy,
// and matmul / batch_matmul through OpenBLAS (the plain loop of Dtype.h for
// the dtypes BLAS has no routine for). Built once as the static library
// par_runtime_host and linked into libpar_runtime.so (the local backend) and
// libpar_runtime_mpi.so.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COMMON_HOSTKERNELS_H
#define PAR_RUNTIME_COMMON_HOSTKERNELS_H

#include "BackendApi.h"
#include "Dtype.h"

#include <cstdint>
#include <string>

namespace par::rt {

/// out[A][B] = block `index` of in viewed as [A][n][B]; `es` bytes per
/// element. In place (out == in) is allowed.
void hostAllSlice(const void *in, void *out, int64_t A, int64_t n, int64_t B,
                  int64_t index, int64_t es);

/// C[M][N] = A[M][K] * B[K][N] (+ C), row-major. On failure sets `error`.
par_status_t hostBlasMatmul(const void *a, const void *b, void *c, int64_t M,
                            int64_t N, int64_t K, int32_t dtype,
                            bool accumulate, std::string &error);

/// `batch` row-major GEMMs with optional transposes (f32/f64, BLAS).
par_status_t hostBlasBatchMatmul(const void *a, const void *b, void *c,
                                 int64_t batch, int64_t M, int64_t N,
                                 int64_t K, bool transA, bool transB,
                                 int32_t dtype, bool accumulate,
                                 std::string &error);

/// The backend table entries over these kernels, for a backend whose state
/// type `S` keeps its message in `std::string error` (local and MPI).
template <typename S> struct HostKernelEntries {
  static par_status_t allSlice(void *, const par_rt_backend_group_t *g,
                               const void *in, void *out, int64_t A,
                               int64_t B, int32_t dtype) {
    hostAllSlice(in, out, A, g->size, B, g->index, dtypeSize(dtype));
    return PAR_OK;
  }

  static par_status_t matmul(void *state, const void *a, const void *b,
                             void *c, int64_t M, int64_t N, int64_t K,
                             int32_t dtype, int32_t accumulate) {
    return hostBlasMatmul(a, b, c, M, N, K, dtype, accumulate != 0,
                          static_cast<S *>(state)->error);
  }

  static par_status_t batchMatmul(void *state, const void *a, const void *b,
                                  void *c, int64_t batch, int64_t M,
                                  int64_t N, int64_t K, int32_t transA,
                                  int32_t transB, int32_t dtype,
                                  int32_t accumulate) {
    return hostBlasBatchMatmul(a, b, c, batch, M, N, K, transA != 0,
                               transB != 0, dtype, accumulate != 0,
                               static_cast<S *>(state)->error);
  }
};

} // namespace par::rt

#endif // PAR_RUNTIME_COMMON_HOSTKERNELS_H
