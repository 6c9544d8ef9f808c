//===- HostKernels.cpp - Kernels on host memory shared by CPU backends ----===//
//
// all_slice as a row copy, and matmul / batch_matmul over cblas sgemm/dgemm
// with the row-major layout of the kernel ABI. Other dtypes take the shared
// loop of Dtype.h, which the CUDA backend also uses, so results do not
// depend on where a program runs.
//
//===----------------------------------------------------------------------===//

#include "HostKernels.h"

#include "Dtype.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>

using namespace par::rt;

namespace {

bool exceedsBlasInt(int64_t M, int64_t N, int64_t K, std::string &error) {
  if (M <= INT_MAX && N <= INT_MAX && K <= INT_MAX)
    return false;
  error = "matmul dimensions exceed BLAS's 32-bit int";
  return true;
}

/// One row-major GEMM through cblas (f32 or f64), with leading dimensions
/// of the stored matrices.
void gemm(int32_t dtype, bool transA, bool transB, int64_t M, int64_t N,
          int64_t K, const void *a, int lda, const void *b, int ldb, void *c,
          int ldc, bool accumulate) {
  CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  if (dtype == PAR_F32)
    cblas_sgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), 1.0f,
                static_cast<const float *>(a), lda,
                static_cast<const float *>(b), ldb, accumulate ? 1.0f : 0.0f,
                static_cast<float *>(c), ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), 1.0,
                static_cast<const double *>(a), lda,
                static_cast<const double *>(b), ldb, accumulate ? 1.0 : 0.0,
                static_cast<double *>(c), ldc);
}

/// Below this many multiply-adds a GEMM runs on the calling thread alone:
/// waking the others costs more than they save (about 10 us of a 1 GFLOP/s
/// share at this size).
constexpr double kParallelMacs = 1 << 20;

/// One GEMM on the calling thread's OpenMP threads (the rank's threads,
/// the same pool the compiled program's parallel loops use; OpenBLAS
/// itself runs one thread, so the two never compete for cores): the longer
/// of M and N cut into one block per thread, multiples of 16 rows or
/// columns, each block one single-threaded OpenBLAS call on its own part of
/// C (docs/RationaleCPUKernels.md, "BLAS").
void parallelGemm(int32_t dtype, bool transA, bool transB, int64_t M,
                  int64_t N, int64_t K, const void *a, int lda, const void *b,
                  int ldb, void *c, int ldc, bool accumulate) {
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || double(M) * double(N) * double(K) < kParallelMacs) {
    gemm(dtype, transA, transB, M, N, K, a, lda, b, ldb, c, ldc, accumulate);
    return;
  }
  bool splitM = M >= N;
  int64_t D = splitM ? M : N;
  int64_t blocks = std::min<int64_t>(threads, (D + 15) / 16);
  int64_t es = dtype == PAR_F32 ? 4 : 8;
  auto *pa = static_cast<const unsigned char *>(a);
  auto *pb = static_cast<const unsigned char *>(b);
  auto *pc = static_cast<unsigned char *>(c);
  auto edge = [&](int64_t t) {
    return t >= blocks ? D : (D * t / blocks) / 16 * 16;
  };
#pragma omp parallel for num_threads(blocks) schedule(static, 1)
  for (int64_t t = 0; t < blocks; ++t) {
    int64_t lo = edge(t), n = edge(t + 1) - lo;
    if (n <= 0)
      continue;
    if (splitM) // rows lo.. of A (stored [K][M] when transposed) and C
      gemm(dtype, transA, transB, n, N, K,
           pa + (transA ? lo : lo * lda) * es, lda, pb, ldb,
           pc + lo * ldc * es, ldc, accumulate);
    else // columns lo.. of B (stored [N][K] when transposed) and C
      gemm(dtype, transA, transB, M, n, K, pa, lda,
           pb + (transB ? lo * ldb : lo) * es, ldb, pc + lo * es, ldc,
           accumulate);
  }
}

} // namespace

void par::rt::hostAllSlice(const void *in, void *out, int64_t A, int64_t n,
                           int64_t B, int64_t index, int64_t es) {
  size_t row = size_t(B * es);
  auto *src = static_cast<const unsigned char *>(in);
  auto *dst = static_cast<unsigned char *>(out);
  // memmove: slicing in place (out == in) moves rows towards the front.
  for (int64_t a = 0; a < A; ++a)
    std::memmove(dst + a * row, src + (a * n + index) * row, row);
}

par_status_t par::rt::hostBlasMatmul(const void *a, const void *b, void *c,
                                     int64_t M, int64_t N, int64_t K,
                                     int32_t dtype, bool accumulate,
                                     std::string &error) {
  if (M == 0 || N == 0)
    return PAR_OK;
  if (dtype != PAR_F32 && dtype != PAR_F64) {
    hostMatmul(a, b, c, M, N, K, dtype, accumulate);
    return PAR_OK;
  }
  if (exceedsBlasInt(M, N, K, error))
    return PAR_ERR_INVALID_ARGUMENT;
  // Leading dimensions must be >= 1 even for empty matrices (K == 0).
  parallelGemm(dtype, false, false, M, N, K, a, int(std::max<int64_t>(K, 1)),
               b, int(N), c, int(N), accumulate);
  return PAR_OK;
}

par_status_t par::rt::hostBlasBatchMatmul(const void *a, const void *b,
                                          void *c, int64_t batch, int64_t M,
                                          int64_t N, int64_t K, bool transA,
                                          bool transB, int32_t dtype,
                                          bool accumulate, std::string &error) {
  if (exceedsBlasInt(M, N, K, error))
    return PAR_ERR_INVALID_ARGUMENT;
  if (M == 0 || N == 0)
    return PAR_OK;
  // Leading dimensions of the stored (row-major) matrices.
  int lda = int(std::max<int64_t>(transA ? M : K, 1));
  int ldb = int(std::max<int64_t>(transB ? K : N, 1));
  int64_t es = dtypeSize(dtype);
  auto *pa = static_cast<const unsigned char *>(a);
  auto *pb = static_cast<const unsigned char *>(b);
  auto *pc = static_cast<unsigned char *>(c);
  // Enough matrices for every thread: one thread a matrix (attention's
  // heads); fewer: each matrix split over the threads.
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads > 1 && batch >= threads &&
      double(batch) * M * N * K >= kParallelMacs) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < batch; ++i)
      gemm(dtype, transA, transB, M, N, K, pa + i * M * K * es, lda,
           pb + i * K * N * es, ldb, pc + i * M * N * es, int(N), accumulate);
    return PAR_OK;
  }
  for (int64_t i = 0; i < batch; ++i)
    parallelGemm(dtype, transA, transB, M, N, K, pa + i * M * K * es, lda,
                 pb + i * K * N * es, ldb, pc + i * M * N * es, int(N),
                 accumulate);
  return PAR_OK;
}
